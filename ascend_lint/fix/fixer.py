"""Fixing one source: rounds of one pass each, re-lint until stable.

Detection stays on `ast`; libcst is imported only when a file has a structural fix to apply (engine.py),
so importing this module costs nothing on a plain check.

The fixes are always derived from the text being fixed: the findings a caller passes (perhaps read from
the result cache) only say whether the file has something to fix; the first round lints the text again
and applies what that finds. Per round: the applicable fixes are applied in one pass (engine.FilePass;
a fix that overlaps one accepted before it waits for the next round), the imports they leave unused are
removed (imports.py), the output is parsed with `ast` and re-linted, and this repeats until nothing
fixable is left (at most `MAX_ROUNDS` rounds). A fix whose output does not parse is dropped with a warning
naming the rule; fixes that change nothing although their finding remains, undo each other or never
converge are dropped with a warning and the file is left as it was.
"""
from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Set, Tuple

from ..config import Settings
from ..engine.linter import Linter, decides_per_file, parse
from ..fileio import SourceError, split_lines
from ..rule import Finding
from .engine import CHUNK_GAP, Attempt, CannotFix, apply_once
from .unused import clean_unused_imports
from .policy import apply_fix_settings, codes, effective_applicability, fix_key, is_applicable

__all__ = ["MAX_ROUNDS", "CHUNK_GAP", "FileFix", "fix_text", "apply_alone", "apply_once", "is_applicable",
           "apply_fix_settings", "effective_applicability"]  # (and command.py's names, for older imports)

MAX_ROUNDS = 10
_apply_once = apply_once  # (the name the tests knew)


@dataclass
class FileFix:
    """What fixing one source produced. `text` is the original when nothing was applied."""

    text: str
    applied: List[Finding] = field(default_factory=list)  # findings whose fixes were applied
    findings: List[Finding] = field(default_factory=list)  # findings of the final text
    warnings: List[str] = field(default_factory=list)


class _GiveUp(Exception):
    """The file is left as it was; the message says why."""


class _Rounds:
    """The state of fixing one text in rounds."""

    def __init__(self, text: str, path: str, linter: Linter, settings: Settings,
                 linted: Optional[Sequence[Finding]] = None, tree: Optional[ast.Module] = None) -> None:
        self.path, self.linter, self.settings = path, linter, settings
        self.current = text
        self.tree: ast.Module = tree if tree is not None else parse(text, path)
        self.scoped = linted is not None  # (the rewritten statements alone are parsed and linted again)
        if linted is None:
            self.findings = self._lint(text, self.tree)
        else:  # (copies: the settings rewrite applicabilities in place)
            self.findings = [dataclasses.replace(f) for f in linted]
            apply_fix_settings(self.findings, settings)
        self.seen = {text}
        self.applied: List[Finding] = []
        self.dropped: Set[tuple] = set()
        self.warnings: List[str] = []

    def _lint(self, text: str, tree: ast.Module) -> List[Finding]:
        try:
            found = self.linter.check(text, self.path, tree)
        except SourceError as exc:  # e.g. too deep for the walker: treat like invalid output
            raise _GiveUp(f"fixed source cannot be linted ({exc.reason}); file left as it was") from None
        apply_fix_settings(found, self.settings)
        return found

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def drop(self, finding: Finding, reason: str) -> None:
        self.dropped.add(fix_key(finding))
        self.warn(f"{finding.code} fix at line {finding.line} {reason}; fix dropped")

    def candidates(self) -> List[Finding]:
        return [f for f in self.findings if is_applicable(f, self.settings) and fix_key(f) not in self.dropped]

    def run(self) -> None:
        for _ in range(MAX_ROUNDS):
            candidates = self.candidates()
            if not candidates:
                return
            self.round(candidates)
        pending = self.candidates()
        if pending:
            raise _GiveUp(f"fixes did not converge after {MAX_ROUNDS} rounds ({codes(pending)} still fixable); "
                          "file left as it was")

    def round(self, candidates: Sequence[Finding]) -> None:
        try:
            attempt = apply_once(self.current, candidates, self.tree)
        except CannotFix as exc:
            raise _GiveUp(str(exc)) from None
        for finding, reason in attempt.failed:
            self.drop(finding, reason)
        if not attempt.applied:
            return
        spliced = self._spliced(attempt) if self.scoped and attempt.reads_kept else None
        tree = spliced if spliced is not None else self._parsed(attempt)
        if tree is not None and not attempt.reads_kept:  # (no read of a name went: no import became unused)
            tree = self._cleaned(attempt, tree)
        if tree is None:
            return
        if attempt.text in self.seen:
            raise _GiveUp(f"fixes {codes(self.applied + attempt.applied)} are not idempotent (they undo each "
                          "other); file left as it was")
        self.seen.add(attempt.text)
        if spliced is not None:
            self.findings = self._lint_rewritten(attempt.text, tree, attempt.rewritten or [])
        else:
            self.findings = self._lint(attempt.text, tree)
        self.applied.extend(attempt.applied)
        self.current, self.tree = attempt.text, tree

    def _spliced(self, attempt: Attempt) -> Optional[ast.Module]:
        """The tree of the pass's output: the rewritten chunks parsed (in one parse, every other line blank,
        so that they keep their lines), every other top-level statement the previous tree's; None when that
        cannot be (the output is parsed whole then)."""
        if attempt.rewritten is None:
            return None
        lines = split_lines(attempt.text, keepends=True)
        masked = ["\n"] * len(lines)
        for first, last in attempt.rewritten:
            masked[first - 1:last] = lines[first - 1:last]
        try:
            fresh = iter(ast.parse("".join(masked)).body)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        body: List[ast.stmt] = []
        for statement in self.tree.body:
            line = statement.lineno
            if not any(first <= line <= last for first, last in attempt.rewritten):
                body.append(statement)
        body += list(fresh)
        body.sort(key=lambda stmt: stmt.lineno)
        return ast.Module(body=body, type_ignores=[])

    def _lint_rewritten(self, text: str, tree: ast.Module, rewritten: Sequence[Tuple[int, int]]) -> List[Finding]:
        """The findings of the output when only the `rewritten` lines changed: the rules that decide per file
        lint it whole, the others only those lines (elsewhere their findings are the previous text's)."""
        try:
            found = self.linter.analyse(text, self.path, tree, within=rewritten).findings
        except SourceError as exc:
            raise _GiveUp(f"fixed source cannot be linted ({exc.reason}); file left as it was") from None
        apply_fix_settings(found, self.settings)
        whole = {r.code for r in self.linter.rules_for(self.path) if decides_per_file(r)}

        def inside(line: int) -> bool:
            return any(first <= line <= last for first, last in rewritten)
        kept = [f for f in self.findings if f.code not in whole and not inside(f.line)]
        out = kept + [f for f in found if f.code in whole or inside(f.line)]
        out.sort(key=Finding.sort_key)
        return out

    def _parsed(self, attempt: Attempt) -> Optional[ast.Module]:
        """The tree of the pass's output; None when it does not parse (the culprits are dropped)."""
        try:
            return parse(attempt.text, self.path)
        except SourceError:
            pass
        culprits = _syntax_culprits(self.current, attempt.applied, self.path)
        if not culprits:
            raise _GiveUp(f"fixes {codes(attempt.applied)} together produced invalid Python; file left as it was")
        for finding in culprits:
            self.drop(finding, "produced invalid Python")
        return None

    def _cleaned(self, attempt: Attempt, tree: ast.Module) -> Optional[ast.Module]:
        """Remove (or mark) the imports the pass left unused, in `attempt.text`; the tree of the result, or
        None when that cannot be done (the fixes responsible are dropped)."""
        cleaned, problems = clean_unused_imports(attempt.text, self.tree, tree)
        if not problems and cleaned != attempt.text:
            try:
                tree = parse(cleaned, self.path)
            except SourceError:
                problems = ["removing the imports it leaves unused would break the file"]
        if not problems:
            attempt.text = cleaned
            return tree
        culprits = _unused_import_culprits(self.current, self.tree, attempt.applied, self.path)
        if not culprits:
            raise _GiveUp(f"fixes {codes(attempt.applied)} together {problems[0]}; file left as it was")
        for finding, problem in culprits:
            self.dropped.add(fix_key(finding))
            self.warn(f"{finding.code} fix at line {finding.line}: {problem}; fix dropped")
        return None


def fix_text(text: str, path: str, findings: Sequence[Finding], linter: Linter, settings: Settings,
             linted: bool = False, tree: Optional[ast.Module] = None) -> FileFix:
    """Apply every applicable fix to `text` in rounds; see the module docstring. `findings` only decide
    whether there is anything to do: the fixes applied are those `linter` finds in `text`. With `linted`,
    `findings` are what `linter` found in `text` (parsed: `tree`) just now, the first round's (the language
    server's lint of the document: only the caller can vouch for that)."""
    original = FileFix(text, findings=list(findings))
    if not any(is_applicable(f, settings) for f in findings):
        return original
    try:
        rounds = _Rounds(text, path, linter, settings, findings if linted else None, tree)
    except SourceError as exc:  # text-level findings (unused noqa) can come from a file that does not parse
        original.warnings = [f"not fixed: the file does not parse ({exc.reason})"]
        return original
    except _GiveUp as exc:
        original.warnings = [str(exc)]
        return original
    try:
        rounds.run()
    except _GiveUp as exc:
        original.warnings = rounds.warnings + [str(exc)]
        return original
    return FileFix(rounds.current, rounds.applied, rounds.findings, rounds.warnings)


def _unused_import_culprits(text: str, before: ast.Module, fixes: Sequence[Finding],
                            path: str) -> List[Tuple[Finding, str]]:
    """The fixes that, on their own, leave an import unused that can be neither removed nor marked."""
    culprits = []
    for finding in fixes:
        try:
            attempt = apply_once(text, [finding], before)
            cleaned, problems = clean_unused_imports(attempt.text, before, parse(attempt.text, path))
            if not problems:
                parse(cleaned, path)
        except CannotFix:
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
        attempt = apply_once(text, [finding], before)
        if not attempt.applied:
            return None
        cleaned, problems = clean_unused_imports(attempt.text, before, parse(attempt.text, "<fix>"))
        if problems:
            return None
        parse(cleaned, "<fix>")
    except (CannotFix, SourceError):
        return None
    return cleaned


def _syntax_culprits(text: str, fixes: Sequence[Finding], path: str) -> List[Finding]:
    """The fixes that produce unparsable output on their own."""
    culprits = []
    for finding in fixes:
        try:
            attempt = apply_once(text, [finding])
            parse(attempt.text, path)
        except (SourceError, CannotFix):
            culprits.append(finding)
    return culprits
