"""Issue #30: the project model's graph walks are iterative (or bounded), so long import chains and import
cycles neither exhaust the Python stack nor change an answer.

A generated project of 12 packages x 100 modules, each importing the next (1,213 files), linted end to end;
a 20,000-module chain and import cycles through the model alone; and the iterative walk against the
recursive definition it replaces, on random import graphs."""
from __future__ import annotations

import ast
import json
import random
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

from ascend_lint.analysis.model import ProjectModel, first_reason
from ascend_lint.analysis.summary import summarize_text
from ascend_lint.cli import main

MIGRATING = "import torch_npu.contrib.transfer_to_npu\n"
LEAKING_CUDA = "import torch_npu\n\n\ndef to_device(x):\n    return x.cuda()\n"  # ASC601 unless migrated


def _chain_project(root: Path, packages: int, modules: int, migrating_end: bool) -> List[str]:
    """`train.py` (an entry script) imports pkg00.m000, which imports the next module, ... to the last one,
    which imports transfer_to_npu when `migrating_end`. One module in the middle calls `.cuda()`."""
    names = [f"pkg{p:02d}.m{m:03d}" for p in range(packages) for m in range(modules)]
    for p in range(packages):
        (root / f"pkg{p:02d}").mkdir(parents=True)
        (root / f"pkg{p:02d}" / "__init__.py").write_text("")
    middle = names[len(names) // 2]
    for i, name in enumerate(names):
        text = f"import {names[i + 1]}\n" if i + 1 < len(names) else (MIGRATING if migrating_end else "")
        if name == middle:
            text += LEAKING_CUDA
        (root / (name.replace(".", "/") + ".py")).write_text(text)
    (root / "train.py").write_text(f"import {names[0]}\n\nif __name__ == '__main__':\n    pass\n")
    return names


def _check(root: Path, monkeypatch, capsys) -> List[dict]:
    monkeypatch.chdir(root)
    capsys.readouterr()
    code = main(["check", "--isolated", "--no-cache", "--preview", "--select", "ASC601", "--output-format", "json",
                 "--exit-zero", "."])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_a_1213_file_import_chain_is_linted(tmp_path, monkeypatch, capsys):
    migrated = tmp_path / "migrated"
    names = _chain_project(migrated, 12, 100, migrating_end=True)
    assert len(list(migrated.rglob("*.py"))) == 1213
    findings = _check(migrated, monkeypatch, capsys)
    assert [f["code"] for f in findings] == []  # the entry runs every module of the chain migrated
    plain = tmp_path / "plain"  # (the same layout without the migration, shorter: the rule fires there)
    names = _chain_project(plain, 2, 10, migrating_end=False)
    findings = _check(plain, monkeypatch, capsys)
    middle = names[len(names) // 2].replace(".", "/") + ".py"
    assert [(Path(f["filename"]).as_posix(), f["code"]) for f in findings] == [(middle, "ASC601")]


def _model(texts: Dict[str, str]) -> ProjectModel:
    return ProjectModel.build({rel: summarize_text(text, None, True, ast.parse) for rel, text in texts.items()})


def test_a_20000_module_chain_and_its_entry():
    size = 20_000
    texts = {f"m{i:05d}.py": f"import m{i + 1:05d}\n" for i in range(size - 1)}
    texts[f"m{size - 1:05d}.py"] = MIGRATING
    texts["run.py"] = "import m00000\nif __name__ == '__main__':\n    pass\n"
    model = _model(texts)
    assert model.migrated("m00000") is not None and model.migrated(f"m{size - 1:05d}") is not None
    assert model.migrated("run") is not None


def test_long_class_and_call_chains():
    """Base classes and re-exports are followed a bounded number of steps (3,000 of each end early); calls
    are followed to any depth, iteratively (the execution model)."""
    size = 3_000
    texts = {f"m{i:04d}.py": (f"import torch\nfrom m{i + 1:04d} import C{i + 1}, f{i + 1}\n\n\n"
                              f"class C{i}(C{i + 1}):\n    pass\n\n\ndef f{i}(x):\n    return f{i + 1}(x)\n")
             for i in range(size - 1)}
    texts[f"m{size - 1:04d}.py"] = f"import torch\n\n\nclass C{size - 1}(torch.nn.Module):\n    pass\n\n\n" \
                                   f"def f{size - 1}(x):\n    return x\n"
    texts["train.py"] = "from m0000 import f0\n\nfor x in data:\n    f0(x).backward()\n"
    model = _model(texts)
    assert model.class_kind(f"m{size - 2:04d}.C{size - 2}") == "module"
    assert model.class_kind("m0000.C0") is None  # (deeper than HIERARCHY_DEPTH)
    assert model.function_role("m0000.f0") is not None
    assert model.function_role(f"m{size - 1:04d}.f{size - 1}").kind == "per_step"


def test_import_cycles():
    cycle = {"a.py": "import b\n", "b.py": "import c\n", "c.py": "import a\n" + MIGRATING,
             "run.py": "import a\nif __name__ == '__main__':\n    pass\n"}
    model = _model(cycle)
    assert all(model.migrated(m) is not None for m in ("a", "b", "c", "run"))
    closed = {"a.py": "import b\n", "b.py": "import a\n", "run.py": "import a\nif __name__ == '__main__':\n    pass\n"}
    model = _model(closed)
    assert all(model.migrated(m) is None for m in ("a", "b", "run"))


def _recursive(node: str, own: Callable[[str], Optional[str]], children: Callable[[str], Iterable[str]],
               memo: Dict[str, Optional[str]]) -> Optional[str]:
    """The recursive definition `first_reason` replaces (one Python frame per module)."""
    if node in memo:
        return memo[node]
    memo[node] = None  # circular imports end here
    reason = own(node)
    if reason is None:
        for other in children(node):
            if _recursive(other, own, children, memo):
                reason = memo[other]
                break
    memo[node] = reason
    return reason


def test_first_reason_is_the_recursive_walk_on_random_graphs():
    rng = random.Random(30)
    for _ in range(300):
        size = rng.randint(1, 12)
        nodes = [f"n{i}" for i in range(size)]
        edges = {n: [rng.choice(nodes) for _ in range(rng.randint(0, 3))] for n in nodes}
        reasons = {n: (f"r{n}" if rng.random() < 0.2 else None) for n in nodes}
        starts = [rng.choice(nodes) for _ in range(4)]
        iterative: Dict[str, Optional[str]] = {}
        recursive: Dict[str, Optional[str]] = {}
        for start in starts:  # (one memo across several starts, as the model uses it)
            got = first_reason(start, reasons.get, edges.__getitem__, iterative)
            assert got == _recursive(start, reasons.get, edges.__getitem__, recursive)
        assert iterative == recursive
