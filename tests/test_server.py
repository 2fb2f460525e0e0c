"""`ascend-lint server` end to end, as an editor drives it: a real process over a stdio pipe (pytest-lsp)."""
from __future__ import annotations

import asyncio
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
