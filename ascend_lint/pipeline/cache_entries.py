"""Cache entries as the caches frame them: findings encoded to JSON lists and back, the framing checks
every value read back from a cache file must pass before it is used (result entries, deps, index entries,
summaries, directory listings), and the stat check that decides when a file need not be re-hashed.

Everything here is a pure function of its arguments: no file is read or written.
"""
from __future__ import annotations

import os
from typing import AbstractSet, Any, List, Optional, Tuple

from ..rule import Applicability, Edit, Finding, Fix, Severity, Span

RACY_NS = 2_000_000_000  # mtimes this close to the moment the file was read are not trusted
INT_BOUND = 2 ** 63
# A result entry: [sha256 hex, size, mtime_ns (0: re-hash), [encoded findings], deps, [notes], ctime_ns, inode]
Entry = List[Any]
Stamp = Tuple[int, int, int, int]  # (size, mtime_ns, ctime_ns, inode)


# ----------------------------------------------------------------------------- findings and result entries
def encode_finding(f: Finding) -> list:
    fix = None
    if f.fix is not None:
        fix = [f.fix.applicability.value, f.fix.description,
               [[e.op, [e.span.line, e.span.col, e.span.end_line, e.span.end_col], e.text, e.name]
                for e in f.fix.edits],
               list(f.fix.imports)]
    return [f.line, f.col, f.end_line, f.end_col, f.code, f.name, f.message, f.severity.value, fix]


def decode_finding(data: Any, path: str, codes: Optional[AbstractSet[str]] = None) -> Finding:
    """Inverse of encode_finding; raises (KeyError, TypeError, ValueError) on malformed data, and on a code
    not in `codes` (the run's rules)."""
    if not isinstance(data, list) or len(data) != 9:
        raise TypeError("finding")
    line, col, end_line, end_col, code, name, message, severity, fix = data
    _ints([line, col, end_line, end_col], 4)
    if not 1 <= line <= end_line:
        raise ValueError("lines")
    if codes is not None and code not in codes:
        raise ValueError("code")
    decoded_fix = None
    if fix is not None:
        if not isinstance(fix, list) or len(fix) != 4:
            raise TypeError("fix")
        applicability, description, edits, imports = fix
        decoded_fix = Fix(Applicability(applicability), _str(description),
                          tuple(_edit(e) for e in _list(edits)), tuple(_str(i) for i in _list(imports)))
    return Finding(path, line, col, end_line, end_col, _str(code), _str(name), _str(message), Severity(severity),
                   decoded_fix)


def _edit(data: Any) -> Edit:
    if not isinstance(data, list) or len(data) != 4:
        raise TypeError("edit")
    op, span, text, name = data
    return Edit(_str(op), Span(*_ints(span, 4)), _str(text), _str(name))


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("text")
    return value


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise TypeError("list")
    return value


def _ints(values: Any, n: int) -> List[int]:
    """`values`: a list of `n` ints in [0, 2**63) (bools are not ints here)."""
    if not isinstance(values, list) or len(values) != n or any(type(v) is not int or not 0 <= v < INT_BOUND
                                                               for v in values):
        raise TypeError("ints")
    return values


def well_formed(entry: Any) -> bool:
    """The framing of a result entry (see Entry); the findings are checked when decoded."""
    if type(entry) is not list or len(entry) != 8:
        return False
    sha, size, mtime, findings, deps, notes, ctime, inode = entry
    return is_sha(sha) and stat_ints(size, mtime, ctime, inode) and type(findings) is list and _deps_framed(deps) \
        and type(notes) is list and (not notes or all(type(n) is str for n in notes))


def _deps_framed(deps: Any) -> bool:
    """Deps as the cache frames them: [] or the tuple form of analysis.questions.Deps, [schema, [question,
    args, answer], ...] (its decoder, Deps.load in analysis.view.replay, checks questions and answers)."""
    if type(deps) is not list:
        return False
    if not deps:
        return True
    if type(deps[0]) is not int:
        return False
    for dep in deps[1:]:
        if type(dep) is not list or len(dep) < 2 or type(dep[0]) is not str:
            return False
    return True


def is_sha(value: Any) -> bool:
    return type(value) is str and len(value) == 64 and not value.strip("0123456789abcdef")


def stat_ints(a: Any, b: Any, c: Any, d: Any) -> bool:
    """Four ints in [0, 2**63) (bools are not ints here)."""
    return type(a) is type(b) is type(c) is type(d) is int \
        and 0 <= a < INT_BOUND and 0 <= b < INT_BOUND and 0 <= c < INT_BOUND and 0 <= d < INT_BOUND


# ----------------------------------------------------------------------------- the framing of other values
def index_entry(value: Any) -> bool:
    """[size, mtime_ns (0: re-hash), sha256 hex, shape, ctime_ns, inode]"""
    return type(value) is list and len(value) == 6 and stat_ints(value[0], value[1], value[4], value[5]) \
        and is_sha(value[2]) and type(value[3]) is str


def summary_framed(value: Any) -> bool:
    """A stored summary as the store frames it: the tuple form of a records.Summary (a JSON list). Its
    contents are checked by the record's decoder (ProjectStore.summary: a miss on anything odd)."""
    return type(value) is list


def _plain_name(name: Any) -> bool:
    """A single path component (no separator, not `.` or `..`): a listing entry cannot lead out of its
    directory or back into it."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name \
        and os.sep not in name and (os.altsep is None or os.altsep not in name)


def listing_entry(value: Any) -> bool:
    """Is `value` a well-formed discovery.Listing entry (see Listing.dirs)?"""
    return isinstance(value, list) and len(value) == 7 and type(value[0]) is int and value[0] >= 0 \
        and isinstance(value[1], list) and all(_plain_name(n) for n in value[1]) \
        and isinstance(value[2], list) and all(_plain_name(n) for n in value[2]) \
        and (value[3] is None or isinstance(value[3], list)) and isinstance(value[5], list) \
        and all(isinstance(n, str) for n in value[5]) and isinstance(value[6], str)


def has_fix(finding: Any) -> bool:
    """Does this encoded finding carry a fix (a malformed one counts as one: a fixing run lints the file)?"""
    return not isinstance(finding, list) or len(finding) != 9 or finding[8] is not None


def deps_record(deps: Any) -> Any:
    """A file's deps as stored: the tuple form of a typed record, else the value itself ([] for none)."""
    return deps.to_tuple() if hasattr(deps, "to_tuple") else (deps if deps is not None else [])


# ----------------------------------------------------------------------------- the stat check
def same_stat(st: os.stat_result, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> bool:
    """Does `st` show the stat recorded for a file (git's fields; mtime 0: none recorded, re-hash)?"""
    return mtime_ns != 0 and st.st_mtime_ns == mtime_ns and st.st_size == size and st.st_ctime_ns == ctime_ns \
        and st.st_ino == inode


def stamp_of(st: os.stat_result) -> Stamp:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def to_record(before: Optional[Stamp], size: int, mtime_ns: int, read_ns: int) -> Stamp:
    """The stat to record for bytes of this size and mtime read at `read_ns`: the stat taken before the
    read (`before`), if the read saw its size and mtime and neither its mtime nor its ctime is within
    RACY_NS of the read (git's index rule, on the ctime too); else (size, 0, 0, 0), re-hash next time.
    Any later change of the file shows in its stat: a write or `utime` sets a newer ctime, a replacement
    (`cp -p`, `rsync -a`, `tar x`) a new inode as well. A stat recorded earlier will do as `before`: if
    the file changed since, its stat no longer matches it."""
    if before is None or before[0] != size or before[1] != mtime_ns or before[1] == 0 \
            or max(before[1], before[2]) + RACY_NS >= read_ns:
        return size, 0, 0, 0
    return before
