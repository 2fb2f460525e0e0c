"""Which fixes may be applied: applicability after the settings, what `--fix` holds back, and how a run's
fix summary words it (ruff's wording). No libcst here: importing this module is cheap."""
from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from ..config import Settings
from ..rule import Applicability, Finding, Fix


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


def held_back(findings: Iterable[Finding], settings: Settings) -> int:
    """How many of `findings` have an unsafe fix that `--fix` leaves alone without `--unsafe-fixes`."""
    if settings.unsafe_fixes:
        return 0
    return sum(1 for f in findings if f.fix is not None and f.fix.applicability is Applicability.UNSAFE)


def fix_key(finding: Finding) -> tuple:
    """What identifies a fix across rounds (a dropped fix stays dropped when its finding comes back)."""
    fix = finding.fix
    assert fix is not None
    return (finding.code, finding.line, finding.col, fix.description,
            tuple((e.op, e.span, e.text, e.name) for e in fix.edits), fix.imports)


def codes(findings: Iterable[Finding]) -> str:
    return ", ".join(sorted({f.code for f in findings}))


def _plural(count: int, word: str, plural: str = "") -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _summary(fixed: int, unsafe: int, done: str, none: str) -> str:
    if fixed:
        extra = f" ({_plural(unsafe, 'additional fix', 'additional fixes')} available with `--unsafe-fixes`)" \
            if unsafe else ""
        return f"{done} {_plural(fixed, 'finding')}{extra}."
    if unsafe:
        return f"{none} ({_plural(unsafe, 'fix', 'fixes')} available with `--unsafe-fixes`)."
    return f"{none}."


def would_fix_message(fixed: int, unsafe: int) -> str:
    """The `--diff` summary line, as ruff words it (`unsafe`: fixes held back without `--unsafe-fixes`)."""
    return _summary(fixed, unsafe, "Would fix", "No findings would be fixed")


def fixed_message(fixed: int, unsafe: int) -> str:
    """The `--fix-only` summary line, as ruff words it ("" when there is nothing to say)."""
    return _summary(fixed, unsafe, "Fixed", "No findings fixed") if fixed or unsafe else ""
