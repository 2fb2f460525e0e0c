"""File discovery: default excludes, virtualenvs, .gitignore, named files, symlink loops."""
from __future__ import annotations

import os

from ascend_lint.config import Settings
from ascend_lint.discovery import discover


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
