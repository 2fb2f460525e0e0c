"""The flake8 plugin, driven through the real `flake8` executable on fixture files."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from typing import List, Optional, Type

import pytest

from ascend_lint.rule import Rule

from conftest import REGISTRY, lint

pytest.importorskip("flake8")

BAD = textwrap.dedent("""\
    import torch
    # trained on the 'npu' device


    def scores(x, m):
        y = torch.transpose(x, -2, -1).contiguous() @ m
        z = x.permute(0, 2, 1).contiguous() @ m  # noqa: ASC101
        w = x.t().contiguous() @ m  # noqa: E501
        v = x.T.contiguous() @ m  # noqa
        return y, z, w, v
""")
LINE_RE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<msg>.*)$")


def flake8(*args: str, cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAKE8")}
    return subprocess.run([sys.executable, "-m", "flake8", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


def parsed(proc: subprocess.CompletedProcess) -> List[tuple]:
    out = []
    for line in proc.stdout.splitlines():
        m = LINE_RE.match(line)
        assert m, line
        out.append((m["path"], int(m["line"]), int(m["col"]), m["code"]))
    return out


@pytest.fixture
def project(tmp_path):
    (tmp_path / "bad.py").write_text(BAD, encoding="utf-8")
    return tmp_path


def test_registered_with_flake8(project):
    proc = flake8("--version", cwd=str(project))
    assert "ascend-lint" in proc.stdout


def test_codes_positions_and_noqa(project):
    proc = flake8("--select", "ASC", "bad.py", cwd=str(project))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    got = parsed(proc)
    # flake8 prints the plugin's 0-based column + 1: the same column as `ascend-lint check`
    expected = [(f.line, f.col) for f in lint(BAD, select=["ASC101"])]
    assert [(line, col) for _, line, col, _ in got] == expected == [(6, 9), (8, 9)]
    assert {code for *_, code in got} == {"ASC101"}
    message = proc.stdout.splitlines()[0]
    assert "`.contiguous()` after `transpose`" in message


def test_noqa_is_flake8s(project):
    """Line noqa is applied by flake8 (not filtered twice): --disable-noqa shows every finding."""
    proc = flake8("--select", "ASC", "--disable-noqa", "bad.py", cwd=str(project))
    assert [line for _, line, _, _ in parsed(proc)] == [6, 7, 8, 9]


def test_file_level_suppression_still_ours(project):
    (project / "bad.py").write_text("# ascend-lint: noqa: ASC101\n" + BAD, encoding="utf-8")
    proc = flake8("--select", "ASC", "bad.py", cwd=str(project))
    assert proc.returncode == 0 and proc.stdout == ""


def test_default_run_includes_plugin_and_others(project):
    proc = flake8("bad.py", cwd=str(project))
    assert "ASC101" in {code for *_, code in parsed(proc)}  # plugin codes are on by default


def test_select_and_extend_ignore(project):
    assert parsed(flake8("--select", "F", "bad.py", cwd=str(project))) == []
    proc = flake8("--extend-ignore", "ASC101", "bad.py", cwd=str(project))
    assert "ASC101" not in proc.stdout
    proc = flake8("--select", "ASC1", "bad.py", cwd=str(project))
    assert {code for *_, code in parsed(proc)} == {"ASC101"}


def test_syntax_error_is_flake8_e999(project):
    (project / "broken.py").write_text("def f(:\n    return x.t().contiguous()\n", encoding="utf-8")
    proc = flake8("broken.py", "bad.py", cwd=str(project))
    assert "Traceback" not in proc.stderr and "ascend-lint" not in proc.stderr, proc.stderr
    rows = parsed(proc)
    assert ("broken.py", 1, "E999") in [(p, line, code) for p, line, _, code in rows]
    assert any(p == "bad.py" and code == "ASC101" for p, _, _, code in rows)  # the run went on


def test_parallel_jobs(project):
    for i in range(3):
        (project / f"m{i}.py").write_text(BAD, encoding="utf-8")
    proc = flake8("-j", "2", "--select", "ASC", ".", cwd=str(project))
    assert len(parsed(proc)) == 4 * 2, proc.stderr


def test_tool_ascend_lint_config_is_read(project):
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nignore = ["ASC101"]\n', encoding="utf-8")
    assert flake8("--select", "ASC", "bad.py", cwd=str(project)).stdout == ""
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nper-file-ignores = {"b*.py" = ["ASC1"]}\n',
                                            encoding="utf-8")
    (project / "other.py").write_text(BAD, encoding="utf-8")
    assert {p for p, *_ in parsed(flake8("--select", "ASC", ".", cwd=str(project)))} == {"./other.py"}


@pytest.mark.parametrize("config", ['[tool.ascend-lint]\nbogus = 1\n', '[tool.ascend-lint]\nselect = ["ASC999"]\n'])
def test_bad_config_is_a_clear_error(project, config):
    (project / "pyproject.toml").write_text(config, encoding="utf-8")
    proc = flake8("bad.py", cwd=str(project))
    assert proc.returncode != 0
    assert "ascend-lint: error:" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_target_in_flake8_config(project):
    (project / ".flake8").write_text("[flake8]\nascend-target = gpu\n", encoding="utf-8")
    proc = flake8("bad.py", cwd=str(project))
    assert proc.returncode != 0 and "ascend-target must be one of auto, npu" in proc.stderr


# --------------------------------------------------------------------------- --ascend-preview / --ascend-target
def _example(rules: List[Type[Rule]], needs_npu_flag: bool = False) -> Optional[tuple]:
    """(rule, source) with a flagged example that reports only under the given condition."""
    from ascend_lint.engine.linter import NPU_HINTS

    for rule in rules:
        for src in rule.flagged_sources():
            src = textwrap.dedent(src)
            if needs_npu_flag:  # the example without its NPU evidence (import torch_npu, device "npu", ...)
                src = "".join(line for line in src.splitlines(True) if not any(h in line for h in NPU_HINTS))
            if not needs_npu_flag:
                if rule.code in {f.code for f in lint(src, select=[rule.code], preview=True)}:
                    return rule, src
            elif rule.code not in {f.code for f in lint(src, select=[rule.code], target="auto")} and \
                    rule.code in {f.code for f in lint(src, select=[rule.code], target="npu")}:
                return rule, src
    return None


def test_preview_option_from_command_line_and_configs(project):
    found = _example([r for r in REGISTRY.sorted_rules() if r.preview])
    if found is None:
        pytest.skip("no preview rule with a flagged example is registered")
    rule, src = found
    (project / "p.py").write_text(src, encoding="utf-8")
    args = ("--select", rule.code, "p.py")
    assert rule.code not in flake8(*args, cwd=str(project)).stdout
    assert rule.code in flake8("--ascend-preview", *args, cwd=str(project)).stdout
    (project / "setup.cfg").write_text("[flake8]\nascend-preview = true\n", encoding="utf-8")
    assert rule.code in flake8(*args, cwd=str(project)).stdout
    (project / "setup.cfg").unlink()
    (project / "pyproject.toml").write_text("[tool.ascend-lint]\npreview = true\n", encoding="utf-8")
    assert rule.code in flake8(*args, cwd=str(project)).stdout


def test_target_option(project):
    found = _example([r for r in REGISTRY.sorted_rules() if r.npu_context], needs_npu_flag=True)
    if found is None:
        pytest.skip("no NPU-context rule with an example that needs --target npu is registered")
    rule, src = found
    (project / "t.py").write_text(src, encoding="utf-8")
    args = ("--ascend-preview", "--select", rule.code, "t.py")
    assert rule.code not in flake8(*args, cwd=str(project)).stdout
    assert rule.code in flake8("--ascend-target", "npu", *args, cwd=str(project)).stdout
    (project / "tox.ini").write_text("[flake8]\nascend-target = npu\n", encoding="utf-8")
    assert rule.code in flake8(*args, cwd=str(project)).stdout


# ----------------------------------------------------------------------------- excludes (issue #27)
EXCLUDES = {
    "extend-exclude": '[tool.ascend-lint]\nextend-exclude = ["gen/"]\n',
    "exclude": '[tool.ascend-lint]\nexclude = ["gen"]\n',
    "gitignore": "[tool.ascend-lint]\n",  # with gen/ in .gitignore
}


@pytest.mark.parametrize("key", sorted(EXCLUDES))
def test_every_exclude_key_is_honoured_as_check_honours_it(tmp_path, key):
    (tmp_path / "pyproject.toml").write_text(EXCLUDES[key])
    if key == "gitignore":
        (tmp_path / ".gitignore").write_text("gen/\n")
    for directory in ("gen", "src"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "m.py").write_text(BAD)
    walked = parsed(flake8("--select", "ASC", ".", cwd=str(tmp_path)))
    assert {path for path, *_ in walked} == {"./src/m.py"}
    named = parsed(flake8("--select", "ASC", "gen/m.py", cwd=str(tmp_path)))  # named: linted, as by check
    assert {path for path, *_ in named} == {"gen/m.py"}
    (tmp_path / "pyproject.toml").write_text(EXCLUDES[key] + "force-exclude = true\n")
    assert parsed(flake8("--select", "ASC", "gen/m.py", cwd=str(tmp_path))) == []
