"""The fix-safety harness: every rule's fixes (safe and unsafe) applied to realistic programs written for
this project (tests/fixtures/programs/), each result compiled and pyflakes'd against its source (see
tests/fixsafety.py); plus what each program must and must not get, and the real ruff/flake8 after --fix."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REGISTRY
from fixsafety import check_fixes, linter_for, pyflakes_counts, uses_before_import

PROGRAMS = Path(__file__).parent / "fixtures" / "programs"
NAMES = sorted(p.name for p in PROGRAMS.glob("*.py"))


def fix(name: str, target: str = "auto"):
    linter, settings = linter_for(REGISTRY, target)
    return check_fixes((PROGRAMS / name).read_text(), name, linter, settings)


@pytest.mark.parametrize("target", ["auto", "npu"])
@pytest.mark.parametrize("name", NAMES)
def test_every_fix_compiles_adds_no_pyflakes_warning_and_is_idempotent(name, target):
    outcome = fix(name, target)
    assert not outcome.problems, "\n".join(outcome.problems)


def test_the_harness_catches_what_it_is_for():
    assert uses_before_import("x = torch.zeros(1)\nimport torch\n") == ["`torch` read at line 1, imported at line 2"]
    assert uses_before_import("def f():\n    return torch.zeros(1)\nimport torch\n") == []  # runs later
    assert uses_before_import("@torch.no_grad()\ndef f():\n    pass\nimport torch\n")
    assert pyflakes_counts("import os\n") == {("UnusedImport", ("os",)): 1}
    assert not pyflakes_counts("import torch_npu  # noqa: F401\n")  # flake8's noqa is honoured
    assert pyflakes_counts("def f():\n    s = 1\n") == {("UnusedVariable", ("s",)): 1}


FIXED_CASES = [(r.code, i, case) for r in REGISTRY.sorted_rules() for i, case in enumerate(r.cases)
               if case.fixed is not None]


@pytest.mark.parametrize("code,index,case", FIXED_CASES, ids=[f"{c}-case-{i}" for c, i, _ in FIXED_CASES])
def test_every_fix_of_a_rule_case_passes_the_harness(code, index, case):
    """A rule's own cases with a fixed text go through the same checks as the programs."""
    linter, settings = linter_for(REGISTRY, "auto")
    outcome = check_fixes(case.source, "snippet.py", linter, settings)
    assert outcome.applied.get(code), f"{code} case {index}: its fix was not applied by the harness"
    assert not outcome.problems, "\n".join(outcome.problems)


def test_the_programs_and_cases_exercise_every_fixing_rule():
    """Every fixing rule's fixes meet the harness: on the programs, or at least on the rule's own cases (a new
    rule need not touch the programs; extend them when its fix interacts with imports or other fixes)."""
    fixing = {r.code for r in REGISTRY.sorted_rules() if r.fix_applicability is not None}
    applied = {code for code, _, _ in FIXED_CASES}
    for name in NAMES:
        applied.update(fix(name, "npu").applied)
    assert fixing <= applied, f"neither a program nor a case exercises the fixes of {sorted(fixing - applied)}"


# ----------------------------------------------------------------------------- what each program gets
def test_port_removes_what_the_fixes_leave_unused():
    text = fix("gpu_port_train.py").text
    assert "import torch.optim as optim" not in text  # ASC301 used its last name
    assert "torch_npu.optim.NpuFusedSGD(model.parameters()" in text
    assert "stream" not in text  # ASC202 removed `stream.synchronize()` and the stream it was the last use of
    assert "import os\n" in text and "ASCEND_LAUNCH_BLOCKING" not in text  # `os` still used elsewhere
    assert "\n\n\n\n" not in text  # no run of three blank lines where a statement went


def test_inserted_import_lands_above_module_level_code_with_noqa():
    lines = fix("unported_script.py").text.splitlines()
    at = lines.index("import torch_npu  # noqa: F401")
    assert lines[at - 1] == "import torch" and lines.index('DEVICE = torch.device("npu:0")') > at


def test_guarded_or_function_level_torch_npu_gets_no_torch_npu_fix():
    for name in ("multi_backend.py", "guarded_func_import.py"):
        outcome = fix(name, "npu")
        assert not outcome.applied and not outcome.warnings, (name, outcome.applied, outcome.warnings)
    linter, _ = linter_for(REGISTRY, "npu")
    findings = linter.check((PROGRAMS / "multi_backend.py").read_text(), "multi_backend.py")
    assert not [f for f in findings if f.code == "ASC603" and f.line == 9]  # the per-backend table is deliberate


def test_mindspore_only_code_gets_no_torch_npu_advice():
    linter, _ = linter_for(REGISTRY, "auto")
    findings = linter.check((PROGRAMS / "mindspore_train.py").read_text(), "mindspore_train.py")
    assert not [f for f in findings if f.code.startswith("ASC6")]
    assert fix("mindspore_train.py").applied == {"ASC501": 2}


def test_async_save_is_not_offered_where_the_checkpoint_is_read_back():
    linter, _ = linter_for(REGISTRY, "auto")
    findings = linter.check((PROGRAMS / "mindspore_best_ckpt.py").read_text(), "mindspore_best_ckpt.py")
    (finding,) = [f for f in findings if f.code == "ASC501"]
    assert finding.fix is None


def test_unsafe_fixes_are_correct_code_asc201():
    text = fix("npu_model.py").text
    assert "index = self._index_buf" in text and "mean = self._mean_buf" in text
    assert 'total = torch.tensor(0.0, device="npu")' in text  # accumulated in place: no buffer
    assert "requires_grad=self.training" in text  # per-call state: no buffer
    assert "bias = torch.tensor([0.5, -0.5]).npu()" in text  # returned: no buffer


def test_launch_blocking_update_with_other_variables_is_kept():
    text = fix("launch_debug.py").text
    assert '"HCCL_CONNECT_TIMEOUT": "1200"' in text and "setdefault" not in text
    assert "import os" not in fix("launch_only_os.py").text  # the removed line was its last use


# ----------------------------------------------------------------------------- the user's other tools
def _tool(*args):
    return [sys.executable, "-m", *args]


@pytest.mark.parametrize("name", ["unported_script.py", "train_utils.py", "gpu_port_train.py"])
def test_inserted_and_kept_imports_survive_ruff_fix_and_flake8(tmp_path, name):
    pytest.importorskip("ruff")
    shutil.copy(PROGRAMS / name, tmp_path / name)
    env = dict(os.environ, NO_COLOR="1")
    fixed = subprocess.run(_tool("ascend_lint", "check", "--isolated", "--preview", "--no-cache", "--fix", "--unsafe-fixes",
                                 "--target", "npu", "--exit-zero", name),
                           cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert fixed.returncode == 0, fixed.stderr
    after_lint = (tmp_path / name).read_text()
    assert "import torch_npu" in after_lint
    ruff = subprocess.run(_tool("ruff", "check", "--isolated", "--fix", "--select", "F", name), cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert "import torch_npu" in (tmp_path / name).read_text(), ruff.stdout
    assert (tmp_path / name).read_text() == after_lint, "ruff --fix found something to fix after ascend-lint"
    flake = subprocess.run(_tool("flake8", "--select", "F", name), cwd=tmp_path, capture_output=True, text=True,
                           env=env, timeout=120)
    assert "F401" not in flake.stdout and "F821" not in flake.stdout and "F841" not in flake.stdout, flake.stdout
