"""Continuation lines after a fix: a fix that changes the text before an open bracket (a longer name, a
shorter method) moves the column its continuation lines were aligned to (visual indentation); they are
moved with it, so flake8's E127/E128 see the layout they saw before.

Text only: lines are scanned for brackets outside strings and comments. A statement holding a string
that spans lines, or a backslash continuation, is left as it is.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

_OPEN, _CLOSE = "([{", ")]}"


class _Unsure(Exception):
    """The scanner cannot follow this text (a string spans lines, a backslash continuation)."""


def _scan(line: str, stack: List[Tuple[Optional[int], int]], shift: int) -> None:
    """Follow the brackets of `line` on `stack` (entries: (visual column or None, shift of the lines
    aligned to it)); a bracket opened here with code after it on the line sets its visual column."""
    body = line.rstrip("\r\n")
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == "#":
            break
        if ch in "'\"":
            i = _skip_string(body, i)
            continue
        if ch in _OPEN:
            rest = body[i + 1:]
            content = len(rest) - len(rest.lstrip(" \t"))
            visual = None if not rest.strip() or rest.lstrip().startswith("#") else i + 1 + content
            stack.append((visual, shift))
        elif ch in _CLOSE and stack:
            stack.pop()
        i += 1
    if body.endswith("\\"):
        raise _Unsure


def _skip_string(body: str, i: int) -> int:
    """Index after the string literal starting at `i` (its prefix letters are ordinary characters)."""
    quote = body[i]
    if body.startswith(quote * 3, i):
        end = body.find(quote * 3, i + 3)
        if end < 0:
            raise _Unsure
        return end + 3
    j = i + 1
    while j < len(body):
        if body[j] == "\\":
            j += 2
            continue
        if body[j] == quote:
            return j + 1
        j += 1
    raise _Unsure


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def realign(old: Sequence[str], new: List[str]) -> List[str]:
    """`new` (the lines of `old` after a fix changed some, one for one) with the continuation lines that
    were aligned to a bracket of a changed line moved to where that bracket's code now starts."""
    if len(old) != len(new):
        return new
    out = list(new)
    i = 0
    while i < len(old):
        if old[i] == new[i]:
            i += 1
            continue
        try:
            i = _realign_from(old, new, out, i)
        except _Unsure:
            i += 1
    return out


def _realign_from(old: Sequence[str], new: Sequence[str], out: List[str], first: int) -> int:
    """Realign the continuation lines after changed line `first`; the index of the line after them."""
    old_stack: List[Tuple[Optional[int], int]] = []
    new_stack: List[Tuple[Optional[int], int]] = []
    _scan(old[first], old_stack, 0)
    _scan(new[first], new_stack, 0)
    if not old_stack or len(old_stack) != len(new_stack):
        return first + 1
    shifts = [(o[0], None if o[0] is None or n[0] is None else n[0] - o[0]) for o, n in zip(old_stack, new_stack)]
    stack: List[Tuple[Optional[int], int]] = [(visual, shift or 0) for visual, shift in shifts]
    j = first + 1
    pending: List[Tuple[int, str]] = []
    while stack and j < len(old):
        if old[j] != new[j]:  # another change inside the statement: leave its layout to that line
            return j
        visual, shift = stack[-1]
        line = old[j]
        moved = shift if visual is not None and _indent(line) == visual and line.strip() else 0
        if moved and "\t" in line[:_indent(line)]:
            raise _Unsure
        if moved:
            width = _indent(line) + moved
            if width <= 0:
                raise _Unsure
            line = " " * width + line.lstrip(" \t")
        pending.append((j, line))
        _scan(old[j], stack, moved)
        j += 1
    for index, line in pending:
        out[index] = line
    return j


def leaves_open(line: str) -> bool:
    """Does `line` leave a bracket open (or a string or backslash continuation) for the next line?"""
    stack: List[Tuple[Optional[int], int]] = []
    try:
        _scan(line, stack, 0)
    except _Unsure:
        return True
    return bool(stack)
