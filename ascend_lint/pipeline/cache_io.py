"""Cache files as untrusted input: what the result cache and the project store read and write on disk.

Anything under the cache directory may have been written by someone else (a checkout or an archive that
ships one, a restored CI cache, a crash, another version). So:
- a directory is used only if the user owns it and no other user can write it (like git's
  `safe.directory`): the cache directory itself (followed if it is a symbolic link: the user's choice),
  and every directory below it, which must not be a symbolic link. Otherwise: one warning, no cache;
- a file is read only if it is a regular file the user owns that only the user can write, opened
  without following a symbolic link and without blocking (a FIFO cannot hang the run), and of at most
  a bounded size: anything else is a miss, and the file is replaced when the run writes;
- JSON is parsed only after a scan (regular expressions, no recursion) shows it nests at most
  `MAX_DEPTH` deep; a RecursionError or MemoryError is a miss too;
- files are written with private write permissions whatever the umask, so the next run accepts them.
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any, Callable, Iterable, Optional, Set, Tuple

from ..fileio import _umask, write_atomic
from ..sanitize import sanitize

MAX_DEPTH = 32  # the deepest any cache file nests is 10 (a result entry's fix edit span)
SHARD_BYTES = 64 * 1024 * 1024  # the largest shard of ModelZoo-PyTorch/built-in (23,052 files) is 0.5 MB
FILE_BYTES = 512 * 1024 * 1024  # its project index is 5.1 MB, its model 5.8 MB

Identity = Tuple[int, int, int]  # (size, mtime_ns, inode): did another run replace the file since?

_STRING = re.compile(rb'"[^"]*"')  # (once escapes are gone)
_BRACKETS = bytes.maketrans(b"{}", b"[]")  # (in text json.loads accepts, the kinds match: one kind will do)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
    | getattr(os, "O_BINARY", 0)
_warned: Set[str] = set()


# ----------------------------------------------------------------------------- JSON
def nests_within(raw: bytes, limit: int) -> bool:
    """Do the brackets of a JSON text nest at most `limit` deep? The brackets outside strings are kept
    (escapes dropped first, then all but brackets and quotes, then adjacent quote pairs, which leaves each
    bracket on the same side of the quotes, then what strings are left), then each pass drops the
    innermost pairs; text that does not end empty within `limit` passes is too deep or unbalanced (not
    JSON). A prefix of the text nests no deeper, so json.loads never recurses further either. Bytes
    operations only, no loop over characters in Python."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = raw.translate(_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    brackets = _STRING.sub(b"", kept).replace(b'"', b"") if b'"' in kept else kept
    for _ in range(limit):
        if not brackets:
            return True
        shorter = brackets.replace(b"[]", b"")  # (pairs made by this pass wait for the next one)
        if len(shorter) == len(brackets):
            return False
        brackets = shorter
    return not brackets


def parse_json(raw: bytes) -> Any:
    """The value of a UTF-8 JSON text nested at most MAX_DEPTH deep; None for anything else."""
    if not nests_within(raw, MAX_DEPTH):
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return None


# ----------------------------------------------------------------------------- who may have written it
def _private_group(gid: int) -> bool:
    """Is `gid` the user's own group, holding nobody else (a user-private group, as umask 002 expects)?"""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == user.pw_gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def foreign(st: os.stat_result) -> Optional[str]:
    """Why another user could have written this file or directory (None: only the user could)."""
    if not hasattr(os, "geteuid"):
        return None  # (Windows: no POSIX owner; ACLs are not checked)
    if st.st_uid != os.geteuid():
        return f"it is owned by another user (uid {st.st_uid})"
    if st.st_mode & stat.S_IWOTH:
        return "every user can write it"
    if st.st_mode & stat.S_IWGRP and not (stat.S_ISDIR(st.st_mode) and _private_group(st.st_gid)):
        return f"its group (gid {st.st_gid}) can write it"
    return None


def untrusted(directory: str, folder: str) -> Optional[str]:
    """Why `folder` (inside the cache `directory`) cannot be trusted, None when it can (or does not exist
    yet): every existing directory from the cache directory down is the user's and no one else's."""
    path = directory
    parts = [p for p in os.path.relpath(folder, directory).split(os.sep) if p not in ("", ".")]
    for depth in range(len(parts) + 1):
        path = os.path.join(path, parts[depth - 1]) if depth else path
        try:  # (the cache directory itself may be a symbolic link: the user's choice)
            st = os.lstat(path) if depth else os.stat(path)
        except OSError:
            return None  # (not there yet: the run creates it)
        problem = foreign(st) if stat.S_ISDIR(st.st_mode) else \
            f"it is {'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'not a directory'}"
        if problem:
            return f"{path}: {problem}"
    return None


def warn_untrusted(directory: str, problem: str) -> None:
    """Say once per directory that it is not used as a cache, and why."""
    if directory in _warned:
        return
    _warned.add(directory)
    print(f"warning: the cache directory is not used (the run goes on without it): {sanitize(problem)}; "
          "remove it, or choose another with --cache-dir or the cache-dir setting", file=sys.stderr)


# ----------------------------------------------------------------------------- reading and writing
def read_json(path: str, limit: int) -> Tuple[Any, Optional[Identity]]:
    """(value, identity) of a cache file; (None, None) when there is none; (None, identity) when there is
    one that is refused (not a regular file of the user's, over `limit` bytes, not bounded JSON), so the
    caller rewrites it."""
    try:
        seen = os.lstat(path)
    except OSError:
        return None, None
    refused = (None, (seen.st_size, seen.st_mtime_ns, seen.st_ino))
    if not stat.S_ISREG(seen.st_mode) or seen.st_size > limit or foreign(seen):
        return refused
    try:
        fd = os.open(path, _READ)
    except OSError:
        return refused
    try:
        st = os.fstat(fd)
        if st.st_ino != seen.st_ino or not stat.S_ISREG(st.st_mode) or st.st_size > limit or foreign(st):
            return refused  # (replaced since the lstat)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(min(st.st_size, limit) + 1)  # (a file that grows meanwhile: not JSON, a miss)
    except OSError:
        return refused
    finally:
        os.close(fd)
    identity = (st.st_size, st.st_mtime_ns, st.st_ino)
    if len(raw) > limit:
        return None, identity
    return parse_json(raw), identity


def write_json(path: str, data: Any, limit: int) -> bool:
    """Write `data` (ASCII JSON, private write permissions) unless it is over `limit` bytes (False)."""
    payload = json.dumps(data, separators=(",", ":"))  # ASCII: \u escapes
    if len(payload) > limit:
        return False
    write_atomic(path, payload.encode("ascii"), durable=False, mode=0o644 & ~_umask())
    return True


def make_dirs(directory: str, folder: str) -> Optional[str]:
    """Create the directories from the cache directory down to `folder` (private write permissions), then
    check them (None, or why they cannot be trusted)."""
    os.makedirs(directory, 0o755, exist_ok=True)  # (the umask can only take more away)
    path = directory
    for part in os.path.relpath(folder, directory).split(os.sep):
        path = os.path.join(path, part)
        if part not in ("", ".") and not os.path.isdir(path):
            try:
                os.mkdir(path, 0o755)
            except FileExistsError:
                pass
    return untrusted(directory, folder)


def remove_own(folder: str, names: Callable[[str], bool]) -> None:
    """Delete the regular files in `folder` whose names `names` accepts, never following a symbolic link."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if names(name) and stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)


def own_dirs(parent: str, names: Callable[[str], bool]) -> Iterable[Tuple[str, os.stat_result]]:
    """(path, lstat) of the directories in `parent` that the user owns, with names `names` accepts (never a
    symbolic link)."""
    for name in os.listdir(parent):
        if not names(name):
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and not foreign(st):
            yield path, st

