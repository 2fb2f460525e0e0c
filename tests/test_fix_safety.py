"""The fix-safety harness: every rule's fixes (safe and unsafe) applied to realistic programs written for
this project (tests/fixtures/programs/), each result compiled and pyflakes'd against its source (see
tests/fixsafety.py); plus what each program must and must not get, and the real ruff/flake8 after --fix."""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REGISTRY
from ascend_lint.rule import Applicability
from fixsafety import (behaviour_signature, buffers_written_in_place, check_fixes, linter_for, pyflakes_counts,
                       safe_fix_problems, signature_changes, uses_before_import)

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


@pytest.mark.parametrize("before, after", [
    # the shapes of issue #30 that a safe fix once produced: each changes the behaviour signature
    ("with torch.autocast('cuda'):\n    pass\n", "with torch.autocast('npu'):\n    pass\n"),
    ("with torch.amp.autocast('cuda'):\n    pass\n", "with torch.amp.autocast('npu'):\n    pass\n"),
    ("s = torch.amp.GradScaler('cuda')\n", "s = torch.amp.GradScaler('npu')\n"),
    ("c = torch.autocast(device_type='cuda')\n", "c = torch.autocast(device_type='npu')\n"),
    ("s = torch.cuda.amp.GradScaler()\n", "s = torch.npu.amp.GradScaler()\n"),
    ("n = torch.cuda.device_count()\n", "n = torch.npu.device_count()\n"),
    ("ms.save_checkpoint(net, 'a.ckpt')\n", "ms.save_checkpoint(net, 'a.ckpt', async_save=True)\n"),
    ("torch.backends.cuda.matmul.allow_tf32 = True\n", "torch.npu.matmul.allow_hf32 = True\n"),
    ("opt = torch.optim.SGD(p, lr=0.1)\n", "opt = torch_npu.optim.NpuFusedSGD(p, lr=0.1)\n"),
    ("x = F.relu(x)\n", "x = F.relu(x, inplace=True)\n"),
])
def test_the_behaviour_signature_sees_what_a_safe_fix_must_not_change(before, after):
    assert signature_changes(before, after)


@pytest.mark.parametrize("before, after", [
    # what the safe fixes do where the original raises on an Ascend host
    ("x = x.to('cuda')\n", "x = x.to('npu')\n"),
    ("m = m.cuda()\n", "m = m.npu()\n"),
    ("torch.cuda.synchronize()\n", "torch.npu.synchronize()\n"),
    ("dist.init_process_group('nccl')\n", "dist.init_process_group('hccl')\n"),
    ("opt.zero_grad(set_to_none=True)\n", "opt.zero_grad(set_to_none=False)\n"),
])
def test_the_behaviour_signature_lets_rewrites_of_failing_code_pass(before, after):
    assert behaviour_signature(before) == behaviour_signature(after)


def test_the_harness_sees_a_buffer_written_in_place():
    before = ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "    def forward(self, x):\n        h = torch.tensor([1.0]).npu()\n        {use}\n        return x * h\n")
    registered = "super().__init__()\n        self.register_buffer('_h_buf', torch.tensor([1.0]), persistent=False)\n"
    after = before.replace("super().__init__()\n", registered).replace("torch.tensor([1.0]).npu()", "self._h_buf")
    for use in ("torch.exp_(h)", "F.relu(h, inplace=True)", "nn.init.uniform_(h)", "h.add_(1)",
                "h.view(-1).mul_(2)", "torch.add(x, 1, out=h)", "h[0] += 1", "h[0] = 1"):
        assert buffers_written_in_place(before.format(use=use), after.format(use=use)), use
    assert not buffers_written_in_place(before.format(use="y = h + 1"), after.format(use="y = h + 1"))


@pytest.mark.parametrize("name", sorted(p.name for p in (PROGRAMS.parent / "fixes").glob("*.in.py")))
def test_safe_fixes_alone_keep_the_behaviour_signature_of_every_fix_fixture(name):
    linter, settings = linter_for(REGISTRY, "npu")
    raw = (PROGRAMS.parent / "fixes" / name).read_bytes()
    from ascend_lint.fileio import decode_source

    text, _ = decode_source(raw)
    assert not safe_fix_problems(text, name, linter.check(text, name), linter, settings)


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


def _safe_only(name: str, target: str = "npu") -> str:
    """The program after a plain `--fix` (safe fixes only)."""
    from ascend_lint.fix import fixer

    linter, settings = linter_for(REGISTRY, target)
    text = (PROGRAMS / name).read_text()
    safe = dataclasses.replace(settings, unsafe_fixes=False)
    return fixer.fix_text(text, name, linter.check(text, name), linter, safe).text


def test_a_plain_fix_keeps_autocast_scaling_and_caught_failures_of_a_port():
    text = _safe_only("amp_port.py")
    assert 'torch.amp.GradScaler("cuda")' in text and 'torch.autocast("cuda", dtype=torch.float16)' in text
    assert 'torch.amp.autocast(device_type="cuda")' in text  # fp32, unscaled, as the original ran on Ascend
    assert "batch = batch.cuda()" in text  # an `except` catches its failure: the original went on on the CPU
    assert 'torch.device(f"npu:{rank}")' in text  # a local device that only reaches .to()/device=
    assert 'images = images.to("npu", non_blocking=True)' in text
    assert text.count("torch.cuda.") == 2  # the backend tables keep their cuda entries
    unsafe = fix("amp_port.py", "npu").text
    assert 'torch.autocast("npu", dtype=torch.float16)' in unsafe and 'GradScaler("npu")' in unsafe
    assert unsafe.count("torch.cuda.") == 2


def test_async_save_is_refused_where_the_file_names_the_saved_file_again():
    linter, _ = linter_for(REGISTRY, "auto")
    findings = [f for f in linter.check((PROGRAMS / "mindspore_upload.py").read_text(), "mindspore_upload.py")
                if f.code == "ASC501"]
    assert [(f.line, f.fix is not None) for f in findings] == [(16, False), (23, False), (30, False), (37, True)]
    assert findings[-1].fix.applicability is Applicability.UNSAFE  # a reader out of sight may see a partial file
    assert _safe_only("mindspore_upload.py", "auto") == (PROGRAMS / "mindspore_upload.py").read_text()


def test_no_buffer_for_a_tensor_changed_in_place_or_passed_on():
    text = fix("npu_inplace_model.py").text
    assert text.count("register_buffer") == 1 and "weight = self._weight_buf" in text
    for kept in ("logits = torch.tensor([0.1, -0.2]).npu()", "shift = torch.tensor([1.0, 2.0]).npu()",
                 "bound = torch.tensor([3.0, 4.0]).npu()", "init = torch.tensor([0.0, 0.0]).npu()",
                 "reset = torch.tensor([5.0, 6.0]).npu()", "hidden = torch.tensor([7.0, 8.0]).npu()"):
        assert kept in text, kept


def test_launch_blocking_update_with_other_variables_is_kept():
    text = fix("launch_debug.py").text
    assert '"HCCL_CONNECT_TIMEOUT": "1200"' in text and "setdefault" not in text
    assert "import os" not in fix("launch_only_os.py").text  # the removed line was its last use


# ----------------------------------------------------------------------------- the user's other tools
def _tool(*args):
    return [sys.executable, "-m", *args]


@pytest.mark.parametrize("name", ["unported_script.py", "train_utils.py", "gpu_port_train.py", "port_nanogpt.py",
                                  "port_dispatch.py", "port_cuda_probe.py"])
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
