"""The CLI contract: output formats, selection, exit codes, stdin, rule docs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ascend_lint import __version__
from ascend_lint.cli import main

BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
GOOD = "import torch\ny = x.view(2, -1)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_full_output_has_position_code_snippet_and_caret(project, capsys):
    code, out, _ = run(capsys, "check", "bad.py", "--isolated")
    assert code == 1
    assert "bad.py:2:5: ASC101 `.contiguous()` after `transpose`" in out
    assert "2 | y = torch.transpose(x, -2, -1).contiguous() @ w" in out
    assert "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n" in out
    assert "Found 1 finding." in out
    assert "\033[" not in out  # no colour when not a terminal


def test_clean_file_exits_zero(project, capsys):
    code, out, _ = run(capsys, "check", "good.py", "--isolated")
    assert code == 0
    assert "All checks passed!" in out


def test_directory_default_and_concise(project, capsys):
    code, out, _ = run(capsys, "check", "--isolated", "--output-format", "concise")
    assert code == 1
    assert out.splitlines()[0].startswith(os.path.join(".", "bad.py") + ":2:5: ASC101") or \
        out.splitlines()[0].startswith("bad.py:2:5: ASC101")


def test_json_output_is_machine_readable(project, capsys):
    code, out, _ = run(capsys, "check", "bad.py", "--isolated", "--output-format", "json")
    data = json.loads(out)
    assert code == 1 and data[0]["code"] == "ASC101"
    assert data[0]["location"] == {"row": 2, "column": 5}
    assert data[0]["end_location"]["row"] == 2


@pytest.mark.parametrize("flags,expected", [
    (["--select", "ASC1"], 1),
    (["--select", "ASC101"], 1),
    (["--ignore", "ASC101"], 0),
    (["--ignore", "ASC1"], 0),
    (["--select", "ASC", "--ignore", "ASC10"], 0),
    (["--ignore", "ASC", "--extend-select", "ASC101"], 1),
    (["--exit-zero"], 0),
])
def test_selection_and_exit_codes(project, capsys, flags, expected):
    code, _, _ = run(capsys, "check", "bad.py", "--isolated", *flags)
    assert code == expected


def test_unknown_selector_is_a_usage_error(project, capsys):
    code, _, err = run(capsys, "check", "bad.py", "--isolated", "--select", "XYZ9")
    assert code == 2 and "unknown rule selector 'XYZ9'" in err


def test_statistics(project, capsys):
    code, out, _ = run(capsys, "check", "bad.py", "--isolated", "--statistics")
    assert code == 1 and "1\tASC101\tcontiguous-after-view" in out


def test_quiet_prints_findings_only(project, capsys):
    _, out, _ = run(capsys, "check", "bad.py", "--isolated", "-q", "--output-format", "concise")
    assert "Found" not in out and "ASC101" in out


def test_stdin_with_filename(project, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    code, out, _ = run(capsys, "check", "-", "--stdin-filename", "model/net.py", "--isolated")
    assert code == 1 and "model/net.py:2:5: ASC101" in out


def test_missing_path_is_reported_and_run_goes_on(project, capsys):
    code, out, _ = run(capsys, "check", "nope.py", "bad.py", "--isolated", "--output-format", "concise")
    assert code == 1
    assert "nope.py:1:1: ASC000 no such file or directory" in out
    assert "bad.py:2:5: ASC101" in out


def test_empty_file_list_after_force_exclude_warns_like_ruff(project, capsys):
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(BAD)
    code, out, err = run(capsys, "check", "--isolated", "--force-exclude", "build/gen.py")
    assert (code, out, err) == (0, "All checks passed!\n", "warning: No Python files found under the given path(s)\n")
    code, out, err = run(capsys, "check", "--isolated", "--force-exclude", "-q", "build/gen.py")
    assert (code, out, err) == (0, "", "")
    code, out, _ = run(capsys, "check", "--isolated", "--force-exclude", "build/gen.py", "--output-format", "json")
    assert (code, out) == (0, "[]\n")


def test_named_file_in_excluded_dir_is_linted_without_force_exclude(project, capsys):
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(BAD)
    code, out, _ = run(capsys, "check", "--isolated", "build/gen.py")
    assert code == 1 and "ASC101" in out


def test_rule_and_rules_commands(capsys):
    code, out, _ = run(capsys, "rule", "ASC101")
    assert code == 0
    assert out.startswith("ASC101 contiguous-after-view")
    for section in ("## What it does", "## Why is this bad on Ascend?", "## Example", "## Fix safety"):
        assert section in out
    code, out, _ = run(capsys, "rule", "contiguous-after-view")
    assert code == 0 and "ASC101" in out
    code, out, _ = run(capsys, "rules")
    assert code == 0 and out.startswith("CODE") and "ASC101" in out and "affinity" in out
    code, _, err = run(capsys, "rule", "ASC999")
    assert code == 2 and "unknown rule" in err


def test_version_and_module_entry():
    out = subprocess.run([sys.executable, "-m", "ascend_lint", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"ascend-lint {__version__}"


@pytest.mark.parametrize("command", [[sys.executable, "-m", "ascend_lint"], ["ascend-lint"]])
def test_the_command_writes_everything_and_keeps_its_exit_code(command, tmp_path):
    """The command leaves without tearing its heap down: what it printed and the cache it saved are
    whole, and its exit code is main's."""
    for number in range(150):
        (tmp_path / f"bad{number}.py").write_text(BAD)
    args = ["check", ".", "--isolated", "--output-format", "json", "--cache-dir", "cache"]
    out = subprocess.run(command + args, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and len({f["filename"] for f in json.loads(out.stdout)}) == 150
    again = subprocess.run(command + args, cwd=tmp_path, capture_output=True, text=True)
    assert (again.returncode, again.stdout) == (1, out.stdout)
    (tmp_path / "good.py").write_text(GOOD)
    clean = subprocess.run(command + ["check", "good.py", "--isolated"], cwd=tmp_path, capture_output=True, text=True)
    assert clean.returncode == 0 and "All checks passed" in clean.stdout, clean.stderr
    error = subprocess.run(command + ["check", "good.py", "--select", "ASC9"], cwd=tmp_path, capture_output=True,
                           text=True)
    assert error.returncode == 2 and "unknown rule selector" in error.stderr
    head = subprocess.Popen(command + ["check", ".", "--isolated", "--no-cache"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert head.stdout is not None
    head.stdout.readline()
    head.stdout.close()  # (a reader that stops early: `| head -1`)
    assert head.wait(timeout=120) in (1, 2) and b"Traceback" not in head.stderr.read()


def test_console_script_colour_and_no_color(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    env = dict(os.environ, FORCE_COLOR="1")
    env.pop("NO_COLOR", None)
    out = subprocess.run(["ascend-lint", "check", "bad.py", "--isolated"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 1 and "\033[" in out.stdout
    env["NO_COLOR"] = "1"
    out = subprocess.run(["ascend-lint", "check", "bad.py", "--isolated"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert "\033[" not in out.stdout


def test_add_noqa_baselines_findings(project, capsys):
    code, _, err = run(capsys, "check", "bad.py", "--isolated", "--add-noqa")
    assert code == 0 and "Added 1 noqa directive" in err
    assert (project / "bad.py").read_text() == BAD.replace("@ w\n", "@ w  # noqa: ASC101\n")
    code, _, _ = run(capsys, "check", "bad.py", "--isolated")
    assert code == 0


def test_add_noqa_keeps_crlf_and_merges_codes(project, capsys):
    (project / "crlf.py").write_bytes(b"import torch_npu\r\ny = x.t().contiguous() @ w  # noqa: ASC999\r\n")
    run(capsys, "check", "crlf.py", "--isolated", "--add-noqa")
    assert (project / "crlf.py").read_bytes() == b"import torch_npu\r\ny = x.t().contiguous() @ w  # noqa: ASC101, ASC999\r\n"


def test_output_file_keeps_terminal_summary(project, capsys):
    code, out, _ = run(capsys, "check", "bad.py", "--isolated", "--output-format", "json", "--output-file", "r.json")
    assert code == 1
    assert json.loads((project / "r.json").read_text())[0]["code"] == "ASC101"
    assert "Found 1 finding." in out


def test_summary_says_which_preview_rules_the_run_left_out(project, capsys):
    """The summary names the preview rules `--preview` would add to the selection, and is silent with it."""
    _, out, _ = run(capsys, "check", "bad.py", "--isolated", "--select", "ASC101,ASC102")
    assert "1 preview rule not enabled (contiguous-layout-copy): `--preview` checks it." in out
    _, out, _ = run(capsys, "check", "bad.py", "--isolated", "--select", "ASC101,ASC102", "--preview")
    assert "preview rule" not in out
    _, out, _ = run(capsys, "check", "bad.py", "--isolated", "--output-format", "json")
    assert "preview rule" not in out  # machine-readable output stays clean
