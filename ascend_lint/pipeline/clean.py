"""`ascend-lint clean` (ruff's `clean`): remove the caches in a directory and below, and the cache directory
the run's configuration names.

A cache directory is one that holds ascend-lint's `CACHEDIR.TAG`; only what ascend-lint puts there is
removed (the tag, its `.gitignore`, the `v<N>` result caches and `project-v<N>` stores), then the directory
itself if that leaves it empty. A `cache-dir` pointed at a project's own directory loses its cache, never
the project. Symbolic links are neither followed nor removed through.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
from typing import Iterable, List, Optional, Tuple

from .cache_store import CACHEDIR_TAG

OWN_ENTRY = re.compile(r"(project-)?v\d+\Z")
OWN_GITIGNORE = "# created by ascend-lint\n"
NOT_WALKED = frozenset({".git", ".hg", ".svn"})


def is_cache_dir(path: str) -> bool:
    """Does `path` (a real directory) carry ascend-lint's cache tag?"""
    tag = os.path.join(path, "CACHEDIR.TAG")
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode) or not stat.S_ISREG(os.lstat(tag).st_mode):
            return False
        with open(tag, encoding="ascii", errors="replace") as handle:
            return handle.read(len(CACHEDIR_TAG) + 1) == CACHEDIR_TAG
    except OSError:
        return False


def find_caches(start: str) -> List[str]:
    """The cache directories at and below `start` (not below a cache, not through a symbolic link)."""
    found: List[str] = []
    for root, dirs, _ in os.walk(start):
        if is_cache_dir(root):
            found.append(root)
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in NOT_WALKED and not os.path.islink(os.path.join(root, d)))
    return found


def _own(path: str, name: str) -> bool:
    if OWN_ENTRY.match(name) or name == "CACHEDIR.TAG":
        return True
    if name != ".gitignore":
        return False
    try:
        with open(os.path.join(path, name), encoding="utf-8", errors="replace") as handle:
            return handle.read(len(OWN_GITIGNORE)) == OWN_GITIGNORE
    except OSError:
        return False


def remove_cache(path: str) -> Optional[str]:
    """Remove what ascend-lint keeps in the cache directory `path`, then `path` if nothing else is left;
    None, or why it could not."""
    try:
        for name in sorted(os.listdir(path), key=lambda n: n == "CACHEDIR.TAG"):  # (the tag last)
            target = os.path.join(path, name)
            if not _own(path, name):
                continue
            if stat.S_ISDIR(os.lstat(target).st_mode):
                shutil.rmtree(target)
            else:
                os.unlink(target)
        if not os.listdir(path):
            os.rmdir(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


def clean(start: str, configured: Iterable[str] = ()) -> Tuple[List[str], List[str]]:
    """Remove the caches below `start` and the `configured` cache directories: (removed, problems)."""
    candidates = find_caches(start)
    for path in configured:
        path = os.path.abspath(path)
        if path not in candidates and is_cache_dir(path):
            candidates.append(path)
    removed, problems = [], []
    for path in candidates:
        problem = remove_cache(path)
        (problems if problem else removed).append(problem or path)
    return removed, problems

