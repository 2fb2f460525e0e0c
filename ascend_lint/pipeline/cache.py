"""The result cache: findings per file, reused while nothing that could change them has changed (the
project store, project_store.py, keeps every project file's summary).

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

The entries' framing and the stat check are in cache_entries.py, the shard files and the cache directory in
cache_store.py, the file I/O in cache_io.py.

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
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from .. import __version__
from ..config import Settings
from ..core_rules import PARSE_ERROR_CODE, UNUSED_NOQA_CODE
from ..rule import Finding, Rule
from .cache_entries import (Entry, Stamp, decode_finding, deps_record, encode_finding, has_fix, same_stat, stamp_of,
                            to_record, well_formed)
from .cache_io import own_dirs, remove_own
from .cache_store import Shards, cache_dir_for, prepare, trusted

SCHEMA = 2
SHARDS = 64
STALE_SECONDS = 30 * 24 * 3600
# Settings that only choose which files are linted or how results are shown or applied, and where the
# settings came from. (`project_root` is in the key: per-file-ignores patterns are relative to it.)
NOT_IN_KEY = frozenset({
    "select", "ignore", "extend_select", "preview",  # folded into the enabled rules
    "exclude", "extend_exclude", "respect_gitignore", "force_exclude", "fix", "unsafe_fixes",
    "cache_dir", "output_format", "config_path", "extends", "root_config", "origins",
})

_RUN_FOLDER = re.compile(r"[0-9a-f]{32}\Z")
_SHARD_FILE = re.compile(r"(\.[0-9a-f]{2}\.json\..+\.tmp|[0-9a-f]{2}\.json)\Z", re.S)


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


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
        self._shards = Shards(self.folder, header, SHARDS, well_formed, trusted(directory, self.folder))
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
        if entry is None or (self.fixing and any(has_fix(f) for f in entry[3])):
            return None
        return entry

    # ------------------------------------------------------------------ save
    def save(self) -> None:
        """Write the changed shards (entries of deleted files pruned from them) and drop stale run keys."""
        try:
            if self._shards.dirty and self._shards.enabled and prepare(self.directory, self.folder):
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
        if entry is None or not same_stat(st, entry[1], entry[2], entry[6], entry[7]):
            self._before[key] = stamp_of(st)
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
        _size, mtime, ctime, inode = to_record(self._before_read(key), size, mtime_ns, read_ns)
        self._shards.put(key, [sha, size, mtime, [encode_finding(f) for f in findings],
                               deps_record(deps), list(notes), ctime, inode])

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
        _size, mtime, ctime, inode = to_record(self._before_read(key), size, mtime_ns, read_ns)
        if (entry[1], entry[2], entry[6], entry[7]) != (size, mtime, ctime, inode):
            self._shards.put(key, entry[:1] + [size, mtime] + entry[3:6] + [ctime, inode])
