"""Suppression comments: `# noqa`, `# noqa: ASC101,ASC202` and the file-level `# ascend-lint: noqa`."""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Set

from .rule import Finding

NOQA_RE = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
FILE_NOQA_RE = re.compile(r"^\s*#\s*ascend-lint\s*:\s*noqa\b(?::\s*(?P<codes>[A-Z0-9,\s]+))?", re.I | re.M)
CODE_SPLIT_RE = re.compile(r"[,\s]+")


def line_codes(line: str) -> Optional[Set[str]]:
    """None: no noqa on the line; empty set: a bare `# noqa`; else the codes named."""
    if "noqa" not in line.lower():
        return None
    match = NOQA_RE.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return {c.upper() for c in CODE_SPLIT_RE.split(codes) if c} if codes else set()


def file_codes(text: str) -> Optional[Set[str]]:
    """The file-level suppression, like line_codes."""
    if "ascend-lint" not in text:
        return None
    match = FILE_NOQA_RE.search(text)
    if match is None:
        return None
    codes = match.group("codes")
    return {c.upper() for c in CODE_SPLIT_RE.split(codes) if c} if codes else set()


def _suppressed(code: str, codes: Optional[Set[str]]) -> bool:
    return codes is not None and (not codes or any(code.startswith(c) for c in codes))


def filter_findings(findings: List[Finding], lines: List[str], text: str) -> List[Finding]:
    """Drop findings suppressed by a noqa comment on their first line or for the whole file."""
    if not findings:
        return findings
    whole = file_codes(text)
    kept = []
    for finding in findings:
        if _suppressed(finding.code, whole):
            continue
        line = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
        if _suppressed(finding.code, line_codes(line)):
            continue
        kept.append(finding)
    return kept


def add_noqa_to_lines(lines: List[str], findings: Iterable[Finding]) -> Dict[int, str]:
    """New text for each reported line with `# noqa: CODES` appended or extended (by line index)."""
    per_line: Dict[int, Set[str]] = {}
    for finding in findings:
        if finding.code != "ASC000":
            per_line.setdefault(finding.line - 1, set()).add(finding.code)
    changed = {}
    for index, codes in per_line.items():
        if not 0 <= index < len(lines):
            continue
        line = lines[index]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        existing = line_codes(body)
        if existing is not None and not existing:
            continue  # a bare noqa already suppresses everything
        if existing is not None:
            match = NOQA_RE.search(body)
            merged = sorted(existing | codes)
            body = body[: match.start()] + "# noqa: " + ", ".join(merged) + body[match.end():]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        changed[index] = body + ending
    return changed
