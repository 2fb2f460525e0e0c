"""flake8 plugin: ascend-lint findings as flake8 `ASC` errors (editors, `flake8 --select ASC`).

A thin face over the one engine: flake8 parses the file once and hands us its tree; rules, settings
(`[tool.ascend-lint]` / `.ascend-lint.yaml`, overridden by `--ascend-preview` / `--ascend-target` or
the same keys in flake8's config) and the engine are ascend-lint's own. Line `# noqa` comments are
left to flake8 (so `--disable-noqa` works); the file-level `# ascend-lint: noqa` is still ours.

The project model is built once per process in `parse_options`, before flake8 forks its workers, from the
project of the paths flake8 was given; a file read from stdin replaces its own summary.
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Any, ClassVar, Dict, Iterator, Optional, Sequence, Tuple

from . import __version__
from .config import TARGETS, ConfigError, load_settings
from .engine import Linter
from .fileio import SourceError, check_size
from .sanitize import sanitize
from .registry import PARSE_ERROR_CODE, RegistryError, load_registry, print_warnings, select_rules

Error = Tuple[int, int, str, type]


def build_linter(preview: Optional[bool], target: Optional[str], start: str,
                 paths: Sequence[str] = ()) -> Linter:
    """The engine configured as the CLI would be from `start`, with flake8's overrides, and the project
    model of `paths` (default: `start`)."""
    if target is not None and target not in TARGETS:
        raise ConfigError(f"ascend-target must be one of {', '.join(TARGETS)}, got {target!r}")
    settings = load_settings(None, False, start).override(preview=preview, target=target)
    registry = load_registry()
    print_warnings(registry.warnings)
    rules, warnings = select_rules(registry, settings)
    print_warnings(warnings)
    from .project.index import ProjectIndex

    index = ProjectIndex.open([p for p in paths if p != "-"] or [start], settings)
    index.complete()  # facts that need a tree, for files no CLI run has summarised yet
    index.model()
    index.save()
    return Linter(rules, settings, project=index)


class AscendLintChecker:
    """flake8 AST plugin (entry point `ASC` in the `flake8.extension` group)."""

    name = "ascend-lint"
    version = __version__

    preview: ClassVar[Optional[bool]] = None
    target: ClassVar[Optional[str]] = None
    paths: ClassVar[Tuple[str, ...]] = ()
    _linters: ClassVar[Dict[Tuple[Optional[bool], Optional[str], str, Tuple[str, ...]], Linter]] = {}

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
            cls.linter()
        except (ConfigError, RegistryError) as exc:
            raise SystemExit(f"ascend-lint: error: {sanitize(str(exc))}") from None

    @classmethod
    def linter(cls) -> Linter:
        key = (cls.preview, cls.target, os.getcwd(), cls.paths)
        linter = cls._linters.get(key)
        if linter is None:
            linter = cls._linters[key] = build_linter(cls.preview, cls.target, key[2], key[3])
        return linter

    def run(self) -> Iterator[Error]:
        """Yield (line, 0-based column, 'ASCnnn message', type) for flake8."""
        kind = type(self)
        text = "".join(self.lines)
        tree = self.tree if isinstance(self.tree, ast.Module) else None
        try:
            linter = self.linter()
            if len(text) * 4 > linter.settings.max_file_size:  # flake8 read it; the cap still applies
                check_size(text.encode("utf-8", "surrogatepass"), linter.settings.max_file_size)
            if self.filename in ("stdin", "-") or not os.path.isfile(self.filename):
                linter.project.refresh(self.filename, text, tree)  # the buffer stands for that file
            findings = linter.check(text, self.filename, tree=tree, line_noqa=False)
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
