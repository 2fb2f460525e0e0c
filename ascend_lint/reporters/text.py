"""Human formats: `full` (with a source snippet and caret) and `concise` (one line per finding)."""
from __future__ import annotations

from typing import TextIO

from ..rule import Applicability, Finding
from ..sanitize import sanitize
from . import Report, clean_text, fix_applies
from .cost import cost_label

BOLD, RED, CYAN, YELLOW, RESET = "\033[1m", "\033[31m", "\033[36m", "\033[33m", "\033[0m"


def _paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{RESET}" if color else text


def fix_marker(finding: Finding, report: Report) -> str:
    return "[*] " if fix_applies(finding, report.unsafe_fixes) else ""


def headline(finding: Finding, report: Report) -> str:
    color = report.color
    where = f"{clean_text(finding.path)}:{finding.line}:{finding.col}:"
    code = _paint(finding.code, RED + BOLD if finding.severity.value == "error" else RED, color)
    marker = _paint(fix_marker(finding, report), CYAN, color)
    cost = _paint(f"[{cost_label(finding.cost)}] ", YELLOW, color) if finding.cost is not None else ""
    return f"{_paint(where, BOLD, color)} {code} {cost}{marker}{clean_text(finding.message)}"


def render_concise(report: Report, out: TextIO) -> None:
    for finding in report.findings:
        out.write(headline(finding, report) + "\n")


def render_full(report: Report, out: TextIO) -> None:
    for finding in report.findings:
        out.write(headline(finding, report) + "\n")
        lines = report.sources.get(finding.path)
        if lines and 0 < finding.line <= len(lines):
            out.write(_snippet(finding, lines, report.color))
        if finding.fix is not None:
            kind = finding.fix.applicability.value
            note = f"{kind} fix: {finding.fix.description}"
            if finding.fix.applicability is Applicability.UNSAFE and not report.unsafe_fixes:
                note += " (unsafe fix available with --unsafe-fixes)"
            out.write(f"  = help: {clean_text(note)}\n")
        out.write("\n")


def _snippet(finding: Finding, lines: list, color: bool) -> str:
    text = sanitize(lines[finding.line - 1].expandtabs(1), same_width=True)  # carets stay aligned
    number = str(finding.line)
    pad = " " * len(number)
    start = max(finding.col - 1, 0)
    end = finding.end_col - 1 if finding.end_line == finding.line else len(text)
    width = max(end - start, 1)
    caret = " " * start + _paint("^" * width, RED, color)
    gutter = _paint(f"{pad} |", CYAN, color)
    return (
        f"{gutter}\n"
        f"{_paint(number + ' |', CYAN, color)} {text}\n"
        f"{gutter} {caret}\n"
    )
