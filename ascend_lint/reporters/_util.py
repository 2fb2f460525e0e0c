"""Helpers shared by the machine formats (github, sarif, gitlab, junit, json-lines).

Everything a report contains that came from outside (file names, messages quoting source, source
lines) is untrusted: these helpers make it valid Unicode, strip what can break a consumer, and map
paths to the repository-relative form CI systems expect.
"""
from __future__ import annotations

import hashlib
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote

from ..rule import Finding
from ..sanitize import is_unsafe

LONE_SURROGATE_RE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
XML_INVALID_RE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def text(value: str) -> str:
    """`value` as valid Unicode: undecodable file-name bytes and lone surrogates become U+FFFD."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        value = LONE_SURROGATE_RE.sub("\ufffd", value)  # keep only the escapes of undecodable bytes
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def clean(value: str) -> str:
    """Valid Unicode without control, format (bidi, zero-width) or line-separator characters (TAB, CR, LF
    kept: the serialisers escape them); `ascend_lint.sanitize` decides what is unsafe."""
    value = text(value)
    if value.isprintable():
        return value
    return "".join(c for c in value if c in "\t\r\n" or not is_unsafe(c))


def one_line(value: str) -> str:
    """`clean` and every run of whitespace (newlines included) folded into one space."""
    return " ".join(clean(value).split())


def path_bytes(path: str) -> bytes:
    """The file name's bytes (file names that were not UTF-8 are surrogate-escaped in `str`)."""
    try:
        return path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogatepass")


def relative_path(path: str, base: Optional[str] = None) -> str:
    """`path` relative to `base` (default: $GITHUB_WORKSPACE / $CI_PROJECT_DIR / cwd), with `/`.

    Paths outside `base` stay absolute; `-` (stdin) stays as is.
    """
    if path in ("", "-"):
        return path
    if base is None:
        base = os.environ.get("GITHUB_WORKSPACE") or os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
    except ValueError:  # another drive on Windows
        return path.replace(os.sep, "/")
    if rel == ".." or rel.startswith(".." + os.sep):
        return os.path.abspath(path).replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def uri_path(path: str) -> str:
    """A relative path as a URI reference (RFC 3986 percent-encoding of the file name's bytes)."""
    return quote(path_bytes(path), safe="/")


def source_line(lines: Optional[Sequence[str]], line: int) -> str:
    if lines and 0 < line <= len(lines):
        return lines[line - 1]
    return ""


def fingerprints(findings: Sequence[Finding], sources: Dict[str, List[str]],
                 base: Optional[str] = None) -> List[Tuple[str, int]]:
    """Per finding: (hash of path + code + the whitespace-normalised source line, occurrence).

    Independent of line numbers (stable when code moves), unique within a report through the
    occurrence counter (identical lines with the same finding in one file count 0, 1, 2, ...).
    """
    seen: Dict[str, int] = {}
    out = []
    for f in findings:
        line = " ".join(source_line(sources.get(f.path), f.line).split()) or f.message
        key = "\0".join((relative_path(f.path, base), f.code, line))
        digest = hashlib.sha256(path_bytes(key)).hexdigest()
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        out.append((digest, n))
    return out
