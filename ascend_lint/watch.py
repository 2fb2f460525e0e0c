"""`check --watch`: run the check, then again whenever a Python file, a configuration or a `.gitignore`
under the given paths changes (or one of the configurations above them). Polling with the standard library:
every `interval` seconds the watched files' (mtime, size) are compared with the last run's."""
from __future__ import annotations

import fnmatch
import os
import sys
import time
from typing import Callable, Dict, Iterable, Optional, Sequence, TextIO, Tuple

from .config import CONFIG_NAMES
from .pipeline.discovery import DEFAULT_EXCLUDES, PY_SUFFIXES

INTERVAL = 0.5  # seconds between two looks at the files
WATCHED_NAMES = frozenset(CONFIG_NAMES + (".gitignore",))
Snapshot = Dict[str, Tuple[int, int]]


def _stat(path: str, into: Snapshot) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    into[path] = (st.st_mtime_ns, st.st_size)


def _skipped(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in DEFAULT_EXCLUDES)


def snapshot(paths: Iterable[str]) -> Snapshot:
    """(mtime_ns, size) of the files a change of which can change the check's result: Python files and
    `.gitignore` files below each path (the default excludes not walked, symlinks to directories not
    followed) and the configuration files in each path's directory and above."""
    seen: Snapshot = {}
    for path in paths:
        absolute = os.path.abspath(path)
        directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        while True:  # the configurations that may govern the path
            for name in CONFIG_NAMES:
                _stat(os.path.join(directory, name), seen)
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        if not os.path.isdir(absolute):
            _stat(absolute, seen)
            continue
        for root, dirs, files in os.walk(absolute):
            dirs[:] = [d for d in dirs if not _skipped(d) and not os.path.islink(os.path.join(root, d))]
            for name in files:
                if name.endswith(PY_SUFFIXES) or name in WATCHED_NAMES:
                    _stat(os.path.join(root, name), seen)
    return seen


def watch(run_once: Callable[[], int], paths: Sequence[str], out: TextIO = sys.stderr, interval: float = INTERVAL,
          sleep: Callable[[float], None] = time.sleep, rounds: Optional[int] = None) -> int:
    """Run `run_once`, then again after each change, until interrupted (Ctrl-C: exit 0) or, for tests, after
    `rounds` looks at the files. The snapshot is taken after each run, so a `--fix` run's own writes do not
    start another."""
    out.write("Starting linter in watch mode...\n")
    out.flush()
    run_once()
    seen = snapshot(paths)
    looks = 0
    try:
        while rounds is None or looks < rounds:
            sleep(interval)
            looks += 1
            now = snapshot(paths)
            if now == seen:
                continue
            out.write("File change detected...\n")
            out.flush()
            run_once()
            seen = snapshot(paths)
    except KeyboardInterrupt:
        pass
    return 0
