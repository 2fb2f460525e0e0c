"""Reading source files faithfully and writing them back atomically."""
from __future__ import annotations

import io
import os
import re
import tempfile
import tokenize
from dataclasses import dataclass
from typing import List


NEWLINE_RE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> List[str]:
    """Split on the newlines Python's tokenizer knows (not on form feeds etc. like str.splitlines)."""
    if not keepends:
        return NEWLINE_RE.split(text)
    parts, start = [], 0
    for match in NEWLINE_RE.finditer(text):
        parts.append(text[start:match.end()])
        start = match.end()
    parts.append(text[start:])
    return parts


class SourceError(Exception):
    """A file that cannot be linted; becomes one ASC000 finding."""

    def __init__(self, reason: str, line: int = 1, col: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.col = col


@dataclass
class SourceFile:
    path: str
    raw: bytes
    text: str
    encoding: str  # as Python names it; "utf-8-sig" when the file starts with a BOM

    def encode(self, text: str) -> bytes:
        """Encode `text` the way this file was encoded (BOM and codec kept)."""
        return text.encode(self.encoding)


def decode_source(raw: bytes) -> tuple:
    """Decode Python source bytes per PEP 263 (BOM, coding cookie). Returns (text, encoding)."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SourceError("file is UTF-16 encoded: Python source must be UTF-8 or declare an ASCII-compatible encoding")
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise SourceError("binary file (contains NUL bytes), not Python source", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(f"bad encoding declaration: {exc}") from None
    try:
        text = raw.decode(encoding)
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r} in the coding declaration") from None
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw[: exc.start].count(b"\n") + 1
        raise SourceError(
            f"not valid {encoding}: byte 0x{raw[exc.start]:02x} cannot be decoded "
            "(declare the file's encoding with a '# -*- coding: ... -*-' line)",
            line,
            exc.start - line_start + 1,
        ) from None
    return text, encoding


def read_source(path: str) -> SourceFile:
    """Read and decode a source file; raise SourceError with a user-facing reason."""
    if os.path.isdir(path):
        raise SourceError("is a directory, not a file")
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError("broken symbolic link") from None
        raise SourceError("no such file or directory") from None
    except PermissionError:
        raise SourceError("permission denied: cannot read the file") from None
    except OSError as exc:
        raise SourceError(f"cannot read the file: {exc.strerror or exc}") from None
    text, encoding = decode_source(raw)
    return SourceFile(path, raw, text, encoding)


def write_atomic(path: str, data: bytes, durable: bool = True) -> None:
    """Replace (or create) `path` with `data` atomically: a temporary file in the same directory, then
    os.replace, so a reader sees the old or the new content, never a torn one. An existing file keeps its
    permission bits; a new one gets the umask's. `durable` fsyncs before the rename (source files);
    the result cache skips that."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
