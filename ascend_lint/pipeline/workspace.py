"""Linters and project models for files under hierarchical configuration (every face's one place).

A `Workspace` gives each file the Linter of its resolved configuration (rules selected once per
configuration) and, for the faces that lint one file at a time (the flake8 plugin, the language server),
the project index of the file's project, opened once and kept. The project root is decided by
`root.find_project_root`: the directory of the file's root configuration, else the markers above
the paths the run was given.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..config import ConfigError, ConfigResolver, Settings
from .discovery import DiscoveryReport, Target
from .index import ProjectIndex
from ..engine.linter import Linter
from .root import find_project_root
from ..registry import Registry, print_warnings, select_rules
from ..rule import wants_precision


@dataclass
class Configured:
    """The files of a run that share one resolved configuration, with its Linter."""

    settings: Settings
    linter: Linter
    targets: List[Target]


class Workspace:
    """`resolver` decides each file's settings; `paths` are the paths the run was given (they decide the
    project root of files that no configuration places); `cache`: project indexes use the project store."""

    def __init__(self, resolver: ConfigResolver, registry: Registry, paths: Sequence[str] = (),
                 cache: bool = True, warn: Callable[[List[str]], None] = print_warnings) -> None:
        self.resolver = resolver
        self.registry = registry
        self.paths = [p for p in paths if p and p != "-"]
        self.cache = cache
        self.warn = warn
        self._rules: Dict[int, list] = {}
        self._linters: Dict[Tuple[int, Optional[str]], Linter] = {}
        self._warned: set = set()
        self.indexes: Dict[str, ProjectIndex] = {}  # project root -> its index
        self._roots: Dict[str, str] = {}  # directory -> project root (files no configuration places)
        self._given: Optional[str] = None
        self.refused: List[str] = []  # broken configurations whose files were not linted (each once)

    def tell(self, warnings: Sequence[str]) -> None:
        """Warn once of each message."""
        self.warn([w for w in dict.fromkeys(warnings) if w not in self._warned])
        self._warned.update(warnings)

    def heard(self, report: DiscoveryReport) -> None:
        """What listing a project's files could not do: warnings (a broken configuration left out of the
        model is one too, unless it stopped linted files already)."""
        self.tell(report.warnings + [f"{m} (the files it governs are left out of the project model)"
                                     for m in report.refused if m not in self.refused])

    # ----------------------------------------------------------------- linters
    def rules(self, settings: Settings) -> list:
        rules = self._rules.get(id(settings))
        if rules is None:
            rules, warnings = select_rules(self.registry, settings)
            self.tell(warnings)
            self._rules[id(settings)] = rules
        return rules

    def linter(self, settings: Settings, index: object = None) -> Linter:
        """The Linter of one configuration (with `index`: bound to that project's model)."""
        key = (id(settings), getattr(index, "root", None))
        linter = self._linters.get(key)
        if linter is None:
            linter = self._linters[key] = Linter(self.rules(settings), settings, project=index)
        elif index is not None:
            linter.project = index  # (the project's index may have been opened again: see index_for)
        return linter

    def linter_for(self, path: str) -> Linter:
        return self.linter(self.resolver.for_file(path))

    def groups(self, targets: Sequence[Target]) -> List[Configured]:
        """The targets grouped by their resolved configuration, in first-seen order."""
        by_settings: Dict[int, Configured] = {}
        for target in targets:
            try:
                settings = self.resolver.for_file(target.path)
            except ConfigError as exc:  # a broken configuration stops only the files it governs
                self.refused += [str(exc)] if str(exc) not in self.refused else []
                continue
            group = by_settings.get(id(settings))
            if group is None:
                group = by_settings[id(settings)] = Configured(settings, self.linter(settings), [])
            group.targets.append(target)
        return list(by_settings.values())

    # ----------------------------------------------------------------- projects
    def root_for(self, path: str, settings: Optional[Settings] = None) -> str:
        """The project root of a file (or directory): its root configuration's directory, else the root the
        run's paths give when the file is below it, else the one its own path gives."""
        settings = settings or self.resolver.for_path(path)
        if settings.root_config:
            return find_project_root([path], settings.root_config)
        absolute = os.path.abspath(path)
        key = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        root = self._roots.get(key)
        if root is None:
            root = self._given_root() if self.paths else None
            if root is None or not (key == root or key.startswith(root.rstrip(os.sep) + os.sep)):
                root = find_project_root([key])
            self._roots[key] = root
        return root

    def _given_root(self) -> str:
        if self._given is None:
            self._given = find_project_root(self.paths)
        return self._given

    def index_for(self, path: str) -> ProjectIndex:
        """The project index of the file at `path` (opened, completed and stored on first use, then kept; an
        index of imported files takes in the file and what it imports). It gathers the training precision if
        the rules of a file it was asked for read it: opened again, once, when a file under another
        configuration is the first whose rules do."""
        settings = self.resolver.for_path(path)
        root = self.root_for(path, settings)
        index = self.indexes.get(root)
        precision = wants_precision(self.rules(settings))
        if index is not None and index.scope is not None and not (precision and not index.precision):
            if index.relpath(path) not in index.shapes:
                index.follow([path])
                self._settle(index)
        elif index is None or (precision and not index.precision):
            given = [path] if index is None else [path, *index.paths()]
            index = ProjectIndex.open(given, settings, cache=self.cache, resolver=self.resolver, precision=precision,
                                      root=root)
            self.heard(index.report)
            self._settle(index)
            self.indexes[root] = index
        return index

    @staticmethod
    def _settle(index: ProjectIndex) -> None:
        index.complete()  # facts that need a tree, for files no run has summarised yet
        index.model()
        index.save()

    def project_linter(self, path: str) -> Linter:
        """The file's Linter bound to its project's model."""
        return self.linter(self.resolver.for_path(path), self.index_for(path))
