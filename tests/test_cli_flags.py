"""ruff's remaining `check` flags and `clean` (issue #27): `--config KEY = VALUE`, `--[no-]respect-gitignore`,
`--color`, `--watch`, `clean`, and `check`'s own usage on a bad flag."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ascend_lint.cli import main, use_color
from ascend_lint.watch import snapshot, watch

BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
ESC = "\x1b["


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "CLICOLOR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "bad.py").write_text(BAD)
    return tmp_path


def run(capsys, *args):
    code = main(["check", "--no-cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- usage
@pytest.mark.parametrize("args", [["--bogus"], ["--color", "sometimes"], ["--jobs", "many"]])
def test_a_bad_check_flag_prints_checks_own_usage(project, capsys, args):
    with pytest.raises(SystemExit) as exc:
        main(["check", *args, "bad.py"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("usage: ascend-lint check ") and "ascend-lint check: error:" in err


def test_a_bad_top_level_flag_keeps_the_top_level_usage(project, capsys):
    with pytest.raises(SystemExit):
        main(["--bogus", "check", "bad.py"])
    assert capsys.readouterr().err.startswith("usage: ascend-lint [-h]")


# ----------------------------------------------------------------------------- --config KEY = VALUE
def test_config_override_applies_over_every_configuration(project, capsys):
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nselect = ["ASC6"]\n')
    (project / "sub").mkdir()
    (project / "sub" / ".ascend-lint.yaml").write_text("select: [ASC6]\n")
    (project / "sub" / "m.py").write_text(BAD)
    assert run(capsys, "bad.py", "sub/m.py")[0] == 0
    code, out, _ = run(capsys, "--config", "select = ['ASC1']", "--output-format", "concise", "bad.py", "sub/m.py")
    assert code == 1 and "bad.py:2:5: ASC101" in out and "m.py:2:5: ASC101" in out


def test_dedicated_flags_win_over_config_overrides_like_ruff(project, capsys):
    assert run(capsys, "--isolated", "--config", "select = ['ASC6']", "--select", "ASC1", "bad.py")[0] == 1
    assert run(capsys, "--isolated", "--config", "select = ['ASC1']", "--select", "ASC6", "bad.py")[0] == 0


def test_config_overrides_add_and_merge_like_an_extending_file(project, capsys):
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nselect = ["ASC6"]\nextend-select = ["ASC2"]\n')
    code, out, _ = run(capsys, "--config", "extend-select = ['ASC1']", "--config", "preview = true",
                       "--show-settings", "bad.py")
    assert code == 0
    assert 'extend-select = ["ASC2", "ASC1"]' in out and "+ command line (--config)" in out
    assert "preview = true  # command line (--config)" in out


def test_config_override_globs_are_relative_to_the_current_directory(project, capsys, monkeypatch):
    (project / "pkg").mkdir()
    (project / "pkg" / "pyproject.toml").write_text('[tool.ascend-lint]\nselect = ["ASC1"]\n')
    (project / "pkg" / "gen").mkdir()
    (project / "pkg" / "gen" / "m.py").write_text(BAD)
    assert run(capsys, "pkg")[0] == 1
    assert run(capsys, "--config", "extend-exclude = ['pkg/gen/*.py']", "pkg")[0] == 0
    assert run(capsys, "--config", "per-file-ignores = {'pkg/gen/*' = ['ASC101']}", "pkg")[0] == 0


@pytest.mark.parametrize("value,needle", [
    ("bogus = 1", "--config: unknown key 'bogus'"),
    ("preview = 'yes'", "--config: 'preview' must be true or false"),
    ("select = [", "invalid TOML `KEY = VALUE` pair"),
    ("extend = 'other.toml'", "give that file as --config FILE"),
    ("nonsense", "nonsense: configuration file not found (--config takes a file, or a TOML"),
    ("select = " + "[" * 5000 + "]" * 5000, "nested too deeply to read"),  # hostile: bounded, no traceback
    ("rules = " + "{a = " * 40 + "1" + "}" * 40, "nested more than 16 levels deep"),
    ("select = [" + ", ".join(["'ASC1'"] * 10_001) + "]", "hold more than 10,000 values"),
])
def test_bad_config_values_are_one_line_errors(project, capsys, value, needle):
    code, out, err = run(capsys, "--config", value, "bad.py")
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


def test_one_configuration_file_and_not_with_isolated_like_ruff(project, capsys):
    (project / "a.toml").write_text("[tool.ascend-lint]\n")
    (project / "b.yaml").write_text("preview: true\n")
    code, _, err = run(capsys, "--config", "a.toml", "--config", "b.yaml", "bad.py")
    assert code == 2 and "only one configuration file can be given" in err
    code, _, err = run(capsys, "--isolated", "--config", "a.toml", "bad.py")
    assert code == 2 and "cannot be used with --isolated" in err
    assert run(capsys, "--isolated", "--config", "select = ['ASC6']", "bad.py")[0] == 0  # an override may
    assert run(capsys, "--config", "b.yaml", "--config", "select = ['ASC6']", "bad.py")[0] == 0  # file + override


# ----------------------------------------------------------------------------- --[no-]respect-gitignore
def test_respect_gitignore_flags(project, capsys):
    (project / ".gitignore").write_text("bad.py\n")
    assert run(capsys, ".")[0] == 0
    assert run(capsys, "--no-respect-gitignore", ".")[0] == 1
    (project / "pyproject.toml").write_text("[tool.ascend-lint]\nrespect-gitignore = false\n")
    assert run(capsys, ".")[0] == 1
    code, out, _ = run(capsys, "--respect-gitignore", "--show-settings", ".")
    assert code == 0 and "respect-gitignore = true  # command line" in out
    assert run(capsys, "--respect-gitignore", ".")[0] == 0


# ----------------------------------------------------------------------------- --color
class Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("env,choice,tty,expected", [
    ({}, "auto", True, True),
    ({}, "auto", False, False),
    ({"NO_COLOR": "1"}, "auto", True, False),
    ({"NO_COLOR": ""}, "auto", True, True),  # empty: not set (no-color.org)
    ({"FORCE_COLOR": "1"}, "auto", False, True),
    ({"FORCE_COLOR": "0"}, "auto", False, True),  # ruff: any non-empty value
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, "auto", False, False),
    ({"CLICOLOR_FORCE": "1"}, "auto", False, True),
    ({"CLICOLOR": "0"}, "auto", True, False),
    ({"NO_COLOR": "1"}, "always", False, True),  # the flag beats the environment, as in ruff
    ({"FORCE_COLOR": "1"}, "never", True, False),
])
def test_color_choice_follows_ruff(project, monkeypatch, env, choice, tty, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert use_color(Terminal(tty), choice) is expected


def test_color_flag_colours_the_report(project, capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert ESC in run(capsys, "--isolated", "--color", "always", "bad.py")[1]
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ESC in run(capsys, "--isolated", "bad.py")[1]
    assert ESC not in run(capsys, "--isolated", "--color", "never", "bad.py")[1]
    assert ESC not in run(capsys, "--isolated", "--color", "always", "--output-format", "json", "bad.py")[1]


# ----------------------------------------------------------------------------- --watch
def test_watch_runs_again_after_a_change_and_not_after_its_own_writes(tmp_path):
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not watched\n")
    runs = []

    def run_once() -> int:
        runs.append(target.read_text())
        if len(runs) == 2:  # a `--fix` run writes the file it was started for
            target.write_text("x = 3\n")
        return 0

    def sleep(_):
        looks = len(sleeps)
        sleeps.append(looks)
        if looks == 1:
            target.write_text("x = 2  # edited\n")
        if looks == 3:
            (tmp_path / "notes.txt").write_text("still not watched\n")
        if looks == 4:
            (tmp_path / "pyproject.toml").write_text("[tool.ascend-lint]\n")

    sleeps: list = []
    out = io.StringIO()
    assert watch(run_once, [str(tmp_path)], out, interval=0, sleep=sleep, rounds=6) == 0
    assert runs == ["x = 1\n", "x = 2  # edited\n", "x = 3\n"]
    assert out.getvalue() == "Starting linter in watch mode...\n" + "File change detected...\n" * 2


def test_watch_snapshot_skips_default_excludes_and_sees_configurations_above(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "src" / ".venv").mkdir(parents=True)
    (tmp_path / "src" / ".venv" / "lib.py").write_text("")
    (tmp_path / "src" / "m.py").write_text("")
    seen = snapshot([str(tmp_path / "src")])
    assert str(tmp_path / "src" / "m.py") in seen and str(tmp_path / "pyproject.toml") in seen
    assert not any(".venv" in path for path in seen)


def _reader(process: subprocess.Popen, seen: list) -> None:
    """Collect the process's stdout and stderr lines in `seen` (threads: a pipe's buffered lines and select()
    do not mix)."""
    for stream in (process.stdout, process.stderr):
        threading.Thread(target=lambda s=stream: seen.extend(iter(s.readline, "")), daemon=True).start()


def _wait_for(needle: str, seen: list, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if needle in "".join(seen):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_watch_end_to_end_in_a_short_lived_run(project):
    process = subprocess.Popen([sys.executable, "-m", "ascend_lint", "check", "--watch", "--isolated", "--no-cache",
                                "--output-format", "concise", "bad.py"], cwd=project, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, bufsize=1, env={**os.environ, "NO_COLOR": "1"})
    seen: list = []
    _reader(process, seen)
    try:
        assert _wait_for("Found 1 finding.", seen), seen
        with open(project / "bad.py", "a") as handle:
            handle.write("z = torch.transpose(x, -2, -1).contiguous() @ w\n")
        assert _wait_for("Found 2 findings.", seen), seen
        assert "File change detected...\n" in seen
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_watch_refuses_modes_it_cannot_repeat(project, capsys):
    code, _, err = run(capsys, "--watch", "--add-noqa", "bad.py")
    assert code == 2 and "--watch cannot be used with --add-noqa" in err
    code, _, err = run(capsys, "--watch", "-")
    assert code == 2 and "--watch cannot be used with standard input" in err


# ----------------------------------------------------------------------------- clean
def _cached(directory: Path, *extra: str) -> None:
    assert main(["check", "-q", "--exit-zero", *extra, str(directory / "bad.py")]) == 0


def test_clean_removes_every_cache_below_and_the_configured_one(project, capsys, tmp_path_factory):
    (project / "sub").mkdir()
    (project / "sub" / "bad.py").write_text(BAD)
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "cache"
    _cached(project)
    os.chdir(project / "sub")
    _cached(project / "sub")
    os.chdir(project)
    (project / "pyproject.toml").write_text(f'[tool.ascend-lint]\ncache-dir = "{elsewhere}"\n')
    _cached(project)
    assert (project / ".ascend_lint_cache").is_dir() and (project / "sub" / ".ascend_lint_cache").is_dir()
    assert elsewhere.is_dir()
    capsys.readouterr()
    assert main(["clean"]) == 0
    err = capsys.readouterr().err
    assert not (project / ".ascend_lint_cache").exists() and not (project / "sub" / ".ascend_lint_cache").exists()
    assert not elsewhere.exists()
    assert "Removing cache at: .ascend_lint_cache\n" in err and f"Removing cache at: {elsewhere}\n" in err
    assert sorted(p.name for p in project.iterdir()) == ["bad.py", "pyproject.toml", "sub"]
    assert main(["clean"]) == 0 and capsys.readouterr().err == ""  # nothing left: silent


def test_clean_removes_only_what_ascend_lint_put_in_a_shared_cache_dir(project, capsys):
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\ncache-dir = "."\n')
    (project / "keep").mkdir()
    (project / "keep" / "v1").write_text("the user's file named like a cache entry is in a subdirectory\n")
    _cached(project)
    assert (project / "CACHEDIR.TAG").exists()
    assert main(["clean", "-q"]) == 0 and capsys.readouterr().err == ""
    assert sorted(p.name for p in project.iterdir()) == ["bad.py", "keep", "pyproject.toml"]
    assert (project / "keep" / "v1").exists()


def test_clean_does_not_follow_symbolic_links(project, capsys, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "bad.py").write_text(BAD)
    os.chdir(outside)
    _cached(outside)
    os.chdir(project)
    (project / "link").symlink_to(outside, target_is_directory=True)
    assert main(["clean"]) == 0
    assert (outside / ".ascend_lint_cache" / "CACHEDIR.TAG").exists()


def test_clean_with_a_broken_configuration_still_cleans_below(project, capsys):
    _cached(project)
    (project / "pyproject.toml").write_text("[tool.ascend-lint]\nbogus = 1\n")
    assert main(["clean"]) == 0
    assert not (project / ".ascend_lint_cache").exists()
    assert "unknown key 'bogus'" in capsys.readouterr().err
