"""Linted code is never imported or executed; terminal output cannot be hijacked by file content."""
from __future__ import annotations

import os
import subprocess
import sys


def test_linted_code_is_never_executed_or_imported(tmp_path):
    marker = tmp_path / "executed"
    evil = (
        "import os, torch\n"
        f"open({str(marker)!r}, 'w').write('x')\n"
        "class M(torch.nn.Module):\n"
        f"    def forward(self, x=open({str(marker)!r}, 'w')):\n"
        "        return x.t().contiguous()\n"
    )
    (tmp_path / "evil.py").write_text(evil)
    (tmp_path / "conftest.py").write_text(evil)
    for args in (["check", "."], ["check", ".", "--fix", "--unsafe-fixes"], ["check", ".", "--diff"]):
        out = subprocess.run([sys.executable, "-m", "ascend_lint", *args, "--isolated", "-j", "1"],
                             cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode in (0, 1), out.stderr
        assert not marker.exists()


def test_terminal_output_strips_control_and_escape_characters(tmp_path):
    source = "import torch_npu\ny = x.t().contiguous() @ w  # \x1b]0;pwned\x07 \x1b[2J \u202e evil\n"
    (tmp_path / "ctl.py").write_text(source)
    env = dict(os.environ, NO_COLOR="1")
    out = subprocess.run([sys.executable, "-m", "ascend_lint", "check", "ctl.py", "--isolated"],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 1
    assert "contiguous()" in out.stdout
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\u202e" not in out.stdout


def test_plugins_come_only_from_entry_points(tmp_path):
    # a module named like a pack in the current directory is not loaded
    (tmp_path / "ascend_lint_plugins_evil.py").write_text("raise SystemExit('loaded!')\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "__init__.py").write_text("raise SystemExit('loaded!')\n")
    out = subprocess.run([sys.executable, "-m", "ascend_lint", "rules"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and "loaded!" not in out.stdout + out.stderr
