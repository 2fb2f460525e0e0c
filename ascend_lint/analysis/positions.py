"""Positions in a file's source: its lines, the source text of a node, and spans with character columns (the ast
counts UTF-8 bytes). A facet of FileContext (semantic.py), which provides `text`."""
from __future__ import annotations

import ast
import re
from typing import List, Optional

from ..fileio import split_lines
from ..rule import Span


class SourcePositions:
    """FileContext's questions about positions (the file's lines split once, on first use)."""

    text: str
    _lines: Optional[List[str]]
    _lines_with_ends: Optional[List[str]]  # (files with `\r`: lines keeping their endings)
    _has_cr: Optional[bool]

    @property
    def lines(self) -> List[str]:
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    def segment(self, node: ast.AST) -> Optional[str]:
        """The source text of `node`, as `ast.get_source_segment` gives it, cut from the lines the
        file was split into once (get_source_segment splits the whole file on every call)."""
        try:
            first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return None
        if last is None or end_col is None:
            return None
        if self._has_cr is None:
            self._has_cr = "\r" in self.text
        if self._has_cr:  # keep the file's own line endings inside the segment
            if self._lines_with_ends is None:
                self._lines_with_ends = _LINE_WITH_END.findall(self.text)  # (ast's own line splitting)
            lines, joiner = self._lines_with_ends, ""
        else:
            lines, joiner = self.lines, "\n"
        if not 0 < first <= last <= len(lines):
            return None
        if first == last:
            return _byte_slice(lines[first - 1], col, end_col)
        return joiner.join([_byte_slice(lines[first - 1], col, None)] + lines[first:last - 1]
                           + [_byte_slice(lines[last - 1], 0, end_col)])

    def char_col(self, line: int, byte_col: int) -> int:
        if not 0 < line <= len(self.lines):
            return byte_col
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = col
        return Span(line, self.char_col(line, col), end_line, self.char_col(end_line, end_col))


_LINE_WITH_END = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # lines as `ast` numbers them, ends kept


def _byte_slice(line: str, start: int, end: Optional[int]) -> str:
    """`line[start:end]` with UTF-8 byte offsets (as the ast gives columns)."""
    if line.isascii():
        return line[start:end]
    return line.encode("utf-8")[start:end].decode("utf-8", "replace")
