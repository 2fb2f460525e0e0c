"""Which files a project index holds when no configuration or project marker says where the project is.

A script in a directory without `pyproject.toml`, `setup.py`, `setup.cfg` or `.git` (a home directory, a
scratch folder) is no project to scan: the index holds the linted files and what they import from the
files around them, transitively, found the way Python would find them (the importing file's own
directory and the directories above it up to the root, relative imports from the file's package).
Directory listings are read once each, so a name that is no file (`torch`, `os`) costs a set lookup.
"""
from __future__ import annotations

import os
from typing import Dict, FrozenSet, Iterable, List, Optional

from ..analysis.summary import Summary

class ImportScope:
    """Finds the files under `root` that an index of imported files needs next."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self._names: Dict[str, FrozenSet[str]] = {}  # directory -> the names in it

    def names(self, directory: str) -> FrozenSet[str]:
        found = self._names.get(directory)
        if found is None:
            try:
                found = frozenset(os.listdir(directory))
            except OSError:
                found = frozenset()
            self._names[directory] = found
        return found

    def imported_files(self, path: str, summary: Summary) -> List[str]:
        """The files below the root that the file at `path` (absolute) imports, package `__init__`s included."""
        found: Dict[str, None] = {}
        directory = os.path.dirname(path)
        for record in summary.imports:
            module, name, level = record.module or "", record.name, record.level
            for base in self._bases(directory, level):
                hits = self._module_files(base, module, name)
                if hits:
                    found.update(dict.fromkeys(hits))
                    break
        return list(found)

    def _bases(self, directory: str, level: int) -> Iterable[str]:
        """Where an import of `level` dots made in `directory` is looked for: for a relative one its package;
        else the directory itself and each one above it up to the root (the script's directory comes first
        on sys.path; a script may be run from any directory above)."""
        if level:
            base = directory
            for _ in range(level - 1):
                base = os.path.dirname(base)
            if self._inside(base):
                yield base
            return
        base = directory
        while self._inside(base):
            yield base
            if base == self.root:
                return
            base = os.path.dirname(base)

    def _inside(self, directory: str) -> bool:
        return directory == self.root or directory.startswith(self.root.rstrip(os.sep) + os.sep)

    def _module_files(self, base: str, module: str, name: Optional[str]) -> List[str]:
        """The files an import of `module` (and of `module.name`, which may be a submodule) loads from `base`."""
        parts = [p for p in module.split(".") if p]
        files: List[str] = []
        directory = base
        for part in parts:
            module_file = self._file_of(directory, part)
            if module_file is None:
                return files
            files.append(module_file)
            if os.path.basename(module_file) not in ("__init__.py", "__init__.pyi"):
                return files  # (a module has no submodules)
            directory = os.path.dirname(module_file)
        if name and name != "*":
            submodule = self._file_of(directory, name)
            if submodule is not None:
                files.append(submodule)
        return files

    def _file_of(self, directory: str, name: str) -> Optional[str]:
        """`name.py` (or `.pyi`) in `directory`, else the package `name/__init__.py` (`.pyi`), else None."""
        names = self.names(directory)
        for candidate in (name + ".py", name + ".pyi"):
            if candidate in names:
                return os.path.join(directory, candidate)
        if name in names:
            package = os.path.join(directory, name)
            inside = self.names(package)
            for init in ("__init__.py", "__init__.pyi"):
                if init in inside:
                    return os.path.join(package, init)
        return None

