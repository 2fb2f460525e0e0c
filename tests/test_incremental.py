"""An edited buffer (pipeline/incremental.py, lint_buffer's `previous`/`scoped`/`stop`): the reused parse is
the parse of the whole text, a scoped lint of an edit inside function bodies finds what a whole lint finds,
a text that does not parse keeps the last good findings next to its syntax error, and a buffer over
`max-file-size` is not linted."""
from __future__ import annotations

import ast
import glob
import importlib.util
import os
import random
from pathlib import Path

import pytest

from ascend_lint.config import ConfigResolver, load_settings
from ascend_lint.engine.walker import Stopped
from ascend_lint.fileio import SourceError
from ascend_lint.pipeline.incremental import Parsed, reparse
from ascend_lint.pipeline.run import LINTED, SCOPED, SYNTAX_ERROR, TOO_LARGE, lint_buffer
from ascend_lint.pipeline.workspace import Workspace
from ascend_lint.registry import load_registry

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_lsp", os.path.join(HERE, "..", "bench", "lsp.py"))
bench_lsp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_lsp)  # type: ignore[union-attr]
SNIPPETS = ["x = 1\n", "    y = foo(\n", "    return 3\n", "\n", "def g():\n    pass\n", "  ", ")",
            "class K:\n    def forward(self):\n        pass\n", "# c\n", "    z = t.transpose(1, 2).contiguous()\n",
            "@dec\n", "'''\n", "        torch.save(m, 'p')\n"]


def _edit(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines) + 1)
    op = rng.random()
    if op < 0.35:
        lines[i:i] = [rng.choice(SNIPPETS)]
    elif op < 0.6 and i < len(lines):
        del lines[i:i + rng.randrange(1, 4)]
    elif i < len(lines):
        line = lines[i]
        k = rng.randrange(len(line) + 1)
        lines[i] = line[:k] + rng.choice(["a", "(", " ", "", "1", ":", "\n"]) + line[k + 1:]
    return "".join(lines)


def test_a_reused_parse_is_the_parse_of_the_whole_text():
    """Random edits (many of which break the file) on real files: the tree reparse gives, positions
    included, is ast.parse's; a text that does not parse raises and leaves the previous tree usable."""
    rng = random.Random(27)
    files = sorted(glob.glob(os.path.join(HERE, "..", "examples", "*.py")))
    files += [os.path.join(HERE, "..", "ascend_lint", "pipeline", "run.py")]
    scoped = 0
    for path in files:
        text = Path(path).read_text()
        parsed = Parsed.of(text, ast.parse(text))
        for _ in range(60):
            new = _edit(text, rng)
            try:
                want = ast.dump(ast.parse(new), include_attributes=True)
            except SyntaxError:
                want = None
            try:
                got, change = reparse(parsed, new, path)
            except SourceError:
                assert want is None
                continue
            assert ast.dump(got.tree, include_attributes=True) == want
            scoped += change.scoped
            parsed, text = got, new
    assert scoped > 20  # (edits inside function bodies are common)


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ascend-lint]\npreview = true\n")
    return Workspace(ConfigResolver(load_settings(None, False, str(tmp_path))), load_registry(), [str(tmp_path)],
                     cache=False)


def _keys(findings):
    """Comparable findings, their fixes (edit spans: moved with the edit) included."""
    return sorted((f.line, f.col, f.end_line, f.end_col, f.code, f.message, repr(f.fix)) for f in findings)


def test_a_scoped_lint_of_an_edit_inside_a_function_finds_what_a_whole_lint_finds(workspace, tmp_path):
    path = str(tmp_path / "train_module.py")
    text = bench_lsp.training_module(400)
    result = lint_buffer(workspace, path, text, scoped=True)
    assert result.status == LINTED and result.findings
    lines = text.splitlines(keepends=True)
    forwards = bench_lsp.sync_lines(text)
    backward = next(i for i, line in enumerate(lines) if "loss.backward()" in line)
    edits = [(forwards[1], forwards[1], ["        z = x.transpose(1, 2).contiguous()\n"]),  # a new finding
             (forwards[1], forwards[1] + 1, ["        z = x.transpose(0, 1).contiguous()\n"]),  # changed
             (forwards[1], forwards[1] + 1, []),  # removed again
             (backward + 1, backward + 1, ["            torch.save(model, 'a.pt')\n"] * 3),  # three lines in a loop
             (forwards[3], forwards[3] + 1, ["        torch.cuda.synchronize()\n"])]
    for first, end, new in edits:
        lines[first:end] = new
        text = "".join(lines)
        result = lint_buffer(workspace, path, text, previous=result, scoped=True)
        assert result.status == SCOPED
        whole = lint_buffer(workspace, path, text)
        assert _keys(result.findings) == _keys(whole.findings)


def test_an_edit_outside_function_bodies_lints_the_whole_file(workspace, tmp_path):
    path = str(tmp_path / "m.py")
    text = bench_lsp.training_module(200)
    result = lint_buffer(workspace, path, text)
    for new in (text.replace("import os\n", "import os\nimport sys\n"),  # an import
                text.replace("def train_0(", "def train_zero(")):  # a function's name
        result = lint_buffer(workspace, path, new, previous=result, scoped=True)
        assert result.status == LINTED and _keys(result.findings) == _keys(lint_buffer(workspace, path, new).findings)


def test_a_syntax_error_keeps_the_last_good_findings_moved_with_the_edits(workspace, tmp_path):
    path = str(tmp_path / "m.py")
    text = bench_lsp.training_module(200)
    good = lint_buffer(workspace, path, text)
    lines = text.splitlines(keepends=True)
    backward = next(i for i, line in enumerate(lines) if "loss.backward()" in line)
    broken = "".join(["\n", "\n"] + lines[:backward] + ["            loss.backward(\n"] + lines[backward + 1:])
    result = lint_buffer(workspace, path, broken, previous=good, scoped=True)
    assert result.status == SYNTAX_ERROR
    errors = [f for f in result.findings if f.code == "ASC000"]
    assert len(errors) == 1 and "syntax error" in errors[0].message
    kept = [f for f in result.findings if f.code != "ASC000"]
    assert [(f.line, f.code) for f in kept] == [(f.line + 2, f.code) for f in good.findings]
    # still broken, then mended: the findings follow, and the whole file is linted again
    again = lint_buffer(workspace, path, broken.replace("\n\n", "\n", 1), previous=result, scoped=True)
    assert [(f.line, f.code) for f in again.findings if f.code != "ASC000"] == [
        (f.line + 1, f.code) for f in good.findings]
    mended = lint_buffer(workspace, path, text, previous=again, scoped=True)
    assert mended.status == LINTED and _keys(mended.findings) == _keys(good.findings)


def test_a_buffer_over_max_file_size_is_one_finding_not_a_lint(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ascend-lint]\nmax-file-size = "1 KB"\n')
    workspace = Workspace(ConfigResolver(load_settings(None, False, str(tmp_path))), load_registry(),
                          [str(tmp_path)], cache=False)
    result = lint_buffer(workspace, str(tmp_path / "m.py"), bench_lsp.training_module(100))
    assert result.status == TOO_LARGE
    (finding,) = result.findings
    assert finding.code == "ASC000" and "file too large" in finding.message and "max-file-size" in finding.message


def test_a_stopped_lint_raises_and_the_next_one_starts_afresh(workspace, tmp_path):
    path = str(tmp_path / "m.py")
    text = bench_lsp.training_module(200)
    first = lint_buffer(workspace, path, text)
    moved = "\n" + text
    with pytest.raises(Stopped):
        lint_buffer(workspace, path, moved, previous=first, stop=lambda: True)
    again = lint_buffer(workspace, path, moved, previous=first)  # (the stopped lint used up its parse)
    assert _keys(again.findings) == _keys(lint_buffer(workspace, path, moved).findings)


@pytest.mark.parametrize("preview", [False, True])
def test_an_editors_fix_all_is_what_fix_writes(tmp_path, preview, monkeypatch):
    """fix_buffer (the document's lint as the first round; the rewritten statements alone parsed and linted
    again) gives the text fix_text gives from scratch (parse, lint, parse and lint each round's output), and
    its spliced trees are ast.parse's."""
    from ascend_lint.fix import fixer
    from ascend_lint.pipeline.run import fix_buffer

    spliced = fixer._Rounds._spliced
    checked = []

    def checking(self, attempt):
        tree = spliced(self, attempt)
        if tree is not None:
            assert ast.dump(tree, include_attributes=True) == ast.dump(ast.parse(attempt.text), include_attributes=True)
            checked.append(attempt)
        return tree

    monkeypatch.setattr(fixer._Rounds, "_spliced", checking)

    (tmp_path / "pyproject.toml").write_text(f"[tool.ascend-lint]\npreview = {str(preview).lower()}\n"
                                             'target = "npu"\nunsafe-fixes = true\n')
    workspace = Workspace(ConfigResolver(load_settings(None, False, str(tmp_path))), load_registry(),
                          [str(tmp_path)], cache=False)
    sources = [bench_lsp.training_module(300)] + [Path(p).read_text() for p in sorted(
        glob.glob(os.path.join(HERE, "..", "examples", "*.py")))]
    fixed = 0
    for n, text in enumerate(sources):
        path = str(tmp_path / f"m{n}.py")
        result = lint_buffer(workspace, path, text)
        linter = result.linter
        editor = fix_buffer(result, path)
        alone = fixer.fix_text(text, path, result.findings, linter, linter.settings)
        assert editor.text == alone.text and len(editor.applied) == len(alone.applied), path
        fixed += len(editor.applied)
    assert fixed > 10 and checked
