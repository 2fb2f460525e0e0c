"""ruff's CLI contract, checked against the real ruff where the two can be compared."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from ascend_lint.cli import main
from ascend_lint.fix.edits import TextEdit

RUFF = Path(sys.executable).with_name("ruff")
ASCEND = Path(sys.executable).with_name("ascend-lint")
FIXTURES = Path(__file__).parent / "fixtures" / "fixes"
BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
SAFE_FIX = ("import torch\nimport torch_npu\nopt = torch.optim.Adam(model.parameters())\n"  # ASC301: unsafe fix
            "fused = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)\n"
            "fused.zero_grad(set_to_none=True)\n")  # ASC307: safe fix


def needs_ruff():
    if not RUFF.exists():
        pytest.skip("ruff is not installed")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def run(capsys, *args):
    code = main(["check", "--isolated", "--no-cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


def tool(exe: Path, *args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120)


# ------------------------------------------------------------------------------ fix modes
def fixable_project(path: Path) -> Path:
    (path / "a.py").write_text(SAFE_FIX)
    return path / "a.py"


def test_fix_only_reports_fixes_not_findings(project, capsys):
    target = fixable_project(project)
    code, out, err = run(capsys, "--fix-only", "a.py")
    assert code == 0 and out == "Fixed 1 finding.\n" and "ASC" not in out + err
    assert "set_to_none=False" in target.read_text()
    assert run(capsys, "--fix-only", "a.py") == (0, "", "")  # nothing left to fix: silent


def test_exit_non_zero_on_fix(project, capsys):
    fixable_project(project)
    assert run(capsys, "--fix-only", "--exit-non-zero-on-fix", "a.py")[0] == 1
    fixable_project(project)
    code, out, _ = run(capsys, "--fix", "--exit-non-zero-on-fix", "--select", "ASC307", "a.py")
    assert code == 1 and "Fixed 1 finding; all checks passed!" in out
    fixable_project(project)
    assert run(capsys, "--fix", "--exit-non-zero-on-fix", "--exit-zero", "--select", "ASC307", "a.py")[0] == 0
    assert run(capsys, "--fix", "--exit-non-zero-on-fix", "--select", "ASC307", "a.py")[0] == 0  # nothing fixed


def test_fix_modes_on_stdin(project, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SAFE_FIX.encode())))
    code, out, err = run(capsys, "--fix-only", "--exit-non-zero-on-fix", "-", "--stdin-filename", "a.py")
    assert code == 1 and "set_to_none=False" in out and err == "Fixed 1 finding.\n"


@pytest.mark.parametrize("flags", [["--fix-only"], ["--fix", "--exit-non-zero-on-fix"]])
def test_fix_mode_exit_codes_match_ruff(tmp_path, flags):
    """Same file state (fixable, then already fixed): same exit codes as ruff."""
    needs_ruff()
    (tmp_path / "r.py").write_text("import os\nimport sys\n")  # F401 twice: a safe fix for ruff
    fixable_project(tmp_path)
    theirs = [tool(RUFF, "check", "--isolated", "--select", "F401", *flags, "r.py", cwd=tmp_path).returncode
              for _ in range(2)]
    ours = [tool(ASCEND, "check", "--isolated", "--no-cache", "--select", "ASC307", *flags, "a.py",
                 cwd=tmp_path).returncode for _ in range(2)]
    assert ours == theirs


# ------------------------------------------------------------------------------ files and settings
def test_show_files_lists_what_would_be_linted(project, capsys):
    (project / "pkg").mkdir()
    (project / "pkg" / "m.py").write_text(BAD)
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(BAD)
    (project / "notes.txt").write_text("x")
    code, out, _ = run(capsys, "--show-files", ".")
    assert code == 0 and out.split() == ["pkg/m.py"]


def test_show_settings_says_where_each_value_came_from(project, capsys):
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nselect = ["ASC1"]\n')
    (project / "a.py").write_text(BAD)
    code = main(["check", "--show-settings", "--preview", "a.py"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith('Resolved settings for: "a.py"\n')
    assert f'select = ["ASC1"]  # {project / "pyproject.toml"}' in out
    assert "preview = true  # command line" in out
    assert 'target = "auto"  # default' in out
    assert 'enabled rules = ["ASC101", "ASC102"]' in out


# ------------------------------------------------------------------------------ one-line errors
@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_empty_selector_is_a_usage_error_like_ruff(project, capsys, flag):
    (project / "a.py").write_text(BAD)
    code, out, err = run(capsys, flag, "", "a.py")
    assert code == 2 and out == "" and err.count("\n") == 1 and "empty rule selector" in err


def test_empty_selector_exit_code_matches_ruff(tmp_path):
    needs_ruff()
    (tmp_path / "a.py").write_text(BAD)
    assert tool(RUFF, "check", "--isolated", "--select", "", "a.py", cwd=tmp_path).returncode == 2
    assert tool(ASCEND, "check", "--isolated", "--select", "", "a.py", cwd=tmp_path).returncode == 2


def test_unknown_code_in_per_file_ignores(project, capsys):
    (project / "pyproject.toml").write_text('[tool.ascend-lint.per-file-ignores]\n"tests/*" = ["ASC1", "ASX101"]\n')
    (project / "a.py").write_text(BAD)
    code = main(["check", "--no-cache", "a.py"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "unknown rule selector 'ASX101' in per-file-ignores 'tests/*'" in err and "pyproject.toml" in err


def test_output_file_in_missing_directory_is_created_like_ruff(project, capsys):
    (project / "a.py").write_text(BAD)
    code, _, _ = run(capsys, "a.py", "--output-format", "json", "-o", "reports/lint/out.json")
    assert code == 1 and json.loads((project / "reports" / "lint" / "out.json").read_text())[0]["code"] == "ASC101"


def test_unwritable_output_file_is_one_line(project, capsys):
    (project / "a.py").write_text(BAD)
    (project / "taken").write_text("a file, not a directory")
    code, _, err = run(capsys, "a.py", "-o", "taken/out.json")
    assert code == 2 and err.count("\n") == 1 and err.startswith("ascend-lint: error: cannot write the report")


def test_stdin_filename_without_dash_reads_stdin_like_ruff(tmp_path):
    (tmp_path / "other.py").write_text(BAD)
    ours = tool(ASCEND, "check", "--isolated", "--no-cache", "--stdin-filename", "model/net.py", "other.py",
                cwd=tmp_path, stdin=BAD)
    assert ours.returncode == 1 and "model/net.py:2:5: ASC101" in ours.stdout and "other.py" not in ours.stdout
    assert "warning: Ignoring file other.py in favor of standard input." in ours.stderr
    ours = tool(ASCEND, "check", "--isolated", "--no-cache", "--stdin-filename", "net.py", cwd=tmp_path, stdin="x = 1\n")
    assert ours.returncode == 0 and "other.py" not in ours.stdout
    if RUFF.exists():
        theirs = tool(RUFF, "check", "--isolated", "--stdin-filename", "net.py", "other.py", cwd=tmp_path,
                      stdin="import os\n")
        assert "net.py" in theirs.stdout and "Ignoring file other.py in favor of standard input." in theirs.stderr


# ------------------------------------------------------------------------------ statistics and JSON
def test_statistics_mark_only_fixes_that_fix_would_apply(project, capsys):
    (project / "a.py").write_text("import torch\nimport torch_npu\nopt = torch.optim.Adam(model.parameters())\n")
    _, out, _ = run(capsys, "--statistics", "--preview", "--select", "ASC301", "a.py")  # its fix is unsafe
    assert "\tASC301\tfused-optimizer-available" in out and "[*]" not in out
    _, out, _ = run(capsys, "--statistics", "--preview", "--select", "ASC301", "--unsafe-fixes", "a.py")
    assert "\tASC301\t[*] fused-optimizer-available" in out


def test_statistics_json_has_ruffs_fields(project, capsys):
    (project / "a.py").write_text(SAFE_FIX)
    code, out, _ = run(capsys, "--statistics", "--output-format", "json", "--preview", "--select", "ASC307,ASC301",
                    "a.py")
    rows = json.loads(out)
    assert code == 1
    assert rows == [
        {"code": "ASC301", "name": "fused-optimizer-available", "count": 1, "fixable": False, "fixable_count": 0},
        {"code": "ASC307", "name": "fused-optimizer-set-to-none", "count": 1, "fixable": True, "fixable_count": 1},
    ]
    if RUFF.exists():
        (project / "r.py").write_text("import os\n")
        theirs = json.loads(tool(RUFF, "check", "--isolated", "--statistics", "--output-format", "json", "r.py",
                                 cwd=project).stdout)
        assert set(theirs[0]) == set(rows[0])


def test_json_findings_have_ruffs_fields(project, capsys):
    needs_ruff()
    (project / "r.py").write_text("import os\n")
    theirs = json.loads(tool(RUFF, "check", "--isolated", "--output-format", "json", "r.py", cwd=project).stdout)[0]
    (project / "a.py").write_text(SAFE_FIX)
    _, out, _ = run(capsys, "--output-format", "json", "--select", "ASC307", "a.py")
    ours = json.loads(out)[0]
    assert set(theirs) - set(ours) <= {"cell"}  # notebooks are not linted
    assert set(theirs["fix"]) == set(ours["fix"])
    assert set(theirs["fix"]["edits"][0]) == set(ours["fix"]["edits"][0])


def apply_edits(text: str, edits: List[dict]) -> str:
    """Apply ruff-style JSON edits (1-based rows and character columns) to `text`."""
    lines = text.splitlines(keepends=True) + [""]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(loc: dict) -> int:
        return starts[loc["row"] - 1] + loc["column"] - 1

    for edit in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        text = text[:offset(edit["location"])] + edit["content"] + text[offset(edit["end_location"]):]
    return text


SINGLE_FIX_CASES = ["ASC307_set_to_none", "ASC301_adds_import", "ASC303_crlf", "ASC001_unknown_codes"]


@pytest.mark.parametrize("case", SINGLE_FIX_CASES)
def test_json_edits_do_what_fix_does(project, capsys, case):
    """Applying every finding's JSON edits, one finding at a time, gives what `--fix` writes."""
    code = case.split("_", 1)[0]
    source = (FIXTURES / f"{case}.in.py").read_bytes().decode()
    shutil.copy(FIXTURES / f"{case}.in.py", project / "a.py")
    flags = ["--preview", "--select", code, "--unsafe-fixes"]
    text = source
    for _ in range(20):
        _, out, _ = run(capsys, *flags, "--output-format", "json", "a.py")
        rows = [r for r in json.loads(out) if r["fix"] and r["fix"]["edits"]]
        if not rows:
            break
        text = apply_edits(text, rows[0]["fix"]["edits"])
        (project / "a.py").write_bytes(text.encode())
    shutil.copy(FIXTURES / f"{case}.in.py", project / "b.py")
    run(capsys, *flags, "--fix", "b.py")
    assert text == (project / "b.py").read_bytes().decode()


def test_text_edit_round_trip():
    from ascend_lint.fix.edits import diff_edits

    old, new = "a = 1\nb = 2\nc = 3\n", "a = 1\nimport x\nb = 20\nc = 3\n"
    edits = diff_edits(old, new)
    assert edits == [TextEdit(2, 1, 2, 6, "import x\nb = 20")]
    assert apply_edits(old, [e.to_dict() for e in edits]) == new
