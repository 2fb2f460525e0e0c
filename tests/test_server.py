"""`ascend-lint server` end to end, as an editor drives it: a real process over a stdio pipe (pytest-lsp)."""
from __future__ import annotations

import asyncio
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")  # Python >= 3.10; installed by the test extra
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402

from conftest import STEP_CALL, STEP_TRAIN, STEP_UTILS  # noqa: E402

SERVER = [sys.executable, "-m", "ascend_lint", "server"]
SOURCE = textwrap.dedent("""\
    import torch
    import torch_npu

    optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        y = torch.transpose(x, -2, -1).contiguous() @ w
""")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.ascend-lint]\nignore = ["ASC4"]\n')
    (tmp_path / "train.py").write_text(SOURCE)
    return tmp_path


def recording_client() -> LanguageClient:
    """pytest-lsp's client, also recording every publication: client.published = [(uri, version, codes)]."""
    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append((params.uri, params.version, [d.code for d in params.diagnostics]))

    client = LanguageClient(converter_factory=default_converter)
    client.published = []
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    return client


def published(client: LanguageClient, uri: str) -> list:
    """(version, codes) of each publication for `uri`, in order."""
    return [(version, codes) for u, version, codes in client.published if u == uri]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=recording_client))
async def client(lsp_client: LanguageClient, project: Path):
    lsp_client.set_configuration({"preview": True}, section="ascend-lint")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=project.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=project.as_uri(), name="project")],
    ))
    yield
    await lsp_client.shutdown_session()


async def open_document(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return uri


def apply(text: str, edits) -> str:
    """Apply LSP text edits (ASCII text here: UTF-16 units are characters)."""
    lines = text.splitlines(keepends=True) + [""]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    offset = lambda p: starts[p.line] + p.character  # noqa: E731
    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


async def actions_at(client: LanguageClient, uri: str, line: int, only=None):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=only)))


@pytest.mark.asyncio
async def test_diagnostics_code_actions_edit_and_shutdown(client: LanguageClient, project: Path):
    uri = await open_document(client, project / "train.py", SOURCE)
    diagnostics = client.diagnostics[uri]
    assert sorted(d.code for d in diagnostics) == ["ASC101", "ASC307"]
    fused = next(d for d in diagnostics if d.code == "ASC307")
    assert fused.source == "ascend-lint" and fused.range.start == types.Position(line=5, character=4)
    assert fused.code_description.href.endswith("#asc307-fused-optimizer-set-to-none")

    # the safe fix is the preferred quick fix; applying its edit fixes the finding
    actions = await actions_at(client, uri, 5)
    fix = next(a for a in actions if a.is_preferred)
    assert fix.kind == types.CodeActionKind.QuickFix and fix.title.startswith("ASC307")
    fixed = apply(SOURCE, fix.edit.changes[uri])
    assert "zero_grad(set_to_none=False)" in fixed
    suppress = next(a for a in actions if "noqa" in a.title)
    assert "# noqa: ASC307" in apply(SOURCE, suppress.edit.changes[uri])

    # the client applies the fix as an incremental change: the diagnostic goes away
    edit = fix.edit.changes[uri][0]
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)]))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in client.diagnostics[uri]] == ["ASC101"]

    # hover explains the rule from its docs
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=6, character=10)))
    assert "## ASC101 `contiguous-after-view`" in hover.contents.value and "What it does" in hover.contents.value


@pytest.mark.asyncio
async def test_unsafe_fix_is_labelled_and_fix_all_is_offered(client: LanguageClient, project: Path):
    source = "import torch\nimport torch_npu\nopt = torch.optim.Adam(model.parameters())\n" + SOURCE.split("\n", 3)[3]
    uri = await open_document(client, project / "other.py", source)
    unsafe = [a for a in await actions_at(client, uri, 2) if a.title.startswith("ASC301") and "noqa" not in a.title]
    assert unsafe and not unsafe[0].is_preferred and "(unsafe fix: review the change)" in unsafe[0].title
    assert "NpuFusedAdam" in apply(source, unsafe[0].edit.changes[uri])
    fix_all = await actions_at(client, uri, 0, only=[types.CodeActionKind.SourceFixAll])
    assert len(fix_all) == 1 and fix_all[0].kind == "source.fixAll.ascend-lint"
    result = apply(source, fix_all[0].edit.changes[uri])
    assert "set_to_none=False" in result and "NpuFusedAdam" not in result  # safe fixes only


@pytest.mark.asyncio
async def test_settings_from_the_workspace_and_the_project(client: LanguageClient, project: Path):
    # pyproject.toml ignores ASC4; the workspace setting preview = true enables the preview rule ASC001
    source = "import torch\nx = torch.ones(2, dtype=torch.float64)  # noqa: ASC990\n"
    uri = await open_document(client, project / "settings.py", source)
    assert [d.code for d in client.diagnostics[uri]] == ["ASC001"]
    assert list(client.diagnostics[uri][0].tags) == [types.DiagnosticTag.Unnecessary]

    client.set_configuration({"preview": False}, section="ascend-lint")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []


@pytest.mark.asyncio
async def test_syntax_error_is_one_diagnostic_and_close_clears(client: LanguageClient, project: Path):
    uri = await open_document(client, project / "broken.py", "import torch, torch_npu\ny = torch.transpose(x, 1, 2).contiguous(\n")
    (diag,) = client.diagnostics[uri]
    assert diag.code == "ASC000" and diag.severity == types.DiagnosticSeverity.Error
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []


def test_server_without_pygls_says_how_to_install(tmp_path):
    import subprocess

    blocker = tmp_path / "pygls"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('blocked', name='pygls')\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(SERVER, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and 'pip install "ascend-lint[server] @ git+' in proc.stderr


@pytest.mark.asyncio
async def test_positions_are_utf16_and_noqa_codes_hover(client: LanguageClient, project: Path):
    source = 'import torch, torch_npu\ny = ("\U0001F600", torch.transpose(x, -2, -1).contiguous() @ w)  # noqa: ASC307\n'
    uri = await open_document(client, project / "emoji.py", source)
    (diag,) = [d for d in client.diagnostics[uri] if d.code == "ASC101"]
    assert diag.range.start.character == len('y = ("\U0001F600", ') + 1  # the emoji is two UTF-16 units
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=1, character=source.splitlines()[1].index("ASC307") + 1 + 2)))
    assert "## ASC307" in hover.contents.value


# ------------------------------------------------------------------------------ the project model
UTILS, CALL = STEP_UTILS, STEP_CALL
TRAIN = STEP_TRAIN.replace("{module}", "utils")


async def diagnostics_until(client: LanguageClient, uri: str, predicate, timeout: float = 60.0):
    """Poll the published diagnostics until the document's satisfy `predicate`. (Not by waiting for the next
    publication: one that arrives before the waiter is registered would be missed, and if it was the last
    one the wait never ends.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (uri in client.diagnostics and predicate([d.code for d in client.diagnostics[uri]])):
        assert loop.time() < deadline, f"diagnostics of {uri}: {[d.code for d in client.diagnostics.get(uri, [])]}"
        await asyncio.sleep(0.02)
    return [d.code for d in client.diagnostics[uri]]


def replace_all(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


@pytest.mark.asyncio
async def test_editing_the_step_loop_changes_a_helpers_diagnostics(client: LanguageClient, project: Path):
    """utils.py's helper synchronizes; it is per-step only while train.py's step loop calls it. The
    server lints utils.py again when train.py's buffer changes that answer, and leaves other files alone."""
    (project / "utils.py").write_text(UTILS)
    (project / "train.py").write_text(TRAIN.format(call=""))
    (project / "other.py").write_text("import torch\nimport torch_npu\n\nx = torch.ones(2)\n")
    utils = await open_document(client, project / "utils.py", UTILS)
    other = await open_document(client, project / "other.py", (project / "other.py").read_text())
    assert "ASC202" not in await diagnostics_until(client, utils, lambda codes: True)

    # the buffer (not saved) starts calling the helper in the step loop: utils.py's sync becomes hot
    train = train_uri = (project / "train.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=train, language_id="python", version=1, text=TRAIN.format(call=CALL))))
    await diagnostics_until(client, utils, lambda codes: "ASC202" in codes)
    (hot,) = [d for d in client.diagnostics[utils] if d.code == "ASC202"]
    assert "the step loop in `train.py:7` calls it" in hot.message and hot.range.start.line == 5

    # a burst of edits that removes the call: the newest version wins (no older one is published after a
    # newer one), and utils.py follows once the whole file is linted again
    for version, text in enumerate([TRAIN.format(call="        log_metr\n"), TRAIN.format(call="")], start=2):
        replace_all(client, train_uri, version, text)
    assert "ASC202" not in await diagnostics_until(client, utils, lambda codes: "ASC202" not in codes)
    versions = [version for version, _ in published(client, train)]
    assert versions == sorted(versions) and versions[-1] == 3, versions

    # moving the loop down two lines changes only where the reason points
    replace_all(client, train_uri, 4, "\n\n" + TRAIN.format(call=CALL))
    await diagnostics_until(client, utils, lambda codes: "ASC202" in codes)
    assert "`train.py:9` calls it" in client.diagnostics[utils][0].message

    # closing the unsaved buffer: the file on disk (no call) is the project's fact again
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=train)))
    await diagnostics_until(client, utils, lambda codes: "ASC202" not in codes)
    assert len(published(client, other)) == 1  # never linted again: none of its answers changed


@pytest.mark.asyncio
async def test_a_nested_configuration_applies_in_the_editor(client: LanguageClient, project: Path):
    """The closest configuration to the file, with what it extends (the root ignores ASC4)."""
    (project / "sub").mkdir()
    (project / "sub" / ".ascend-lint.yaml").write_text("extend: ../pyproject.toml\nignore: [ASC307]\n")
    uri = await open_document(client, project / "sub" / "train.py", SOURCE)
    assert [d.code for d in client.diagnostics[uri]] == ["ASC101"]
    (project / "sub" / ".ascend-lint.yaml").write_text("extend: ../pyproject.toml\nignore: [ASC101]\n")
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=(project / "sub" / ".ascend-lint.yaml").as_uri())))
    assert await diagnostics_until(client, uri, lambda codes: codes == ["ASC307"]) == ["ASC307"]


# ------------------------------------------------------------------------------ keeping up (issues #27, #30)
_spec = importlib.util.spec_from_file_location("bench_lsp", Path(__file__).parent.parent / "bench" / "lsp.py")
bench_lsp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_lsp)  # type: ignore[union-attr]


async def started(project: Path, settings=None) -> LanguageClient:
    """A server process driven by pytest-lsp's client (recording every publication), initialised."""
    client = await ClientServerConfig(server_command=SERVER, client_factory=recording_client).start()
    client.set_configuration(settings or {}, section="ascend-lint")
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=project.as_uri()))
    return client


async def finished(client: LanguageClient) -> int:
    """shutdown, exit: the server's exit code."""
    await client.shutdown_session()
    code = client._server.returncode
    await client.stop()
    return code


async def publication(client: LanguageClient, uri: str, version: int, timeout: float = 60.0) -> list:
    """The codes of the first publication of `version` of the document (polled, see diagnostics_until)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = [codes for u, v, codes in client.published if u == uri and v == version]
        if found:
            return found[0]
        assert loop.time() < deadline, f"no publication of version {version}: {published(client, uri)}"
        await asyncio.sleep(0.01)


def edit(uri: str, version: int, line: int, text: str, end: int) -> types.DidChangeTextDocumentParams:
    """Lines line..end (0-based, end excluded) replaced with `text`, as an incremental change."""
    rng = types.Range(start=types.Position(line=line, character=0), end=types.Position(line=end, character=0))
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=rng, text=text)])


def check_codes(project: Path, name: str, text: str) -> list:
    """The codes `ascend-lint check` reports for `text` as the file `name` of the project, by line."""
    import json
    import subprocess

    (project / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "ascend_lint", "check", "--output-format", "json", "--no-cache",
                           name], cwd=project, capture_output=True, text=True, timeout=120)
    assert proc.stdout, proc.stderr
    return sorted((f["location"]["row"] - 1, f["code"]) for f in json.loads(proc.stdout))


@pytest.mark.asyncio
async def test_end_to_end_edits_syntax_error_fix_all_and_exit_code(tmp_path: Path):
    """initialize, didOpen, diagnostics; an edit inside a function (its scope linted at once, the whole file
    once the edits pause: what `check` reports); an edit that breaks the file keeps the diagnostics, with one
    more at the syntax error; fix-all; shutdown and exit: exit code 0."""
    (tmp_path / "pyproject.toml").write_text("[tool.ascend-lint]\n")
    source = bench_lsp.training_module(300)
    lines = source.splitlines(keepends=True)
    client = await started(tmp_path)
    uri = (tmp_path / "train_module.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=source)))
    opened = await publication(client, uri, 1)
    assert {"ASC101", "ASC307", "ASC501"} <= set(opened)

    at = [i for i, line in enumerate(lines) if "loss.backward()" in line][1] + 1  # in a step loop: a save
    saving = '            torch.save(model, "every_step.pt")\n'
    client.text_document_did_change(edit(uri, 2, at, saving, at))
    assert sorted(await publication(client, uri, 2)) == sorted(opened + ["ASC501"])
    edited = "".join(lines[:at] + [saving] + lines[at:])
    expected = check_codes(tmp_path, "as_checked.py", edited)
    await diagnostics_until(client, uri, lambda codes: sorted(  # (and so after the lint of the whole file)
        (d.range.start.line, d.code) for d in client.diagnostics[uri]) == expected)
    assert published(client, uri)[-1][0] == 2

    backward = next(i for i, line in enumerate(edited.splitlines()) if "loss.backward()" in line)
    client.text_document_did_change(edit(uri, 3, backward, "            loss.backward(\n", backward + 1))
    broken = await publication(client, uri, 3)
    assert broken.count("ASC000") == 1 and sorted(c for c in broken if c != "ASC000") == sorted(
        code for _, code in expected)
    (error,) = [d for d in client.diagnostics[uri] if d.code == "ASC000"]
    assert "syntax error" in error.message and error.severity == types.DiagnosticSeverity.Error
    client.text_document_did_change(edit(uri, 4, backward, "            loss.backward()\n", backward + 1))
    assert "ASC000" not in await publication(client, uri, 4)

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll])))
    (fix_all,) = actions
    assert fix_all.kind == "source.fixAll.ascend-lint"
    fixed = apply(edited, fix_all.edit.changes[uri])
    assert "set_to_none=True" not in fixed and fixed.count("set_to_none=False") == edited.count("set_to_none=True")
    versions = [version for version, _ in published(client, uri)]
    assert versions == sorted(versions)  # never an older version after a newer one
    assert await finished(client) == 0


async def raw_request(client: LanguageClient, method: str, params: dict):
    """Send a request as it is (the client's own methods check their params), and wait for the answer."""
    future = asyncio.get_running_loop().create_future()
    msg_id = "raw-1"
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(future, 30)


@pytest.mark.asyncio
async def test_every_request_is_answered(tmp_path: Path):
    """Invalid params: an InvalidParams error (pygls alone never answers); a document never opened: no
    actions; while a long lint runs, a request is answered before it ends; after shutdown: InvalidRequest."""
    from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest

    (tmp_path / "pyproject.toml").write_text("[tool.ascend-lint]\n")
    client = await started(tmp_path)
    with pytest.raises(JsonRpcInvalidParams):  # (a hover without its position, sent as raw JSON)
        await raw_request(client, types.TEXT_DOCUMENT_HOVER, {"textDocument": {"uri": "file:///x.py"}})
    nowhere = types.TextDocumentIdentifier(uri=(tmp_path / "never_opened.py").as_uri())
    client.protocol._send_data({"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_OPEN, "params": {}})  # (bad)
    client.text_document_did_change(edit(nowhere.uri, 2, 0, "x = (\n", 0))  # a document never opened
    assert not await client.text_document_code_action_async(types.CodeActionParams(
        text_document=nowhere, range=types.Range(start=types.Position(line=0, character=0),
                                                 end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[])))

    small = await open_document(client, tmp_path / "small.py", SOURCE)
    big = (tmp_path / "big.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=big, language_id="python", version=1, text=bench_lsp.training_module(5000))))
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=small), position=types.Position(line=6, character=10)))
    answered_before = [u for u, _, _ in client.published].count(big) == 0
    assert "ASC101" in hover.contents.value and answered_before
    await publication(client, big, 1)

    await client.shutdown_async(None)
    with pytest.raises(JsonRpcInvalidRequest):
        await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=small), position=types.Position(line=6, character=10)))
    client.exit(None)
    await client._server.wait()
    assert client._server.returncode == 0
    await client.stop()


@pytest.mark.asyncio
async def test_a_buffer_over_max_file_size_is_one_diagnostic_and_a_log_message(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.ascend-lint]\nmax-file-size = "1 KB"\n')
    client = await started(tmp_path)
    uri = await open_document(client, tmp_path / "huge.py", bench_lsp.training_module(200))
    (diag,) = client.diagnostics[uri]
    assert diag.code == "ASC000" and "file too large" in diag.message and "max-file-size" in diag.message
    await diagnostics_until(client, uri, lambda codes: any(
        "file too large" in m.message for m in client.log_messages))
    assert await finished(client) == 0


def test_the_server_knows_the_configuration_file_names_without_loading_them():
    from ascend_lint.config import CONFIG_NAMES
    from ascend_lint.server import CONFIG_FILES

    assert set(CONFIG_FILES) == set(CONFIG_NAMES)


def test_the_server_module_loads_no_engine():
    """`initialize` is answered before the engine and the rule packs load (they load on the lint thread)."""
    import subprocess

    script = ("import sys\nbefore = set(sys.modules)\nimport ascend_lint.server\n"
              "print(sorted(m for m in set(sys.modules) - before if m.startswith(('ascend_lint.', 'plugins', 'libcst'))))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "['ascend_lint.server']", proc.stderr
