"""Every finding's fix edits on one file, from one pass (the `json` and `json-lines` outputs).

`edits.fix_edits` applies one fix to the whole file and diffs the result: exact, but the work of a
whole file per finding. Here the file's chunks are parsed once for all findings (engine.FilePass), and a
fix that replaces expressions or sets keywords on single lines (no continuation line to realign), and
reads every name the code it replaces read (so it leaves no import unused), is rendered where it is: its
work is the size of its edit. Its
edits are the ones `fix_edits` gives (diffed on the changed text only, placed where that text is). Every
other fix, and any case this module does not cover, goes through `fix_edits` as before.
"""
from __future__ import annotations

import ast
import warnings
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..fileio import split_lines
from ..rule import Finding
from .edits import TextEdit, diff_edits, fix_edits

_WHOLE_FILE = object()  # "apply this fix to the whole file": the local rendering does not cover it
_SMALL_STATEMENT = (200, 20_000)  # lines, characters: a statement this small is parsed again to check an edit
Change = Tuple[int, int, int, str, str]  # (line, start col, end col, old code, new code): one line, 0-based cols


class FileEdits:
    """The edits of each finding's fix on one source (see the module docstring)."""

    def __init__(self, text: str, tree: ast.Module, findings: Sequence[Finding]) -> None:
        self.text, self.tree = text, tree
        self.findings = [f for f in findings if f.fix is not None]
        self.lines = split_lines(text, keepends=True)
        self._pass: Any = None
        self._anchors: Dict[Tuple[str, ...], Tuple[int, int, int]] = {}
        self._holders: Optional[List[Optional[ast.stmt]]] = None
        self._spans: Dict[int, Dict[tuple, Tuple[ast.AST, ast.AST]]] = {}  # statement -> span -> (node, parent)
        self.whole_file = 0  # fixes that took the whole-file path (tests and benches read it)
        self._file_reads: Optional[Counter] = None  # name -> how often the file reads it

    def edits(self, finding: Finding) -> Optional[List[TextEdit]]:
        """What `fix_edits` gives for `finding`, found locally when it can be."""
        if finding.fix is None:
            return None
        try:
            found = self._local(finding)
        except Exception:  # anything unexpected: the whole-file path decides
            found = _WHOLE_FILE
        if found is _WHOLE_FILE:
            self.whole_file += 1
            return fix_edits(self.text, finding, self.tree)
        return found

    # ---------------------------------------------------------------- the local path
    def _local(self, finding: Finding) -> Any:
        fix = finding.fix
        assert fix is not None
        if not fix.edits or any(e.op == "replace_text" for e in fix.edits):
            return _WHOLE_FILE
        after, *blanks = self._anchor(fix.imports)
        needed, ops, problem = self._file_pass().resolve(finding, after)
        if problem:  # the same on its own, unless libcst failed on its chunk (which may hold other statements)
            return _WHOLE_FILE if "libcst could not parse" in problem else None
        changes = self._changes([op for _, op in ops if not op.noop], ops[0][0].resolver.module)
        insert = ""
        if needed:
            if after > 0 and not self.lines[after - 1].endswith(("\n", "\r")):
                return _WHOLE_FILE
            insert = self._import_lines(finding, needed, blanks)
        if changes is _WHOLE_FILE:
            return self._unit_edits(finding, after, insert)
        return self._text_edits(changes, after, insert)

    # ---------------------------------------------------------------- the statement path
    def _unit_edits(self, finding: Finding, after: int, insert: str) -> Any:
        """A fix inside one top-level statement, rendered as the whole-file path renders it (the statement
        parsed on its own, engine.FilePass._render, the blank line after a removed statement as
        engine._assemble drops it) on a window of the statement and the lines around it: the work of the
        statement, not of the file. _WHOLE_FILE when it could differ from the whole-file path: next to the
        inserted imports, imports in the statement, or a name it stops reading that is read nowhere else in
        the file (its import would be cleaned)."""
        from .engine import _Chunk, _assemble
        from .resolve import chunk_resolver

        fp = self._file_pass()
        units = {fp.unit_of(e.span) for e in finding.fix.edits}  # type: ignore[union-attr]
        if len(units) != 1 or -1 in units:
            return _WHOLE_FILE
        first, last = fp.units[units.pop()][:2]
        start, end = max(first - 1, 1), min(last + 1, len(self.lines))  # the window, 1-based, inclusive
        if insert and start - 1 <= after + 1 and after <= end + 1:
            return _WHOLE_FILE
        needed, renames, problem = fp.plan(finding, after)
        if problem:
            return None
        resolver, error = chunk_resolver("".join(self.lines[first - 1:last]), first)
        if resolver is None:
            return None
        ops = [resolver.resolve(edit, renames) for edit in finding.fix.edits]  # type: ignore[union-attr]
        live = [op for op in ops if not op.noop]
        if not live:
            return None if not needed else _WHOLE_FILE
        code = fp._render(_Chunk(first, last, resolver=resolver, ops=live))
        window = self.lines[start - 1:end]
        new = split_lines(_assemble(window, {first - start + 1: last - start + 1}, {first - start + 1: code}, -1, []),
                          keepends=True)
        if not _parses(split_lines(code, keepends=True)) or not self._reads_elsewhere(first, last, code):
            return _WHOLE_FILE
        edits = [TextEdit(e.line + start - 1, e.col, e.end_line + start - 1, e.end_col, e.content)
                 for e in diff_edits("".join(window), "".join(new))]
        if insert:
            edits.append(TextEdit(after + 1, 1, after + 1, 1, insert))
        return sorted(edits, key=lambda e: (e.line, e.col))

    def _reads_elsewhere(self, first: int, last: int, code: str) -> bool:
        """Does every name that lines `first`..`last` read and `code` (their replacement) reads less often
        stay read elsewhere in the file, with no import among those lines (whose use could end)?"""
        old = "".join(self.lines[first - 1:last])
        before, after = _unit_loads(old), _unit_loads(code)
        if before is None or after is None:
            return False
        dropped = before[0] - after[0]
        if not dropped:
            return True
        if before[1]:
            return False
        if self._file_reads is None:
            self._file_reads = Counter(n.id for n in ast.walk(self.tree)
                                       if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store))
        return all(self._file_reads[name] > count for name, count in dropped.items())

    def _file_pass(self) -> Any:
        if self._pass is None:
            from .engine import FilePass  # libcst is imported only when a fix is structural

            self._pass = FilePass(self.text, self.tree, self.findings)
        return self._pass

    def _anchor(self, modules: Sequence[str]) -> Tuple[int, int, int]:
        from .imports import import_place

        key = tuple(sorted(modules))
        if key not in self._anchors:
            self._anchors[key] = import_place(self.tree, key) if key else (-1, 0, 0)
        return self._anchors[key]

    def _import_lines(self, finding: Finding, needed: Sequence[str], blanks: Sequence[int]) -> str:
        from .imports import import_statement, names_module

        texts = [e.text for e in finding.fix.edits]  # type: ignore[union-attr]
        newline = next((ln[len(ln.rstrip("\r\n")):] for ln in self.lines if ln.endswith(("\n", "\r"))), "\n")
        return newline * blanks[0] + "".join(import_statement(m, [m] if names_module(texts, m) else []) + newline
                                             for m in sorted(needed)) + newline * blanks[1]

    def _changes(self, ops: Sequence[Any], module: Any) -> Any:
        """The ops rendered in place, as Changes; _WHOLE_FILE when they are not all local."""
        from .layout import leaves_open
        from .transform import local_edits

        edited = local_edits(ops)
        if edited is None:  # (not all local, or nested: the transformer's job)
            return _WHOLE_FILE
        changes: List[Change] = []
        for op, new in edited.values():
            (line, start), (end_line, end) = op.anchor
            old, code = module.code_for_node(op.node), module.code_for_node(new)
            if end_line != line or "\n" in code or "\r" in code or self.lines[line - 1][start:end] != old \
                    or not _reads_kept(old, code) or not self._still_parses(line, start, end, code, new):
                return _WHOLE_FILE
            changes.append((line, start, end, old, code))
        opened = [c for c in changes if leaves_open(self.lines[c[0] - 1])]
        return self._realigned(sorted(changes)) if opened else sorted(changes)

    def _realigned(self, changes: List[Change]) -> Any:
        """`changes` and the continuation lines they move (layout.realign, as the engine does it on the
        statement's chunk), when every change sits in a small statement of its own."""
        from .layout import realign

        holders = {id(h): h for h in (self._holder(c[0]) for c in changes) if h is not None}
        if len(holders) != len({c[0] for c in changes}) or any(
                (h.end_lineno or h.lineno) - h.lineno > _SMALL_STATEMENT[0] for h in holders.values()):
            return _WHOLE_FILE
        moved: List[Change] = []
        for line, start, end, _, code in changes:
            holder = self._holder(line)
            first, last = holder.lineno, holder.end_lineno or holder.lineno
            old_lines = self.lines[first - 1:last]
            new_lines = list(old_lines)
            text = new_lines[line - first]
            new_lines[line - first] = text[:start] + code + text[end:]
            for index, (before, after) in enumerate(zip(new_lines, realign(old_lines, new_lines))):
                if before != after:
                    body = old_lines[index].rstrip("\r\n")
                    moved.append((first + index, 0, len(body), body, after.rstrip("\r\n")))
        return sorted(changes + moved)

    # ---------------------------------------------------------------- is the edit valid Python there?
    def _holder(self, line: int) -> Optional[ast.stmt]:
        """The innermost statement holding `line`."""
        if self._holders is None:
            self._holders = [None] * (len(self.lines) + 2)
            for node in ast.walk(self.tree):  # breadth first: inner statements overwrite outer ones
                if isinstance(node, ast.stmt):
                    last = node.end_lineno or node.lineno
                    self._holders[node.lineno:last + 1] = [node] * (last - node.lineno + 1)
        return self._holders[line] if line < len(self._holders) else None

    def _still_parses(self, line: int, start: int, end: int, code: str, node: Any) -> bool:
        """Does the statement holding the edit still parse? A small statement is parsed again; in a large
        one, the code replaced must be an expression read as a value (where any parenthesised or atomic
        expression may stand)."""
        holder = self._holder(line)
        if holder is None:
            return False
        first, last = holder.lineno, holder.end_lineno or holder.lineno
        lines = self.lines[first - 1:last]
        if last - first <= _SMALL_STATEMENT[0] and sum(map(len, lines)) <= _SMALL_STATEMENT[1]:
            text = lines[line - first]
            lines[line - first] = text[:start] + code + text[end:]
            return _parses(lines)
        return self._value_position(holder, line, start, end) and _stands_alone(node, code)

    def _value_position(self, holder: ast.stmt, line: int, start: int, end: int) -> bool:
        spans = self._spans.get(id(holder))
        if spans is None:
            spans = self._spans[id(holder)] = {}
            for parent in ast.walk(holder):
                for child in ast.iter_child_nodes(parent):
                    if isinstance(child, ast.expr):
                        key = (child.lineno, child.col_offset, child.end_lineno, child.end_col_offset)
                        spans[key] = (child, parent)
        text = self.lines[line - 1]
        found = spans.get((line, _byte_col(text, start), line, _byte_col(text, end)))
        if found is None:
            return False
        child, parent = found
        return isinstance(getattr(child, "ctx", ast.Load()), ast.Load) and not isinstance(
            parent, (ast.JoinedStr, ast.FormattedValue, ast.keyword, ast.arg, ast.alias))

    # ---------------------------------------------------------------- text edits
    def _text_edits(self, changes: List[Change], after: int, insert: str) -> List[TextEdit]:
        """The edits `fix_edits` would give: a change alone on its line (not next to the inserted imports)
        is diffed on its own code; otherwise the lines are diffed as the whole-file diff would."""
        lines = [c[0] for c in changes]
        touching = insert and any(line in (after, after + 1) for line in lines)
        if touching or len(set(lines)) != len(lines) or any(b - a == 1 for a, b in zip(lines, lines[1:])):
            return self._line_edits(changes, after, insert)
        edits = [TextEdit(line, start + e.col, line, start + e.end_col, e.content)
                 for line, start, _, old, code in changes for e in diff_edits(old, code)]
        if insert:
            edits.append(TextEdit(after + 1, 1, after + 1, 1, insert))
        return sorted(edits, key=lambda e: (e.line, e.col))

    def _line_edits(self, changes: List[Change], after: int, insert: str) -> List[TextEdit]:
        """Line-level changes (0-based first line, end line, new text), each run of touching ones diffed
        on its own lines only."""
        by_line: Dict[int, str] = {}
        for line, start, end, _, code in sorted(changes, reverse=True):
            text = by_line.get(line, self.lines[line - 1])
            by_line[line] = text[:start] + code + text[end:]
        runs = sorted([(line - 1, line, text) for line, text in by_line.items()]
                      + ([(after, after, insert)] if insert else []))
        edits: List[TextEdit] = []
        i = 0
        while i < len(runs):
            first, end, new = runs[i]
            parts = [new]
            while i + 1 < len(runs) and runs[i + 1][0] <= end:
                i += 1
                parts.append(runs[i][2])
                end = max(end, runs[i][1])
            for e in diff_edits("".join(self.lines[first:end]), "".join(parts)):
                edits.append(TextEdit(e.line + first, e.col, e.end_line + first, e.end_col, e.content))
            i += 1
        return edits


def _byte_col(text: str, col: int) -> int:
    return col if text.isascii() else len(text[:col].encode("utf-8"))


def _parses(lines: List[str]) -> bool:
    source = "".join(lines)
    if lines and lines[0][:1] in (" ", "\t"):
        source = "if True:\n" + source
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _stands_alone(node: Any, code: str) -> bool:
    """Can `code` replace a value anywhere one may stand: parenthesised, or a name, call, attribute or
    subscript (not a number, whose `.` would read as a decimal point)?"""
    stripped = code.strip()
    if stripped.startswith("(") and stripped.endswith(")"):
        return True
    return type(node).__name__ in ("Name", "Attribute", "Call", "Subscript") and not stripped[:1].isdigit()


def _loads(code: str) -> Optional[Counter]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse("(" + code + ")", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store))


def _unit_loads(code: str) -> Optional[Tuple[Counter, bool]]:
    """(the names `code` reads, does it hold an import?) for top-level statements; None if it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    reads: Counter = Counter()
    imports = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            reads[node.id] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports = True
    return reads, imports


def _reads_kept(old: str, new: str) -> bool:
    """Does `new` read every name `old` read, as often (so the fix leaves no import unused)?"""
    before, after = _loads(old), _loads(new)
    return before is not None and after is not None and not (before - after)
