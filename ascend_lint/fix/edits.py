"""A fix as plain text edits (range + replacement), for the `json` output and the language server.

The fixer applies a fix structurally (libcst); a client gets what applying that one fix on its own
(`fixer.apply_alone`) would change, so what it applies is exactly what `--fix` would write.
Many findings of one file: preview.FileEdits (the same edits from one pass over the file).
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ..fileio import split_lines
from ..rule import Finding


@dataclass(frozen=True)
class TextEdit:
    """Replace the characters from (line, col) to (end_line, end_col) with `content`.

    Lines are 1-based, columns 1-based in characters, the end exclusive (ruff's JSON convention).
    """

    line: int
    col: int
    end_line: int
    end_col: int
    content: str

    def to_dict(self) -> Dict[str, object]:
        return {"content": self.content, "location": {"row": self.line, "column": self.col},
                "end_location": {"row": self.end_line, "column": self.end_col}}


def fix_edits(text: str, finding: Finding, tree: Optional[ast.Module] = None) -> Optional[List[TextEdit]]:
    """The edits of `finding`'s fix on `text` (parsed: `tree`, to parse it once for many findings);
    None when the fix cannot be applied on its own."""
    if finding.fix is None:
        return None
    from .fixer import apply_alone  # libcst is imported only when a fix is structural

    fixed = apply_alone(text, finding, tree)
    return None if fixed is None else diff_edits(text, fixed)


def diff_edits(old: str, new: str) -> List[TextEdit]:
    """The smallest edits (one per changed run of lines, trimmed to the changed characters)."""
    a, b = split_lines(old, keepends=True), split_lines(new, keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        before, after = "".join(a[i1:i2]), "".join(b[j1:j2])
        prefix = _word_start(before, after, _common_prefix(before, after))
        suffix = _common_prefix(before[prefix:][::-1], after[prefix:][::-1])
        suffix = len(before) - _word_end(before, after, len(before) - suffix, len(after) - suffix)
        start = _position(a, i1, prefix)
        end = _position(a, i1, len(before) - suffix)
        edits.append(TextEdit(start[0], start[1], end[0], end[1], after[prefix:len(after) - suffix]))
    return edits


def _common_prefix(x: str, y: str) -> int:
    n = 0
    for p, q in zip(x, y):
        if p != q:
            break
        n += 1
    return n


def _is_word(text: str, index: int) -> bool:
    return 0 <= index < len(text) and (text[index].isalnum() or text[index] == "_")


def _word_start(before: str, after: str, cut: int) -> int:
    """Move a cut inside a word back to the word's start (replace `True` by `False`, not `Tru` by `Fals`)."""
    while cut > 0 and _is_word(before, cut - 1) and (_is_word(before, cut) or _is_word(after, cut)):
        cut -= 1
    return cut


def _word_end(before: str, after: str, cut: int, cut_after: int) -> int:
    """Move a cut inside a word (`cut` in `before`, `cut_after` in `after`) forward to the word's end."""
    while cut < len(before) and _is_word(before, cut) and (_is_word(before, cut - 1) or _is_word(after, cut_after - 1)):
        cut += 1
        cut_after += 1
    return cut


def _position(lines: Sequence[str], first: int, offset: int) -> tuple:
    """(1-based line, 1-based column) of the character `offset` characters after line `first` starts."""
    index = first
    while index < len(lines) and offset >= len(lines[index]) and lines[index].endswith(("\n", "\r")):
        offset -= len(lines[index])
        index += 1
    return index + 1, offset + 1
