"""Applying fixes: applicability, one libcst pass per file and round, re-lint until stable, safe writes.

Detection stays on `ast`. This module imports libcst only inside `_apply_once`, i.e. only when a file
has a fix to apply, so importing it costs nothing on a plain check.

Per file and round: the applicable fixes are resolved to libcst nodes (spans are mapped with libcst's
PositionProvider; only the top-level statements holding an edit are parsed, every other line is copied
as it is), a fix that overlaps one accepted before it waits for the next round, all accepted fixes are
applied in one transformer pass, the imports they need are added with the file's imports and the imports
they leave unused are removed (see fix_imports.py), the output is parsed with `ast` and re-linted, and
this repeats until nothing fixable is left (at most
`MAX_ROUNDS` rounds). A fix whose output does not parse is dropped with a warning naming the rule; fixes
that change nothing although their finding remains, undo each other or never converge are dropped with
a warning and the file is left as it was.
"""
from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import itertools
import difflib
import sys
import textwrap
import warnings
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from ..config import Settings
from ..engine.linter import FileResult, Linter, parse
from ..fileio import SourceError, SourceFile, split_lines, write_source
from .imports import anchor_line, clean_unused_imports, import_facts, import_statement, names_module, plan
from ..sanitize import diff_name, sanitize
from ..rule import Applicability, Edit, Finding, Fix

MAX_ROUNDS = 10
CHUNK_GAP = 40  # touched top-level statements at most this many lines apart are parsed together
Range = Tuple[Tuple[int, int], Tuple[int, int]]


# ----------------------------------------------------------------------------- applicability
def _specificity(code: str, selectors: Sequence[str]) -> int:
    """Length of the longest selector matching `code` (-1: none; ALL matches with 0)."""
    best = -1
    for raw in selectors:
        sel = raw.strip().upper()
        sel = "" if sel == "ALL" else sel
        if code.startswith(sel):
            best = max(best, len(sel))
    return best


def effective_applicability(code: str, fix: Fix, settings: Settings) -> Applicability:
    """The fix's applicability after `extend-safe-fixes` / `extend-unsafe-fixes` (most specific wins,
    ties go to unsafe). Display-only fixes stay display-only."""
    if fix.applicability is Applicability.DISPLAY:
        return fix.applicability
    safe = _specificity(code, settings.extend_safe_fixes)
    unsafe = _specificity(code, settings.extend_unsafe_fixes)
    if safe < 0 and unsafe < 0:
        return fix.applicability
    return Applicability.SAFE if safe > unsafe else Applicability.UNSAFE


def apply_fix_settings(findings: Sequence[Finding], settings: Settings) -> None:
    """Rewrite each finding's fix applicability per the settings (in place)."""
    if not (settings.extend_safe_fixes or settings.extend_unsafe_fixes):
        return
    for finding in findings:
        if finding.fix is not None:
            app = effective_applicability(finding.code, finding.fix, settings)
            if app is not finding.fix.applicability:
                finding.fix = dataclasses.replace(finding.fix, applicability=app)


def is_applicable(finding: Finding, settings: Settings) -> bool:
    """Would `--fix` (with the current `--unsafe-fixes` setting) apply this finding's fix?"""
    fix = finding.fix
    if fix is None:
        return False
    return fix.applicability is Applicability.SAFE or (
        fix.applicability is Applicability.UNSAFE and settings.unsafe_fixes)


# ----------------------------------------------------------------------------- one file
@dataclass
class FileFix:
    """What fixing one source produced. `text` is the original when nothing was applied."""

    text: str
    applied: List[Finding] = field(default_factory=list)  # findings whose fixes were applied
    findings: List[Finding] = field(default_factory=list)  # findings of the final text
    warnings: List[str] = field(default_factory=list)


@dataclass
class _Attempt:
    text: str
    applied: List[Finding]
    failed: List[Tuple[Finding, str]]


class _CannotFix(Exception):
    """The file cannot be fixed at all (libcst cannot parse it, internal error)."""


def _fix_key(finding: Finding) -> tuple:
    fix = finding.fix
    assert fix is not None
    return (finding.code, finding.line, finding.col, fix.description,
            tuple((e.op, e.span, e.text, e.name) for e in fix.edits), fix.imports)


def _codes(findings: Sequence[Finding]) -> str:
    return ", ".join(sorted({f.code for f in findings}))


def fix_text(text: str, path: str, findings: Sequence[Finding], linter: Linter, settings: Settings) -> FileFix:
    """Apply every applicable fix to `text` in rounds; see the module docstring."""
    original = FileFix(text, findings=list(findings))
    current, current_findings = text, list(findings)
    current_tree: Optional[ast.Module] = None
    seen = {text}
    applied: List[Finding] = []
    dropped: set = set()
    warnings: List[str] = []
    warned: set = set()

    def warn(message: str) -> None:
        if message not in warned:
            warned.add(message)
            warnings.append(message)

    if any(is_applicable(f, settings) for f in findings):
        try:  # text-level findings (unused noqa) can come from a file that does not parse: no fix there
            current_tree = parse(text, path)
        except SourceError as exc:
            original.warnings = [f"not fixed: the file does not parse ({exc.reason})"]
            return original
    for _ in range(MAX_ROUNDS):
        candidates = [f for f in current_findings if is_applicable(f, settings) and _fix_key(f) not in dropped]
        if not candidates:
            break
        try:
            attempt = _apply_once(current, candidates, current_tree)
        except _CannotFix as exc:
            original.warnings = warnings + [str(exc)]
            return original
        for finding, reason in attempt.failed:
            dropped.add(_fix_key(finding))
            warn(f"{finding.code} fix at line {finding.line} {reason}; fix dropped")
        if not attempt.applied:
            continue
        try:
            tree = parse(attempt.text, path)
        except SourceError:
            culprits = _syntax_culprits(current, attempt.applied, path)
            if not culprits:
                original.warnings = warnings + [
                    f"fixes {_codes(attempt.applied)} together produced invalid Python; file left as it was"]
                return original
            for finding in culprits:
                dropped.add(_fix_key(finding))
                warn(f"{finding.code} fix at line {finding.line} produced invalid Python; fix dropped")
            continue
        before = current_tree if current_tree is not None else parse(current, path)
        cleaned, problems = clean_unused_imports(attempt.text, before, tree)
        if not problems and cleaned != attempt.text:
            try:
                cleaned_tree = parse(cleaned, path)
            except SourceError:
                problems = ["removing the imports it leaves unused would break the file"]
        if problems:  # an import the fixes leave unused can be neither removed nor marked: drop those fixes
            culprits = _unused_import_culprits(current, before, attempt.applied, path)
            if not culprits:
                original.warnings = warnings + [
                    f"fixes {_codes(attempt.applied)} together {problems[0]}; file left as it was"]
                return original
            for finding, problem in culprits:
                dropped.add(_fix_key(finding))
                warn(f"{finding.code} fix at line {finding.line}: {problem}; fix dropped")
            continue
        if cleaned != attempt.text:
            attempt.text, tree = cleaned, cleaned_tree
        if attempt.text in seen:
            original.warnings = warnings + [
                f"fixes {_codes(applied + attempt.applied)} are not idempotent (they undo each other); "
                "file left as it was"]
            return original
        seen.add(attempt.text)
        try:
            new_findings = linter.check(attempt.text, path, tree)
        except SourceError as exc:  # e.g. too deep for the walker: treat like invalid output
            original.warnings = warnings + [f"fixed source cannot be linted ({exc.reason}); file left as it was"]
            return original
        apply_fix_settings(new_findings, settings)
        applied.extend(attempt.applied)
        current, current_findings, current_tree = attempt.text, new_findings, tree
    else:
        pending = [f for f in current_findings if is_applicable(f, settings) and _fix_key(f) not in dropped]
        if pending:
            original.warnings = warnings + [
                f"fixes did not converge after {MAX_ROUNDS} rounds ({_codes(pending)} still fixable); "
                "file left as it was"]
            return original
    return FileFix(current, applied, current_findings, warnings)


def _unused_import_culprits(text: str, before: ast.Module, fixes: Sequence[Finding],
                            path: str) -> List[Tuple[Finding, str]]:
    """The fixes that, on their own, leave an import unused that can be neither removed nor marked."""
    culprits = []
    for finding in fixes:
        try:
            attempt = _apply_once(text, [finding], before)
            cleaned, problems = clean_unused_imports(attempt.text, before, parse(attempt.text, path))
            if not problems:
                parse(cleaned, path)
        except _CannotFix:
            continue
        except SourceError:
            problems = ["removing the imports it leaves unused would break the file"]
        if problems:
            culprits.append((finding, problems[0]))
    return culprits


def apply_alone(text: str, finding: Finding, tree: Optional[ast.Module] = None) -> Optional[str]:
    """`text` (parsed: `tree`) with only `finding`'s fix applied (whatever its applicability), imports
    it leaves unused cleaned as `--fix` cleans them; None if it cannot be applied on its own."""
    try:
        before = tree if tree is not None else parse(text, "<fix>")
        attempt = _apply_once(text, [finding], before)
        if not attempt.applied:
            return None
        cleaned, problems = clean_unused_imports(attempt.text, before, parse(attempt.text, "<fix>"))
        if problems:
            return None
        parse(cleaned, "<fix>")
    except (_CannotFix, SourceError):
        return None
    return cleaned


def _syntax_culprits(text: str, fixes: Sequence[Finding], path: str) -> List[Finding]:
    """The fixes that produce unparsable output on their own."""
    culprits = []
    for finding in fixes:
        try:
            attempt = _apply_once(text, [finding])
            parse(attempt.text, path)
        except (SourceError, _CannotFix):
            culprits.append(finding)
    return culprits


# ----------------------------------------------------------------------------- CLI faces
@dataclass
class FixOutcome:
    changed: int = 0  # files changed (with --diff: that would change)
    fixed: int = 0  # findings fixed (with --diff: that would be fixed)
    per_file: Dict[str, Counter] = field(default_factory=dict)  # path -> Counter[(code, name)]


def _lines(text: str) -> List[str]:
    lines = split_lines(text, keepends=True)
    return lines[:-1] if lines and not lines[-1] else lines


class DiffNameError(ValueError):
    """A file name no unified diff can carry safely (see `sanitize.diff_name`)."""


def unified_diff(path: str, old: str, new: str, terminal: bool = False) -> str:
    """The unified diff `--diff` prints. The header names the file as `patch -p0` must read it (quoted
    when it has spaces; DiffNameError when it has a newline, control or bidi character). With
    `terminal`, the changed lines are sanitised too (a diff shown on a screen is read, not applied)."""
    name = diff_name(path)
    if name is None:
        raise DiffNameError(f"its name ({sanitize(path)}) has a character a unified diff cannot carry safely "
                            "(newline, control or bidi character, or bytes that are not UTF-8); "
                            "rename the file or apply the fix with --fix")
    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile=name, tofile=name)
    out = []
    for line in lines:
        if terminal:
            body = line.rstrip("\r\n")
            line = sanitize(body, keep="\t") + line[len(body):]
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _is_terminal(stream: TextIO) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def _encode(source: SourceFile, text: str) -> Optional[bytes]:
    try:
        return source.encode(text)
    except UnicodeEncodeError:
        return None


def fix_results(results: Sequence[FileResult], linter: Linter, settings: Settings, diff: bool = False,
                show: bool = False, out: Optional[TextIO] = None, err: Optional[TextIO] = None,
                linters: Optional[Callable[[str], Linter]] = None) -> FixOutcome:
    """Fix every file of `results` (results are updated to the fixed sources and their findings).

    With `diff`, print a unified diff per file instead of writing anything. `linters`: each file's own
    Linter (hierarchical configuration), whose settings then decide which fixes apply.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    outcome = FixOutcome()
    for result in results:
        source = result.source
        if source is None or not result.findings:
            continue
        own = linters(source.path) if linters is not None else linter
        apply_fix_settings(result.findings, own.settings)
        if not any(is_applicable(f, own.settings) for f in result.findings):
            continue
        done = fix_text(source.text, source.path, result.findings, own, own.settings)
        name = sanitize(source.path)
        for message in done.warnings:
            err.write(f"warning: {name}: {sanitize(message)}\n")
        if not done.applied or done.text == source.text:
            continue
        data = _encode(source, done.text)
        if data is None:
            err.write(f"warning: {name}: the fixed source cannot be encoded as {source.encoding}; "
                      "file left as it was\n")
            continue
        if diff:
            try:
                out.write(unified_diff(source.path, source.text, done.text, terminal=_is_terminal(out)))
            except DiffNameError as exc:
                err.write(f"error: {name}: no diff shown: {exc}\n")
        else:
            problem = write_source(source, data)
            if problem:
                err.write(f"warning: {name}: {problem}\n")
                continue
            result.findings = done.findings
            result.source = SourceFile(source.path, data, done.text, source.encoding)
        outcome.changed += 1
        outcome.fixed += len(done.applied)
        outcome.per_file[source.path] = Counter((f.code, f.name) for f in done.applied)
    if diff:
        err.write(f"Would fix {outcome.fixed} finding{'s' if outcome.fixed != 1 else ''}.\n")
    elif show:
        human = (settings.output_format or "full") in ("full", "concise")
        write_fixes(outcome, out if human else err)
    return outcome


def write_fixes(outcome: FixOutcome, stream: TextIO) -> None:
    """The `--show-fixes` listing."""
    if not outcome.fixed:
        stream.write("No findings fixed.\n")
        return
    stream.write(f"Fixed {outcome.fixed} finding{'s' if outcome.fixed != 1 else ''}:\n")
    for path in sorted(outcome.per_file):
        stream.write(f"- {sanitize(path)}:\n")
        for (code, name), count in sorted(outcome.per_file[path].items()):
            stream.write(f"    {count} \u00d7 {sanitize(code)} ({sanitize(name)})\n")
    stream.write("\n")


def fix_stdin(raw: bytes, result: FileResult, linter: Linter, settings: Settings, diff: bool = False,
              err: Optional[TextIO] = None) -> Tuple[Any, int, FileResult]:
    """(output, fixed count, result) for source read from stdin: the fixed bytes, or the diff text."""
    err = err or sys.stderr
    apply_fix_settings(result.findings, settings)
    source = result.source
    unchanged: Any = "" if diff else raw
    if source is None or not any(is_applicable(f, settings) for f in result.findings):
        return unchanged, 0, result
    done = fix_text(source.text, source.path, result.findings, linter, settings)
    name = sanitize(source.path)
    for message in done.warnings:
        err.write(f"warning: {name}: {sanitize(message)}\n")
    if not done.applied or done.text == source.text:
        return unchanged, 0, result
    data = _encode(source, done.text)
    if data is None:
        err.write(f"warning: {name}: the fixed source cannot be encoded as {source.encoding}; left as it was\n")
        return unchanged, 0, result
    if diff:
        try:
            return (unified_diff(source.path, source.text, done.text, terminal=_is_terminal(sys.stdout)),
                    len(done.applied), result)
        except DiffNameError as exc:
            err.write(f"error: {name}: no diff shown: {exc}\n")
            return unchanged, len(done.applied), result
    result.findings = done.findings
    result.source = SourceFile(source.path, data, done.text, source.encoding)
    return data, len(done.applied), result


# ----------------------------------------------------------------------------- libcst machinery
@dataclass
class _Op:
    """One resolved edit: `kind` is expr | kw | remove | replace_small | replace_line | after | body_end."""

    kind: str
    node: Any  # the libcst node (of the tree being transformed) the edit attaches to
    payload: Any = None
    dest: Optional[Range] = None  # the source range it destroys
    anchor: Optional[Range] = None  # the range of the node it needs intact
    key: Optional[tuple] = None  # exclusive per key (one keyword setting per call and name)
    noop: bool = False


def _overlap(a: Range, b: Range) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _inside(a: Range, b: Range) -> bool:
    """a strictly inside b."""
    return b[0] <= a[0] and a[1] <= b[1] and a != b


def _conflict(a: _Op, b: _Op) -> bool:
    if a.key is not None and a.key == b.key:
        return True
    if a.dest and b.dest and _overlap(a.dest, b.dest):
        return True
    if a.dest and b.anchor and _overlap(a.dest, b.anchor) and not _inside(a.dest, b.anchor):
        return True
    return bool(b.dest and a.anchor and _overlap(b.dest, a.anchor) and not _inside(b.dest, a.anchor))


class _OpIndex:
    """Accepted ops by line, so that a new op is checked only against ops on its own lines."""

    def __init__(self) -> None:
        self.by_line: Dict[int, List[_Op]] = {}

    @staticmethod
    def _lines(op: _Op) -> set:
        lines: set = set()
        for rng in (op.anchor, op.dest):
            if rng:
                lines.update(range(rng[0][0], rng[1][0] + 1))
        return lines

    def add(self, op: _Op) -> None:
        for line in self._lines(op):
            self.by_line.setdefault(line, []).append(op)

    def near(self, op: _Op) -> List[_Op]:
        seen: Dict[int, _Op] = {}
        for line in self._lines(op):
            for other in self.by_line.get(line, ()):
                seen[id(other)] = other
        return list(seen.values())


class _Resolver:
    """Maps rule spans to libcst nodes and parses the edit texts."""

    def __init__(self, cst: Any, wrapper: Any, offset: int = 0) -> None:
        """`offset`: lines before the parsed chunk; ranges are kept in the file's line numbers."""
        from libcst.metadata import PositionProvider

        self.cst = cst
        self.module = wrapper.module
        self.line_of: Dict[int, Any] = {}  # small statement -> its SimpleStatementLine/Suite
        self.ranges: Dict[int, Range] = {}
        self.by_span: Dict[Range, List[Any]] = {}
        self.statements: List[Any] = []
        self.has_blocks = False
        for node, pos in wrapper.resolve(PositionProvider).items():
            rng = ((pos.start.line + offset, pos.start.column), (pos.end.line + offset, pos.end.column))
            self.ranges[id(node)] = rng
            self.by_span.setdefault(rng, []).append(node)
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                self.statements.append(node)
            elif isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    self.line_of[id(small)] = node
            elif isinstance(node, cst.IndentedBlock):
                self.has_blocks = True

    # ---------------------------------------------------------------- lookups
    def range(self, node: Any) -> Range:
        return self.ranges[id(node)]

    def exact(self, span: Any, kinds: tuple) -> Optional[Any]:
        key = ((span.line, span.col), (span.end_line, span.end_col))
        return next((n for n in self.by_span.get(key, ()) if isinstance(n, kinds)), None)

    def containing(self, span: Any, kinds: tuple) -> Optional[Any]:
        """The innermost statement of `kinds` whose range holds `span`."""
        target = ((span.line, span.col), (span.end_line, span.end_col))
        best, best_rng = None, None
        for node in self.statements:
            rng = self.range(node)
            if isinstance(node, kinds) and rng[0] <= target[0] and target[1] <= rng[1]:
                if best_rng is None or (best_rng[0] <= rng[0] and rng[1] <= best_rng[1]):
                    best, best_rng = node, rng
        return best

    def source(self, node: Any) -> str:
        return self.module.code_for_node(node)

    # ---------------------------------------------------------------- texts
    def expression(self, text: str, renames: Dict[str, str]) -> Any:
        node = _parse_expression(text.strip())
        return _rename(self.cst, node, renames) if renames else node

    def statements_of(self, text: str, renames: Dict[str, str]) -> List[Any]:
        cst = self.cst
        src = textwrap.dedent(text)
        blank = len(src) - len(src.lstrip("\n"))
        module = cst.parse_module(src.strip("\n") + "\n")
        body = list(module.body)
        if not body:
            raise ValueError("no statement in the fix text")
        lead = [cst.EmptyLine(indent=False)] * blank + list(module.header) + list(body[0].leading_lines)
        body[0] = body[0].with_changes(leading_lines=lead)
        return [_rename(cst, s, renames) for s in body] if renames else body

    def same_code(self, node: Any, text: str) -> bool:
        """Is `text` the code already at `node` (up to whitespace and layout)?"""
        old = self.source(node)
        if "".join(old.split()) != "".join(text.split()):
            return False
        return _expression_dump(old) == _expression_dump(text)

    # ---------------------------------------------------------------- edits
    def resolve(self, edit: Edit, renames: Dict[str, str]) -> _Op:
        """One edit as an _Op; raises LookupError (no target) or ValueError (bad text)."""
        cst = self.cst
        small, compound = cst.BaseSmallStatement, cst.BaseCompoundStatement
        if edit.op == "replace":
            try:
                expr = self.expression(edit.text, renames)
            except Exception:
                expr = None
            node = self.exact(edit.span, (cst.BaseExpression,)) if expr is not None else None
            if node is not None:
                rng = self.range(node)
                return _Op("expr", node, expr, rng, rng, noop=self.same_code(node, edit.text))
            node = self.exact(edit.span, (small, compound))
            if node is None:
                raise LookupError(f"the {edit.op} target was not found in the source")
            stmts = self._parse_statements(edit.text, renames)
            parent = self.line_of.get(id(node))
            if isinstance(node, small) and len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine):
                rng = self.range(node)
                return _Op("replace_small", node, list(stmts[0].body), rng, rng)
            if isinstance(node, small):
                if not (isinstance(parent, cst.SimpleStatementLine) and len(parent.body) == 1):
                    raise LookupError("several statements cannot replace one of several on a line")
                node = parent
            rng = self.range(node)
            return _Op("replace_line", node, stmts, rng, rng)
        if edit.op == "set_keyword":
            call = self.exact(edit.span, (cst.Call,))
            if call is None or not edit.name:
                raise LookupError(f"the {edit.op} target was not found in the source")
            value = self._parse_expression(edit.text, renames)
            existing = next((a for a in call.args if a.keyword is not None and a.keyword.value == edit.name), None)
            dest = self.range(existing.value) if existing is not None else None
            noop = existing is not None and self.same_code(existing.value, edit.text)
            return _Op("kw", call, (edit.name, value), dest, self.range(call), key=("kw", id(call), edit.name),
                       noop=noop)
        if edit.op == "remove_statement":
            node = self.exact(edit.span, (small, compound)) or self.containing(edit.span, (small,))
            if node is None:
                raise LookupError(f"the {edit.op} target was not found in the source")
            rng = self.range(node)
            return _Op("remove", node, None, rng, rng)
        if edit.op == "insert_after":
            node = self.exact(edit.span, (small, compound)) or self.containing(edit.span, (small, compound))
            if node is None:
                raise LookupError(f"the {edit.op} target was not found in the source")
            if isinstance(node, small):
                node = self.line_of.get(id(node))
                if not isinstance(node, cst.SimpleStatementLine):
                    raise LookupError("cannot insert after a statement on its compound statement's line")
            return _Op("after", node, self._parse_statements(edit.text, renames), None, self.range(node))
        if edit.op == "insert_body_end":
            node = self.exact(edit.span, (compound,)) or self.containing(edit.span, (compound,))
            if node is None or not isinstance(getattr(node, "body", None), cst.IndentedBlock):
                raise LookupError(f"the {edit.op} target was not found in the source")
            return _Op("body_end", node, self._parse_statements(edit.text, renames), None, self.range(node))
        raise ValueError(f"unknown edit operation {edit.op!r}")

    def _parse_expression(self, text: str, renames: Dict[str, str]) -> Any:
        try:
            return self.expression(text, renames)
        except Exception as exc:
            raise ValueError(f"fix text is not an expression: {text!r}") from exc

    def _parse_statements(self, text: str, renames: Dict[str, str]) -> List[Any]:
        try:
            return self.statements_of(text, renames)
        except Exception as exc:
            raise ValueError(f"fix text is not a statement: {text!r}") from exc


@functools.lru_cache(maxsize=256)
def _parse_expression(text: str) -> Any:
    """libcst nodes are immutable: one parse per distinct fix text is enough."""
    import libcst

    return libcst.parse_expression(text)


@functools.lru_cache(maxsize=256)
def _expression_dump(text: str) -> Optional[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.dump(ast.parse("(" + text.strip() + ")", mode="eval"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _rename(cst: Any, node: Any, renames: Dict[str, str]) -> Any:
    """Spell module `M` as its alias `A` (from `import M as A`) inside a fix's new code."""

    class Renamer(cst.CSTTransformer):
        def leave_Attribute(self, original: Any, updated: Any) -> Any:
            updated = updated.with_changes(attr=original.attr)
            return self._swap(original, updated)

        def leave_Name(self, original: Any, updated: Any) -> Any:
            return self._swap(original, updated)

        def leave_Arg(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(keyword=original.keyword)

        def _swap(self, original: Any, updated: Any) -> Any:
            dotted = cst.helpers.get_full_name_for_node(original)
            if dotted in renames:
                alias = cst.parse_expression(renames[dotted])
                return alias.with_changes(lpar=updated.lpar, rpar=updated.rpar)
            return updated

    return node.visit(Renamer())


ATOMS = ("Name", "Attribute", "Call", "Subscript", "SimpleString", "ConcatenatedString", "FormattedString",
         "Integer", "Float", "Imaginary", "List", "Dict", "Set", "ListComp", "SetComp", "DictComp",
         "GeneratorExp", "Ellipsis")


@dataclass
class _Chunk:
    """One top-level statement (or several sharing lines), parsed by libcst on its own."""

    first: int  # 1-based first line
    last: int
    resolver: Optional[_Resolver] = None
    error: str = ""
    ops: List[_Op] = field(default_factory=list)


def _units(tree: ast.Module) -> List[List[int]]:
    """[first, last] line ranges of the top-level statements (decorators included, shared lines merged)."""
    units: List[List[int]] = []
    for stmt in tree.body:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        last = stmt.end_lineno or stmt.lineno
        if units and first <= units[-1][1]:
            units[-1][1] = max(units[-1][1], last)
        else:
            units.append([first, last])
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


def _apply_once(text: str, findings: Sequence[Finding], tree: Optional[ast.Module] = None) -> _Attempt:
    """Apply the fixes of `findings` (in order, skipping overlaps) to `text` in one libcst pass.

    Only the top-level statements that hold an edit are parsed with libcst (each on its own: libcst
    is slow, and a construct it cannot parse elsewhere in the file does not block the fix); every other
    line is copied as it is.
    """
    with warnings.catch_warnings():  # libcst.metadata warns about its own typing imports
        warnings.simplefilter("ignore", DeprecationWarning)
        import libcst as cst
        import libcst.helpers  # noqa: F401  (get_full_name_for_node)
        from libcst.metadata import MetadataWrapper

    text, text_applied, findings = _apply_text_edits(text, findings)
    if text_applied:
        tree = None
        if not findings:
            return _Attempt(text, text_applied, [])
    if tree is None:
        tree = parse(text, "<fix>")
    lines = split_lines(text, keepends=True)
    units = _units(tree)
    starts = [u[0] for u in units]
    facts = import_facts(tree)

    def unit_of(span: Any) -> int:
        i = bisect.bisect_right(starts, span.line) - 1
        return i if i >= 0 and span.end_line <= units[i][1] else -1

    # touched statements close to each other share one parse (each libcst parse has a fixed cost)
    group: Dict[int, int] = {}
    bounds: List[List[int]] = []
    touched = sorted({unit_of(e.span) for f in findings for e in f.fix.edits} - {-1})  # type: ignore[union-attr]
    # added imports go right after line `after`: no chunk may run across it
    wanted = sorted({m for f in findings for m in f.fix.imports})  # type: ignore[union-attr]
    after = anchor_line(tree, wanted) if wanted else -1
    for i in touched:
        if (bounds and units[i][0] - bounds[-1][1] <= CHUNK_GAP
                and not bounds[-1][1] <= after < units[i][0]):
            bounds[-1][1] = units[i][1]
        else:
            bounds.append(list(units[i]))
        group[i] = len(bounds) - 1
    chunks: Dict[int, _Chunk] = {}

    def chunk_for(span: Any) -> _Chunk:
        i = group.get(unit_of(span), -1)
        if i < 0:
            raise LookupError("its target is not inside one statement")
        if i not in chunks:
            chunk = chunks[i] = _Chunk(bounds[i][0], bounds[i][1])
            chunk.resolver, chunk.error = _chunk_resolver(
                cst, MetadataWrapper, "".join(lines[chunk.first - 1:chunk.last]), chunk.first)
        chunk = chunks[i]
        if chunk.resolver is None:
            raise LookupError(chunk.error)
        return chunk

    try:
        accepted: List[Tuple[_Chunk, _Op]] = []
        index = _OpIndex()
        applied: List[Finding] = []
        failed: List[Tuple[Finding, str]] = []
        imports: Dict[str, bool] = {}  # module to import -> some fix's code names it
        for finding in findings:
            fix = finding.fix
            assert fix is not None
            texts = [e.text for e in fix.edits]
            needed, renames, problem = plan(facts, fix.imports, texts)
            if not problem and needed and any(e.span.line <= after for e in fix.edits):
                problem = f"needs `import {needed[0]}` above line {min(e.span.line for e in fix.edits)}, " \
                          "where no import can go"
            if problem:
                failed.append((finding, problem))
                continue
            try:
                ops = []
                for edit in fix.edits:
                    chunk = chunk_for(edit.span)
                    assert chunk.resolver is not None
                    ops.append((chunk, chunk.resolver.resolve(edit, renames)))
            except LookupError as exc:
                failed.append((finding, f"could not be applied ({exc.args[0] if exc.args else 'no target'})"))
                continue
            except ValueError as exc:
                failed.append((finding, f"could not be applied ({exc})"))
                continue
            if all(op.noop for _, op in ops) and not needed:
                failed.append((finding, "changes nothing although the finding remains (not idempotent)"))
                continue
            if any(_conflict(op, other) for _, op in ops for other in index.near(op)):
                continue  # overlaps an earlier fix: left for the next round
            accepted.extend((chunk, op) for chunk, op in ops if not op.noop)
            for _, op in ops:
                if not op.noop:
                    index.add(op)
            applied.append(finding)
            for module in needed:
                imports[module] = imports.get(module, False) or names_module(texts, module)
        if not applied:
            return _Attempt(text, text_applied, failed)
        for chunk, op in accepted:
            chunk.ops.append(op)
        indent = _indent_unit(tree, lines)
        new_chunks: Dict[int, str] = {}
        for chunk in chunks.values():
            if chunk.ops and chunk.resolver is not None:
                module = chunk.resolver.module
                if not chunk.resolver.has_blocks:  # nothing to learn the indentation from: use the file's
                    module = module.with_changes(default_indent=indent)
                transformer = _transformer_class(cst)(cst, chunk.resolver, chunk.ops)
                transformer.blank_before = chunk.first > 1 and not lines[chunk.first - 2].strip()
                module = module.visit(transformer)
                empty = not (module.body or module.header or module.footer)
                code = "" if empty else module.code  # libcst prints "\n" for nothing
                if code:  # keep the chunk's own line ending (libcst may normalise a lone "\r")
                    original = "".join(lines[chunk.first - 1:chunk.last])
                    code = code.rstrip("\r\n") + original[len(original.rstrip("\r\n")):]
                new_chunks[chunk.first] = code
        statements = [import_statement(m, [m] if named else []) for m, named in imports.items()]
        return _Attempt(_assemble(lines, {c.first: c.last for c in chunks.values()}, new_chunks, after, statements),
                        text_applied + applied, failed)
    except Exception as exc:  # a libcst validation error or a bug here must not crash the run
        raise _CannotFix(f"cannot apply fixes {_codes(findings)}: internal error ({type(exc).__name__}: {exc}); "
                         "file left as it was") from None


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


_RESOLVERS: "OrderedDict[Tuple[str, int], Tuple[Optional[_Resolver], str]]" = OrderedDict()
RESOLVER_CACHE = 4  # chunks kept parsed: fixes applied one at a time (json edits, editors) reuse them


def _chunk_resolver(cst: Any, wrapper: Any, source: str, first: int) -> Tuple[Optional[_Resolver], str]:
    """(resolver, error) for the chunk `source` starting at line `first`; a resolver is read-only,
    so the last few are kept: the libcst parse and its positions are most of a fix's cost."""
    key = (source, first)
    if key in _RESOLVERS:
        _RESOLVERS.move_to_end(key)
        return _RESOLVERS[key]
    try:
        module = cst.parse_module(source)
        found: Tuple[Optional[_Resolver], str] = (
            _Resolver(cst, wrapper(module, unsafe_skip_copy=True), first - 1), "")
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        found = (None, f"libcst could not parse the statement at line {first}: {message}")
    _RESOLVERS[key] = found
    while len(_RESOLVERS) > RESOLVER_CACHE:
        _RESOLVERS.popitem(last=False)
    return found


def _assemble(lines: List[str], ends: Dict[int, int], new_chunks: Dict[int, str], after: int,
              imports: Sequence[str]) -> str:
    """The file with the rewritten chunks in place of their lines, and the `imports` lines added after
    line `after` (see fix_imports.anchor_line)."""
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


_TRANSFORMER: List[Any] = []


def _transformer_class(cst: Any) -> Any:
    """The libcst transformer applying accepted _Ops (defined lazily: libcst is imported on demand)."""
    if _TRANSFORMER:
        return _TRANSFORMER[0]

    class Transformer(cst.CSTTransformer):
        def __init__(self, cst: Any, resolver: _Resolver, ops: Sequence[_Op]) -> None:
            super().__init__()
            self.cst = cst
            self.expr: Dict[int, Any] = {}
            self.kw: Dict[int, List[Tuple[str, Any]]] = {}
            self.remove_lines: set = set()
            self.remove_small: set = set()
            self.replace_small: Dict[int, List[Any]] = {}
            self.replace_line: Dict[int, List[Any]] = {}
            self.after: Dict[int, List[Any]] = {}
            self.body_end: Dict[int, List[Any]] = {}
            self.ranges = resolver.ranges
            # lines holding an edit, as prefix counts: a node is entered only if its lines hold one
            last = max((op.anchor[1][0] for op in ops if op.anchor), default=0)
            marks = [0] * (last + 2)
            for op in ops:
                if op.anchor:
                    for line in range(op.anchor[0][0], op.anchor[1][0] + 1):
                        marks[line] = 1
            self.edited = list(itertools.accumulate(marks))
            self.blank_before = False  # the line before the chunk is blank (set by _apply_once)
            removed: Dict[int, set] = {}
            lines: Dict[int, Any] = {}
            for op in ops:
                key = id(op.node)
                if op.kind == "expr":
                    self.expr[key] = op.payload
                elif op.kind == "kw":
                    self.kw.setdefault(key, []).append(op.payload)
                elif op.kind == "replace_small":
                    self.replace_small[key] = op.payload
                elif op.kind == "replace_line":
                    self.replace_line[key] = op.payload
                elif op.kind == "after":
                    self.after.setdefault(key, []).extend(op.payload)
                elif op.kind == "body_end":
                    self.body_end.setdefault(key, []).extend(op.payload)
                elif op.kind == "remove":
                    parent = resolver.line_of.get(id(op.node))
                    if isinstance(op.node, cst.BaseSmallStatement) and isinstance(parent, cst.SimpleStatementLine):
                        removed.setdefault(id(parent), set()).add(key)
                        lines[id(parent)] = parent
                    elif isinstance(op.node, cst.BaseSmallStatement):
                        self.remove_small.add(key)
                    else:
                        self.remove_lines.add(key)
            for line_id, small in removed.items():
                if len(small) == len(lines[line_id].body):
                    self.remove_lines.add(line_id)
                else:
                    self.remove_small.update(small)

        # ------------------------------------------------------------ dispatch
        def on_visit(self, node: Any) -> bool:
            """Descend only into nodes that hold an edit."""
            rng = self.ranges.get(id(node))
            if rng is None:
                return True
            edited = self.edited
            first, last = min(rng[0][0], len(edited) - 1), min(rng[1][0], len(edited) - 1)
            return edited[last] - (edited[first - 1] if first > 0 else 0) > 0

        def on_leave(self, original: Any, updated: Any) -> Any:
            cst = self.cst
            key = id(original)
            if key in self.expr:
                return self._expression(updated, self.expr[key])
            if key in self.kw:
                for name, value in self.kw[key]:
                    updated = _set_keyword(cst, updated, name, value)
            if isinstance(original, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                updated = self._smalls(original, updated)
            elif isinstance(original, (cst.IndentedBlock, cst.Module)):
                updated = self._block(original, updated)
            if key in self.body_end:
                block = updated.body
                updated = updated.with_changes(body=block.with_changes(body=list(block.body) + self.body_end[key]))
            return updated

        def _expression(self, old: Any, new: Any) -> Any:
            cst = self.cst
            if getattr(old, "lpar", None) and not new.lpar:
                return new.with_changes(lpar=old.lpar, rpar=old.rpar)
            if not getattr(old, "lpar", None) and type(new).__name__ not in ATOMS and type(new) is not type(old):
                return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return new

        def _smalls(self, original: Any, updated: Any) -> Any:
            cst = self.cst
            if not any(id(s) in self.remove_small or id(s) in self.replace_small for s in original.body):
                return updated
            out: List[Any] = []
            for orig, upd in zip(original.body, updated.body):
                if id(orig) in self.remove_small:
                    continue
                if id(orig) in self.replace_small:
                    new = list(self.replace_small[id(orig)])
                    new[-1] = new[-1].with_changes(semicolon=upd.semicolon)
                    out.extend(new)
                else:
                    out.append(upd)
            if not out:
                out = [cst.Pass()]
            fixed = []
            for i, stmt in enumerate(out):
                last = i == len(out) - 1
                if not last and not isinstance(stmt.semicolon, cst.Semicolon):
                    stmt = stmt.with_changes(semicolon=cst.Semicolon(
                        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" ")))
                elif last and stmt is not updated.body[-1]:
                    stmt = stmt.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                fixed.append(stmt)
            return updated.with_changes(body=fixed)

        def _block(self, original: Any, updated: Any) -> Any:
            cst = self.cst
            is_module = isinstance(original, cst.Module)
            touched = any(id(s) in self.remove_lines or id(s) in self.replace_line or id(s) in self.after
                          for s in original.body)
            if touched:
                out: List[Any] = []
                carry: List[Any] = []
                for orig, upd in zip(original.body, updated.body):
                    key = id(orig)
                    if key in self.remove_lines:
                        carry.extend(upd.leading_lines)
                    elif key in self.replace_line:
                        new = list(self.replace_line[key])
                        new[0] = new[0].with_changes(leading_lines=carry + list(upd.leading_lines)
                                                     + list(new[0].leading_lines))
                        if (len(new) == 1 and isinstance(upd, cst.SimpleStatementLine)
                                and isinstance(new[0], cst.SimpleStatementLine)):
                            new[0] = new[0].with_changes(trailing_whitespace=upd.trailing_whitespace)
                        out.extend(new)
                    else:
                        if carry:
                            upd = upd.with_changes(leading_lines=_join_leading(carry, upd.leading_lines))
                        elif is_module and not out and self.blank_before and orig is not original.body[0]:
                            # the chunk's first statements were removed, a blank line precedes the chunk
                            upd = upd.with_changes(leading_lines=_drop_one_blank(upd.leading_lines))
                        out.append(upd)
                    if key not in self.remove_lines:
                        carry = []
                    inserted = list(self.after.get(key, ()))
                    if inserted and carry:
                        inserted[0] = inserted[0].with_changes(leading_lines=carry + list(inserted[0].leading_lines))
                        carry = []
                    out.extend(inserted)
                if not out and not is_module:
                    out = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carry)]
                    carry = []
                comments = [line for line in carry if line.comment is not None]
                updated = updated.with_changes(body=out, footer=comments + list(updated.footer))
            return updated

    _TRANSFORMER.append(Transformer)
    return Transformer


def _blank_before(out: List[str]) -> bool:
    """Does the text assembled so far end with a blank line?"""
    for piece in reversed(out):
        if piece:
            return not piece.strip() or piece.endswith(("\n\n", "\r\n\r\n", "\r\r"))
    return False


def _drop_one_blank(own: Sequence[Any]) -> List[Any]:
    """`own` with one blank line fewer when it has two or more (the blank line before the removed
    statements already separates): no new run of 3 blank lines (E303), and 2 stay before a `def`."""
    lines = list(own)
    blanks = [i for i, line in enumerate(lines) if line.comment is None]
    if len(blanks) >= 2:
        del lines[blanks[0]]
    return lines


def _join_leading(carried: Sequence[Any], own: Sequence[Any]) -> List[Any]:
    """The leading lines of a statement that follows removed ones: the removed statements' comments are
    kept, their blank lines only where the statement has none of its own (no run of 3 blank lines, E303)."""
    if any(line.comment is None for line in own):
        carried = [line for line in carried if line.comment is not None]
    return list(carried) + list(own)


def _set_keyword(cst: Any, call: Any, name: str, value: Any) -> Any:
    """Set keyword `name` on `call`: replace its value, or append it in the call's own layout."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value=value, keyword=cst.Name(name),
                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace("")))
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    trailing = isinstance(last.comma, cst.Comma)
    end = last.comma.whitespace_after if trailing else last.whitespace_after_arg
    prev = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) \
        else call.whitespace_before_args
    if isinstance(end, cst.ParenthesizedWhitespace) and isinstance(prev, cst.ParenthesizedWhitespace):
        # one argument per line: the new one goes on its own line, comments stay where they were
        sep = end.with_changes(last_line=prev.last_line)
        tail = end.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    else:
        sep, tail = cst.SimpleWhitespace(" "), end
    if trailing:
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=sep))
        new = new.with_changes(comma=last.comma.with_changes(whitespace_after=tail))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=sep),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=tail)
    return call.with_changes(args=args + [new])
