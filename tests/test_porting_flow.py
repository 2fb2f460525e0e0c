"""The README's "Porting a GPU project" steps, run as the README shows them (through the CLI) on copies of
three training scripts written for CUDA (tests/fixtures/programs/port_*.py), end in code whose CUDA paths
are ported: checked on the fixed code, statically and by running it on an emulated Ascend host
(tests/ascend_host.py: torch with torch_npu and without CUDA, recording what the run turned on)."""
from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Iterable, List

import pytest

from ascend_lint import cli
from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_host import Host, NoCuda, fake, run_script
from conftest import REGISTRY
from fixsafety import pyflakes_counts

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"
SCRIPTS = {"port_nanogpt.py": "train", "port_dispatch.py": "main", "port_cuda_probe.py": "train"}


def readme_commands() -> List[List[str]]:
    """The `ascend-lint` command lines of the README's porting section, in order, without `ascend-lint`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Porting a GPU project"):]
    section = section[: section.index("\n## ")]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    commands = [shlex.split(line, comments=True) for line in block.splitlines()]
    return [argv[1:] for argv in commands if argv and argv[0] == "ascend-lint"]


def port(root: Path, skip: Iterable[str] = ()) -> Path:
    """Copy the scripts into a project at `root` and run the README's commands there (but those naming a
    code in `skip`)."""
    for name in SCRIPTS:
        shutil.copy(PROGRAMS / name, root / name)
    (root / "pyproject.toml").write_text("[tool.ascend-lint]\n")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for argv in readme_commands():
                if not any(code in arg for code in skip for arg in argv):
                    cli.main(argv)
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture(scope="module")
def ported(tmp_path_factory) -> Path:
    return port(tmp_path_factory.mktemp("ported"))


@pytest.fixture
def host_env(monkeypatch):
    """A rank of a two-process job on an Ascend host, with `--amp` on the command line."""
    for name, value in (("RANK", "1"), ("LOCAL_RANK", "1"), ("WORLD_SIZE", "2")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["train.py", "--amp"])
    monkeypatch.setenv("NO_COLOR", "1")


def run(path: Path) -> Host:
    return run_script(path.read_text(), path.name, SCRIPTS[path.name], fake("model"), fake("data"))


# ----------------------------------------------------------------------------- the steps
def test_readme_ports_with_device_tests_first_and_every_migration_rule():
    commands = readme_commands()
    assert all(argv[:4] == ["check", "--target", "npu", "--preview"] for argv in commands)
    selected = [argv[argv.index("--select") + 1] for argv in commands if "--select" in argv]
    assert selected[0] == "ASC605"  # the tests first: the renames then land on paths the NPU takes
    assert {c for s in selected for c in s.split(",")} >= {"ASC601", "ASC602", "ASC603", "ASC604", "ASC605"}


def test_ported_code_has_no_cuda_path_left(ported):
    linter = Linter([r for r in REGISTRY.sorted_rules() if r.code.startswith("ASC6")],
                    Settings(target="npu", preview=True))
    for name in SCRIPTS:
        text = (ported / name).read_text()
        assert text != (PROGRAMS / name).read_text()
        assert not linter.check(text, name), name
        for node in ast.walk(ast.parse(text)):
            assert not (isinstance(node, ast.Attribute) and node.attr == "cuda"), \
                f"{name}:{node.lineno}: `.cuda()` or `torch.cuda` left"
            assert not (isinstance(node, ast.Constant) and node.value == "nccl"), f"{name}:{node.lineno}: 'nccl' left"
        for stmt in _statements(ast.parse(text)):
            strings = {n.value for n in ast.walk(stmt) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            if any(s == "cuda" or s.startswith("cuda:") for s in strings):  # a device test that kept CUDA's
                assert any(s == "npu" or s.startswith("npu:") for s in strings), f"{name}:{stmt.lineno}"


def test_the_steps_are_idempotent_and_leave_pyflakes_clean_code(ported, tmp_path):
    again = port(tmp_path)
    for name in SCRIPTS:
        fixed = (again / name).read_text()
        assert fixed == (ported / name).read_text()
        cwd = os.getcwd()
        os.chdir(again)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                for argv in readme_commands():
                    cli.main(argv)
        finally:
            os.chdir(cwd)
        assert (again / name).read_text() == fixed, f"{name}: a second pass changed it"
        assert not pyflakes_counts(fixed, name) - pyflakes_counts((PROGRAMS / name).read_text(), name)


# ----------------------------------------------------------------------------- the ported scripts, run
def test_nanogpt_trains_with_autocast_pinned_memory_and_fused_adamw_on_the_npu(ported, host_env):
    host = run(ported / "port_nanogpt.py")
    assert host.autocast == [("npu", True)]  # `ctx`: torch.amp.autocast('npu'), not a nullcontext
    assert host.pinned and host.async_copies  # get_batch took the pin_memory().to(non_blocking=True) path
    assert [(cls, opts["fused"]) for cls, opts in host.optimizers] == [("AdamW", True)]
    assert [kind for kind, _ in host.scalers] == ["npu"]  # (off by design: bf16 needs no loss scaling)
    assert host.backends == ["hccl"] and "set_device" in host.npu_calls and set(host.devices) == {"npu"}


def test_dispatching_script_sets_up_the_npu_like_cuda(ported, host_env):
    host = run(ported / "port_dispatch.py")
    assert host.backends == ["hccl"] and "set_device" in host.npu_calls  # --dist-backend and the device branch
    assert [loader["pin_memory"] for loader in host.loaders] == [True]
    assert host.scalers == [("npu", True)] and host.autocast and all(on for _, on in host.autocast)
    assert set(host.devices) == {"npu"} and host.async_copies


def test_probing_script_keeps_its_fast_paths_on_the_npu(ported, host_env):
    host = run(ported / "port_cuda_probe.py")
    assert [loader["pin_memory"] for loader in host.loaders] == [True]
    assert [(cls, opts["fused"]) for cls, opts in host.optimizers] == [("AdamW", True)]
    assert host.scalers == [("npu", True)] and host.autocast and set(host.autocast) == {("npu", True)}
    assert host.async_copies and "synchronize" in host.npu_calls and set(host.devices) == {"npu"}


# ----------------------------------------------------------------------------- the emulation sees the issue
def test_unported_scripts_fail_or_run_on_the_cpu(host_env):
    for name in ("port_nanogpt.py", "port_dispatch.py"):
        with pytest.raises(NoCuda):
            run(PROGRAMS / name)
    host = run(PROGRAMS / "port_cuda_probe.py")  # every fast path off, on the CPU, with no error
    assert set(host.devices) == {"cpu"} and not any(on for _, on in host.autocast + host.scalers)


def test_without_the_device_tests_the_port_trains_in_fp32_without_a_word(tmp_path, host_env):
    """Issue #27, item 1: the renames alone leave `'cuda' in device` false once the device is 'npu'."""
    root = port(tmp_path, skip=("ASC605",))
    host = run(root / "port_nanogpt.py")
    assert host.autocast == [] and not host.pinned  # nullcontext(), and the plain .to(device) copies
    assert [opts["fused"] for _, opts in host.optimizers] == [None]
    host = run(root / "port_dispatch.py")
    assert "set_device" not in host.npu_calls and host.loaders[0]["pin_memory"] is False
    assert host.scalers == [("npu", False)]


# ----------------------------------------------------------------------------- helpers
def _statements(tree: ast.AST) -> Iterable[ast.AST]:
    """Simple statements, and the tests of compound ones (not their bodies)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)):
            yield node.test
        elif isinstance(node, ast.stmt) and not hasattr(node, "body"):
            yield node
