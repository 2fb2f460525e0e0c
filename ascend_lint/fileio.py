"""Reading source files faithfully (regular files only, bounded) and writing them back safely."""
from __future__ import annotations

import io
import os
import re
import signal
import stat
import tempfile
import threading
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple


NEWLINE_RE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> List[str]:
    """Split on the newlines Python's tokenizer knows (not on form feeds etc. like str.splitlines)."""
    if not keepends:
        return text.split("\n") if "\r" not in text else NEWLINE_RE.split(text)
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


DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024  # bytes; the `max-file-size` setting
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class FileTooLarge(SourceError):
    """A file over the size cap."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"file too large: {size:,} bytes, over the {limit:,}-byte limit (setting `max-file-size`)")
        self.size, self.limit = size, limit


def _too_large(size: int, limit: int) -> SourceError:
    return FileTooLarge(size, limit)


def check_size(raw: bytes, limit: Optional[int]) -> None:
    """Raise `file too large` for source bytes over `limit` (stdin, editor buffers)."""
    if limit is not None and len(raw) > limit:
        raise _too_large(len(raw), limit)


def read_bytes(path: str, limit: Optional[int] = DEFAULT_MAX_FILE_SIZE) -> Tuple[bytes, os.stat_result]:
    """The bytes of a regular file of at most `limit` bytes, and its stat; SourceError otherwise.

    Only regular files are opened: a FIFO, device or socket named `x.py` (or a symlink to `/dev/zero`)
    is refused from its stat, and the open is non-blocking, so a file swapped for a FIFO in between
    cannot hang the run either. At most `limit` + 1 bytes are read, whatever the file claims.
    """
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise SourceError("is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"not a regular file ({_kind(st.st_mode)}): not read")
        if limit is not None and st.st_size > limit:
            raise _too_large(st.st_size, limit)
        fd = os.open(path, _READ_FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SourceError(f"not a regular file ({_kind(st.st_mode)}): not read")
            with os.fdopen(fd, "rb", closefd=False) as handle:
                raw = handle.read() if limit is None else handle.read(limit + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError("broken symbolic link") from None
        raise SourceError("no such file or directory") from None
    except PermissionError:
        raise SourceError("permission denied: cannot read the file") from None
    except OSError as exc:
        raise SourceError(f"cannot read the file: {exc.strerror or exc}") from None
    if limit is not None and len(raw) > limit:
        raise _too_large(len(raw), limit)
    return raw, st


def read_source(path: str, limit: Optional[int] = DEFAULT_MAX_FILE_SIZE) -> SourceFile:
    """Read and decode a source file; raise SourceError with a user-facing reason."""
    raw, _ = read_bytes(path, limit)
    text, encoding = decode_source(raw)
    return SourceFile(path, raw, text, encoding)


# ----------------------------------------------------------------------------- writing
@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back while a file is being replaced, then act on them.

    A signal arriving in the write window is recorded; the window ends (the temporary file renamed or
    removed), the previous handlers come back and the signal is raised again, so an interrupted run
    never leaves a `.NAME.tmp` file or a half-written source behind. (SIGKILL cannot be caught: a kill
    during the window can leave the temporary file; the source itself is still whole.) Only the main
    thread can install handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: List[int] = []
    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is None:
            continue
        try:
            previous[number] = signal.signal(number, lambda signum, frame: received.append(signum))
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(received):
            signal.raise_signal(number)


class _OwnerNotKept(Exception):
    """The replacement file could not be given the original owner."""


def write_atomic(path: str, data: bytes, durable: bool = True, like: Optional[os.stat_result] = None,
                 mode: Optional[int] = None) -> None:
    """Replace (or create) `path` with `data` atomically: a temporary file in the same directory, then
    os.replace, so a reader sees the old or the new content, never a torn one. The new file gets the
    permission bits (and, with `like`, the owner and group) of the file it replaces; a new one gets the
    umask's. `durable` fsyncs before the rename (source files); the result cache skips that. Signals
    are deferred until the temporary file is renamed or removed. `mode`: the new file's, whatever the old one's."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = (like or os.stat(path)).st_mode & 0o7777 if mode is None else mode
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    with signals_deferred():
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            if like is not None and hasattr(os, "chown"):
                new = os.stat(tmp)
                if (new.st_uid, new.st_gid) != (like.st_uid, like.st_gid):
                    try:
                        os.chown(tmp, like.st_uid, like.st_gid)
                    except OSError:
                        raise _OwnerNotKept() from None
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def _write_in_place(path: str, data: bytes) -> None:
    """Overwrite the file's own inode (owner, mode, hard links and extended attributes stay)."""
    with signals_deferred():
        with open(path, "r+b") as handle:
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())


def write_source(source: SourceFile, data: bytes, what: str = "fixes") -> Optional[str]:
    """The one write policy of `--fix` and `--add-noqa`: write `data` over the file `source` was read
    from, or say why not (a warning naming `what` was not written; None when written).

    Refused: a file that changed on disk since it was read, a read-only file (no write bit, or not
    writable by this user), anything but a regular file. Symbolic links are followed (the target is
    written, the link stays). The file keeps its mode, owner and group: it is replaced atomically
    (temporary file + rename) when the new inode can be identical, and overwritten in place when it
    cannot: a file with several hard links (a rename would split them), one whose owner this user
    cannot give to a new file, or one in a directory where no temporary file can be created.
    """
    real = os.path.realpath(source.path)
    try:
        current, st = read_bytes(real, None)
    except SourceError as exc:
        return f"cannot re-read the file before writing ({exc.reason}); {what} not written"
    if current != source.raw:
        return f"the file changed on disk since it was read; {what} not written"
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(real, os.W_OK):
        return f"the file is read-only; {what} not written"
    try:
        if st.st_nlink > 1:
            _write_in_place(real, data)
            return None
        try:
            write_atomic(real, data, like=st)
        except (_OwnerNotKept, PermissionError):  # keep the owner / no temporary file possible here
            _write_in_place(real, data)
    except OSError as exc:
        return f"cannot write the file ({exc.strerror or exc}); {what} not written, file left as it was"
    return None


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
