"""Suppression comments: `# noqa`, `# noqa: ASC101,ASC202` and the file-level `# ascend-lint: noqa`;
the unused-noqa check (ASC001)."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Callable, Collection, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ..core_rules import UNUSED_NOQA_CODE
from ..rule import Applicability, Edit, Finding, Fix, Severity, Span

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


# ----------------------------------------------------------------------------- unused noqa (ASC001)
@dataclass(frozen=True)
class Directive:
    """A `# noqa: CODES` directive in a comment; columns are 0-based characters of its line."""

    line: int  # 1-based
    start: int  # the directive's `#`
    end: int  # just after its last code
    codes_start: int
    codes: Tuple[str, ...]  # as written, upper-cased, in order


def _directives_in(comment: str, line: int, col: int) -> Iterator[Directive]:
    for match in NOQA_RE.finditer(comment):
        if match.group("codes"):
            codes = tuple(c.upper() for c in CODE_SPLIT_RE.split(match.group("codes")) if c)
            yield Directive(line, col + match.start(), col + match.end(), col + match.start("codes"), codes)


def directives(text: str, wanted: Callable[[str], bool]) -> List[Directive]:
    """The noqa directives with codes in real comments (not in strings), if one names a `wanted` code."""
    if "noqa" not in text.lower():
        return []
    if not any(wanted(code) for m in NOQA_RE.finditer(text) if m.group("codes")
               for code in CODE_SPLIT_RE.split(m.group("codes").upper()) if code):
        return []  # only other tools' codes: not worth tokenizing the file
    found: List[Directive] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and "noqa" in token.string.lower():
                found.extend(_directives_in(token.string, token.start[0], token.start[1]))
    except (tokenize.TokenError, SyntaxError, ValueError):  # not Python enough to tell comments apart
        return []
    return found


def unused_noqa(path: str, text: str, lines: Sequence[str], findings: Sequence[Finding], ran: Set[str],
                registered: Collection[str]) -> List[Finding]:
    """ASC001 findings: noqa codes that suppressed none of `findings` (found before suppression).

    A code is judged only when every registered code it matches belongs to a rule that `ran` on the
    file, or when it is an `ASC` code that matches no registered rule at all (unknown).
    """
    def judged(code: str) -> Optional[str]:
        matching = [c for c in registered if c.startswith(code)]
        if not matching:
            return "unknown" if code.startswith("ASC") else None
        return "unused" if all(c in ran for c in matching) else None

    whole = file_codes(text)
    by_line: Dict[int, List[str]] = {}
    for f in findings:
        if not _suppressed(f.code, whole):
            by_line.setdefault(f.line, []).append(f.code)
    out: List[Finding] = []
    for directive in directives(text, lambda code: judged(code) is not None):
        reported = by_line.get(directive.line, [])
        problems: Dict[str, List[str]] = {}
        keep: List[str] = []
        for code in directive.codes:
            seen = code in keep or any(code in codes for codes in problems.values())
            verdict = "duplicated" if seen else judged(code)
            if verdict == "unused" and any(r.startswith(code) for r in reported):
                verdict = None
            if verdict is None:
                keep.append(code)
            else:
                problems.setdefault(verdict, []).append(code)
        if problems:
            details = "; ".join(f"{kind}: " + ", ".join(f"`{c}`" for c in codes)
                                for kind, codes in problems.items())
            line = lines[directive.line - 1] if directive.line <= len(lines) else ""
            out.append(Finding(path, directive.line, directive.start + 1, directive.line, directive.end + 1,
                               UNUSED_NOQA_CODE, "unused-noqa", f"Unused `noqa` directive ({details})",
                               Severity.WARNING, _removal(directive, line, keep)))
    return out


def _removal(directive: Directive, line: str, keep: Sequence[str]) -> Fix:
    """The safe fix: keep only `keep`, or drop the directive (what follows it stays a comment)."""
    line = line.rstrip("\r\n")
    if keep:
        start, end, text = directive.codes_start, directive.end, ", ".join(keep)
        description = "Remove the unused codes from the `noqa` directive"
    else:
        description = "Remove the unused `noqa` directive"
        start, end = directive.start, directive.end
        rest = line[end:]
        if not rest.strip():  # nothing after it: drop the whitespace before it too
            start = len(line[:start].rstrip(" \t"))
            if not line[:start].strip():
                start = 0
            end, text = len(line), ""
        elif rest.lstrip().startswith("#"):  # `# noqa: X  # why` -> `# why`
            end += len(rest) - len(rest.lstrip())
            text = ""
        else:  # `# noqa: X why` -> `# why`
            text = "#"
    span = Span(directive.line, start, directive.line, end)
    return Fix(Applicability.SAFE, description, (Edit("replace_text", span, text),))
