"""Fixed code keeps the layout flake8 and isort (ruff I001) accepted: continuation lines aligned to a bracket
move with it when a fix lengthens or shortens the code before it, and an added import goes where isort
would put it. Checked with the real tools (skipped where they are not installed)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.fix import fixer
from ascend_lint.fix.layout import realign
from ascend_lint.registry import load_registry

RUFF = shutil.which("ruff")


def _fix(src: str) -> str:
    settings = Settings(preview=True, target="npu", unsafe_fixes=True)
    linter = Linter(load_registry().sorted_rules(), settings)
    done = fixer.fix_text(src, "m.py", linter.check(src, "m.py"), linter, settings)
    assert done.applied and not done.warnings
    return done.text


def _flake8(tmp_path, text: str, select: str) -> str:
    pytest.importorskip("flake8")
    path = tmp_path / "m.py"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "flake8", "--isolated", f"--select={select}", str(path)],
                          capture_output=True, text=True, cwd=tmp_path)
    return proc.stdout


def _ruff(tmp_path, text: str, select: str = "I001,E") -> str:
    if RUFF is None:
        pytest.skip("ruff is not installed")
    path = tmp_path / "m.py"
    path.write_text(text)
    proc = subprocess.run([RUFF, "check", "--isolated", "--no-cache", "--output-format", "concise",
                           f"--select={select}", str(path)], capture_output=True, text=True, cwd=tmp_path)
    return proc.stdout if proc.returncode else ""


ALIGNED = '''\
import torch


def train(model, params, a, b):
    opt = torch.optim.Adam(params,
                           lr=0.1)
    x = torch.zeros(3).cuda(non_blocking=True,
                            device=0)
    y = torch.zeros(3).cuda(foo(a,
                                b),
                            1)
    for batch in range(10):
        opt.zero_grad()
        loss = model(batch, x, y)
        loss.backward()
        opt.step()
    return opt
'''


def test_continuation_lines_follow_the_bracket_a_fix_moved(tmp_path):
    assert _flake8(tmp_path, ALIGNED, "E1,E3,W") == ""
    fixed = _fix(ALIGNED)
    assert "torch_npu.optim.NpuFusedAdam(params,\n                                       lr=0.1)" in fixed
    assert ".npu(non_blocking=True,\n                           device=0)" in fixed
    assert ".npu(foo(a,\n                               b),\n                           1)" in fixed
    assert _flake8(tmp_path, fixed, "E1,E3,W") == ""
    assert _ruff(tmp_path, fixed) == ""


def test_realign_leaves_hanging_indents_strings_and_other_lines_alone():
    old = ["x = f(\n", "    a)\n", "y = g(a,\n", "      '''\n"]
    new = ["x = ff(\n", "    a)\n", "y = gg(a,\n", "      '''\n"]
    assert realign(old, new) == new  # a hanging indent; a string that spans lines
    assert realign(["x = f(a,\n", "      b)\n"], ["x = f(a,\n"]) == ["x = f(a,\n"]  # not line for line


@pytest.mark.parametrize("src", [
    # the framework's block: by module name among the plain imports, before the `from` imports
    "import os\n\nimport numpy as np\nimport torch\nimport torchvision\nfrom torch import nn\n\n"
    "x = torch.zeros(1).cuda()\n",
    "import os\nimport sys\n\nimport torch\nimport torch.nn as nn\nfrom tqdm import tqdm\n\n\n"
    "def f():\n    return torch.zeros(1).cuda()\n",
    '"""Doc."""\nimport torch\n\nx = torch.zeros(1).cuda()\n',
])
def test_an_added_import_goes_where_isort_puts_it(tmp_path, src):
    assert _ruff(tmp_path, src) == ""
    fixed = _fix(src)
    assert "import torch_npu" in fixed
    assert _ruff(tmp_path, fixed) == ""
    assert _flake8(tmp_path, fixed, "E1,E3,W") == ""


def test_an_import_added_above_code_gets_the_blank_lines_isort_wants():
    from ascend_lint.fix.imports import import_place
    import ast

    assert import_place(ast.parse("import os\nx = 1\n"), ["torch_npu"]) == (1, 1, 1)  # a new section
    assert import_place(ast.parse("import os\n\n\ndef f():\n    pass\n"), ["torch_npu"]) == (1, 1, 0)
    assert import_place(ast.parse("def f():\n    pass\n"), ["torch_npu"]) == (0, 0, 2)
    assert import_place(ast.parse("import os\nimport torch\n"), ["torch_npu"]) == (2, 0, 0)
    assert import_place(ast.parse("import torch\nimport torchvision\n"), ["torch_npu"]) == (1, 0, 0)


def test_json_edits_move_the_continuation_lines_as_the_fix_does():
    from ascend_lint.engine.linter import parse
    from ascend_lint.fix.edits import fix_edits
    from ascend_lint.fix.preview import FileEdits

    settings = Settings(preview=True, target="npu", unsafe_fixes=True)
    linter = Linter(load_registry().sorted_rules(), settings)
    findings = [f for f in linter.check(ALIGNED, "m.py") if f.fix is not None]
    edits = FileEdits(ALIGNED, parse(ALIGNED, "m.py"), findings)
    assert len(findings) >= 3
    for finding in findings:
        assert edits.edits(finding) == fix_edits(ALIGNED, finding, parse(ALIGNED, "m.py"))
    assert edits.whole_file == 1  # ASC301's fix stops reading `torch` there: the whole-file path checks imports
    moved = edits.edits(next(f for f in findings if f.line == 7))  # .cuda(non_blocking=True, / device=0)
    assert [(e.line, e.col, e.end_line, e.end_col, e.content) for e in moved][1:] == [
        (7, 24, 8, 2, "npu(non_blocking=True,\n")]  # `.cuda` -> `.npu`, and line 8 one column left
