"""Progress on long runs (issue 27): files done / total and the rate on a terminal's stderr, nothing for short
runs, `-q`, pipes, CI or machine formats; the line is erased before the report."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from ascend_lint.pipeline.progress import CLEAR, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_phase_shows_files_done_total_and_rate_then_is_erased():
    stream, clock = Terminal(), Clock()
    progress = Progress(stream, clock)
    progress.start("linting", 1000)
    progress.advance()  # (before DELAY: nothing drawn)
    assert stream.getvalue() == ""
    clock.now += 2.0
    progress.advance(99)
    assert stream.getvalue() == f"{CLEAR}linting: 100/1,000 files (50 files/s)"
    clock.now += 0.01
    progress.advance()  # (redrawn at most every EVERY seconds)
    assert stream.getvalue().count(CLEAR) == 1
    progress.finish()
    assert stream.getvalue().endswith(CLEAR) and stream.getvalue().count(CLEAR) == 2


def test_a_short_run_draws_nothing():
    stream, clock = Terminal(), Clock()
    progress = Progress(stream, clock)
    progress.start("linting", 3)
    for _ in range(3):
        clock.now += 0.1
        progress.advance()
    progress.finish()
    assert stream.getvalue() == ""


def test_progress_is_off_for_pipes_quiet_ci_and_machine_formats(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert Progress.for_terminal(Terminal()).stream is not None
    assert Progress.for_terminal(io.StringIO()).stream is None  # a pipe or a file
    assert Progress.for_terminal(Terminal(), quiet=True).stream is None
    assert Progress.for_terminal(Terminal(), human=False).stream is None
    monkeypatch.setenv("CI", "true")
    assert Progress.for_terminal(Terminal()).stream is None


def test_a_run_on_a_terminal_shows_progress_on_stderr_only(tmp_path):
    """A real pseudo-terminal as stderr; the report on stdout (a pipe) holds no progress line."""
    for number in range(30):
        (tmp_path / f"m{number}.py").write_text("import torch, torch_npu\ny = x.t().contiguous() @ w\n")
    script = ("import ascend_lint.pipeline.progress as p; p.DELAY = 0.0; p.EVERY = 0.0\n"
              "from ascend_lint.cli import main; raise SystemExit(main(['check', '--isolated', '--no-cache', "
              "'-j', '1', '.']))\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    controller, terminal = pty.openpty()
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=terminal,
                          env=env, timeout=120)
    os.close(terminal)
    err = b""
    try:
        while True:
            chunk = os.read(controller, 65536)
            if not chunk:
                break
            err += chunk
    except OSError:  # (the terminal closed: everything was read)
        pass
    os.close(controller)
    out = proc.stdout.decode()
    assert proc.returncode == 1 and "ASC101" in out and "files/s" not in out
    text = err.decode()
    assert "linting: 30/30 files" in text and text.endswith(CLEAR)
    piped = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, env=env, timeout=120)
    assert b"files/s" not in piped.stderr and CLEAR.encode() not in piped.stderr
