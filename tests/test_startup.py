"""Start-up: a plain `check` imports only what it needs (every run pays for each import)."""
from __future__ import annotations

import subprocess
import sys

from ascend_lint.registry import ENTRY_POINT_GROUP, _entry_points_from_files

# Imported by nothing a plain check needs: importlib.metadata (and the email, csv and zipfile modules it
# pulls in) is replaced by reading entry_points.txt; pathspec is needed only for gitignore-style patterns.
NOT_NEEDED = ("importlib.metadata", "email", "csv", "zipfile", "pathspec", "libcst")


def test_plain_check_imports_nothing_it_does_not_need(tmp_path):
    (tmp_path / "m.py").write_text("import torch, torch_npu\nx = torch.randn(3).cuda()\ny = x.t().contiguous() @ w\n")
    # (modules the interpreter loaded before ascend-lint, e.g. by a site .pth file, are not ours)
    script = ("import sys\nbefore = set(sys.modules)\nfrom ascend_lint.cli import main\n"
              "main(['check', '--isolated', '--no-cache', '.'])\n"
              "sys.stdout.flush()\nprint(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
              f"{sorted({n.split('.')[0] for n in NOT_NEEDED})!r} and m.startswith({NOT_NEEDED!r})))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "ASC101" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr


def test_entry_points_read_from_files_agree_with_importlib_metadata():
    from importlib import metadata

    def facts(eps):
        return sorted((e.name, e.value, e.dist.metadata["Name"], e.dist.version) for e in eps)

    ours = _entry_points_from_files()
    assert ours is not None and ours
    assert facts(ours) == facts(metadata.entry_points().select(group=ENTRY_POINT_GROUP))
