"""File discovery: default excludes, virtualenvs, .gitignore, named files, symlink loops."""
from __future__ import annotations

import os

import pytest

from ascend_lint.config import Settings
from ascend_lint.pipeline.discovery import discover


def names(root, settings=None, paths=None):
    settings = settings or Settings(project_root=str(root))
    targets, missing = discover(paths or [str(root)], settings)
    return sorted(os.path.relpath(t.path, root) for t in targets), missing


def test_walks_python_files_and_skips_tool_directories(tmp_path):
    for rel in ["a.py", "pkg/b.py", "pkg/c.pyi", "pkg/notes.txt", ".git/x.py", "build/gen.py", "dist/d.py",
                "node_modules/m.py", "pkg/__pycache__/c.py", "x.egg-info/e.py", ".tox/t.py"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    assert names(tmp_path)[0] == ["a.py", "pkg/b.py", "pkg/c.pyi"]


def test_skips_virtualenvs_by_marker(tmp_path):
    (tmp_path / "myenv" / "lib").mkdir(parents=True)
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "myenv" / "lib" / "site.py").write_text("x = 1\n")
    (tmp_path / "main.py").write_text("x = 1\n")
    assert names(tmp_path)[0] == ["main.py"]


def test_honours_gitignore_including_nested_and_negation(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n!keep_pb2.py\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.py\n")
    for rel in ["generated/g.py", "msg_pb2.py", "keep_pb2.py", "sub/local.py", "sub/kept.py", "main.py"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    assert names(tmp_path)[0] == ["keep_pb2.py", "main.py", "sub/kept.py"]
    settings = Settings(project_root=str(tmp_path), respect_gitignore=False)
    assert "msg_pb2.py" in names(tmp_path, settings)[0]


def test_named_files_are_always_linted_unless_force_exclude(tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("x = 1\n")
    target = str(tmp_path / "build" / "gen.py")
    assert names(tmp_path, paths=[target])[0] == ["build/gen.py"]
    settings = Settings(project_root=str(tmp_path), force_exclude=True)
    assert names(tmp_path, settings, paths=[target])[0] == []


def test_symlink_loops_do_not_hang_and_missing_paths_are_reported(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    os.symlink(tmp_path, tmp_path / "pkg" / "loop")
    found, missing = names(tmp_path, paths=[str(tmp_path), str(tmp_path / "nope.py")])
    assert found == ["pkg/a.py"]
    assert missing == [str(tmp_path / "nope.py")]


def test_directory_named_like_a_python_file_is_walked(tmp_path):
    (tmp_path / "weird.py").mkdir()
    (tmp_path / "weird.py" / "inner.py").write_text("x = 1\n")
    assert names(tmp_path)[0] == ["weird.py/inner.py"]


def test_rejected_patterns_are_one_warning_each_and_the_walk_goes_on(tmp_path):
    from ascend_lint.pipeline.discovery import DiscoveryReport

    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("ok_ignored.py\n!\n\\\n[z-a].py\n")
    for rel in ["main.py", "ok_ignored.py", "gen/g.py"]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    report = DiscoveryReport()
    settings = Settings(project_root=str(tmp_path), extend_exclude=["gen/", "[z-a]"])
    targets, _ = discover([str(tmp_path)], settings, report)
    assert sorted(os.path.relpath(t.path, tmp_path) for t in targets) == ["main.py"]
    gitignore = str(tmp_path / ".gitignore")
    assert len(report.warnings) == 4
    assert [w.split(": pattern")[0] for w in report.warnings[1:]] == [f"{gitignore}:2", f"{gitignore}:3",
                                                                         f"{gitignore}:4"]
    assert "'[z-a]'" in report.warnings[0] and report.warnings[0].startswith("exclude setting")


def test_a_posix_class_gitignore_line_is_one_warning_and_no_futurewarning(tmp_path, monkeypatch):
    """`[[:bogus:]]` (issue #30): Python's re warns (FutureWarning, "possible nested set") on its way to stderr;
    the line is refused with one warning of ours instead, under -W error too."""
    import subprocess
    import sys

    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("[[:bogus:]]\n[[:alpha:]]x.py\nskipped.py\n")
    (tmp_path / "main.py").write_text("import torch\n")
    (tmp_path / "skipped.py").write_text("import torch\n")
    proc = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-m", "ascend_lint", "check", "--isolated",
                           "--no-cache", "--show-files", "."], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() == ["main.py"]
    assert "FutureWarning" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("pattern '[[:bogus:]]' ignored") == 1
    proc = subprocess.run([sys.executable, "-m", "ascend_lint", "check", "--isolated", "--no-cache", "--show-files",
                           "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "FutureWarning" not in proc.stderr and proc.stdout.split() == ["main.py"]


def test_warnings_are_printed_when_no_report_is_given(tmp_path, capsys):
    (tmp_path / "a.py").write_text("x = 1\n")
    targets, _ = discover([str(tmp_path)], Settings(project_root=str(tmp_path), extend_exclude=["[z-a]"]))
    assert len(targets) == 1
    assert capsys.readouterr().err.count("warning: ") == 1


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any directory")
def test_unreadable_directory_is_reported(tmp_path):
    from ascend_lint.pipeline.discovery import DiscoveryReport

    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    os.chmod(tmp_path / "locked", 0)
    try:
        report = DiscoveryReport()
        targets, _ = discover([str(tmp_path)], Settings(project_root=str(tmp_path)), report)
    finally:
        os.chmod(tmp_path / "locked", 0o755)
    assert [os.path.basename(t.path) for t in targets] == ["b.py"]
    assert [d for d, _ in report.unreadable] == [str(tmp_path / "locked")]


def test_unreadable_directory_fails_the_cli_run(tmp_path, monkeypatch, capsys):
    """Through the CLI: a directory that cannot be listed is an ASC000 finding (exit 1), not a silent skip."""
    from ascend_lint import cli
    from ascend_lint.pipeline import discovery

    (tmp_path / "b.py").write_text("x = 1\n")
    real = os.scandir

    def scandir(path):
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied")
        return real(path)

    (tmp_path / "locked").mkdir()
    monkeypatch.setattr(discovery.os, "scandir", scandir)
    code = cli.main(["check", "--no-cache", "--isolated", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "ASC000" in out and "locked" in out and "Permission denied" in out


def test_gitignore_lookup_stops_at_the_project_root_and_reads_each_file_once(tmp_path, monkeypatch):
    from ascend_lint.pipeline import discovery

    (tmp_path / ".gitignore").write_text("*.py\n")  # above the project root: not consulted
    project = tmp_path / "project"
    for rel in ["a.py", "pkg/b.py", "pkg/sub/c.py"]:
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    (project / "pkg" / ".gitignore").write_text("c.py\n")
    opened = []
    real_open = open
    monkeypatch.setattr(discovery, "open", lambda p, *a, **k: opened.append(p) or real_open(p, *a, **k),
                        raising=False)
    found, _ = names(project, Settings(project_root=str(project)))
    assert found == ["a.py", "pkg/b.py"]
    assert opened == [str(project / "pkg" / ".gitignore")]


def _age(root, seconds=10):
    """Backdate every directory and .gitignore, so a cached listing trusts their mtimes (not 'racy')."""
    import time

    past = time.time() - seconds
    for directory, _dirs, files in os.walk(root):
        os.utime(directory, (past, past))
        for name in files:
            if name == ".gitignore":
                os.utime(os.path.join(directory, name), (past, past))


def test_a_cached_listing_gives_what_a_fresh_walk_gives_after_each_change(tmp_path):
    from ascend_lint.pipeline.discovery import Listing

    settings = Settings(project_root=str(tmp_path))
    listing = Listing(Listing.key_for(settings))

    def cached():
        targets, _ = discover([str(tmp_path)], settings, listing=listing)
        return sorted(os.path.relpath(t.path, tmp_path) for t in targets)

    for rel in ["a.py", "pkg/b.py", "pkg/deep/c.py", "venv/pyvenv.cfg", "venv/v.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    _age(tmp_path)
    assert cached() == names(tmp_path)[0] == ["a.py", "pkg/b.py", "pkg/deep/c.py"]
    assert listing.dirs and cached() == ["a.py", "pkg/b.py", "pkg/deep/c.py"]  # served from the listing
    steps = [
        lambda: (tmp_path / "pkg" / "deep" / "new.py").write_text("x = 1\n"),  # a file added
        lambda: (tmp_path / "pkg" / "b.py").unlink(),  # a file removed
        lambda: (tmp_path / ".gitignore").write_text("deep/\n"),  # a .gitignore added above
        lambda: (tmp_path / ".gitignore").write_text("new.py\n"),  # ... and edited in place
        lambda: (tmp_path / ".gitignore").unlink(),  # ... and removed
        lambda: os.rename(tmp_path / "pkg" / "deep", tmp_path / "pkg" / "moved"),  # a directory renamed
    ]
    for step in steps:
        step()
        _age(tmp_path)
        assert cached() == names(tmp_path)[0]
    assert "pkg/deep" not in {os.path.relpath(d, tmp_path) for d in (listing.prune() or listing.dirs)}


def test_the_project_stores_listing_is_read_back(tmp_path):
    """A listing saved by the project store is valid when read back (not re-listed on every run)."""
    from ascend_lint.pipeline.project_store import ProjectStore
    from ascend_lint.pipeline.discovery import Listing

    settings = Settings(project_root=str(tmp_path), cache_dir=str(tmp_path / ".cache"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    _age(tmp_path)
    key = Listing.key_for(settings)
    store = ProjectStore.open(settings, str(tmp_path))
    discover([str(tmp_path)], settings, listing=store.listing(key))
    store.save()
    listing = ProjectStore.open(settings, str(tmp_path)).listing(key)
    assert os.path.join(str(tmp_path), "pkg") in listing.dirs
