"""An edited buffer: parse only what the edit touched, and say which scopes to lint again.

An editor's buffer changes a few lines at a time. `reparse` keeps the top-level statements of the previous
tree that the edit left alone (those after it moved by the lines it added or removed) and parses again
only the lines from the start of the statement before the first changed line to the start of the next
untouched statement: the tree is the one `ast.parse` gives for the whole text (tested), for the cost of
parsing one function. The edit is *scoped* when it stays inside the bodies of the same functions and
classes (same names, headers, methods; no file-level `# ascend-lint: noqa`): then the rest of the file
keeps its findings (`carried`), and only the edited region is linted again (the language server's fast
path: docs/editors.md), but by the rules that decide per file, which walk the whole file.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from ..engine.linter import parse
from ..fileio import split_lines
from ..rule import Edit, Finding, Span

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPE_TYPES = FUNCTION_TYPES + (ast.ClassDef,)


@dataclass
class Parsed:
    """A text, its tree and the line ranges of its top-level statements (decorators included; statements
    sharing a line make one unit), each with the slice of `tree.body` it holds."""

    text: str
    lines: List[str]  # with their line endings, split as the tokenizer counts lines
    tree: ast.Module
    units: List[Tuple[int, int, int, int]]  # (first line, last line, first body index, end body index)
    positioned: Dict[int, List[ast.AST]] = field(default_factory=dict)  # id(top-level statement) -> its nodes

    @classmethod
    def of(cls, text: str, tree: ast.Module) -> "Parsed":
        return cls(text, split_lines(text, keepends=True), tree, _units(tree.body))

    def move(self, statements: Sequence[ast.stmt], delta: int) -> None:
        """Move top-level statements (and everything under them) `delta` lines down; each statement's nodes
        with a position are listed once, so that the moves of later edits are one loop."""
        for stmt in statements:
            nodes = self.positioned.get(id(stmt))
            if nodes is None:
                nodes = self.positioned[id(stmt)] = [n for n in ast.walk(stmt) if "lineno" in n._attributes]
            for node in nodes:
                node.lineno += delta  # type: ignore[attr-defined]
                if node.end_lineno is not None:  # type: ignore[attr-defined]
                    node.end_lineno += delta  # type: ignore[attr-defined]


@dataclass
class Change:
    """Where a new text differs from the previous one: lines `first`..`old_last` of the old text became
    `first`..`new_last` of the new one (whole top-level statements; `delta` lines more), of which the lines
    `changed` (old numbering, [lo, hi]; hi < lo when lines were only inserted) differ; `scoped`: the edit
    stays inside the bodies of the region's functions and classes."""

    first: int
    old_last: int
    new_last: int
    changed: Tuple[int, int]
    delta: int
    scoped: bool

    def new_line(self, line: int) -> int:
        """Where an old line outside the changed lines is in the new text (a changed line: clamped into
        the new version of the changed lines)."""
        lo, hi = self.changed
        if line < lo:
            return line
        if line > hi:
            return line + self.delta
        return max(lo, min(line, hi + self.delta))


def _units(body: Sequence[ast.stmt]) -> List[Tuple[int, int, int, int]]:
    units: List[Tuple[int, int, int, int]] = []
    for index, stmt in enumerate(body):
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        last = stmt.end_lineno or stmt.lineno
        if units and first <= units[-1][1]:
            prev = units[-1]
            units[-1] = (prev[0], max(prev[1], last), prev[2], index + 1)
        else:
            units.append((first, last, index, index + 1))
    return units


def line_change(old: Sequence[str], new: Sequence[str]) -> Tuple[int, int]:
    """(lines in common at the start, lines in common at the end, not overlapping the first)."""
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    return start, end


def reparse(previous: Parsed, text: str, path: str) -> Tuple[Parsed, Change]:
    """`text` parsed, reusing the statements of `previous` that the edit did not touch (they are moved, so
    `previous` must not be used afterwards); raises SourceError (positioned as a whole parse puts it) when
    the text does not parse, leaving `previous` as it was."""
    lines = split_lines(text, keepends=True)
    same_start, same_end = line_change(previous.lines, lines)
    lo, hi = same_start + 1, len(previous.lines) - same_end
    delta = len(lines) - len(previous.lines)
    units = previous.units
    before = [u for u in units if u[0] <= lo]
    first = before[-1][0] if before else 1
    after = [u for u in units if u[0] > max(hi, lo - 1, first)]
    old_last = after[0][0] - 1 if after else len(previous.lines)
    new_last = old_last + delta
    region = "".join(lines[first - 1:new_last])
    try:
        fresh = _parse_region(region, first)
    except SyntaxError:
        fresh = None
    except (ValueError, RecursionError, MemoryError):
        fresh = None
    change = Change(first, old_last, new_last, (lo, hi), delta, False)
    if fresh is None:  # (an edit that joins statements, or a syntax error: the whole text decides)
        return Parsed.of(text, parse(text, path)), change
    head = previous.tree.body[:before[-1][2]] if before else []
    old_region = previous.tree.body[len(head):after[0][2]] if after else previous.tree.body[len(head):]
    tail = previous.tree.body[after[0][2]:] if after else []
    if delta:
        previous.move(tail, delta)
    tree = ast.Module(body=head + fresh + tail, type_ignores=[])
    change.scoped = _same_scopes(old_region, fresh) and not _file_directive(previous.lines[first - 1:old_last]) \
        and not _file_directive(lines[first - 1:new_last])
    kept_nodes = {id(s): previous.positioned[id(s)] for s in head + tail if id(s) in previous.positioned}
    return Parsed(text, lines, tree, _units(tree.body), kept_nodes), change


def _parse_region(region: str, first: int) -> List[ast.stmt]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = ast.parse(region)
    if first > 1:
        ast.increment_lineno(module, first - 1)
    return module.body


def _same_scopes(old: Sequence[ast.stmt], new: Sequence[ast.stmt]) -> bool:
    """Are both the same functions and classes, with the same headers (and classes the same methods)?"""
    return len(old) == len(new) > 0 and all(
        isinstance(a, SCOPE_TYPES) and type(a) is type(b) and _header(a) == _header(b) for a, b in zip(old, new))


def _header(node: ast.stmt) -> str:
    if isinstance(node, ast.ClassDef):
        methods = [s.name for s in node.body if isinstance(s, FUNCTION_TYPES)]
        parts: list = [node.name, node.bases, node.keywords, node.decorator_list, methods]
    else:
        parts = [node.name, node.args, node.returns, node.decorator_list]  # type: ignore[attr-defined]
    return repr([[_dumped(x) for x in p] if isinstance(p, list) else _dumped(p) for p in parts])


def _dumped(part: object) -> object:
    return ast.dump(part) if isinstance(part, ast.AST) else part


def _file_directive(lines: Sequence[str]) -> bool:
    return any("ascend-lint" in line for line in lines)  # (`# ascend-lint: noqa` applies to the whole file)


# ----------------------------------------------------------------------------- findings across an edit
def moved(finding: Finding, delta: int) -> Finding:
    """The finding (and its fix) `delta` lines down."""
    if not delta:
        return finding
    fix = finding.fix
    if fix is not None:
        fix = dataclasses.replace(fix, edits=tuple(_moved_edit(e, delta) for e in fix.edits))
    return dataclasses.replace(finding, line=finding.line + delta, end_line=finding.end_line + delta, fix=fix)


def _moved_edit(edit: Edit, delta: int) -> Edit:
    span = edit.span
    return dataclasses.replace(edit, span=Span(span.line + delta, span.col, span.end_line + delta, span.end_col))


def carried(findings: Sequence[Finding], change: Change) -> List[Finding]:
    """Findings of the old text outside the changed lines, where they are in the new text (the findings
    on changed lines: kept within the new version of those lines, without their fixes)."""
    lo, hi = change.changed
    return [moved(f, change.delta) if f.line > hi else f if f.line < lo else _placed(f, change.new_line(f.line))
            for f in findings]


def _placed(finding: Finding, line: int) -> Finding:
    """The finding on `line` (its text changed: the fix no longer applies)."""
    return dataclasses.replace(finding, line=line, end_line=max(line, finding.end_line + line - finding.line),
                               fix=None)


def kept(findings: Sequence[Finding], old: Sequence[str], new: Sequence[str]) -> List[Finding]:
    """Findings of the text `old` (its lines) carried to `new`, however many places changed: the lines the
    two texts share (difflib, between the common start and end) keep their findings, moved; a finding on
    a changed line stays within what replaced it, without its fix."""
    start, end = line_change(old, new)
    delta = len(new) - len(old)
    blocks = difflib.SequenceMatcher(None, old[start:len(old) - end], new[start:len(new) - end],
                                     autojunk=False).get_opcodes()
    out = []
    for f in findings:
        if f.line <= start:
            out.append(f)
        elif f.line > len(old) - end:
            out.append(moved(f, delta))
        else:
            index = f.line - 1 - start
            tag, i1, i2, j1, j2 = next(b for b in blocks if b[1] <= index < b[2] or b[1] == b[2] == index)
            if tag == "equal":
                out.append(moved(f, j1 - i1))
            else:
                out.append(_placed(f, start + 1 + min(j1 + index - i1, max(j1, j2 - 1))))
    return out


def merge_scoped(previous: Sequence[Finding], scoped: Sequence[Finding], change: Change,
                 file_level: Sequence[str]) -> List[Finding]:
    """The findings after a scoped edit: the codes decided per file (`file_level`: their rules walked the
    whole file) as the scoped lint found them everywhere; every other code as it found them in the edited
    region, and outside it as they were (moved with the edit)."""
    whole = set(file_level)
    region = range(change.first, change.new_last + 1)
    out = [f for f in carried(previous, change) if f.code not in whole and f.line not in region]
    out += [f for f in scoped if f.code in whole or f.line in region]
    out.sort(key=Finding.sort_key)
    return out


__all__ = ["Change", "Parsed", "carried", "kept", "line_change", "merge_scoped", "moved", "reparse"]
