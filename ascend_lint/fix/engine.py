"""One libcst pass over a file: the fixes of a round resolved to nodes, overlaps left for the next round,
all accepted edits applied at once, the imports they need added (see imports.py).

Only the top-level statements that hold an edit are parsed with libcst (touched simple statements close
to each other together: each parse has a fixed cost; a function, class or other compound statement on its
own: libcst's parse grows faster than the text, and an unchanged statement's parse is reused from
resolve's cache, e.g. after an editor's edit elsewhere; a construct libcst cannot parse elsewhere in the
file does not block a fix); every other line is copied as it is. A chunk whose edits are one-line
expression or keyword edits is rendered where they stand (the code libcst prints for the edited nodes,
spliced into the lines); any other chunk is printed whole by the transformer. libcst is imported only when a
pass has a structural edit to make.
"""
from __future__ import annotations

import ast
import bisect
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..engine.linter import gc_paused, parse
from ..fileio import split_lines
from ..rule import Edit, Finding
from .layout import realign
from .imports import ImportFacts, import_facts, import_place, import_statement, names_module, plan
from .policy import codes

CHUNK_GAP = 40  # touched top-level statements at most this many lines apart are parsed together
CHUNK_LINES = 400  # ... into a chunk of at most this many lines (unless one statement is longer)
LIVE_CHUNKS = 4  # parsed chunks a pass keeps (others are parsed again if needed): memory stays bounded
_BLOCK = 32  # columns per bucket of the op index
Range = Tuple[Tuple[int, int], Tuple[int, int]]
PASSES = [0]  # passes over a file so far (tests count them)


@dataclass
class Attempt:
    text: str
    applied: List[Finding]
    failed: List[Tuple[Finding, str]]
    reads_kept: bool = False  # every edit kept every name the code it replaced read: no import became unused
    # [first, last] lines of the rewritten chunks, when each kept its number of lines and nothing else
    # changed (no import added, no text edit): the lines of every other statement are as they were
    rewritten: Optional[List[Tuple[int, int]]] = None


class CannotFix(Exception):
    """The file cannot be fixed at all (libcst cannot parse it, internal error)."""


# ----------------------------------------------------------------------------- overlapping ops
def _overlap(a: Range, b: Range) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _inside(a: Range, b: Range) -> bool:
    """a strictly inside b."""
    return b[0] <= a[0] and a[1] <= b[1] and a != b


def _conflict(a: Any, b: Any) -> bool:
    if a.key is not None and a.key == b.key:
        return True
    if a.dest and b.dest and _overlap(a.dest, b.dest):
        return True
    if a.dest and b.anchor and _overlap(a.dest, b.anchor) and not _inside(a.dest, b.anchor):
        return True
    return bool(b.dest and a.anchor and _overlap(b.dest, a.anchor) and not _inside(b.dest, a.anchor))


class OpIndex:
    """Accepted ops by place: an op on one line by the column blocks it covers, a longer one by its lines;
    a new op is checked only against the ops near it (many fixes on one long line stay linear)."""

    def __init__(self) -> None:
        self.by_block: Dict[Tuple[int, int], List[Any]] = {}
        self.by_line: Dict[int, List[Any]] = {}  # ops over several lines
        self.singles: Dict[int, List[Any]] = {}  # one-line ops, by line
        self.keys: set = set()

    @staticmethod
    def _places(op: Any) -> Tuple[List[Tuple[int, int]], List[int]]:
        """(line, block) buckets of its one-line ranges, lines of its longer ranges."""
        blocks: List[Tuple[int, int]] = []
        lines: List[int] = []
        for rng in (op.anchor, op.dest):
            if not rng:
                continue
            (l1, c1), (l2, c2) = rng
            if l1 == l2:
                blocks.extend((l1, b) for b in range(c1 // _BLOCK, c2 // _BLOCK + 1))
            else:
                lines.extend(range(l1, l2 + 1))
        return blocks, lines

    def add(self, op: Any) -> None:
        blocks, lines = self._places(op)
        for block in set(blocks):
            self.by_block.setdefault(block, []).append(op)
        for line in {line for line, _ in blocks}:
            self.singles.setdefault(line, []).append(op)
        for line in set(lines):
            self.by_line.setdefault(line, []).append(op)
        if op.key is not None:
            self.keys.add(op.key)

    def clashes(self, op: Any) -> bool:
        """Does `op` conflict with an accepted op?"""
        if op.key is not None and op.key in self.keys:
            return True
        blocks, lines = self._places(op)
        near: Dict[int, Any] = {}
        for line in set(lines) | {line for line, _ in blocks}:
            near.update((id(o), o) for o in self.by_line.get(line, ()))
        for block in set(blocks):
            near.update((id(o), o) for o in self.by_block.get(block, ()))
        for line in set(lines):  # a long range may hold one-line ops of any column on its lines
            near.update((id(o), o) for o in self.singles.get(line, ()))
        return any(_conflict(op, other) for other in near.values())


@dataclass
class _Chunk:
    """One top-level statement (or several sharing lines), parsed by libcst on its own."""

    first: int  # 1-based first line
    last: int
    resolver: Any = None
    error: str = ""
    ops: List[Any] = field(default_factory=list)
    index: "OpIndex" = field(default_factory=OpIndex)  # its accepted ops (chunks are disjoint: no clash across)


def _units(tree: ast.Module) -> List[List[int]]:
    """[first, last, simple] of the top-level statements (decorators included, shared lines merged; simple:
    1 when they hold no body)."""
    units: List[List[int]] = []
    for stmt in tree.body:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        last = stmt.end_lineno or stmt.lineno
        simple = int(not hasattr(stmt, "body"))
        if units and first <= units[-1][1]:
            units[-1][1] = max(units[-1][1], last)
            units[-1][2] &= simple
        else:
            units.append([first, last, simple])
    return units


def _indent_unit(tree: ast.Module, lines: List[str]) -> str:
    """The file's indentation step (from its first indented block), for code inserted elsewhere."""
    for stmt in tree.body:
        inner = getattr(stmt, "body", None)
        if isinstance(inner, list) and inner and inner[0].lineno > stmt.lineno:
            line = lines[inner[0].lineno - 1]
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            if indent:
                return indent
    return "    "


class FilePass:
    """One file's text, tree and the libcst chunks a round's fixes touch; `apply` makes the round's pass.

    The chunks are laid out for all of `findings` at once (touched statements close together share one
    parse, up to CHUNK_LINES), so resolving fixes one at a time (json edits) parses each chunk once too.
    Memory is bounded by the chunks, not the file: a chunk is rendered once the last fix touching it is
    resolved, and at most LIVE_CHUNKS parsed chunks without pending ops are kept.
    """

    def __init__(self, text: str, tree: ast.Module, findings: Sequence[Finding]) -> None:
        self.text = text
        self.tree = tree
        self.lines = split_lines(text, keepends=True)
        self.units = _units(tree)
        self.starts = [u[0] for u in self.units]
        self._facts: Optional[ImportFacts] = None
        wanted = sorted({m for f in findings for m in f.fix.imports})  # type: ignore[union-attr]
        # added imports go after line `after`, with blank lines around them where isort wants them
        self.after, self.blanks_before, self.blanks_after = import_place(tree, wanted) if wanted else (-1, 0, 0)
        self.group: Dict[int, int] = {}
        self.bounds: List[List[int]] = []
        self._lay_out(findings)
        self.chunks: Dict[int, _Chunk] = {}
        self._live: "OrderedDict[int, None]" = OrderedDict()  # chunks holding a parse, oldest first

    @property
    def facts(self) -> ImportFacts:
        """How the file imports modules (only a fix that needs a module asks: a walk of every statement)."""
        if self._facts is None:
            self._facts = import_facts(self.tree)
        return self._facts

    def unit_of(self, span: Any) -> int:
        i = bisect.bisect_right(self.starts, span.line) - 1
        return i if i >= 0 and span.end_line <= self.units[i][1] else -1

    def _lay_out(self, findings: Sequence[Finding]) -> None:
        """Group the touched units into chunks; no chunk runs across the import anchor."""
        touched = sorted({self.unit_of(e.span) for f in findings for e in f.fix.edits} - {-1})  # type: ignore
        units, bounds = self.units, self.bounds
        for i in touched:
            if (bounds and units[i][2] and bounds[-1][2] and units[i][0] - bounds[-1][1] <= CHUNK_GAP
                    and units[i][1] - bounds[-1][0] < CHUNK_LINES
                    and not bounds[-1][1] <= self.after < units[i][0]):
                bounds[-1][1] = units[i][1]
            else:
                bounds.append(list(units[i]))
            self.group[i] = len(bounds) - 1

    def chunk_for(self, span: Any) -> _Chunk:
        from .resolve import chunk_resolver

        i = self.chunk_of(span)
        if i < 0:
            raise LookupError("its target is not inside one statement")
        chunk = self.chunks.get(i)
        if chunk is None:
            chunk = self.chunks[i] = _Chunk(self.bounds[i][0], self.bounds[i][1])
        if chunk.resolver is None and not chunk.error:  # (new, or dropped: chunk_resolver may still hold it)
            chunk.resolver, chunk.error = chunk_resolver("".join(self.lines[chunk.first - 1:chunk.last]), chunk.first)
        self._live[i] = None
        self._live.move_to_end(i)
        if chunk.resolver is None:
            raise LookupError(chunk.error)
        return chunk

    def chunk_of(self, span: Any) -> int:
        return self.group.get(self.unit_of(span), -1)

    def _drop_idle(self) -> None:
        """Forget the parses of the oldest chunks beyond LIVE_CHUNKS that hold no pending op."""
        for i in list(self._live)[:-LIVE_CHUNKS or None]:
            chunk = self.chunks[i]
            if not chunk.ops:
                chunk.resolver = None
                chunk.index = OpIndex()
                del self._live[i]

    # ---------------------------------------------------------------- one fix
    def plan(self, finding: Finding, after: Optional[int] = None) -> Tuple[List[str], Dict[str, str], str]:
        """(modules to import, renames, problem) for `finding`'s fix on this file (its imports going after
        line `after`, by default the pass's)."""
        fix = finding.fix
        assert fix is not None
        after = self.after if after is None else after
        needed, renames, problem = plan(self.facts, fix.imports, [e.text for e in fix.edits])
        if not problem and needed and any(e.span.line <= after for e in fix.edits):
            problem = f"needs `import {needed[0]}` above line {min(e.span.line for e in fix.edits)}, " \
                      "where no import can go"
        return needed, renames, problem

    def resolve(self, finding: Finding, after: Optional[int] = None) -> Tuple[List[str], List[Tuple[_Chunk, Any]], str]:
        """(modules to import, [(chunk, op)], problem): `finding`'s fix resolved on this file."""
        if len(self._live) > LIVE_CHUNKS:
            self._drop_idle()  # (before: the ops returned last time are the caller's until now)
        needed, renames, problem = self.plan(finding, after)
        if problem:
            return [], [], problem
        ops = []
        try:
            for edit in finding.fix.edits:  # type: ignore[union-attr]
                chunk = self.chunk_for(edit.span)
                ops.append((chunk, chunk.resolver.resolve(edit, renames)))
        except LookupError as exc:
            return [], [], f"could not be applied ({exc.args[0] if exc.args else 'no target'})"
        except ValueError as exc:
            return [], [], f"could not be applied ({exc})"
        if all(op.noop for _, op in ops) and not needed:
            return [], [], "changes nothing although the finding remains (not idempotent)"
        return needed, ops, ""

    # ---------------------------------------------------------------- the round's pass
    def apply(self, findings: Sequence[Finding]) -> Attempt:
        """Apply the fixes of `findings` (in order; one overlapping an earlier one waits for the next round)."""
        PASSES[0] += 1
        try:
            return self._apply(findings)
        except Exception as exc:  # a libcst validation error or a bug here must not crash the run
            raise CannotFix(f"cannot apply fixes {codes(findings)}: internal error ({type(exc).__name__}: {exc}); "
                            "file left as it was") from None

    def _apply(self, findings: Sequence[Finding]) -> Attempt:
        applied: List[Finding] = []
        failed: List[Tuple[Finding, str]] = []
        imports: Dict[str, bool] = {}  # module to import -> some fix's code names it
        new_chunks: Dict[int, str] = {}
        self._kept_reads = True  # every edit kept the names it read (see _in_place)
        self._rewritten: Optional[List[Tuple[int, int]]] = []  # chunks whose line count stayed: spliced in place
        finished = self._last_users(findings)
        for number, finding in enumerate(findings):
            needed, ops, problem = self.resolve(finding)
            if problem:
                failed.append((finding, problem))
            elif not any(chunk.index.clashes(op) for chunk, op in ops):  # (else: left for the next round)
                for chunk, op in ops:
                    if not op.noop:
                        chunk.index.add(op)
                        chunk.ops.append(op)
                applied.append(finding)
                texts = [e.text for e in finding.fix.edits]  # type: ignore[union-attr]
                for module in needed:
                    imports[module] = imports.get(module, False) or names_module(texts, module)
            for i in finished.get(number, ()):  # no later fix touches these chunks: render them now
                self._render_done(i, new_chunks)
        for i in list(self.chunks):
            self._render_done(i, new_chunks)
        if not applied:
            return Attempt(self.text, [], failed)
        statements = [import_statement(m, [m] if named else []) for m, named in sorted(imports.items())]
        if statements:
            statements = [""] * self.blanks_before + statements + [""] * self.blanks_after
            self._rewritten = None
        text = _assemble(self.lines, {c.first: c.last for c in self.chunks.values()}, new_chunks, self.after,
                         statements)
        rewritten = self._rewritten
        return Attempt(text, applied, failed, self._kept_reads, sorted(rewritten) if rewritten is not None else None)

    def _in_place(self, chunk: _Chunk) -> Optional[Tuple[str, bool]]:
        """(the chunk's code, every edit kept the names it read) with its ops rendered where they stand: the
        code libcst prints for each edited node spliced into its line; what printing the whole chunk gives,
        for one-line expression and keyword edits none of which is inside another, on lines that leave no
        bracket open (nothing to realign). None: the chunk is for the transformer."""
        from .layout import leaves_open
        from .preview import _reads_kept
        from .transform import local_edits

        edited = local_edits(chunk.ops)
        if edited is None:
            return None
        module = chunk.resolver.module
        lines = self.lines[chunk.first - 1:chunk.last]
        changes = []
        kept = True
        for op, new in edited.values():
            (line, start), (end_line, end) = op.anchor
            old, code = module.code_for_node(op.node), module.code_for_node(new)
            text = lines[line - chunk.first]
            if end_line != line or "\n" in code or "\r" in code or text[start:end] != old or leaves_open(text):
                return None
            kept = kept and _reads_kept(old, code)
            changes.append((line - chunk.first, start, end, code))
        for index, start, end, code in sorted(changes, reverse=True):
            lines[index] = lines[index][:start] + code + lines[index][end:]
        return "".join(lines), kept

    def _last_users(self, findings: Sequence[Finding]) -> Dict[int, List[int]]:
        """finding number -> the chunks no later finding has an edit in."""
        last: Dict[int, int] = {}
        for number, finding in enumerate(findings):
            for edit in finding.fix.edits:  # type: ignore[union-attr]
                last[self.chunk_of(edit.span)] = number
        finished: Dict[int, List[int]] = {}
        for i, number in last.items():
            finished.setdefault(number, []).append(i)
        return finished

    def _render_done(self, i: int, into: Dict[int, str]) -> None:
        """Render chunk `i`'s ops (if it has any) into `into`, then let its parse go."""
        chunk = self.chunks.get(i)
        if chunk is None or not chunk.ops:
            return
        rendered = self._in_place(chunk)
        self._kept_reads = self._kept_reads and rendered is not None and rendered[1]
        into[chunk.first] = rendered[0] if rendered is not None else self._render(chunk)
        if self._rewritten is not None:
            if rendered is None and len(split_lines(into[chunk.first])) != chunk.last - chunk.first + 1:
                self._rewritten = None
            else:
                self._rewritten.append((chunk.first, chunk.last))
        chunk.ops = []
        chunk.resolver = None
        chunk.index = OpIndex()
        self._live.pop(i, None)

    def _render(self, chunk: _Chunk) -> str:
        """The chunk's code with its ops applied (one transformer pass)."""
        from .transform import Transformer

        module = chunk.resolver.module
        if not chunk.resolver.has_blocks:  # nothing to learn the indentation from: use the file's
            module = module.with_changes(default_indent=_indent_unit(self.tree, self.lines))
        transformer = Transformer(chunk.resolver, chunk.ops)
        transformer.blank_before = chunk.first > 1 and not self.lines[chunk.first - 2].strip()
        module = module.visit(transformer)
        empty = not (module.body or module.header or module.footer)
        code = "" if empty else module.code  # libcst prints "\n" for nothing
        if code:  # keep the chunk's own line ending (libcst may normalise a lone "\r")
            original = self.lines[chunk.first - 1:chunk.last]
            ending = original[-1][len(original[-1].rstrip("\r\n")):]
            new = split_lines(code.rstrip("\r\n") + ending, keepends=True)
            code = "".join(realign(original, new[:-1] if new and not new[-1] else new))
        return code


def apply_once(text: str, findings: Sequence[Finding], tree: Optional[ast.Module] = None) -> Attempt:
    """Apply the fixes of `findings` (in order, skipping overlaps) to `text` in one pass: text edits
    first, then the structural ones with libcst (see FilePass)."""
    text, text_applied, findings = _apply_text_edits(text, findings)
    if text_applied:
        tree = None
        if not findings:
            return Attempt(text, text_applied, [])
    if tree is None:
        tree = parse(text, "<fix>")
    with gc_paused():  # libcst's trees and metadata are many objects and no cyclic garbage: no GC passes
        attempt = FilePass(text, tree, findings).apply(findings)
    attempt.applied[:0] = text_applied
    if text_applied:
        attempt.rewritten = None
    return attempt


# ----------------------------------------------------------------------------- text edits and assembly
def _is_text_fix(finding: Finding) -> bool:
    return all(e.op == "replace_text" for e in finding.fix.edits)  # type: ignore[union-attr]


def _apply_text_edits(text: str, findings: Sequence[Finding]) -> Tuple[str, List[Finding], List[Finding]]:
    """Apply the fixes made of `replace_text` edits (plain text within one line, e.g. a comment).

    A text fix on a line that another fix of this round touches, or that overlaps an earlier text
    fix, waits for the next round. Returns (text, applied, the other findings).
    """
    structural = [f for f in findings if not _is_text_fix(f)]
    if len(structural) == len(findings):
        return text, [], list(findings)
    busy = {n for f in structural for e in f.fix.edits  # type: ignore[union-attr]
            for n in range(e.span.line, e.span.end_line + 1)}
    lines = split_lines(text, keepends=True)
    taken: Dict[int, List[Tuple[int, int]]] = {}
    edits: List[Edit] = []
    applied: List[Finding] = []
    for finding in findings:
        if not _is_text_fix(finding):
            continue
        mine = finding.fix.edits  # type: ignore[union-attr]
        if any(e.span.line != e.span.end_line or e.span.line in busy or not 0 < e.span.line <= len(lines)
               or any(e.span.col < end and start < e.span.end_col for start, end in taken.get(e.span.line, []))
               for e in mine):
            continue
        for e in mine:
            taken.setdefault(e.span.line, []).append((e.span.col, e.span.end_col))
        edits.extend(mine)
        applied.append(finding)
    for e in sorted(edits, key=lambda e: (e.span.line, e.span.col), reverse=True):
        line = lines[e.span.line - 1]
        body = line.rstrip("\r\n")
        body = body[:e.span.col] + e.text + body[e.span.end_col:]
        lines[e.span.line - 1] = body + line[len(line.rstrip("\r\n")):]
    return "".join(lines), applied, structural


def _assemble(lines: List[str], ends: Dict[int, int], new_chunks: Dict[int, str], after: int,
              imports: Sequence[str]) -> str:
    """The file with the rewritten chunks in place of their lines, and the `imports` lines added after
    line `after` (see imports.import_place)."""
    newline = next((ln[len(ln.rstrip("\r\n")):] for ln in lines if ln.endswith(("\n", "\r"))), "\n")
    out: List[str] = []
    if imports and after == 0:
        out.extend(f"{m}{newline}" for m in imports)
    line = 1
    emptied = False  # the previous chunk was removed whole
    while line <= len(lines):
        if line in new_chunks:
            last = ends[line]
            out.append(new_chunks[line])
            emptied = not new_chunks[line]
        else:
            last = line
            blank = not lines[line - 1].strip()
            if not (emptied and blank and out and _blank_before(out)):  # no new run of blank lines (E303)
                out.append(lines[line - 1])
            emptied = False
        if imports and line <= after <= last:
            if out[-1] and not out[-1].endswith(("\n", "\r")):
                out.append(newline)
            out.extend(f"{m}{newline}" for m in imports)
        line = last + 1
    return "".join(out)


def _blank_before(out: List[str]) -> bool:
    """Does the text assembled so far end with a blank line?"""
    for piece in reversed(out):
        if piece:
            return not piece.strip() or piece.endswith(("\n\n", "\r\n\r\n", "\r\r"))
    return False
