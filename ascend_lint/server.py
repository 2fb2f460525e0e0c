"""`ascend-lint server`: a language server (LSP over stdio, built on pygls) for any editor.

Diagnostics on open, change and save; code actions for every fix (safe ones as the preferred quick
fix, unsafe ones labelled), a "suppress with `# noqa: CODE`" action and a fix-all source action;
hover shows the rule's documentation. Settings come from the configuration files (the closest one to
each file, with what it extends, as `check` resolves it) overridden by the editor's `ascend-lint` settings.

Keeping up (docs/editors.md): the event loop only reads messages, answers and publishes; every lint and
fix runs on one lint thread (`Linting`), through the run pipeline (`server_session.LintSession`). A change
is linted as soon as the thread is free, reusing the previous parse and, when the edit stays inside
function bodies, linting only those scopes; the whole file (and the other open documents whose project
answers it changes) is linted again once the edits pause for CONFIRM_SECONDS. A result for a version that
is no longer the document's is dropped, never published. Every request gets an answer: invalid params an
InvalidParams error, a request after `shutdown` an InvalidRequest error. The engine is imported on the lint
thread after `initialize` is answered.
"""
from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from . import __version__

SECTION = "ascend-lint"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.ascend-lint"
CONFIG_FILES = ("pyproject.toml", ".ascend-lint.yaml", ".ascend-lint.yml")  # (config.CONFIG_NAMES, unloaded)
CONFIRM_SECONDS = 0.3  # edits paused this long: the whole file is linted again (and its dependents)
log = logging.getLogger(__name__)


class Protocol(LanguageServerProtocol):
    """pygls' protocol, answering every request: one whose params do not deserialize gets an InvalidParams
    error (pygls logs it and never answers), one after `shutdown` an InvalidRequest error."""

    def structure_message(self, data: Dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "method" in data and data.get("id") is not None:
                self._send_response(data["id"], error=exc.to_response_error())
                return _ANSWERED
            raise

    def handle_message(self, message: Any) -> None:
        if message is _ANSWERED:
            return
        if self._shutdown and getattr(message, "method", types.EXIT) != types.EXIT and \
                getattr(message, "id", None) is not None:
            error = JsonRpcInvalidRequest(f"the server is shutting down: {message.method} not answered")
            self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)


_ANSWERED = object()  # a request already answered with an error while it was read


class AscendLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("ascend-lint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=Protocol)
        self.linting = Linting(self)
        self.shown_errors: set = set()

    def open_document(self, uri: str) -> Any:
        """The open document at `uri` (None: not open)."""
        return self.workspace.text_documents.get(unquote(uri))

    def path_of(self, uri: str) -> str:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        return path or os.path.join(self.linting.root, "untitled.py")

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Show a message once per session (bad settings, bad configuration), and log it."""
        self.window_log_message(types.LogMessageParams(type=kind, message=message))
        if message not in self.shown_errors:
            self.shown_errors.add(message)
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def publish(self, uri: str, diagnostics: List[Any], version: Optional[int] = None) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))


class Linting:
    """The lint thread and what is due on it: each open document's next lint (whole file or edited scopes
    only), one at a time, the newest text first taken when the thread is free; code actions, settings and
    closes queue on the same thread, so the engine's state is only ever touched there."""

    def __init__(self, server: AscendLintServer) -> None:
        self.server = server
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ascend-lint")
        self.root = os.getcwd()
        self.options: Any = None  # the editor's settings from `initialize`, applied when the session starts
        self.session: Any = None  # server_session.LintSession, made on the lint thread
        self.due: Dict[str, bool] = {}  # uri -> lint the whole file (else the edited scopes may do)
        self.running: Optional[str] = None
        self.configuring = False  # asking the client for its settings: lints wait for them
        self.timers: Dict[str, asyncio.TimerHandle] = {}
        self.linted: Dict[str, Any] = {}  # uri -> its published server_session.Linted
        self.waiters: Dict[str, List[Tuple[asyncio.Future, bool]]] = {}  # uri -> (waiter, wants a whole lint)

    # -------------------------------------------------------------- the lint thread
    def run(self, function: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        """Run `function(session, *args)` on the lint thread."""
        return asyncio.get_running_loop().run_in_executor(self.executor, self._call, function, args)

    def _call(self, function: Callable[..., Any], args: Tuple[Any, ...]) -> Any:
        return function(self.start(), *args)

    def start(self) -> Any:
        """The session (on the lint thread): the engine is imported and the editor's settings applied."""
        if self.session is None:
            from .server_session import LintSession

            session = LintSession(self.root)
            session.problems = session.configure(self.options)
            self.session = session
        return self.session

    # -------------------------------------------------------------- lints
    def want(self, uri: str, whole: bool = True) -> None:
        """Lint the document when the thread is free (`whole`: the whole file, not only edited scopes)."""
        self.due[uri] = self.due.get(uri, False) or whole
        self.kick()

    def edited(self, uri: str) -> None:
        self.cancel_timer(uri)
        self.want(uri, whole=False)

    def kick(self) -> None:
        while self.running is None and self.due and not self.configuring:
            uri = next(iter(self.due))
            whole = self.due.pop(uri)
            document = self.server.open_document(uri)
            if document is None:
                continue
            self.running = uri
            version, text = document.version, document.source
            future = self.run(_lint, uri, self.server.path_of(uri), text, version, document.position_codec, whole,
                              self.newer_than(uri, version))
            future.add_done_callback(lambda done, uri=uri, version=version: self.linted_one(uri, version, done))

    def newer_than(self, uri: str, version: Optional[int]) -> Callable[[], bool]:
        """Asked on the lint thread: has the document changed (or closed) since `version`? (A lint of an
        older text stops: its result would be dropped anyway.)"""
        documents = self.server.workspace.text_documents
        key = unquote(uri)

        def newer() -> bool:
            document = documents.get(key)
            return document is None or document.version != version
        return newer

    def linted_one(self, uri: str, version: Optional[int], done: "Future[Any]") -> None:
        """A lint came back (on the event loop): published if it is of the document's current version."""
        self.running = None
        try:
            linted, dependents, error = done.result()
        except Exception as exc:  # a bug must not stop the server: say so, keep serving
            log.exception("linting %s failed", uri)
            linted, dependents, error = None, [], f"ascend-lint: internal error linting {uri}: {exc!r}"
        document = self.server.open_document(uri)
        if error is not None:
            self.server.tell(error, types.MessageType.Error)
            if document is not None and document.version == version:
                self.linted.pop(uri, None)
                self.server.publish(uri, [], version)
                self.wake(uri, None)
        elif linted is not None and document is not None and document.version == version:
            self.linted[uri] = linted
            self.server.publish(uri, list(linted.diagnostics), version)
            if linted.status == "too-large":
                self.server.window_log_message(types.LogMessageParams(
                    type=types.MessageType.Warning, message=f"ascend-lint: {linted.findings[0].message}: {uri}"))
            if not linted.complete and not self.due.get(uri):
                self.confirm_later(uri)
            self.wake(uri, linted)
        for other in dependents:
            self.want(other)
        self.kick()

    def confirm_later(self, uri: str) -> None:
        self.cancel_timer(uri)
        self.timers[uri] = asyncio.get_running_loop().call_later(CONFIRM_SECONDS, self.confirm, uri)

    def confirm(self, uri: str) -> None:
        self.timers.pop(uri, None)
        document, linted = self.server.open_document(uri), self.linted.get(uri)
        if document is not None and not (linted is not None and linted.complete and linted.version == document.version):
            self.want(uri)

    def cancel_timer(self, uri: str) -> None:
        timer = self.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def wake(self, uri: str, linted: Any) -> None:
        """Answer the waiters of `uri` that this lint satisfies (None: it could not be linted: all of them)."""
        waiting = []
        for waiter, whole in self.waiters.pop(uri, ()):
            if waiter.done():
                continue
            if linted is None or linted.complete or not whole:
                waiter.set_result(linted)
            else:
                waiting.append((waiter, whole))
        if waiting:
            self.waiters[uri] = waiting

    async def current(self, uri: str, whole: bool = False) -> Any:
        """The lint of the document's current version (`whole`: of the whole file), waiting for it if need
        be; None if it is not open or could not be linted."""
        document = self.server.open_document(uri)
        if document is None:
            return None
        linted = self.linted.get(uri)
        if linted is not None and linted.version == document.version and linted.text == document.source and (
                linted.complete or not whole):
            return linted
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(uri, []).append((waiter, whole))
        if whole:
            self.cancel_timer(uri)  # (the lint of the whole file, now)
            self.want(uri)
        elif uri not in self.due and self.running != uri:
            self.want(uri, whole=False)
        return await waiter

    def relint_all(self) -> None:
        for uri in list(self.server.workspace.text_documents):
            self.want(uri)

    # -------------------------------------------------------------- documents
    def closed(self, uri: str) -> None:
        """No diagnostics for a closed document; its project facts come from the file on disk again."""
        self.cancel_timer(uri)
        self.due.pop(uri, None)
        self.linted.pop(uri, None)
        self.wake(uri, None)
        self.server.publish(uri, [])
        self.after(self.run(_close, uri))

    def after(self, future: "asyncio.Future[Any]") -> None:
        """When a job returns documents whose project answers changed (or 'all'), lint them again."""
        def done(finished: "asyncio.Future[Any]") -> None:
            try:
                stale = finished.result()
            except Exception:  # (a bug: logged; the next edit lints again)
                log.exception("ascend-lint job failed")
                return
            if stale == "all":
                self.relint_all()
            for uri in stale if isinstance(stale, list) else ():
                self.want(uri)
        future.add_done_callback(done)

    async def configure(self, raw: Any) -> None:
        for problem in await self.run(_configure, raw):
            self.server.tell(f"ascend-lint: {problem}")


# ----------------------------------------------------------------------------- jobs (on the lint thread)
def _lint(session: Any, uri: str, path: str, text: str, version: Optional[int], codec: Any,
          whole: bool, stop: Callable[[], bool]) -> Tuple[Any, List[str], Optional[str]]:
    from .server_session import ConfigError, RegistryError, Stopped

    try:
        linted = session.lint(uri, path, text, version, codec, scoped=not whole, stop=stop)
    except (ConfigError, RegistryError) as exc:
        return None, [], f"ascend-lint: {exc}"
    except Stopped:  # a newer text came: its own lint is due
        return None, [], None
    return linted, session.dependents(uri) if linted.complete else [], None


def _close(session: Any, uri: str) -> List[str]:
    session.close(uri)
    return session.dependents()


def _configure(session: Any, raw: Any) -> List[str]:
    problems = getattr(session, "problems", [])
    session.problems = []
    return problems + (session.configure(raw) if raw is not _KEEP else [])


_KEEP = object()  # (configure: only report the problems of the settings `initialize` gave)


def _files_changed(session: Any, paths: List[str]) -> Any:
    what = session.files_changed(paths)
    return "all" if what == "all" else session.dependents() if what else []


def _forget(session: Any) -> str:
    session.forget_linters()
    return "all"


def _code_actions(session: Any, linted: Any, params: types.CodeActionParams, codec: Any,
                  fix_all: bool) -> List[types.CodeAction]:
    return session.code_actions(linted, params, codec, fix_all)


def wants_fix_all(params: types.CodeActionParams) -> bool:
    """Asked for the fix-all source action: by kind, or (no kinds named) by the user rather than by the
    editor's own automatic requests (a cursor move: the light bulb shows quick fixes only)."""
    only = [str(getattr(kind, "value", kind)) for kind in params.context.only or ()]
    if only:
        return any(FIX_ALL_KIND.startswith(kind) for kind in only)
    return params.context.trigger_kind != types.CodeActionTriggerKind.Automatic


# ----------------------------------------------------------------------------- the features
def build_server() -> AscendLintServer:
    server = AscendLintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: AscendLintServer, params: types.InitializeParams) -> None:
        root = ls.workspace.root_path
        if root:
            ls.linting.root = root
        options = params.initialization_options
        if isinstance(options, dict) and "settings" in options:
            options = options["settings"]
        ls.linting.options = options

    @server.feature(types.INITIALIZED)
    async def initialized(ls: AscendLintServer, params: types.InitializedParams) -> None:
        ls.linting.configuring = True  # (documents opened meanwhile wait for the editor's settings)
        try:
            await ls.linting.configure(_KEEP)  # the engine loads on the lint thread meanwhile
        finally:
            await pull_configuration(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: AscendLintServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and SECTION in settings:
            await ls.linting.configure(settings[SECTION])
            ls.linting.relint_all()
        else:
            await pull_configuration(ls)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AscendLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.linting.want(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AscendLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.linting.edited(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AscendLintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if os.path.basename(ls.path_of(uri)) in CONFIG_FILES:  # a saved configuration applies from now on
            ls.linting.after(ls.linting.run(_forget))
        elif ls.open_document(uri) is not None:
            ls.linting.cancel_timer(uri)
            ls.linting.want(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AscendLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.linting.closed(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: AscendLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        paths = [ls.path_of(change.uri) for change in params.changes]
        ls.linting.after(ls.linting.run(_files_changed, paths))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND]))
    async def code_action(ls: AscendLintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
        uri = params.text_document.uri
        fix_all = wants_fix_all(params)
        linted = await ls.linting.current(uri, whole=fix_all)
        document = ls.open_document(uri)
        if linted is None or document is None:
            return []
        actions = await ls.linting.run(_code_actions, linted, params, document.position_codec, fix_all)
        document = ls.open_document(uri)
        if document is None or document.version != linted.version:
            return []  # (edited meanwhile: these edits are of an older text)
        return actions

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: AscendLintServer, params: types.HoverParams) -> Optional[types.Hover]:
        uri = params.text_document.uri
        linted, document, session = ls.linting.linted.get(uri), ls.open_document(uri), ls.linting.session
        if linted is None or document is None or session is None:
            return None
        return session.hover(linted, params.position, document.position_codec)

    return server


async def pull_configuration(ls: AscendLintServer) -> None:
    """Ask the client for the `ascend-lint` section, if it can answer; then lint the open documents."""
    caps = ls.client_capabilities.workspace
    linting = ls.linting
    if caps is not None and caps.configuration:
        linting.configuring = True
        try:
            answer = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)]))
        except Exception as exc:  # a client that cannot answer: keep the settings we have
            log.warning("workspace/configuration failed: %s", exc)
            answer = None
        if answer and answer[0] is not None:
            await linting.configure(answer[0])
    linting.configuring = False
    linting.relint_all()


def main() -> int:
    """Serve on stdin/stdout; 0 after `shutdown` then `exit` (the LSP exit code), 1 otherwise."""
    server = build_server()
    server.start_io()
    server.linting.executor.shutdown(wait=False, cancel_futures=True)
    return 0 if server.protocol._shutdown else 1
