"""ASC001 unused-noqa: which noqa codes are judged, the message, the safe fix, --ignore-noqa."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ascend_lint.cli import main
from conftest import lint

BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w"


def unused(source: str, select=("ASC1", "ASC001"), **kwargs):
    return [f for f in lint(source, select=list(select), **kwargs) if f.code == "ASC001"]


def test_used_code_is_not_reported():
    assert unused(BAD + "  # noqa: ASC101\n") == []
    assert unused(BAD + "  # noqa: ASC1\n") == []


def test_unused_and_unknown_codes_are_reported_at_the_directive():
    found = unused("import torch_npu\ny = x.view(2, -1)  # noqa: ASC101, F401, ASC990\n")
    assert len(found) == 1
    f = found[0]
    assert f.message == "Unused `noqa` directive (unused: `ASC101`; unknown: `ASC990`)"
    assert (f.line, f.col, f.end_col) == (2, 20, 48)


def test_codes_of_rules_that_did_not_run_are_not_judged():
    src = "import torch\ny = x.view(2, -1)  # noqa: ASC403, ASC301, E501\n"
    assert unused(src, select=("ASC1", "ASC001")) == []  # ASC403/ASC301 not selected
    assert unused(src, select=("ASC", "ASC001")) == []  # NPU-context rules: this file is not NPU code
    npu = src.replace("import torch\n", "import torch\nimport torch_npu\n")
    assert [f.message for f in unused(npu, select=("ASC", "ASC001"))] == [
        "Unused `noqa` directive (unused: `ASC403`, `ASC301`)"]
    assert unused(npu, select=("ASC", "ASC001"), per_file_ignores={"*.py": ["ASC4"]})[0].message == (
        "Unused `noqa` directive (unused: `ASC301`)")


def test_bare_noqa_other_tools_and_strings_are_left_alone():
    assert unused("import torch\ny = 1  # noqa\nz = 2  # noqa: E501\n") == []
    assert unused('import torch\ns = "# noqa: ASC101"\nt = """\n# noqa: ASC990\n"""\n') == []


def test_the_check_itself_can_be_suppressed():
    assert unused("import torch\ny = 1  # noqa: ASC990, ASC001\n") == []
    assert unused("# ascend-lint: noqa: ASC001\nimport torch\ny = 1  # noqa: ASC990\n") == []


def test_preview_rule_is_not_on_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text("import torch\ny = 1  # noqa: ASC990\n")
    assert main(["check", "--isolated", "--no-cache", "a.py"]) == 0
    assert main(["check", "--isolated", "--no-cache", "--preview", "a.py"]) == 1
    assert "ASC001" in capsys.readouterr().out


FIX_CASES = [
    ("y = x.view(2, -1)  # noqa: ASC101, F401\n", "y = x.view(2, -1)  # noqa: F401\n"),
    ("y = x.view(2, -1)  # noqa: ASC101\n", "y = x.view(2, -1)\n"),
    ("y = x.view(2, -1)  # noqa:ASC101 reason\n", "y = x.view(2, -1)  # reason\n"),
    ("y = x.view(2, -1)  # noqa: ASC101  # type: ignore\n", "y = x.view(2, -1)  # type: ignore\n"),
    ("y = x.view(2, -1)  # type: ignore  # noqa: ASC101,ASC101\n", "y = x.view(2, -1)  # type: ignore\n"),
    ("    # noqa: ASC101\n", "\n"),
    ("y = 1  # noqa: ASC101\r\n", "y = 1\r\n"),
]


@pytest.mark.parametrize("line,expected", FIX_CASES)
def test_fix_removes_only_the_unused_codes(tmp_path, monkeypatch, line, expected):
    monkeypatch.chdir(tmp_path)
    head = "import torch_npu\n" if "\r" not in line else "import torch_npu\r\n"
    Path("a.py").write_bytes((head + line).encode())
    args = ["check", "--isolated", "--no-cache", "--preview", "--select", "ASC1,ASC001", "a.py"]
    assert main(args + ["--fix"]) == 0
    assert Path("a.py").read_bytes().decode() == head + expected
    assert main(args) == 0  # idempotent: nothing left to fix or report


def test_fix_next_to_another_fix_on_the_same_line(tmp_path, monkeypatch):
    """A text fix waits for the round after a structural fix of its line."""
    monkeypatch.chdir(tmp_path)
    src = textwrap.dedent("""\
        import torch
        import torch_npu
        opt = torch.optim.Adam(model.parameters(), lr=0.1)  # noqa: ASC101
    """)
    Path("a.py").write_text(src)
    args = ["check", "--isolated", "--no-cache", "--preview", "--select", "ASC1,ASC3,ASC001", "--exit-zero"]
    main(args + ["--fix", "--unsafe-fixes", "a.py"])
    text = Path("a.py").read_text()
    assert "noqa" not in text and "NpuFusedAdam" in text


def test_ignore_noqa_reports_suppressed_findings(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text("# ascend-lint: noqa\n" + BAD + "  # noqa: ASC101\n")
    assert main(["check", "--isolated", "--no-cache", "a.py"]) == 0
    assert main(["check", "--isolated", "--no-cache", "--preview", "--ignore-noqa", "a.py"]) == 1
    out = capsys.readouterr().out
    assert "ASC101" in out and "ASC001" not in out


def test_fixed_file_survives_ruff(tmp_path):
    """After the fix, ruff finds the remaining noqa well-formed (RUF100 sees no broken directive)."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed")
    path = tmp_path / "a.py"
    path.write_text("# trained on the 'npu' device\nimport os  # noqa: ASC101, F401\nx = 1  # noqa: ASC101  # why\n")
    exe = Path(sys.executable).with_name("ascend-lint")
    subprocess.run([str(exe), "check", "--isolated", "--no-cache", "--preview", "--select", "ASC1,ASC001",
                    "--fix", str(path)], check=True, capture_output=True)
    assert path.read_text() == "# trained on the 'npu' device\nimport os  # noqa: F401\nx = 1  # why\n"
    done = subprocess.run([str(ruff), "check", "--isolated", "--select", "F401,RUF100", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
