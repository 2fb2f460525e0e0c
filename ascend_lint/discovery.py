"""Which files to lint: walk directories for Python files, honouring excludes and .gitignore."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pathspec

from .config import Settings

PY_SUFFIXES = (".py", ".pyi")
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ascend_lint_cache", "build", "dist", "node_modules",
    "site-packages", ".eggs", "*.egg-info", ".ipynb_checkpoints", "_build", "buck-out", ".direnv",
    "__pypackages__",
)


@dataclass
class Target:
    path: str
    explicit: bool  # named on the command line (always linted unless --force-exclude)


def _spec(patterns: Sequence[str]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


class Excluder:
    """Decides whether a path is excluded by settings or by a .gitignore file."""

    def __init__(self, settings: Settings) -> None:
        self.root = os.path.abspath(settings.project_root)
        excludes = list(DEFAULT_EXCLUDES if settings.exclude is None else settings.exclude)
        self.spec = _spec(excludes + list(settings.extend_exclude))
        self.gitignore = settings.respect_gitignore
        self._ignores: Dict[str, Optional[pathspec.PathSpec]] = {}

    def _gitignore_spec(self, directory: str) -> Optional[pathspec.PathSpec]:
        if directory not in self._ignores:
            spec = None
            path = os.path.join(directory, ".gitignore")
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    spec = pathspec.GitIgnoreSpec.from_lines(handle.read().splitlines())
            except OSError:
                pass
            self._ignores[directory] = spec
        return self._ignores[directory]

    def excluded(self, path: str, is_dir: bool) -> bool:
        absolute = os.path.abspath(path)
        suffix = "/" if is_dir else ""
        rel = os.path.relpath(absolute, self.root).replace(os.sep, "/")
        name = os.path.basename(absolute)
        if self.spec.match_file(name + suffix) or (not rel.startswith("..") and self.spec.match_file(rel + suffix)):
            return True
        if is_dir and os.path.isfile(os.path.join(absolute, "pyvenv.cfg")):
            return True
        return self.gitignore and self._git_ignored(absolute, suffix)

    def _git_ignored(self, absolute: str, suffix: str) -> bool:
        directory = os.path.dirname(absolute)
        while True:
            spec = self._gitignore_spec(directory)
            if spec is not None:
                rel = os.path.relpath(absolute, directory).replace(os.sep, "/")
                if spec.match_file(rel + suffix):
                    return True
            if os.path.isdir(os.path.join(directory, ".git")):
                return False
            parent = os.path.dirname(directory)
            if parent == directory:
                return False
            directory = parent


def discover(paths: Sequence[str], settings: Settings) -> Tuple[List[Target], List[str]]:
    """Files to lint (sorted, de-duplicated) and paths that do not exist."""
    excluder = Excluder(settings)
    found: Dict[str, Target] = {}
    missing: List[str] = []
    for raw in paths:
        if os.path.isdir(raw) and not os.path.islink(raw) or (os.path.isdir(raw) and raw.endswith(os.sep)):
            if settings.force_exclude and excluder.excluded(raw, True):
                continue
            for path in _walk(raw, excluder):
                found.setdefault(os.path.normpath(path), Target(os.path.normpath(path), False))
        elif os.path.isdir(raw):  # a symlink to a directory named explicitly
            for path in _walk(raw, excluder):
                found.setdefault(os.path.normpath(path), Target(os.path.normpath(path), False))
        elif os.path.lexists(raw):
            if settings.force_exclude and excluder.excluded(raw, False):
                continue
            found[os.path.normpath(raw)] = Target(os.path.normpath(raw), True)
        else:
            missing.append(raw)
    return [found[k] for k in sorted(found)], missing


def _walk(top: str, excluder: Excluder) -> Iterator[str]:
    """Python files below `top`; symlinked directories are not followed (no loops)."""
    for directory, dirnames, filenames in os.walk(top, followlinks=False, onerror=None):
        dirnames[:] = sorted(
            d for d in dirnames if not excluder.excluded(os.path.join(directory, d), True)
        )
        for name in sorted(filenames):
            if name.endswith(PY_SUFFIXES):
                path = os.path.join(directory, name)
                if not excluder.excluded(path, False):
                    yield path
