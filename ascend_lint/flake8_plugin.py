"""flake8 plugin: ascend-lint findings as flake8 `ASC` errors (editors, `flake8 --select ASC`).

A thin face over the one engine: flake8 parses the file once and hands us its tree; rules, settings
(the closest `[tool.ascend-lint]` / `.ascend-lint.yaml` to each file, as `check` resolves them,
overridden by `--ascend-preview` / `--ascend-target` or the same keys in flake8's config) and the engine
are ascend-lint's own. Line `# noqa` comments are left to flake8 (so `--disable-noqa` works); the
file-level `# ascend-lint: noqa` is still ours. A file ascend-lint's configuration excludes (`exclude`,
`extend-exclude`, the default excludes, `.gitignore` files with `respect-gitignore`) gets no finding when
flake8 found it in a directory, and when it was named on flake8's command line under `force-exclude`, as
`ascend-lint check` would treat it.

The project models of the paths flake8 was given are built once per process in `parse_options`, before
flake8 forks its workers (a project found only below them is opened by the worker that meets it); a file
read from stdin replaces its own summary.
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Any, ClassVar, Dict, Iterator, Optional, Sequence, Tuple

from . import __version__
from .config import TARGETS, ConfigError, ConfigResolver, load_settings
from .fileio import SourceError, check_size
from .sanitize import sanitize
from .registry import PARSE_ERROR_CODE, RegistryError, load_registry, print_warnings
from .pipeline.discovery import DiscoveryReport, Excluder
from .pipeline.run import lint_buffer
from .pipeline.workspace import Workspace

Error = Tuple[int, int, str, type]


def build_workspace(preview: Optional[bool], target: Optional[str], start: str,
                    paths: Sequence[str] = ()) -> Workspace:
    """Each file's settings as the CLI would resolve them from `start`, with flake8's overrides, and the
    project models of `paths` (default: `start`) opened."""
    if target is not None and target not in TARGETS:
        raise ConfigError(f"ascend-target must be one of {', '.join(TARGETS)}, got {target!r}")

    def flake8_options(settings):
        return settings.override(preview=preview, target=target)

    resolver = ConfigResolver(flake8_options(load_settings(None, False, start)), flake8_options)
    registry = load_registry()
    print_warnings(registry.warnings)
    given = [p for p in paths if p != "-"] or [start]
    workspace = Workspace(resolver, registry, given)
    for path in given:
        if os.path.exists(path):
            workspace.rules(resolver.for_path(path))  # (a bad selection is an error now, not once per file)
            workspace.index_for(path)
    done: set = set()
    while resolver.nested_projects - done:  # projects of their own below the given directories, too
        nested = min(resolver.nested_projects - done)
        done.add(nested)
        if any(os.path.isdir(p) and _below(nested, os.path.abspath(p)) for p in given):
            workspace.index_for(nested)
    return workspace


def _below(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)


class AscendLintChecker:
    """flake8 AST plugin (entry point `ASC` in the `flake8.extension` group)."""

    name = "ascend-lint"
    version = __version__

    preview: ClassVar[Optional[bool]] = None
    target: ClassVar[Optional[str]] = None
    paths: ClassVar[Tuple[str, ...]] = ()
    _workspaces: ClassVar[Dict[Tuple[Optional[bool], Optional[str], str, Tuple[str, ...]], Workspace]] = {}
    _excluders: ClassVar[Dict[int, Excluder]] = {}  # id(Settings) -> its excluder (settings live in a workspace)

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, manager: Any) -> None:
        manager.add_option(
            "--ascend-preview", action="store_true", default=None, parse_from_config=True,
            help="ascend-lint: enable preview rules (also `preview` in [tool.ascend-lint])",
        )
        manager.add_option(
            "--ascend-target", choices=("auto", "npu"), default=None, parse_from_config=True,
            help="ascend-lint: 'npu' treats every file as NPU code (also `target` in [tool.ascend-lint])",
            metavar="auto|npu",
        )

    @classmethod
    def parse_options(cls, options: Any) -> None:
        cls.preview = getattr(options, "ascend_preview", None)
        cls.target = getattr(options, "ascend_target", None)
        cls.paths = tuple(getattr(options, "filenames", None) or ())
        try:  # fail at start-up with a clear message rather than once per file
            cls.workspace()
        except (ConfigError, RegistryError) as exc:
            raise SystemExit(f"ascend-lint: error: {sanitize(str(exc))}") from None

    @classmethod
    def workspace(cls) -> Workspace:
        key = (cls.preview, cls.target, os.getcwd(), cls.paths)
        workspace = cls._workspaces.get(key)
        if workspace is None:
            workspace = cls._workspaces[key] = build_workspace(cls.preview, cls.target, key[2], key[3])
        return workspace

    @classmethod
    def excluded(cls, workspace: Workspace, filename: str) -> bool:
        """Would `check` leave this file out? (Walked: when excluded; named: with `force-exclude` too.)"""
        settings = workspace.resolver.for_path(filename)
        named = os.path.normpath(filename) in {os.path.normpath(p) for p in cls.paths}
        if named and not settings.force_exclude:
            return False
        excluder = cls._excluders.get(id(settings))
        if excluder is None:
            excluder = cls._excluders[id(settings)] = Excluder(settings, DiscoveryReport())
        told = len(excluder.report.warnings)
        result = excluder.excluded(filename, False)
        for warning in excluder.report.warnings[told:]:  # (a rejected pattern: said, never dropped silently)
            print(f"warning: {sanitize(warning)}", file=sys.stderr)
        return result

    def run(self) -> Iterator[Error]:
        """Yield (line, 0-based column, 'ASCnnn message', type) for flake8."""
        kind = type(self)
        text = "".join(self.lines)
        tree = self.tree if isinstance(self.tree, ast.Module) else None
        buffer = self.filename in ("stdin", "-") or not os.path.isfile(self.filename)  # (it stands for the file)
        try:
            workspace = self.workspace()
            if not buffer and self.excluded(workspace, self.filename):
                return
            max_size = workspace.resolver.for_path(self.filename).max_file_size
            if len(text) * 4 > max_size:  # flake8 read it; the cap still applies
                check_size(text.encode("utf-8", "surrogatepass"), max_size)
            findings = lint_buffer(workspace, self.filename, text, tree, replaces_file=buffer,
                                   line_noqa=False).findings
        except SourceError as exc:
            yield exc.line, max(exc.col - 1, 0), f"{PARSE_ERROR_CODE} {_one_line(exc.reason)}", kind
            return
        except (ConfigError, RegistryError) as exc:
            print(f"ascend-lint: error: {sanitize(str(exc))}", file=sys.stderr)
            return
        for f in findings:
            yield f.line, max(f.col - 1, 0), f"{f.code} {_one_line(f.message)}", kind


def _one_line(text: str) -> str:
    return sanitize(" ".join(text.split()))
