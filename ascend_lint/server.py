"""`ascend-lint server`: a language server (LSP over stdio, built on pygls) for any editor.

Diagnostics on open, change and save; code actions for every fix (safe ones as the preferred quick
fix, unsafe ones labelled), a "suppress with `# noqa: CODE`" action and a fix-all source action;
hover shows the rule's documentation. Settings come from the configuration files (the closest one to
each file, with what it extends, as `check` resolves it) overridden by the editor's `ascend-lint` settings.

The engine is the CLI's: `LintSession.lint` is the one place a document is linted, and fixes are the
fixer's, turned into text edits by `edits.fix_edits`. Each document is linted with its project's model
(`workspace.Workspace`: one ProjectIndex per project root, opened on first use and kept in memory). An
edited document's summary is refreshed from the buffer, and the other open documents whose recorded
project questions (deps) now get other answers are linted again; changes are debounced.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple, Type

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import __version__
from .config import CONFIG_NAMES, TARGETS, ConfigError, ConfigResolver, Settings, load_settings
from .core_rules import PARSE_ERROR_CODE, UNUSED_NOQA_CODE
from .pipeline.discovery import Excluder
from .docs import rule_markdown, rule_url
from .fix.edits import TextEdit, fix_edits
from .engine.linter import Linter
from .fileio import SourceError, read_source, split_lines
from .engine.noqa import NOQA_RE, add_noqa_to_lines
from .pipeline.root import is_marked
from .analysis.view import replay
from .registry import Registry, RegistryError, load_registry
from .rule import Applicability, Finding, Rule, Severity
from .pipeline.run import BufferResult, lint_buffer
from .pipeline.workspace import Workspace

SECTION = "ascend-lint"
DEBOUNCE_SECONDS = 0.25  # a burst of changes is linted once, this long after the last
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.ascend-lint"
SEVERITIES = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
              Severity.INFO: types.DiagnosticSeverity.Information}
# editor setting -> (Settings attribute, check); camelCase spellings are accepted too
EDITOR_KEYS = {
    "select": ("select", "codes"), "ignore": ("ignore", "codes"), "extend-select": ("extend_select", "codes"),
    "preview": ("preview", "bool"), "target": ("target", "target"), "ignore-noqa": ("ignore_noqa", "bool"),
    "unsafe-fixes": ("unsafe_fixes", "bool"), "config": ("config", "path"),
}
log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the engine side
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


Linted = BufferResult  # one lint of a document (the pipeline's one-file result)


@dataclass
class LintSession:
    """The workspace (settings per configuration, linters, project models) and the one entry point that
    lints a document."""

    registry: Registry = field(default_factory=load_registry)
    editor: Dict[str, Any] = field(default_factory=dict)
    root: str = field(default_factory=os.getcwd)
    _workspace: Optional[Workspace] = None
    _excluders: Dict[int, Excluder] = field(default_factory=dict)
    _stamps: Dict[str, float] = field(default_factory=dict)  # configuration file -> mtime when read

    def configure(self, raw: Any) -> List[str]:
        self.editor, problems = editor_settings(raw)
        self.forget_linters()
        return problems

    def forget_linters(self) -> None:
        """Read the configuration files again (and reopen the project models) on the next lint."""
        self._workspace = None
        self._excluders.clear()
        self._stamps.clear()

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

    def linter_for(self, path: str) -> Tuple[Linter, Excluder]:
        settings = self.settings_for(path)
        excluder = self._excluders.get(id(settings))
        if excluder is None:
            excluder = self._excluders[id(settings)] = Excluder(settings)
        return self.workspace().linter(settings), excluder

    def lint(self, path: str, text: str) -> Linted:
        """Findings for the editor's text of `path`, with its project's facts; the buffer replaces the
        file's summary in the project model."""
        linter, excluder = self.linter_for(path)
        if os.path.isabs(path) and excluder.excluded(path, False):
            return Linted([], linter)
        return lint_buffer(self.workspace(), path, text, in_project=self.in_a_project(path, linter.settings))

    def in_a_project(self, path: str, settings: Settings) -> bool:
        """A file outside the workspace that no configuration or marker places in a project is linted on
        its own (its directory could be a home directory: it is not indexed)."""
        if not os.path.isabs(path):
            return False
        root = self.workspace().root_for(path, settings)
        inside = path.startswith(os.path.abspath(self.root).rstrip(os.sep) + os.sep)
        return inside or bool(settings.root_config) or is_marked(root)

    def still_valid(self, linted: Linted) -> bool:
        """Do the project questions of an earlier lint still get the same answers?"""
        index = linted.index
        return index is None or replay(index.model(), linted.deps, index.summary_of)

    def restore(self, path: str) -> None:
        """A closed document: its project summary comes from the file on disk again."""
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

    def rule(self, code: str) -> Optional[Type[Rule]]:
        return self.registry.rules.get(code.upper())


# ----------------------------------------------------------------------------- positions
class Positions:
    """1-based character positions of the engine <-> LSP positions in the client's code units."""

    def __init__(self, text: str, codec: Any) -> None:
        self.lines = split_lines(text)  # the tokenizer's newlines, as the engine counts lines
        self.codec = codec

    def position(self, line: int, col: int) -> types.Position:
        if line > len(self.lines):
            return types.Position(line=len(self.lines), character=0)
        text = self.lines[line - 1]
        return types.Position(line=line - 1, character=self.codec.client_num_units(text[: max(col - 1, 0)]))

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


# ----------------------------------------------------------------------------- the server
@dataclass
class DocumentState:
    version: Optional[int]
    text: str
    path: str
    findings: List[Finding]
    linter: Linter
    linted: Optional[Linted] = None


class AscendLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("ascend-lint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.session: Optional[LintSession] = None
        self.documents: Dict[str, DocumentState] = {}  # the open documents, as last linted
        self.waiting: Dict[str, None] = {}  # opened while the editor's settings were being asked for
        self.configuring = False
        self.shown_errors: set = set()
        self.pending: Dict[str, asyncio.TimerHandle] = {}  # uri -> its debounced lint

    # -------------------------------------------------------------- helpers
    def ensure_session(self) -> LintSession:
        if self.session is None:
            self.session = LintSession()
        return self.session

    def path_of(self, uri: str) -> str:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        return path or os.path.join(self.ensure_session().root, "untitled.py")

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Show a message once per session (bad settings, bad configuration), and log it."""
        self.window_log_message(types.LogMessageParams(type=kind, message=message))
        if message not in self.shown_errors:
            self.shown_errors.add(message)
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def lint_document(self, uri: str, dependents: bool = True) -> None:
        """Lint an open document now and publish its diagnostics; with `dependents`, then the other open
        documents whose project answers its new text changed."""
        self.cancel(uri)
        if self.configuring:  # lint with the editor's settings, once they are known
            self.waiting[uri] = None
            return
        document = self.workspace.get_text_document(uri)
        path = self.path_of(uri)
        session = self.ensure_session()
        try:
            linted = session.lint(path, document.source)
        except (ConfigError, RegistryError) as exc:
            self.tell(f"ascend-lint: {exc}", types.MessageType.Error)
            self.documents.pop(uri, None)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
            return
        self.documents[uri] = DocumentState(document.version, document.source, path, linted.findings,
                                            linted.linter, linted)
        self.publish(uri, document)
        if dependents:
            self.relint_dependents(uri)

    def publish(self, uri: str, document: Any) -> None:
        state = self.documents[uri]
        positions = Positions(state.text, document.position_codec)
        diagnostics = [self.diagnostic(f, positions) for f in state.findings]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=state.version))

    def relint_dependents(self, changed: Optional[str] = None) -> None:
        """Lint again the open documents (but `changed`) whose recorded project questions now get other
        answers: the project model changed under them. Nothing else is linted."""
        session = self.ensure_session()
        for uri, state in list(self.documents.items()):
            if uri == changed or state.linted is None or state.linted.index is None:
                continue
            if not session.still_valid(state.linted):
                self.lint_document(uri, dependents=False)

    def schedule(self, uri: str) -> None:
        """Lint a document once the edits stop for DEBOUNCE_SECONDS (each change restarts the wait)."""
        self.cancel(uri)
        loop = asyncio.get_event_loop()
        self.pending[uri] = loop.call_later(DEBOUNCE_SECONDS, self.fire, uri)

    def fire(self, uri: str) -> None:
        self.pending.pop(uri, None)
        if uri in self.workspace.text_documents:
            self.lint_document(uri)

    def cancel(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def close(self, uri: str) -> None:
        """A closed document: no diagnostics; its project facts come from the file on disk again."""
        self.cancel(uri)
        state = self.documents.pop(uri, None)
        self.waiting.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if state is not None:
            self.ensure_session().restore(state.path)
            self.relint_dependents()

    def files_changed(self, paths: Iterable[str]) -> None:
        """Files changed on disk (not through an open document): configurations are read again; a Python
        file's summary is refreshed, and the open documents that depend on it are linted again."""
        session = self.ensure_session()
        open_paths = {state.path for state in self.documents.values()}
        changed = False
        for path in paths:
            if os.path.basename(path) in CONFIG_NAMES:
                session.forget_linters()
                self.relint_all()
                return
            if path.endswith((".py", ".pyi")) and path not in open_paths:
                session.restore(path)
                changed = True
        if changed:
            self.relint_dependents()

    def diagnostic(self, f: Finding, positions: Positions) -> types.Diagnostic:
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

    def relint_all(self) -> None:
        for uri in list(self.documents) + [u for u in self.waiting if u not in self.documents]:
            self.lint_document(uri, dependents=False)
        self.waiting.clear()

    # -------------------------------------------------------------- code actions
    def code_actions(self, params: types.CodeActionParams) -> List[types.CodeAction]:
        state = self.documents.get(params.text_document.uri)
        document = self.workspace.get_text_document(params.text_document.uri)
        if state is None or state.text != document.source:
            self.lint_document(params.text_document.uri)
            state = self.documents.get(params.text_document.uri)
        if state is None:
            return []
        uri = params.text_document.uri
        positions = Positions(state.text, document.position_codec)
        wanted = [str(getattr(k, "value", k)) for k in params.context.only or ()]
        actions: List[types.CodeAction] = []
        if not wanted or any(k.startswith(types.CodeActionKind.QuickFix.value) for k in wanted):
            first, last = params.range.start.line + 1, params.range.end.line + 1
            for f in state.findings:
                if _on_lines(f, first, last):
                    actions.extend(self.finding_actions(uri, state, f, positions))
        if not wanted or any(FIX_ALL_KIND.startswith(k) for k in wanted):
            fix_all = self.fix_all_action(uri, state, positions)
            if fix_all is not None:
                actions.append(fix_all)
        return actions

    def finding_actions(self, uri: str, state: DocumentState, f: Finding,
                        positions: Positions) -> Iterable[types.CodeAction]:
        diagnostic = [self.diagnostic(f, positions)]
        if f.fix is not None and f.fix.applicability is not Applicability.DISPLAY:
            edits = fix_edits(state.text, f)
            if edits:
                safe = f.fix.applicability is Applicability.SAFE
                title = f"{f.code}: {f.fix.description}" + ("" if safe else " (unsafe fix: review the change)")
                yield types.CodeAction(
                    title=title, kind=types.CodeActionKind.QuickFix, diagnostics=diagnostic, is_preferred=safe,
                    edit=types.WorkspaceEdit(changes={uri: [positions.edit(e) for e in edits]}))
        suppress = self.suppress_edit(state, f, positions)
        if suppress is not None:
            yield types.CodeAction(
                title=f"{f.code}: suppress with `# noqa: {f.code}`", kind=types.CodeActionKind.QuickFix,
                diagnostics=diagnostic, edit=types.WorkspaceEdit(changes={uri: [suppress]}))

    def suppress_edit(self, state: DocumentState, f: Finding, positions: Positions) -> Optional[types.TextEdit]:
        if f.code == PARSE_ERROR_CODE or not 0 < f.line <= len(positions.lines):
            return None
        line = positions.lines[f.line - 1]
        changed = add_noqa_to_lines([line], [Finding(f.path, 1, f.col, 1, f.end_col, f.code, f.name, f.message)])
        if 0 not in changed:
            return None
        return positions.edit(TextEdit(f.line, 1, f.line, len(line) + 1, changed[0]))

    def fix_all_action(self, uri: str, state: DocumentState, positions: Positions) -> Optional[types.CodeAction]:
        from .fix.fixer import fix_text, is_applicable  # (libcst is imported only to fix: start-up)

        settings = state.linter.settings
        if not any(is_applicable(f, settings) for f in state.findings):
            return None
        done = fix_text(state.text, state.path, state.findings, state.linter, settings)
        if not done.applied or done.text == state.text:
            return None
        end = positions.position(len(positions.lines), len(positions.lines[-1]) + 1)
        whole = types.Range(start=types.Position(line=0, character=0), end=end)
        return types.CodeAction(
            title=f"ascend-lint: fix all ({len(done.applied)} safe fix{'es' if len(done.applied) != 1 else ''})",
            kind=FIX_ALL_KIND,
            edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=whole, new_text=done.text)]}))

    # -------------------------------------------------------------- hover
    def hover(self, params: types.HoverParams) -> Optional[types.Hover]:
        state = self.documents.get(params.text_document.uri)
        if state is None:
            return None
        document = self.workspace.get_text_document(params.text_document.uri)
        positions = Positions(state.text, document.position_codec)
        line, col = positions.character(params.position)
        codes: List[str] = []
        if 0 < line <= len(positions.lines):  # a code in a `# noqa: ...` comment: that rule first
            text = positions.lines[line - 1]
            for match in NOQA_RE.finditer(text):
                if match.group("codes") and match.start("codes") <= col - 1 <= match.end("codes"):
                    codes.append(_word_at(text, col - 1))
        codes += [f.code for f in state.findings if _contains(f, line, col)]
        docs = [rule_markdown(r) for r in (self.ensure_session().rule(c) for c in dict.fromkeys(codes)) if r]
        if not docs:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n".join(docs)))


def _word_at(text: str, index: int) -> str:
    start = index
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    end = index
    while end < len(text) and text[end].isalnum():
        end += 1
    return text[start:end]


def build_server() -> AscendLintServer:
    server = AscendLintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: AscendLintServer, params: types.InitializeParams) -> None:
        session = ls.ensure_session()
        root = ls.workspace.root_path
        if root:
            session.root = root
        options = params.initialization_options
        if isinstance(options, dict) and "settings" in options:
            options = options["settings"]
        for problem in session.configure(options):
            ls.tell(f"ascend-lint: {problem}")

    @server.feature(types.INITIALIZED)
    async def initialized(ls: AscendLintServer, params: types.InitializedParams) -> None:
        await pull_configuration(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: AscendLintServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and SECTION in settings:
            for problem in ls.ensure_session().configure(settings[SECTION]):
                ls.tell(f"ascend-lint: {problem}")
        else:
            await pull_configuration(ls)
        ls.relint_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AscendLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.lint_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AscendLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AscendLintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if os.path.basename(ls.path_of(uri)) in CONFIG_NAMES:  # a saved configuration applies from now on
            ls.ensure_session().forget_linters()
            ls.relint_all()
        elif uri in ls.workspace.text_documents:
            ls.lint_document(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AscendLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: AscendLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.files_changed(ls.path_of(change.uri) for change in params.changes)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND]))
    def code_action(ls: AscendLintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
        return ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: AscendLintServer, params: types.HoverParams) -> Optional[types.Hover]:
        return ls.hover(params)

    return server


async def pull_configuration(ls: AscendLintServer) -> None:
    """Ask the client for the `ascend-lint` section, if it can answer."""
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return
    ls.configuring = True
    try:
        answer = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)]))
    except Exception as exc:  # a client that cannot answer: keep the settings we have
        log.warning("workspace/configuration failed: %s", exc)
        answer = None
    finally:
        ls.configuring = False
    if answer and answer[0] is not None:
        for problem in ls.ensure_session().configure(answer[0]):
            ls.tell(f"ascend-lint: {problem}")
    ls.relint_all()


def main() -> int:
    build_server().start_io()
    return 0

