"""The project model on bad input: unparsable or unreadable files contribute no facts and the run goes on;
circular imports, a 10,000-module project, symlink loops and class hierarchies with a cycle terminate."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascend_lint.cli import main
from ascend_lint.config import Settings
from ascend_lint.pipeline.index import ProjectIndex
from ascend_lint.analysis.model import ProjectModel
from ascend_lint.analysis.summary import Summary, light_summary, summarize

SYNC_FORWARD = "import torch\nimport torch_npu\n\ndef helper(x):\n    torch.npu.synchronize()\n    return x\n"


def write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check(root: Path, monkeypatch, capsys, *paths: str) -> list:
    monkeypatch.chdir(root)
    capsys.readouterr()
    main(["check", "--output-format", "json", "--exit-zero", *(paths or ("."))])
    return json.loads(capsys.readouterr().out)


def test_an_unparsable_file_contributes_no_facts(tmp_path, monkeypatch, capsys):
    write(tmp_path, {
        "pyproject.toml": "[tool.ascend-lint]\npreview = true\n",
        "helpers.py": SYNC_FORWARD,
        # would make `helper` hot, but does not parse (the rules parse it: it mentions `synchronize`)
        "model.py": "import torch\nfrom helpers import helper\nclass M(torch.nn.Module):\n"
                    "    def forward(self, x):\n        return helper(x)\n    def broken(:\n"
                    "        torch.npu.synchronize()\n",
    })
    found = check(tmp_path, monkeypatch, capsys)
    assert [(os.path.basename(f["filename"]), f["code"]) for f in found] == [("model.py", "ASC000")]
    # the same file parsing: the fact is there
    (tmp_path / "model.py").write_text((tmp_path / "model.py").read_text().replace("broken(:", "broken(self):"))
    found = check(tmp_path, monkeypatch, capsys)
    assert sorted((os.path.basename(f["filename"]), f["code"]) for f in found) == [("helpers.py", "ASC202")]


def test_an_unreadable_or_odd_file_contributes_no_facts(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"pyproject.toml": "[tool.ascend-lint]\npreview = true\n", "helpers.py": SYNC_FORWARD,
                     "latin.py": "# -*- coding: bogus -*-\nimport torch\n"})
    (tmp_path / "binary.py").write_bytes(b"\x00\xff\xfe" * 100)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.py")
    index = ProjectIndex(str(tmp_path), Settings(project_root=str(tmp_path)))
    index.load()
    index.complete()
    assert index.model().function_role("helpers.helper") is None
    assert index.summaries["binary.py"].defs == {}
    found = check(tmp_path, monkeypatch, capsys, "helpers.py")
    assert found == []


def test_circular_imports_terminate(tmp_path, monkeypatch, capsys):
    write(tmp_path, {
        "pyproject.toml": "[tool.ascend-lint]\npreview = true\n",
        "a.py": "import torch\nimport torch_npu\nfrom b import g\n\ndef f(x):\n    return g(x)\n",
        "b.py": "import torch\nimport torch_npu\nfrom a import f\n\ndef g(x):\n    x = x.cuda()\n    return f(x)\n",
        "main.py": "from torch_npu.contrib import transfer_to_npu\nimport a\n\nif __name__ == '__main__':\n"
                   "    a.f(1)\n",
    })
    assert check(tmp_path, monkeypatch, capsys) == []  # b is reached through a cycle and runs migrated


def test_class_hierarchy_cycles_terminate(tmp_path, monkeypatch, capsys):
    write(tmp_path, {
        "pyproject.toml": "[tool.ascend-lint]\npreview = true\n",
        "a.py": "import torch\nfrom b import B\n\nclass A(B):\n    def forward(self, x):\n"
                "        torch.npu.synchronize()\n        return self.helper(x)\n",
        "b.py": "from a import A\n\nclass B(A):\n    pass\n\nclass C(C):\n    pass\n",
    })
    assert check(tmp_path, monkeypatch, capsys) == []  # neither is a Module: no cycle makes one
    model = ProjectModel.build({"a.py": light_summary((tmp_path / "a.py").read_text()),
                                "b.py": light_summary((tmp_path / "b.py").read_text())})
    assert model.class_kind("a.A") is None and model.class_kind("b.C") is None


def test_symlink_loops_terminate(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"pyproject.toml": "[tool.ascend-lint]\npreview = true\n", "pkg/mod.py": SYNC_FORWARD})
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")
    os.symlink(tmp_path, tmp_path / "pkg" / "up")
    os.symlink(tmp_path / "pkg" / "mod.py", tmp_path / "alias.py")
    assert check(tmp_path, monkeypatch, capsys, "pkg/mod.py") == []
    index = ProjectIndex(str(tmp_path), Settings(project_root=str(tmp_path)))
    index.load()
    assert "pkg/loop/mod.py" not in index.summaries


def test_ten_thousand_modules(tmp_path):
    """A generated project of 10,000 modules in a chain of imports (and one cycle) builds and answers."""
    n = 10_000
    pkg = tmp_path / "big"
    pkg.mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.ascend-lint]\n")
    (pkg / "__init__.py").write_text("")
    for i in range(n):
        nxt = (i + 1) % n
        (pkg / f"m{i}.py").write_text(f"from big.m{nxt} import f{nxt}\n\nclass C{i}(C{i}):\n    pass\n\n"
                                      f"def f{i}(x):\n    return f{nxt}(x)\n")
    (pkg / "entry.py").write_text("import torch\nfrom torch_npu.contrib import transfer_to_npu\nfrom big.m0 import f0\n\n"
                                  "class Net(torch.nn.Module):\n    def forward(self, x):\n        return f0(x)\n\n"
                                  "if __name__ == '__main__':\n    Net()\n")
    index = ProjectIndex(str(tmp_path), Settings(project_root=str(tmp_path)))
    index.load()
    model = index.model()
    assert model.migrated(f"big.m{n - 1}") is not None  # reached through 10,000 imports
    assert model.role("big.m0.f0").kind == "per_forward"
    assert model.function_role(f"big.m{n - 1}.f{n - 1}").kind == "per_forward"  # calls followed to any depth


@pytest.mark.parametrize("text", [
    "", "\n\n", "class (:\n", "def f(:\n    import x\n", "from . import\n", "import\n", "class A(B, metaclass=M, *x):\n",
    "'''unterminated\nclass A(torch.nn.Module):\n", "\t\tdef f():\n  return 1\n", "x = 1\r\nclass A(B):\r\n  pass\r\n",
    "from .. import (a,\n b as c,\n)\n", "A.forward = B.forward = f\n", "register_patch('x.y', f)\n",
])
def test_summaries_of_odd_text_do_not_fail(text):
    summary = light_summary(text)
    assert Summary.from_tuple(json.loads(json.dumps(summary.to_tuple()))) == summary
    ProjectModel.build({"m.py": summary, "pkg/__init__.py": summary})
    try:
        import ast

        tree = ast.parse(text)
    except SyntaxError:
        return
    full = summarize(tree, text)
    assert Summary.from_tuple(json.loads(json.dumps(full.to_tuple()))) == full


def test_module_names_src_layout_namespace_packages_and_script_directories(tmp_path, monkeypatch, capsys):
    files = {
        "pyproject.toml": "[tool.ascend-lint]\npreview = true\n",
        "src/pkg/__init__.py": "from .base import Base\n",
        "src/pkg/base.py": "from torch import nn\n\nclass Base(nn.Module):\n    pass\n",
        "src/pkg/layers.py": "import torch\nfrom pkg import Base\n\nclass Layer(Base):\n    def forward(self, x):\n"
                             "        torch.npu.synchronize()\n        return x\n",
        "ns/sub/util.py": "import torch\n\ndef helper(x):\n    torch.npu.synchronize()\n    return x\n",
        "ns/sub/mod.py": "import torch\nfrom ns.sub.util import helper\n\nclass M(torch.nn.Module):\n"
                         "    def forward(self, x):\n        return helper(x)\n",
        "tools/run/local_utils.py": "def step_helper(x):\n    return x\n",
        "other/local_utils.py": "def step_helper(x):\n    return x\n",
        "tools/run/train.py": "from local_utils import step_helper\n",
    }
    write(tmp_path, files)
    found = check(tmp_path, monkeypatch, capsys)
    assert sorted((os.path.relpath(f["filename"], tmp_path).replace(os.sep, "/"), f["code"]) for f in found) == [
        ("ns/sub/util.py", "ASC202"),  # a namespace package: hot through M.forward
        ("src/pkg/layers.py", "ASC202"),  # a base re-exported by a package of a src/ layout
    ]
    model = ProjectModel.build({rel: light_summary(text) for rel, text in files.items() if rel.endswith(".py")})
    assert model.class_kind("src.pkg.layers.Layer") == "module"
    from ascend_lint.analysis.resolver import Resolver

    resolver = Resolver({rel: light_summary(text) for rel, text in files.items() if rel.endswith(".py")})
    assert resolver.find_module("local_utils", "tools.run.train") == "tools.run.local_utils"  # the script's dir
