"""Bounded project scope (issue 30): where no configuration or project marker says where the project is,
the index holds the linted files and what they import, never the tree around them; a broken configuration
is read only when it governs a linted file or a file the index needs, and stops only the files it governs,
named once."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ascend_lint.cli import main
from ascend_lint.config import Settings
from ascend_lint.pipeline.index import ProjectIndex


PROJECTS = Path(__file__).parent / "fixtures" / "projects"
BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
BROKEN = "[tool.ascend-lint]\nbogus-key = 1\n"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def reported(out: str) -> set:
    return {(os.path.relpath(f["filename"]).replace(os.sep, "/"), f["code"]) for f in json.loads(out)}


def unmarked_tree(tmp_path: Path) -> Path:
    """train.py (a step loop calling utils.sync_all) and utils.py, beside a vendored tree of 40 files
    that nothing imports, one of its packages holding a broken configuration; no project marker."""
    root = tmp_path / "work"
    root.mkdir()
    for name in ("train.py", "utils.py"):
        (root / name).write_text((PROJECTS / "step_helper" / name).read_text())
    (root / "helpers_unused.py").write_text("import os\n")
    for number in range(40):
        package = root / "vendor" / f"pkg{number % 4}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"mod{number}.py").write_text(BAD)
    (root / "vendor" / "pkg0" / "pyproject.toml").write_text(BROKEN)
    assert not any((parent / marker).exists() for parent in [root, *root.parents]
                   for marker in ("pyproject.toml", "setup.py", "setup.cfg", ".git"))
    return root


def test_the_index_of_an_unmarked_script_holds_it_and_what_it_imports(tmp_path):
    root = unmarked_tree(tmp_path)
    index = ProjectIndex.open([str(root / "train.py")], Settings(project_root=str(root)), cache=False)
    assert index.root == str(root) and index.scope is not None
    assert sorted(index.shapes) == ["train.py", "utils.py"]
    lone = ProjectIndex.open([str(root / "helpers_unused.py")], Settings(project_root=str(root)), cache=False)
    assert sorted(lone.shapes) == ["helpers_unused.py"]


def test_imports_are_found_as_python_finds_them(tmp_path):
    """Relative imports from a package, packages' __init__ files, a submodule named in `from pkg import mod`."""
    root = tmp_path / "work"
    for name, text in {"app/main.py": "from lib import tools\nfrom lib.deep import inner\nimport os, torch\n",
                       "lib/__init__.py": "", "lib/tools.py": "from . import helper\nfrom .. import nowhere\n",
                       "lib/helper.py": "", "lib/deep/__init__.py": "from .inner import x\n",
                       "lib/deep/inner.py": "x = 1\n", "lib/unrelated.py": ""}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    index = ProjectIndex.open([str(root / "app" / "main.py")], Settings(project_root=str(root)), cache=False,
                              root=str(root))
    assert sorted(index.shapes) == ["app/main.py", "lib/__init__.py", "lib/deep/__init__.py", "lib/deep/inner.py",
                                    "lib/helper.py", "lib/tools.py"]


def test_linting_an_unmarked_script_reads_no_configuration_it_does_not_need(tmp_path, monkeypatch, capsys):
    root = unmarked_tree(tmp_path)
    monkeypatch.chdir(root)
    code, out, err = run(capsys, "check", "--preview", "--no-cache", "--output-format", "json", "train.py", "utils.py")
    assert code == 1 and err == ""
    assert ("utils.py", "ASC202") in reported(out)  # the cross-file finding: train.py's loop calls sync_all


def test_a_broken_nested_configuration_stops_only_its_files_named_once(tmp_path, monkeypatch, capsys):
    root = unmarked_tree(tmp_path)
    monkeypatch.chdir(root)
    code, out, err = run(capsys, "check", "--preview", "--no-cache", "--output-format", "json", ".")
    assert code == 2
    assert err.count("pyproject.toml") == 1 and "bogus-key" in err and "Traceback" not in err
    found = reported(out)
    assert ("utils.py", "ASC202") in found
    assert any(path.startswith("vendor/pkg1/") for path, _code in found)
    assert not any(path.startswith("vendor/pkg0/") for path, _code in found)
    # pre-commit names files: the one the broken configuration governs is not linted, the others are
    code, out, err = run(capsys, "check", "--preview", "--no-cache", "--output-format", "json", "train.py",
                         "vendor/pkg0/mod0.py", "vendor/pkg0/mod4.py")
    assert code == 2 and err.count("pyproject.toml") == 1
    assert {path for path, _code in reported(out)} == {"train.py"}


def test_in_a_marked_project_a_broken_configuration_of_files_not_linted_is_a_warning(tmp_path, monkeypatch,
                                                                                       capsys):
    root = unmarked_tree(tmp_path)
    (root / "pyproject.toml").write_text("[tool.ascend-lint]\npreview = true\n")
    monkeypatch.chdir(root)
    code, out, err = run(capsys, "check", "--no-cache", "--output-format", "json", "train.py")
    assert code == 1 and err.count("bogus-key") == 1 and err.startswith("warning:")
    assert {path for path, _code in reported(out)} == {"train.py"}
