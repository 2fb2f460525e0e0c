"""Fix work per file stays one pass whatever the number of findings; the fixer trusts no cached fix; the
`--diff` / `--fix-only` summaries say what was held back or refused (ruff's words)."""
from __future__ import annotations

import json
import os

import pytest

from ascend_lint import cli
from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter, parse
from ascend_lint.fix import engine, fixer, preview
from ascend_lint.fix.edits import fix_edits
from ascend_lint.fix.policy import would_fix_message
from ascend_lint.registry import load_registry

N = 300  # findings per generated file: enough to show growth, quick to run


def _linter(unsafe: bool = True) -> tuple:
    settings = Settings(preview=True, target="npu", unsafe_fixes=unsafe, select=["ASC601"])
    return Linter(load_registry().sorted_rules(), settings), settings


def _module_level(n: int) -> str:
    return "import torch\n\n" + "".join(f"x{i} = torch.zeros({i}).cuda()\n" for i in range(n))


def _in_one_function(n: int) -> str:
    return "import torch\n\n\ndef f():\n" + "".join(f"    x{i} = torch.zeros({i}).cuda()\n" for i in range(n)) \
        + "    return 0\n"


def _one_list(n: int) -> str:
    return "import torch\n\nxs = [" + ", ".join(f"torch.zeros({i}).cuda()" for i in range(n)) + "]\n"


SOURCES = {"module level": _module_level, "one function": _in_one_function, "one list on one line": _one_list}


@pytest.fixture
def counted(monkeypatch):
    """Count the passes over a file and the libcst parses of its chunks."""
    from ascend_lint.fix import resolve

    monkeypatch.setattr(engine, "PASSES", [0])
    monkeypatch.setattr(resolve, "PARSES", [0])
    resolve._PARSES.clear()
    return lambda: (engine.PASSES[0], resolve.PARSES[0])


def _parsed_chunks_held(monkeypatch) -> list:
    """The most chunks holding a libcst parse at once, recorded at every fix resolved (issue #30: memory)."""
    held = [0]
    resolve = engine.FilePass.resolve

    def counting(self, *args, **kwargs):
        found = resolve(self, *args, **kwargs)
        held[0] = max(held[0], sum(1 for c in self.chunks.values() if c.resolver is not None))
        return found

    monkeypatch.setattr(engine.FilePass, "resolve", counting)
    return held


@pytest.mark.parametrize("json_edits", [False, True], ids=["fix", "json"])
def test_a_pass_holds_a_bounded_number_of_parsed_chunks(monkeypatch, counted, json_edits):
    """Many findings at module level: chunks of at most CHUNK_LINES lines, each parsed once and let go when no
    later fix touches it; the result is the one a single whole-file chunk gives."""
    linter, settings = _linter()
    src = _module_level(N)
    findings = linter.check(src, "m.py")

    def run() -> object:
        if json_edits:
            edits = preview.FileEdits(src, parse(src, "m.py"), findings)
            return [edits.edits(f) for f in findings]
        return fixer.fix_text(src, "m.py", findings, linter, settings).text

    monkeypatch.setattr(engine, "CHUNK_LINES", 10 ** 9)
    whole = run()
    held = _parsed_chunks_held(monkeypatch)
    monkeypatch.setattr(engine, "CHUNK_LINES", 25)
    before = counted()[1]
    assert run() == whole
    chunks = -(-N // 25)
    assert counted()[1] - before <= chunks + 1  # each chunk parsed once (+1: the fixer's check of its result)
    assert held[0] <= engine.LIVE_CHUNKS + 1, held  # (with every chunk kept: 12)


@pytest.mark.parametrize("shape", sorted(SOURCES))
def test_fix_makes_one_pass_and_one_parse_per_file(shape, counted):
    linter, settings = _linter()
    src = SOURCES[shape](N)
    findings = linter.check(src, "m.py")
    assert len(findings) == N
    done = fixer.fix_text(src, "m.py", findings, linter, settings)
    assert len(done.applied) == N and done.text.count(".npu()") == N and not done.warnings
    assert counted() == (1, 1)


@pytest.mark.parametrize("shape", sorted(SOURCES))
def test_json_edits_of_every_finding_come_from_one_parse(shape, counted):
    linter, settings = _linter()
    src = SOURCES[shape](N)
    findings = linter.check(src, "m.py")
    edits = preview.FileEdits(src, parse(src, "m.py"), findings)
    got = [edits.edits(f) for f in findings]
    assert counted() == (0, 1) and edits.whole_file == 0
    for i in (0, 1, N // 2, N - 1):  # the same edits as the fix applied alone to the whole file
        assert got[i] == fix_edits(src, findings[i], parse(src, "m.py"))
    assert all(e[-1].content == "npu" for e in got)
    assert all(e[0].content == "import torch_npu  # noqa: F401\n" and e[0].line == 2 for e in got)


def test_json_edits_fall_back_to_the_whole_file_where_the_local_rendering_does_not_apply():
    """A fix whose output does not parse where it stands (an assignment target) gets no edits, as alone."""
    linter, _ = _linter()
    src = "import torch\n\nx = torch.zeros(3).cuda()\ny = torch.zeros(3).cuda() if x else 0\n"
    findings = linter.check(src, "m.py")
    edits = preview.FileEdits(src, parse(src, "m.py"), findings)
    for f in findings:
        assert edits.edits(f) == fix_edits(src, f, parse(src, "m.py"))


# ----------------------------------------------------------------------------- the cache holds no fix to trust
def _tamper(cache_dir: str, path: str) -> int:
    """Make every cached fix of `path` a safe fix writing `BAD` over the finding; how many were changed."""
    changed = 0
    for folder, _, files in os.walk(cache_dir):
        for name in files:
            full = os.path.join(folder, name)
            try:
                with open(full, encoding="utf-8") as handle:
                    data = json.load(handle)
            except (ValueError, UnicodeDecodeError):
                continue
            entry = data.get("entries", {}).get(os.path.abspath(path)) if isinstance(data, dict) else None
            if not entry:
                continue
            for finding in entry[3]:
                line, col, end_line, end_col = finding[:4]  # (columns 1-based; an edit's are 0-based)
                span = [line, col - 1, end_line, end_col - 1]
                finding[8] = ["safe", "crafted", [["replace", span, "BAD()", ""]], []]
                changed += 1
            with open(full, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
    return changed


def test_fix_never_writes_a_fix_read_from_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    src = "import torch\n\nx = torch.zeros(3).cuda()\n"
    (tmp_path / "m.py").write_text(src)
    args = ["check", "--isolated", "--preview", "--target", "npu", "--select", "ASC601",
            "--cache-dir", str(tmp_path / "cache")]
    assert cli.main(args + ["m.py"]) == 1  # fills the cache
    assert _tamper(str(tmp_path / "cache"), "m.py") == 1
    capsys.readouterr()
    cli.main(args + ["--output-format", "concise", "m.py"])
    assert "ASC601" in capsys.readouterr().out  # the cache is read (the finding is still reported)
    cli.main(args + ["--fix", "m.py"])
    assert (tmp_path / "m.py").read_text() == src  # the real fix is unsafe: nothing written
    cli.main(args + ["--fix", "--unsafe-fixes", "m.py"])
    fixed = (tmp_path / "m.py").read_text()
    assert "BAD" not in fixed and "torch.zeros(3).npu()" in fixed  # the fix derived from the file


# ----------------------------------------------------------------------------- what the summaries say
def test_would_fix_message_words_it_as_ruff_does():
    assert would_fix_message(3, 0) == "Would fix 3 findings."
    assert would_fix_message(1, 2) == "Would fix 1 finding (2 additional fixes available with `--unsafe-fixes`)."
    assert would_fix_message(0, 1) == "No findings would be fixed (1 fix available with `--unsafe-fixes`)."
    assert would_fix_message(0, 0) == "No findings would be fixed."


def test_diff_counts_the_unsafe_fixes_it_holds_back(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(_module_level(3))
    code = cli.main(["check", "--isolated", "--no-cache", "--preview", "--target", "npu", "--select", "ASC601",
                     "--diff", "m.py"])
    out, err = capsys.readouterr()
    assert code == 0 and out == ""
    assert err == "No findings would be fixed (3 fixes available with `--unsafe-fixes`).\n"


def test_diff_says_which_files_it_could_not_show(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    name = "bad\u202ename.py"  # a bidi control: no unified diff can carry this name safely
    (tmp_path / name).write_text(_module_level(2))
    code = cli.main(["check", "--isolated", "--no-cache", "--preview", "--target", "npu", "--select", "ASC601",
                     "--unsafe-fixes", "--diff", name])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""  # the file would still change
    assert "no diff shown" in err and "Would fix" not in err
    assert err.endswith("No findings would be fixed.\nNo diff shown for 1 file with fixes (see the errors above).\n")


def test_fix_only_counts_the_unsafe_fixes_it_holds_back(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(_module_level(2))
    code = cli.main(["check", "--isolated", "--no-cache", "--preview", "--target", "npu", "--select", "ASC601",
                     "--fix-only", "m.py"])
    out, _ = capsys.readouterr()
    assert code == 0 and out == "No findings fixed (2 fixes available with `--unsafe-fixes`).\n"


def test_diff_does_not_count_fixes_in_files_it_refused(tmp_path, monkeypatch, capsys):
    """Issue #30: `--diff` said "Would fix 3" when every file's fixes were refused."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(_module_level(3))

    def refuse(*_args, **_kwargs):
        raise engine.CannotFix("cannot apply fixes ASC601: internal error (test); file left as it was")

    monkeypatch.setattr(fixer, "apply_once", refuse)
    code = cli.main(["check", "--isolated", "--no-cache", "-j", "1", "--preview", "--target", "npu", "--select",
                     "ASC601", "--unsafe-fixes", "--diff", "a.py", "b.py"])
    out, err = capsys.readouterr()
    assert code == 0 and out == ""  # nothing would change
    assert "Would fix" not in err and err.count("file left as it was") == 2
    assert err.endswith("No findings would be fixed.\n2 files with fixes left as they were (see the warnings above).\n")


def _applied(text: str, edits) -> str:
    from ascend_lint.fileio import split_lines

    lines = split_lines(text, keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col - 1 if line - 1 < len(lines) else len(text)

    for e in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        text = text[:offset(e.line, e.col)] + e.content + text[offset(e.end_line, e.end_col):]
    return text


def test_json_edits_of_a_fix_inside_one_statement_are_those_of_the_fix_applied_alone():
    """Issue #30: json edits of fixes the one-line path does not cover (a buffer added in `__init__`, a
    statement removed, an optimizer swapped) are found on the statement, not the file; they give what
    `fix_edits` (the fix applied alone to the whole file) gives: the same edits, or, for a line removed among
    identical lines, the same text. Every fixable rule's trigger pattern, the fix fixtures, the programs."""
    import glob
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    from scaling import generate, pattern

    root = os.path.join(os.path.dirname(__file__), "fixtures")
    texts = [open(p, encoding="utf-8", errors="replace").read()
             for p in sorted(glob.glob(os.path.join(root, "fixes", "*.in.py")) +
                             glob.glob(os.path.join(root, "programs", "*.py")))]
    rules = load_registry().sorted_rules()
    texts += [generate(pattern(r), shape, 5) for r in rules if r.fix_applicability is not None and r.pack != "core"
              for shape in ("module", "function")]
    total = whole_file = 0
    for target in ("auto", "npu"):
        linter = Linter(rules, Settings(preview=True, target=target, unsafe_fixes=True))
        for text in texts:
            try:
                tree = parse(text, "m.py")
            except Exception:
                continue
            findings = [f for f in linter.check(text, "m.py", tree) if f.fix is not None]
            edits = preview.FileEdits(text, tree, findings)
            for finding in findings:
                mine, alone = edits.edits(finding), fix_edits(text, finding, tree)
                assert mine == alone or (mine is not None and alone is not None and
                                         _applied(text, mine) == _applied(text, alone)), (finding, mine, alone)
            total += len(findings)
            whole_file += edits.whole_file
    assert total > 500 and whole_file < total // 10
