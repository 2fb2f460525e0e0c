"""Call stacks: parse the recorded frames and map their files to the linted project's files."""
from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .records import Frame
from .signatures import is_library_path

# torch_npu / PyTorch `callstackStr`: "file(line): function"; MindSpore's python tracer: "file(line):function"
_FRAME = re.compile(r"^(.*)\((\d+)\):\s?(.*)$", re.DOTALL)
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".tox", ".nox", ".venv", "venv",
                       "site-packages", "dist-packages", ".mypy_cache", ".pytest_cache", "build", "dist"})


def parse_frame(text: str, line_is_def: bool = False) -> Optional[Frame]:
    """One frame, or None for what is not a Python source frame (C calls, `<string>`, junk)."""
    match = _FRAME.match(text.strip())
    if not match:
        return None
    file, line, function = match.group(1).strip(), int(match.group(2)), match.group(3).strip()
    if not file or file.startswith("<"):
        return None
    return Frame(file, line, function, line_is_def)


def parse_call_stack(text: str) -> Tuple[Frame, ...]:
    """torch_npu's `Call stack` value -> frames, innermost first.

    Frames are joined by ';' (torch_npu then inserts '\\r\\n' after each ';' for display; some exports
    carry it escaped as the four characters `\\r\\n`).
    """
    if "\\r\\n" in text:
        text = text.replace("\\r\\n", "")
    frames = []
    for part in text.split(";"):
        frame = parse_frame(part)
        if frame is not None:
            frames.append(frame)
    return tuple(frames)


def mindspore_function(name: str) -> str:
    """`nn.Cell.Net.construct` -> `Net.construct` (MindSpore prefixes Cell methods with the class)."""
    return name[len("nn.Cell."):] if name.startswith("nn.Cell.") else name


def _parts(path: str) -> Tuple[str, ...]:
    return tuple(p for p in re.split(r"[\\/]+", path) if p and p != ".")


class ProjectPaths:
    """Maps a recorded file path to a project-relative path by the longest common path suffix.

    A profile recorded on another machine has other absolute prefixes (and MindSpore strips the
    `sys.path` entry), so `/home/ci/work/proj/src/model.py` matches the project's `src/model.py`. The
    longest suffix present in the project wins; a tie between several project files at that length maps
    to none (ambiguous), and frames in installed packages or the standard library never map.
    """

    def __init__(self, relative_paths: Iterable[str], root: Optional[str] = None) -> None:
        self.root = os.path.abspath(root) if root else None
        self._by_suffix: Dict[Tuple[str, ...], Set[str]] = {}
        for rel in relative_paths:
            rel = rel.replace(os.sep, "/")
            parts = _parts(rel)
            for start in range(len(parts)):
                self._by_suffix.setdefault(parts[start:], set()).add("/".join(parts))
        self._cache: Dict[str, Optional[str]] = {}

    @classmethod
    def scan(cls, root: str) -> "ProjectPaths":
        """Every `.py` file under `root` (skipping VCS, cache and virtualenv directories)."""
        found: List[str] = []
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = [d for d in subdirs if d not in SKIP_DIRS and not d.startswith(".")]
            for name in files:
                if name.endswith(".py"):
                    found.append(os.path.relpath(os.path.join(directory, name), root))
        return cls(found, root)

    def resolve(self, recorded: str) -> Optional[str]:
        """The project-relative path of a recorded file, or None when it is not a project file."""
        cached = self._cache.get(recorded, self)
        if cached is not self:
            return cached  # type: ignore[return-value]
        result = self._resolve(recorded)
        if len(self._cache) < 100_000:
            self._cache[recorded] = result
        return result

    def _resolve(self, recorded: str) -> Optional[str]:
        parts = _parts(recorded)
        if not parts or is_library_path(parts):
            return None
        for start in range(len(parts)):
            matches = self._by_suffix.get(parts[start:])
            if matches:
                return next(iter(matches)) if len(matches) == 1 else None
        return None


class AnyPath(ProjectPaths):
    """No project given: every non-library frame counts, under its recorded path."""

    def __init__(self) -> None:
        super().__init__(())

    def _resolve(self, recorded: str) -> Optional[str]:
        parts = _parts(recorded)
        if not parts or is_library_path(parts):
            return None
        return recorded.replace("\\", "/")
