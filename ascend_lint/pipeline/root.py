"""Where a project starts: the one place that decides the project root."""
from __future__ import annotations

import os
from typing import Optional, Sequence

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def find_project_root(paths: Sequence[str], config_path: Optional[str] = None) -> str:
    """The directory of the configuration file in use, else the nearest directory holding a
    pyproject.toml / setup.py / setup.cfg / .git at or above the common parent of `paths`, else that parent.

    With hierarchical configuration, callers pass a file's `Settings.root_config`: its closest
    configuration, or the outermost one it `extend`s in a directory at or above its own (so a nested
    configuration that extends the root's stays in the root's project; one that does not is a project)."""
    if config_path:
        return os.path.dirname(os.path.abspath(config_path))
    absolute = [os.path.abspath(p) for p in paths if p and p != "-"] or [os.getcwd()]
    try:
        common = os.path.commonpath(absolute)
    except ValueError:  # different drives
        common = os.getcwd()
    start = common if os.path.isdir(common) else os.path.dirname(common)
    directory = start
    while True:
        if is_marked(directory):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return start
        directory = parent


def is_marked(root: str) -> bool:
    """Does `root` hold a project marker (else it is only the common parent of some paths)?"""
    return any(os.path.exists(os.path.join(root, marker)) for marker in ROOT_MARKERS)
