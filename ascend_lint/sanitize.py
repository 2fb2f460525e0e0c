"""The one sanitiser for text that reaches a terminal or a diff.

File names, messages quoting source, source lines, configuration values and plugin texts are untrusted:
an ESC starts a terminal escape sequence, BEL rings, CR rewrites the line, a newline forges a finding,
DEL and C1 controls are interpreted by some terminals, and bidi overrides/isolates reorder what the
reader sees (Trojan Source). Unicode classifies all of them: controls (Cc), format characters (Cf:
bidi controls, zero-width characters, BOM) and line/paragraph separators (Zl, Zp). Those, and the
surrogate escapes of undecodable file-name bytes (Cs), are replaced; everything else printable stays.
"""
from __future__ import annotations

import unicodedata
from typing import Optional

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
REPLACEMENT = "\ufffd"
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def is_unsafe(char: str) -> bool:
    """Is `char` a control, format, separator or surrogate character?"""
    return not char.isprintable() and unicodedata.category(char) in UNSAFE_CATEGORIES | {"Cs"}


def _escape(char: str) -> str:
    short = _SHORT_ESCAPES.get(char)
    if short:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def sanitize(text: str, keep: str = "", same_width: bool = False) -> str:
    """`text` safe to print: unsafe characters become visible escapes (`\\x1b`, `\\u202e`), or U+FFFD each
    with `same_width` (source snippets, where a caret must stay under its column). Characters in `keep`
    (e.g. "\\n" for multi-line text) are left alone. Undecodable file-name bytes become U+FFFD."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable() or char in keep:
            out.append(char)
            continue
        category = unicodedata.category(char)
        if category == "Cs":  # a surrogate escape of an undecodable byte, or a lone surrogate
            out.append(REPLACEMENT)
        elif category in UNSAFE_CATEGORIES:
            out.append(REPLACEMENT if same_width else _escape(char))
        else:  # non-ASCII spaces, private use, unassigned: harmless
            out.append(char)
    return "".join(out)


def sanitize_lines(text: str) -> str:
    """Multi-line text (tracebacks, rule docs): each line sanitised, newlines kept."""
    return sanitize(text, keep="\n")


# ----------------------------------------------------------------------------- unified diff names
_C_QUOTE = {"\\": "\\\\", '"': '\\"'}


def diff_name(path: str) -> Optional[str]:
    """How to write `path` in a unified diff's `---`/`+++` header so that `patch -p0` and `git apply`
    patch exactly that file, or None when no spelling is safe.

    A name of printable characters without whitespace, quotes or backslashes is written as it is. One
    with spaces, quotes or backslashes is C-quoted (`"my file.py"`, as git writes it and GNU patch
    reads it): unquoted, `patch` stops at the first space and writes another file. A name with a
    control, format or separator character (newline, CR, tab, ESC, bidi controls) or with bytes that
    are not UTF-8 is refused: it could forge header or hunk lines, or cannot be shown.
    """
    if not path or any(is_unsafe(char) for char in path):
        return None
    if all(not char.isspace() and char not in _C_QUOTE for char in path):
        return path
    return '"' + "".join(_C_QUOTE.get(char, char) for char in path) + '"'
