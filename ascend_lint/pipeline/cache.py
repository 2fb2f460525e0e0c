"""The result cache: findings per file, reused while nothing that could change them has changed; and the
project store: every project file's summary, so a warm run re-summarises only changed files.

Results live under `<cache dir>/v2/<run key>/`, in `SHARDS` shard files chosen by a hash of the file's
path, so a run reads and rewrites only the shards of the files it lints or changes. The run key hashes
everything besides the file itself that decides its findings: the ascend-lint version, the Python version
(its `ast`), the plugin packs and their versions (`Registry.fingerprint()`), the enabled rules, the resolved
configuration (less the keys that only choose files or output) and the size and mtime of the source files
of ascend-lint and of the rule packages (so an editable install never serves results of a rule edited
since). Each file's entry is keyed by the SHA-256 of its bytes and holds its findings and its *deps* (the
project-model questions its rules asked, with their answers): findings are reused only while the project
model still gives those answers. The stat (size, mtime, ctime and inode, as git's index compares them)
only spares re-hashing an unchanged file, with git's "racy" rule: a stat taken within `RACY_NS` of the
moment the file was read is not trusted, and the file is re-hashed next time.

The project store (`<cache dir>/project-v4/<root key>/`) keeps an index (path -> stat, hash, shape),
summaries addressed by content hash in shards, and the last models built, keyed by a digest of the
summaries they were built from.

Everything read back is untrusted input (cache_io: the directory must be the user's alone; files are
size- and depth-bounded; docs/reliability.md states the trust boundary). Corrupt, truncated, oversized,
foreign or malformed files and entries are a miss, and are rewritten. An entry's findings must carry the
run's rule codes, and a run that may apply fixes never takes one from the cache. Writes go to a
temporary file then `os.replace`, so concurrent runs never see a torn file; the last writer merges in
what others wrote since it loaded. Entries of files that no longer exist are pruned from the shards a run
rewrites, and run keys unused for `STALE_SECONDS` are deleted.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from dataclasses import asdict
from typing import AbstractSet, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from .. import __version__
from ..config import DEFAULT_CACHE_DIR, Settings
from ..core_rules import PARSE_ERROR_CODE, UNUSED_NOQA_CODE
from .cache_io import (FILE_BYTES, SHARD_BYTES, Identity, make_dirs, own_dirs, read_json, remove_own, untrusted,
                       warn_untrusted, write_json)
from ..analysis.records import Summary
from .discovery import Listing
from ..fileio import _umask, write_atomic
from ..rule import Applicability, Edit, Finding, Fix, Rule, Severity, Span

SCHEMA = 2
SHARDS = 64
SUMMARY_SHARDS = 64
MODELS_KEPT = 2
RACY_NS = 2_000_000_000  # mtimes this close to the moment the file was read are not trusted
STALE_SECONDS = 30 * 24 * 3600
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by ascend-lint.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")
# Settings that only choose which files are linted or how results are shown or applied, and where the
# settings came from. (`project_root` is in the key: per-file-ignores patterns are relative to it.)
NOT_IN_KEY = frozenset({
    "select", "ignore", "extend_select", "preview",  # folded into the enabled rules
    "exclude", "extend_exclude", "respect_gitignore", "force_exclude", "fix", "unsafe_fixes",
    "cache_dir", "output_format", "config_path", "extends", "root_config", "origins",
})

# [sha256 hex, size, mtime_ns (0: re-hash), [encoded findings], deps, [notes], ctime_ns, inode]
Entry = List[Any]
Stamp = Tuple[int, int, int, int]  # (size, mtime_ns, ctime_ns, inode)
INT_BOUND = 2 ** 63
_RUN_FOLDER = re.compile(r"[0-9a-f]{32}\Z")
_SHARD_FILE = re.compile(r"(\.[0-9a-f]{2}\.json\..+\.tmp|[0-9a-f]{2}\.json)\Z", re.S)
_MODEL_FILE = re.compile(r"model-[0-9a-f]{32}\.json\Z")


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def cache_dir_for(settings: Settings) -> str:
    """`cache-dir` (relative to the settings' directory; the CLI makes the run's absolute, see
    config.ConfigResolver) or `.ascend_lint_cache/` there."""
    root = os.path.abspath(settings.project_root)
    return os.path.join(root, settings.cache_dir or DEFAULT_CACHE_DIR)


def _source_stamp(rules: Sequence[Type[Rule]]) -> List[Tuple[str, int, int]]:
    """(source file, size, mtime_ns) of every module of ascend-lint and of the rule packages: all of them,
    whether loaded yet or not, so the key does not depend on what a face happened to import first."""
    tops = {"ascend_lint"} | {r.__module__.split(".", 1)[0] for r in rules}
    stamp = []
    for top in sorted(tops):
        module = sys.modules.get(top)
        for base in list(getattr(module, "__path__", None) or [])[:4]:
            for directory, dirs, files in os.walk(base):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(".py"):
                        path = os.path.join(directory, name)
                        try:
                            st = os.stat(path)
                        except OSError:
                            continue
                        stamp.append((top + ":" + os.path.relpath(path, base), st.st_size, st.st_mtime_ns))
        path = getattr(module, "__file__", None)
        if path and not getattr(module, "__path__", None):  # a single-module pack
            try:
                st = os.stat(path)
                stamp.append((top, st.st_size, st.st_mtime_ns))
            except OSError:
                pass
    stamp.sort()
    return stamp


def run_key(settings: Settings, rules: Sequence[Type[Rule]], fingerprint: str, project: bool = False) -> str:
    """Hash of everything other than the file's bytes that decides a file's findings (`project`: the rules
    see a project model; its answers are checked per entry through the deps)."""
    config = {k: v for k, v in asdict(settings).items() if k not in NOT_IN_KEY}
    blob = json.dumps({
        "schema": SCHEMA,
        "project": project,
        "version": __version__,
        "python": list(sys.version_info[:3]) + [sys.implementation.name],
        "packs": fingerprint,
        "rules": [[r.code, r.__module__, r.__qualname__] for r in rules],
        "config": config,
        "sources": _source_stamp(rules),
    }, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


# ----------------------------------------------------------------------------- (de)serialisation
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


def _well_formed(entry: Any) -> bool:
    """The framing of a result entry (see Entry); the findings are checked when decoded."""
    if type(entry) is not list or len(entry) != 8:
        return False
    sha, size, mtime, findings, deps, notes, ctime, inode = entry
    return _is_sha(sha) and _stat_ints(size, mtime, ctime, inode) and type(findings) is list and _deps_framed(deps) \
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


def _is_sha(value: Any) -> bool:
    return type(value) is str and len(value) == 64 and not value.strip("0123456789abcdef")


def _stat_ints(a: Any, b: Any, c: Any, d: Any) -> bool:
    """Four ints in [0, 2**63) (bools are not ints here)."""
    return type(a) is type(b) is type(c) is type(d) is int \
        and 0 <= a < INT_BOUND and 0 <= b < INT_BOUND and 0 <= c < INT_BOUND and 0 <= d < INT_BOUND


# ----------------------------------------------------------------------------- the stat check
def _same_stat(st: os.stat_result, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> bool:
    """Does `st` show the stat recorded for a file (git's fields; mtime 0: none recorded, re-hash)?"""
    return mtime_ns != 0 and st.st_mtime_ns == mtime_ns and st.st_size == size and st.st_ctime_ns == ctime_ns \
        and st.st_ino == inode


def _stamp(st: os.stat_result) -> Stamp:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def _to_record(before: Optional[Stamp], size: int, mtime_ns: int, read_ns: int) -> Stamp:
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


# ----------------------------------------------------------------------------- shards
def _shard_of(text: str, shards: int) -> str:
    return "%02x" % (int(hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:4], 16) % shards)


def _plain_name(name: Any) -> bool:
    """A single path component (no separator, not `.` or `..`): a listing entry cannot lead out of its
    directory or back into it."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name \
        and os.sep not in name and (os.altsep is None or os.altsep not in name)


def _listing_entry(value: Any) -> bool:
    """Is `value` a well-formed discovery.Listing entry (see Listing.dirs)?"""
    return isinstance(value, list) and len(value) == 7 and type(value[0]) is int and value[0] >= 0 \
        and isinstance(value[1], list) and all(_plain_name(n) for n in value[1]) \
        and isinstance(value[2], list) and all(_plain_name(n) for n in value[2]) \
        and (value[3] is None or isinstance(value[3], list)) and isinstance(value[5], list) \
        and all(isinstance(n, str) for n in value[5]) and isinstance(value[6], str)


def _fit(entries: Dict[str, Any], limit: int) -> Dict[str, Any]:
    """`entries` less the largest ones until they encode in at most `limit` bytes (those files are not
    cached: a shard is never written larger than a run would read)."""
    sizes = {k: len(json.dumps(v, separators=(",", ":"))) + len(json.dumps(k)) + 2 for k, v in entries.items()}
    total = sum(sizes.values()) + 256
    kept = dict(entries)
    for key in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total <= limit:
            break
        del kept[key]
        total -= sizes[key]
    return kept


class _Shards:
    """A map split over shard files that are loaded on first use and rewritten only when changed. Values
    that `valid` refuses are dropped as a shard is read (`enabled` False: an untrusted directory, nothing is
    read or written)."""

    def __init__(self, folder: str, header: Dict[str, Any], shards: int, valid: Callable[[Any], bool],
                 enabled: bool = True) -> None:
        self.folder = folder
        self.header = header  # must match for a shard to be read (schema, key)
        self.shards = shards
        self.valid = valid
        self.enabled = enabled
        self.loaded: Dict[str, Dict[str, Any]] = {}
        self.stats: Dict[str, Optional[Identity]] = {}
        self.dirty: set = set()
        self.touched: Dict[str, set] = {}  # shard -> keys written or looked up this run

    def path(self, shard: str) -> str:
        return os.path.join(self.folder, shard + ".json")

    def shard(self, key: str) -> str:
        return _shard_of(key, self.shards)

    def _read(self, shard: str) -> Tuple[Optional[Dict[str, Any]], Optional[Identity], bool]:
        """(valid entries, identity, whether some were dropped) of a shard file; entries None when it is
        missing, refused or foreign."""
        data, stat = read_json(self.path(shard), SHARD_BYTES)
        if not (isinstance(data, dict) and all(data.get(k) == v for k, v in self.header.items())
                and isinstance(data.get("entries"), dict)):
            return None, stat, False
        entries = data["entries"]
        bad = [k for k, v in entries.items() if not self.valid(v)]
        for key in bad:  # (in place: a copy made the GC's full passes of a warm run 40 % slower)
            del entries[key]
        return entries, stat, bool(bad)

    def _load(self, shard: str) -> Dict[str, Any]:
        entries = self.loaded.get(shard)
        if entries is None:
            found, stat, dropped = self._read(shard) if self.enabled else (None, None, False)
            self.stats[shard] = stat
            if dropped or (found is None and stat is not None):
                self.dirty.add(shard)  # corrupt, too large, too deep, foreign or with malformed entries: rewrite
            entries = self.loaded[shard] = found if found is not None else {}
        return entries

    def get(self, key: str) -> Any:
        shard = self.shard(key)
        self.touched.setdefault(shard, set()).add(key)
        return self._load(shard).get(key)

    def put(self, key: str, value: Any) -> None:
        shard = self.shard(key)
        self.touched.setdefault(shard, set()).add(key)
        self._load(shard)[key] = value
        self.dirty.add(shard)

    def swap(self, key: str, value: Any) -> None:
        """Hold `value` for `key` instead of what was read (an equal value: the shard is not rewritten)."""
        entries = self.loaded.get(self.shard(key))
        if entries is not None and key in entries:
            entries[key] = value

    def drop(self, key: str) -> None:
        shard = self.shard(key)
        if self._load(shard).pop(key, None) is not None:
            self.dirty.add(shard)

    def all(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for i in range(self.shards):
            out.update(self._load("%02x" % i))
        return out

    def save(self, keep=None) -> None:
        """Rewrite the changed shards (merging what another run wrote meanwhile); `keep(key)` prunes. The
        caller has checked the folder (make_dirs)."""
        if not self.enabled:
            return
        for shard in sorted(self.dirty):
            entries = self.loaded[shard]
            theirs, stat, _ = self._read(shard)
            if stat != self.stats.get(shard) and theirs is not None:
                mine = self.touched.get(shard, set())
                for key, value in theirs.items():
                    if key not in mine:
                        entries.setdefault(key, value)
            if keep is not None:
                mine = self.touched.get(shard, set())
                for key in [k for k in entries if k not in mine and not keep(k)]:
                    del entries[key]
            data = dict(self.header, entries=entries)
            if not write_json(self.path(shard), data, SHARD_BYTES):
                write_json(self.path(shard), dict(self.header, entries=_fit(entries, SHARD_BYTES)), SHARD_BYTES)
        self.dirty.clear()


def _prepare(directory: str, folder: str) -> bool:
    """Create the cache directory (tagged, git-ignored) down to `folder`; False (with a warning) when a
    directory on the way cannot be trusted."""
    problem = make_dirs(directory, folder)
    if problem:
        warn_untrusted(directory, problem)
        return False
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by ascend-lint\n*\n")):
        target = os.path.join(directory, name)
        if not os.path.lexists(target):
            write_atomic(target, text.encode("ascii"), durable=False, mode=0o644 & ~_umask())
    return True


def _trusted(directory: str, folder: str) -> bool:
    problem = untrusted(directory, folder)
    if problem:
        warn_untrusted(directory, problem)
    return problem is None


# ----------------------------------------------------------------------------- the result cache
def _deps_record(deps: Any) -> Any:
    """A file's deps as stored: the tuple form of a typed record, else the value itself ([] for none)."""
    return deps.to_tuple() if hasattr(deps, "to_tuple") else (deps if deps is not None else [])


class ResultCache:
    """Findings (and deps) of one run key; `lookup` before linting, `store` after, `save` once at the end.

    `codes`: the codes a cached finding may have (the run's rules; None: any). `fixing`: the run may apply
    fixes, so an entry whose findings carry one is not used (the file is linted, its fixes derived from
    its bytes)."""

    def __init__(self, directory: str, key: str, codes: Optional[AbstractSet[str]] = None,
                 fixing: bool = False) -> None:
        self.directory = directory
        self.key = key
        self.codes = codes
        self.fixing = fixing
        self.folder = os.path.join(directory, f"v{SCHEMA}", key[:32])
        header = {"schema": SCHEMA, "key": self.key}
        self._shards = _Shards(self.folder, header, SHARDS, _well_formed, _trusted(directory, self.folder))
        self.seen: set = set()  # absolute paths looked up or stored in this run
        self._before: Dict[str, Stamp] = {}  # absolute path -> its stat when a lookup missed (before it was read)

    @classmethod
    def open(cls, settings: Settings, rules: Sequence[Type[Rule]], fingerprint: str,
             project: bool = False) -> "ResultCache":
        codes = frozenset(r.code for r in rules) | {PARSE_ERROR_CODE, UNUSED_NOQA_CODE}
        return cls(cache_dir_for(settings), run_key(settings, rules, fingerprint, project), codes, bool(settings.fix))

    def shard_path(self, path: str) -> str:
        """The shard file that holds `path`'s entry."""
        return self._shards.path(self._shards.shard(os.path.abspath(path)))

    @property
    def entries(self) -> Dict[str, Entry]:
        """Every entry on disk and in memory (reads every shard: for tests and tools, not for runs)."""
        return self._shards.all()

    def entry(self, path: str, key: Optional[str] = None) -> Optional[Entry]:
        """A file's entry (`key`: its absolute path) if it is usable by this run (shards hold only well
        framed entries)."""
        key = key or os.path.abspath(path)
        self.seen.add(key)
        entry = self._shards.get(key)
        if entry is None or (self.fixing and any(_has_fix(f) for f in entry[3])):
            return None
        return entry

    # ------------------------------------------------------------------ save
    def save(self) -> None:
        """Write the changed shards (entries of deleted files pruned from them) and drop stale run keys."""
        try:
            if self._shards.dirty and self._shards.enabled and _prepare(self.directory, self.folder):
                self._shards.save(keep=os.path.exists)
                self._remove_stale()
        except OSError:
            pass  # a read-only tree or a full disk: run without a cache, never fail the run

    def _remove_stale(self) -> None:
        """Cache folders of run keys nobody used for STALE_SECONDS (old versions, old configs): only folders
        and files of the names ascend-lint gives them, the user's own, never through a symbolic link."""
        parent = os.path.dirname(self.folder)
        limit = time.time() - STALE_SECONDS
        os.utime(self.folder)
        for target, st in own_dirs(parent, _RUN_FOLDER.match):
            if target != self.folder and st.st_mtime < limit:
                try:
                    remove_own(target, _SHARD_FILE.match)
                    os.rmdir(target)
                except OSError:
                    pass

    # ------------------------------------------------------------------ entries
    def lookup(self, path: str, st: os.stat_result) -> Optional[Tuple[str, List[Finding], Any]]:
        """(hash, findings, deps) if the entry's stat (size, mtime, ctime, inode) matches `st` (the hash is
        then trusted); else None.

        A None here is not yet a miss: the caller reads the file and asks `lookup_hash`.
        """
        key = os.path.abspath(path)
        entry = self.entry(path, key)
        if entry is None or not _same_stat(st, entry[1], entry[2], entry[6], entry[7]):
            self._before[key] = _stamp(st)
            return None
        return self._decode(entry, path)

    def expected_hash(self, path: str) -> Optional[str]:
        entry = self.entry(path)
        return entry[0] if entry is not None else None

    def lookup_hash(self, path: str, sha: str) -> Optional[Tuple[List[Finding], Any]]:
        """(findings, deps) stored for exactly these bytes, if any."""
        entry = self.entry(path)
        if entry is None or entry[0] != sha:
            return None
        decoded = self._decode(entry, path)
        return None if decoded is None else (decoded[1], decoded[2])

    def _decode(self, entry: Entry, path: str) -> Optional[Tuple[str, List[Finding], Any]]:
        try:
            return entry[0], [decode_finding(f, path, self.codes) for f in entry[3]], entry[4]
        except (KeyError, TypeError, ValueError):
            self._shards.drop(os.path.abspath(path))  # malformed: a miss, rewritten by store()
            return None

    def store(self, path: str, sha: str, size: int, mtime_ns: int, read_ns: int,
              findings: Iterable[Finding], deps: Any = None, notes: Sequence[str] = ()) -> None:
        """Remember the findings, deps and notes of the bytes hashed to `sha` (size/mtime as read at
        `read_ns`; ctime and inode from the stat `lookup` was given)."""
        key = os.path.abspath(path)
        self.seen.add(key)
        _size, mtime, ctime, inode = _to_record(self._before_read(key), size, mtime_ns, read_ns)
        self._shards.put(key, [sha, size, mtime, [encode_finding(f) for f in findings],
                               _deps_record(deps), list(notes), ctime, inode])

    def _before_read(self, key: str) -> Optional[Stamp]:
        """The stat `lookup` was given when it missed, else the one recorded (a stat hit confirmed it)."""
        before = self._before.get(key)
        if before is None:
            entry = self._shards.get(key)
            before = (entry[1], entry[2], entry[6], entry[7]) if entry is not None else None
        return before

    def notes_of(self, path: str) -> Tuple[str, ...]:
        """The notes stored with a file's entry (after a hit)."""
        entry = self.entry(path)
        return tuple(entry[5]) if entry is not None else ()

    def refresh_stat(self, path: str, size: int, mtime_ns: int, read_ns: int) -> None:
        """A hash hit on an entry whose stat was stale or racy: trust the new stat from now on."""
        key = os.path.abspath(path)
        entry = self._shards.get(key)
        if entry is None:
            return
        _size, mtime, ctime, inode = _to_record(self._before_read(key), size, mtime_ns, read_ns)
        if (entry[1], entry[2], entry[6], entry[7]) != (size, mtime, ctime, inode):
            self._shards.put(key, entry[:1] + [size, mtime] + entry[3:6] + [ctime, inode])


def _has_fix(finding: Any) -> bool:
    return not isinstance(finding, list) or len(finding) != 9 or finding[8] is not None


# ----------------------------------------------------------------------------- the project store
PROJECT_SCHEMA = 6  # (6: summaries of schema 7, execution-model facts; 5: the tuple form of records.Summary)


def project_store_dir(settings: Settings, root: str, precision: bool = True) -> str:
    """Where a project's index lives: keyed by the root, the version, the Python (its `ast`) and whether its
    summaries hold precision decisions."""
    stamp = json.dumps([os.path.abspath(root), __version__, list(sys.version_info[:2]), PROJECT_SCHEMA, precision])
    return os.path.join(cache_dir_for(settings), f"project-v{PROJECT_SCHEMA}",
                        hashlib.sha256(stamp.encode("utf-8", "surrogatepass")).hexdigest()[:24])


def _index_entry(value: Any) -> bool:
    """[size, mtime_ns (0: re-hash), sha256 hex, shape, ctime_ns, inode]"""
    return type(value) is list and len(value) == 6 and _stat_ints(value[0], value[1], value[4], value[5]) \
        and _is_sha(value[2]) and type(value[3]) is str


def _summary_framed(value: Any) -> bool:
    """A stored summary as the store frames it: the tuple form of a records.Summary (a JSON list). Its
    contents are checked by the record's decoder (ProjectStore.summary: a miss on anything odd)."""
    return type(value) is list


class ProjectStore:
    """The project index on disk: path -> [size, mtime_ns, sha, shape, ctime_ns, inode]; sha -> summary;
    digest -> model."""

    def __init__(self, directory: str, folder: str) -> None:
        self.directory = directory  # the cache directory (tagged on first write)
        self.folder = folder
        self.enabled = _trusted(directory, folder)
        header = {"schema": PROJECT_SCHEMA, "version": __version__}
        self.index: Dict[str, List[Any]] = {}
        self._index_dirty = False
        self._before: Dict[str, Stamp] = {}  # relpath -> its stat when stat_entry missed (before it was read)
        self._summaries = _Shards(os.path.join(folder, "summaries"), header, SUMMARY_SHARDS, _summary_framed,
                                  self.enabled)
        self._typed: Dict[str, Summary] = {}  # sha -> the summary read from the shards (each made once)
        self._listing: Any = None  # discovery.Listing, read on first use
        self._load_index()

    @classmethod
    def open(cls, settings: Settings, root: str, precision: bool = True) -> "ProjectStore":
        return cls(cache_dir_for(settings), project_store_dir(settings, root, precision))

    def _read(self, name: str) -> Any:
        return read_json(os.path.join(self.folder, name), FILE_BYTES)[0] if self.enabled else None

    def _load_index(self) -> None:
        data = self._read("index.json")
        if isinstance(data, dict) and data.get("schema") == PROJECT_SCHEMA and isinstance(data.get("files"), dict):
            self.index = {k: v for k, v in data["files"].items() if _index_entry(v)}

    def listing(self, key: str) -> Any:
        """The project's directory listing as last walked with settings `key` (a discovery.Listing)."""
        if self._listing is None or self._listing.key != key:
            data = self._read("listing.json")
            dirs = data.get("dirs") if isinstance(data, dict) and data.get("key") == key else None
            valid = isinstance(dirs, dict) and all(_listing_entry(v) for v in dirs.values())
            self._listing = Listing(key, dirs if valid else None)
            if valid and isinstance(data.get("above"), dict):
                self._listing.above = data["above"]
        return self._listing

    def stat_entry(self, relpath: str, st: os.stat_result) -> Optional[Tuple[str, str]]:
        """(content hash, shape) recorded for a file whose size, mtime, ctime and inode have not changed
        (racy: None)."""
        entry = self.index.get(relpath)
        if entry is None or not _same_stat(st, entry[0], entry[1], entry[4], entry[5]):
            self._before[relpath] = _stamp(st)
            return None
        return entry[2], entry[3]

    def recorded(self, relpath: str) -> Optional[Tuple[str, str]]:
        """(content hash, shape) of the bytes last recorded for a file, whatever its stat."""
        entry = self.index.get(relpath)
        return (entry[2], entry[3]) if entry is not None else None

    def summary(self, sha: str) -> Optional[Summary]:
        """The complete summary stored for these bytes (None: none, or malformed)."""
        found = self._typed.get(sha)
        if found is None:
            value = self._summaries.get(sha)
            try:
                found = Summary.from_tuple(value) if isinstance(value, list) else None
            except (TypeError, ValueError, IndexError, KeyError):
                found = None
            if found is not None and not found.light:
                self._typed[sha] = found
                self._summaries.swap(sha, found.to_tuple())  # (one copy of its records in memory)
        return found if found is not None and not found.light else None

    def put(self, relpath: str, size: int, mtime_ns: int, read_ns: int, sha: str,
            summary: Optional[Summary], shape: str) -> None:
        """Record a file's stat, hash and shape, and its complete summary (ctime and inode from the stat
        `stat_entry` was given when it missed, else from the stat recorded)."""
        old = self.index.get(relpath)
        before = self._before.get(relpath) or ((old[0], old[1], old[4], old[5]) if old is not None else None)
        _size, mtime, ctime, inode = _to_record(before, size, mtime_ns, read_ns)
        entry = [size, mtime, sha, shape, ctime, inode]
        if old != entry:
            self.index[relpath] = entry
            self._index_dirty = True
        if summary is not None and not summary.light and self._summaries.get(sha) is None:
            self._summaries.put(sha, summary.to_tuple())

    def forget_missing(self, present: Iterable[str]) -> None:
        keep = set(present)
        gone = [p for p in self.index if p not in keep]
        for path in gone:
            del self.index[path]
        self._index_dirty = self._index_dirty or bool(gone)

    def model(self, digest: str) -> Optional[Dict[str, Any]]:
        data = self._read(f"model-{digest[:32]}.json")
        if isinstance(data, dict) and data.get("digest") == digest and isinstance(data.get("tables"), dict):
            return data["tables"]
        return None

    def save(self, digest: Optional[str] = None, tables: Optional[Dict[str, Any]] = None) -> None:
        if not self.enabled:
            return
        try:
            if not _prepare(self.directory, os.path.join(self.folder, "summaries")):
                return
            self._summaries.save()
            if self._index_dirty:
                self._write("index.json", {"schema": PROJECT_SCHEMA, "files": self.index})
                self._index_dirty = False
            if self._listing is not None and self._listing.changed:
                self._write("listing.json", {"key": self._listing.key, "above": self._listing.above,
                                             "dirs": self._listing.dirs})
                self._listing.changed = False
            if digest is not None and tables is not None and self.model(digest) is None:
                self._write(f"model-{digest[:32]}.json", {"digest": digest, "tables": tables})
                models = sorted((os.lstat(os.path.join(self.folder, n)).st_mtime, n)
                                for n in os.listdir(self.folder) if _MODEL_FILE.match(n))
                for _, name in models[:-MODELS_KEPT]:
                    remove_own(self.folder, name.__eq__)
        except OSError:
            pass  # a read-only tree or a full disk: run without a store

    def _write(self, name: str, data: Any) -> None:
        """Write one of the store's files; one too large to be read back is removed instead."""
        path = os.path.join(self.folder, name)
        if not write_json(path, data, FILE_BYTES):
            remove_own(self.folder, name.__eq__)
