"""The language server's engine side: settings, the workspace of project models, each open document's
lint results, and what they become in LSP terms (diagnostics, code actions, hover).

Everything here runs on the server's one lint thread (server.py): the workspace, its project models and
the documents' results are only touched from there, and the event loop only ever sees the immutable
`Linted` snapshots it hands back. Every lint goes through the run pipeline (`pipeline.run.lint_buffer`),
fixes through the fixer. This module is imported on the lint thread once the server is initialised, so
that `initialize` is answered without loading the engine and the rule packs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Type

from lsprotocol import types

from .analysis.view import replay
from .config import CONFIG_NAMES, TARGETS, ConfigError, ConfigResolver, Settings, load_settings
from .core_rules import PARSE_ERROR_CODE, UNUSED_NOQA_CODE
from .docs import rule_markdown, rule_url
from .engine.noqa import NOQA_RE, add_noqa_to_lines
from .engine.walker import Stopped
from .fileio import SourceError, read_source, split_lines
from .fix.edits import TextEdit, fix_edits
from .pipeline.discovery import Excluder
from .pipeline.root import is_marked
from .pipeline.run import LINTED, SCOPED, SYNTAX_ERROR, BufferResult, fix_buffer, lint_buffer
from .pipeline.workspace import Workspace
from .registry import Registry, RegistryError, load_registry
from .rule import Applicability, Finding, Rule, Severity
from .server import FIX_ALL_KIND, SECTION

KEPT_PARSES = 1024  # statements kept parsed by libcst for the next fix-all (~9 KB a line): a document is
# fixed again after an edit, and only the statements the edit changed are parsed again
SEVERITIES = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
              Severity.INFO: types.DiagnosticSeverity.Information}
# editor setting -> (Settings attribute, check); camelCase spellings are accepted too
EDITOR_KEYS = {
    "select": ("select", "codes"), "ignore": ("ignore", "codes"), "extend-select": ("extend_select", "codes"),
    "preview": ("preview", "bool"), "target": ("target", "target"), "ignore-noqa": ("ignore_noqa", "bool"),
    "unsafe-fixes": ("unsafe_fixes", "bool"), "config": ("config", "path"),
}
__all__ = ["CONFIG_NAMES", "ConfigError", "LintSession", "Linted", "RegistryError", "Stopped", "editor_settings"]


def editor_settings(raw: Any) -> Tuple[Dict[str, Any], List[str]]:
    """Validated editor settings (kebab-case keys) and a warning per value that was ignored."""
    if isinstance(raw, dict) and SECTION in raw and isinstance(raw[SECTION], dict):
        raw = raw[SECTION]
    if not isinstance(raw, dict):
        return {}, [] if raw is None else [f"settings must be an object, got {type(raw).__name__}"]
    out: Dict[str, Any] = {}
    problems = []
    for key, value in raw.items():
        name = "".join("-" + c.lower() if c.isupper() else c for c in str(key))  # extendSelect -> extend-select
        if name not in EDITOR_KEYS:
            problems.append(f"unknown setting {key!r}")
            continue
        kind = EDITOR_KEYS[name][1]
        ok = {"codes": isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value),
              "bool": isinstance(value, bool), "target": value in TARGETS,
              "path": isinstance(value, str)}[kind]
        if value is None or (kind == "path" and not value):
            continue
        if not ok:
            problems.append(f"setting {key!r} has a wrong value {value!r}")
            continue
        out[name] = value
    return out, problems


@dataclass(frozen=True)
class Linted:
    """One document version as linted, for the event loop: what to publish and what code actions need."""

    uri: str
    version: Optional[int]
    text: str
    path: str
    findings: Tuple[Finding, ...]
    diagnostics: Tuple[types.Diagnostic, ...]
    status: str  # pipeline.run: LINTED, SCOPED (a full lint is due), SYNTAX_ERROR, TOO_LARGE
    settings: Optional[Settings] = None
    result: Optional[BufferResult] = field(default=None, compare=False, repr=False)

    @property
    def complete(self) -> bool:
        return self.status != SCOPED


class LintSession:
    """The workspace (settings per configuration, linters, project models), the documents' last results,
    and the one entry point that lints a document."""

    def __init__(self, root: Optional[str] = None, registry: Optional[Registry] = None) -> None:
        self.registry = registry if registry is not None else load_registry()
        self.editor: Dict[str, Any] = {}
        self.root = root or os.getcwd()
        self._workspace: Optional[Workspace] = None
        self._excluders: Dict[int, Excluder] = {}
        self._stamps: Dict[str, float] = {}  # configuration file -> mtime when read
        self.results: Dict[str, BufferResult] = {}  # uri -> its last lint (reused by the next edit)
        self.complete: Dict[str, BufferResult] = {}  # uri -> its last lint of the whole file (deps)
        self.paths: Dict[str, str] = {}  # uri -> path
        self._fixed: Dict[str, Tuple[BufferResult, Any]] = {}  # uri -> (the lint fixed, its fix.fixer.FileFix)

    # ----------------------------------------------------------------- settings
    def configure(self, raw: Any) -> List[str]:
        self.editor, problems = editor_settings(raw)
        self.forget_linters()
        return problems

    def forget_linters(self) -> None:
        """Read the configuration files again (and reopen the project models) on the next lint."""
        self._workspace = None
        self._excluders.clear()
        self._stamps.clear()
        self.results.clear()  # (their linters and project indexes belong to the old workspace)
        self.complete.clear()
        self._fixed.clear()

    def workspace(self) -> Workspace:
        if self._workspace is None:
            config = self.editor.get("config")
            if config and not os.path.isabs(config):
                config = os.path.join(self.root, config)
            attrs = {EDITOR_KEYS[k][0]: v for k, v in self.editor.items() if k != "config"}

            def editor_options(settings: Settings) -> Settings:
                return settings.override(**attrs)

            run = editor_options(load_settings(config, False, self.root))
            resolver = ConfigResolver(run, editor_options, hierarchical=not config)
            self._workspace = Workspace(resolver, self.registry, [self.root])
        return self._workspace

    def settings_for(self, path: str) -> Settings:
        """The configuration closest to the file (or the editor's `config`), then the editor's settings."""
        settings = self.workspace().resolver.for_path(path)
        if self._stale(settings):
            self.forget_linters()
            settings = self.workspace().resolver.for_path(path)
        return settings

    def _stale(self, settings: Settings) -> bool:
        """Has a configuration file these settings were read from changed on disk since?"""
        for config in ((settings.config_path,) if settings.config_path else ()) + settings.extends:
            try:
                stamp = os.stat(config).st_mtime_ns
            except OSError:
                stamp = -1
            if self._stamps.setdefault(config, stamp) != stamp:
                return True
        return False

    def excluded(self, path: str, settings: Settings) -> bool:
        excluder = self._excluders.get(id(settings))
        if excluder is None:
            excluder = self._excluders[id(settings)] = Excluder(settings)
        return os.path.isabs(path) and excluder.excluded(path, False)

    def in_a_project(self, path: str, settings: Settings) -> bool:
        """A file outside the workspace that no configuration or marker places in a project is linted on
        its own (its directory could be a home directory: it is not indexed)."""
        if not os.path.isabs(path):
            return False
        root = self.workspace().root_for(path, settings)
        inside = path.startswith(os.path.abspath(self.root).rstrip(os.sep) + os.sep)
        return inside or bool(settings.root_config) or is_marked(root)

    # ----------------------------------------------------------------- linting
    def lint(self, uri: str, path: str, text: str, version: Optional[int], codec: Any,
             scoped: bool = False, stop: Optional[Callable[[], bool]] = None) -> Linted:
        """Lint the editor's text of `path` with its project's facts (the buffer stands for the file in the
        project model); with `scoped`, an edit inside function bodies lints only those scopes. Raises
        ConfigError/RegistryError when the file's configuration or the rule packs are broken, Stopped when
        `stop()` said so during the lint."""
        self.paths[uri] = path
        settings = self.settings_for(path)
        if self.excluded(path, settings):
            self.results.pop(uri, None)
            return Linted(uri, version, text, path, (), (), LINTED, settings)
        previous = self.results.get(uri)
        result = lint_buffer(self.workspace(), path, text, in_project=self.in_a_project(path, settings),
                             previous=previous, scoped=scoped and previous is not None, stop=stop)
        self.results[uri] = result
        if result.complete:
            self.complete[uri] = result
        positions = Positions(text, codec)
        diagnostics = tuple(self.diagnostic(f, positions) for f in result.findings)
        return Linted(uri, version, text, path, tuple(result.findings), diagnostics, result.status,
                      result.linter.settings, result)

    def dependents(self, changed: Optional[str] = None) -> List[str]:
        """The open documents (but `changed`) whose recorded project questions now get other answers: the
        project model changed under them."""
        stale = []
        for uri, result in self.complete.items():
            if uri == changed or result.index is None:
                continue
            if not replay(result.index.model(), result.deps, result.index.summary_of):
                stale.append(uri)
        return stale

    def close(self, uri: str) -> None:
        """A closed document: its project summary comes from the file on disk again."""
        self.results.pop(uri, None)
        self._fixed.pop(uri, None)
        self.complete.pop(uri, None)
        path = self.paths.pop(uri, None)
        if path is not None:
            self.restore(path)

    def restore(self, path: str) -> None:
        workspace = self._workspace
        if workspace is None or not os.path.isabs(path):
            return
        index = workspace.indexes.get(workspace.root_for(path))
        if index is None:
            return
        try:
            text = read_source(path).text
        except SourceError:
            text = ""
        index.refresh(path, text)

    def files_changed(self, paths: Iterable[str]) -> str:
        """Files changed on disk (not through an open document): 'all' when a configuration changed (read
        again), 'dependents' when a Python file's summary was refreshed, '' when nothing concerns us."""
        open_paths = set(self.paths.values())
        changed = ""
        for path in paths:
            if os.path.basename(path) in CONFIG_NAMES:
                self.forget_linters()
                return "all"
            if path.endswith((".py", ".pyi")) and path not in open_paths:
                self.restore(path)
                changed = "dependents"
        return changed

    def rule(self, code: str) -> Optional[Type[Rule]]:
        return self.registry.rules.get(code.upper())

    # ----------------------------------------------------------------- LSP terms
    @staticmethod
    def diagnostic(f: Finding, positions: "Positions") -> types.Diagnostic:
        return types.Diagnostic(
            range=positions.finding_range(f),
            message=f.message,
            severity=SEVERITIES.get(f.severity, types.DiagnosticSeverity.Warning),
            code=f.code,
            code_description=types.CodeDescription(href=rule_url(f.code, f.name)),
            source="ascend-lint",
            tags=[types.DiagnosticTag.Unnecessary] if f.code == UNUSED_NOQA_CODE else None,
            data={"fix": f.fix.applicability.value if f.fix else None},
        )

    def code_actions(self, linted: Linted, params: types.CodeActionParams, codec: Any,
                     fix_all: bool) -> List[types.CodeAction]:
        """The quick fixes of the findings on the lines asked about (unless the client asked only for other
        kinds) and, with `fix_all`, the fix-all source action."""
        positions = Positions(linted.text, codec)
        wanted = [str(getattr(k, "value", k)) for k in params.context.only or ()]
        actions: List[types.CodeAction] = []
        if not wanted or any(k.startswith(types.CodeActionKind.QuickFix.value) for k in wanted):
            first, last = params.range.start.line + 1, params.range.end.line + 1
            for f in linted.findings:
                if _on_lines(f, first, last):
                    actions.extend(self.finding_actions(linted, f, positions))
        if fix_all:
            action = self.fix_all_action(linted, positions)
            if action is not None:
                actions.append(action)
        return actions

    def finding_actions(self, linted: Linted, f: Finding, positions: "Positions") -> Iterable[types.CodeAction]:
        uri = linted.uri
        diagnostic = [self.diagnostic(f, positions)]
        if f.fix is not None and f.fix.applicability is not Applicability.DISPLAY and linted.status != SYNTAX_ERROR:
            edits = fix_edits(linted.text, f)
            if edits:
                safe = f.fix.applicability is Applicability.SAFE
                title = f"{f.code}: {f.fix.description}" + ("" if safe else " (unsafe fix: review the change)")
                yield types.CodeAction(
                    title=title, kind=types.CodeActionKind.QuickFix, diagnostics=diagnostic, is_preferred=safe,
                    edit=types.WorkspaceEdit(changes={uri: [positions.edit(e) for e in edits]}))
        suppress = self.suppress_edit(f, positions)
        if suppress is not None:
            yield types.CodeAction(
                title=f"{f.code}: suppress with `# noqa: {f.code}`", kind=types.CodeActionKind.QuickFix,
                diagnostics=diagnostic, edit=types.WorkspaceEdit(changes={uri: [suppress]}))

    @staticmethod
    def suppress_edit(f: Finding, positions: "Positions") -> Optional[types.TextEdit]:
        if f.code == PARSE_ERROR_CODE or not 0 < f.line <= len(positions.lines):
            return None
        line = positions.lines[f.line - 1]
        changed = add_noqa_to_lines([line], [Finding(f.path, 1, f.col, 1, f.end_col, f.code, f.name, f.message)])
        if 0 not in changed:
            return None
        return positions.edit(TextEdit(f.line, 1, f.line, len(line) + 1, changed[0]))

    def fix_all_action(self, linted: Linted, positions: "Positions") -> Optional[types.CodeAction]:
        """Every safe fix applied as `--fix` applies them, as one edit of the whole document; None when there
        is nothing to apply or the document was linted again since (its tree and findings moved on)."""
        from .fix.policy import is_applicable  # (no libcst there)

        result, settings, latest = linted.result, linted.settings, self.results.get(linted.uri)
        if latest is not result and latest is not None and latest.status == LINTED and latest.text == linted.text:
            result = latest  # (linted again since, the same text: its tree is the one still current)
        if result is None or settings is None or linted.status != LINTED or latest is not result:
            return None
        if not any(is_applicable(f, settings) for f in linted.findings):
            return None
        cached = self._fixed.get(linted.uri)
        if cached is not None and cached[0] is result:
            done = cached[1]
        else:
            from .fix import resolve  # (libcst)

            resolve.RESOLVER_CACHE = max(resolve.RESOLVER_CACHE, KEPT_PARSES)
            done = fix_buffer(result, linted.path)
            self._fixed[linted.uri] = (result, done)
        if not done.applied or done.text == linted.text:
            return None
        end = positions.position(len(positions.lines), len(positions.lines[-1]) + 1)
        whole = types.Range(start=types.Position(line=0, character=0), end=end)
        return types.CodeAction(
            title=f"ascend-lint: fix all ({len(done.applied)} safe fix{'es' if len(done.applied) != 1 else ''})",
            kind=FIX_ALL_KIND,
            edit=types.WorkspaceEdit(changes={linted.uri: [types.TextEdit(range=whole, new_text=done.text)]}))

    def hover(self, linted: Linted, position: types.Position, codec: Any) -> Optional[types.Hover]:
        positions = Positions(linted.text, codec)
        line, col = positions.character(position)
        codes: List[str] = []
        if 0 < line <= len(positions.lines):  # a code in a `# noqa: ...` comment: that rule first
            text = positions.lines[line - 1]
            for match in NOQA_RE.finditer(text):
                if match.group("codes") and match.start("codes") <= col - 1 <= match.end("codes"):
                    codes.append(_word_at(text, col - 1))
        codes += [f.code for f in linted.findings if _contains(f, line, col)]
        docs = [rule_markdown(r) for r in (self.rule(c) for c in dict.fromkeys(codes)) if r]
        if not docs:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n".join(docs)))


# ----------------------------------------------------------------------------- positions
class Positions:
    """1-based character positions of the engine <-> LSP positions in the client's code units."""

    def __init__(self, text: str, codec: Any) -> None:
        self.lines = split_lines(text)  # the tokenizer's newlines, as the engine counts lines
        self.codec = codec

    def units(self, text: str) -> int:
        return len(text) if text.isascii() else self.codec.client_num_units(text)

    def position(self, line: int, col: int) -> types.Position:
        if line > len(self.lines):
            return types.Position(line=len(self.lines), character=0)
        text = self.lines[line - 1]
        return types.Position(line=line - 1, character=self.units(text[: max(col - 1, 0)]))

    def range(self, line: int, col: int, end_line: int, end_col: int) -> types.Range:
        return types.Range(start=self.position(line, col), end=self.position(end_line, end_col))

    def finding_range(self, f: Finding) -> types.Range:
        end_line, end_col = f.end_line, f.end_col
        if (end_line, end_col) <= (f.line, f.col) and 0 < f.line <= len(self.lines):  # point: the rest of the line
            end_line, end_col = f.line, len(self.lines[f.line - 1]) + 1
        return self.range(f.line, f.col, end_line, end_col)

    def character(self, position: types.Position) -> Tuple[int, int]:
        """(1-based line, 1-based character column) of an LSP position."""
        if position.line >= len(self.lines):
            return len(self.lines) + 1, 1
        text, units, col = self.lines[position.line], 0, 0
        while col < len(text) and units < position.character:
            units += self.codec.client_num_units(text[col])
            col += 1
        return position.line + 1, col + 1

    def edit(self, edit: TextEdit) -> types.TextEdit:
        return types.TextEdit(range=self.range(edit.line, edit.col, edit.end_line, edit.end_col),
                              new_text=edit.content)


def _contains(f: Finding, line: int, col: int) -> bool:
    return (f.line, f.col) <= (line, col) <= (f.end_line, max(f.end_col, f.col + 1))


def _on_lines(f: Finding, first: int, last: int) -> bool:
    """Does the finding touch lines first..last (the editor asks for actions at the cursor's line)?"""
    return f.line <= last and first <= f.end_line


def _word_at(text: str, index: int) -> str:
    start = index
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    end = index
    while end < len(text) and text[end].isalnum():
        end += 1
    return text[start:end]
