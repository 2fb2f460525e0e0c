"""The result cache: findings per file, reused while nothing that could change them has changed.

One JSON file per *run key* under `<cache dir>/v1/`. The run key hashes everything besides the file
itself that decides its findings: the ascend-lint version, the Python version (its `ast`), the plugin
packs and their versions (`Registry.fingerprint()`), the enabled rules, the resolved configuration
(less the keys that only choose files or output) and the size and mtime of the source files of
ascend-lint and of the rule packages (so an editable install never serves results of a rule that
has been edited since). Inside, each file's entry is keyed by the SHA-256 of its bytes; its size and
mtime only spare re-hashing an unchanged file (git's index trick, with the same "racy" rule: an entry
written within `RACY_NS` of the file's mtime is always re-hashed).

Corrupt, truncated or foreign cache files and malformed entries are ignored (a miss) and rewritten.
Writes go to a temporary file then `os.replace`, so concurrent runs never see a torn file; the last
writer merges in what others wrote since it loaded. Entries of files that no longer exist are pruned
on save, and run keys unused for `STALE_SECONDS` are deleted.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from . import __version__
from .config import Settings
from .fileio import write_atomic
from .rule import Applicability, Edit, Finding, Fix, Rule, Severity, Span

DEFAULT_DIR = ".ascend_lint_cache"
SCHEMA = 1
RACY_NS = 2_000_000_000  # mtimes this close to the moment the file was read are not trusted
STALE_SECONDS = 30 * 24 * 3600
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by ascend-lint.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")
# Settings that only choose which files are linted or how results are shown or applied.
NOT_IN_KEY = frozenset({
    "select", "ignore", "extend_select", "preview",  # folded into the enabled rules
    "exclude", "extend_exclude", "respect_gitignore", "force_exclude", "fix", "unsafe_fixes",
    "cache_dir", "output_format", "project_root", "config_path",
})

Entry = List[Any]  # [sha256 hex, size, mtime_ns (0: re-hash), [encoded findings], ([notes])]


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def cache_dir_for(settings: Settings) -> str:
    """`cache-dir` (relative to the project root) or `.ascend_lint_cache/` at the project root."""
    root = os.path.abspath(settings.project_root)
    return os.path.join(root, settings.cache_dir or DEFAULT_DIR)


def _source_stamp(rules: Sequence[Type[Rule]]) -> List[Tuple[str, int, int]]:
    """(module file, size, mtime_ns) of ascend-lint's and the rule packages' loaded modules."""
    tops = {"ascend_lint"} | {r.__module__.split(".", 1)[0] for r in rules}
    stamp = []
    for name, module in list(sys.modules.items()):
        if name.split(".", 1)[0] not in tops:
            continue
        path = getattr(module, "__file__", None)
        if not path:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamp.append((name, st.st_size, st.st_mtime_ns))
    stamp.sort()
    return stamp


def run_key(settings: Settings, rules: Sequence[Type[Rule]], fingerprint: str) -> str:
    """Hash of everything other than the file's bytes that decides a file's findings."""
    config = {k: v for k, v in asdict(settings).items() if k not in NOT_IN_KEY}
    blob = json.dumps({
        "schema": SCHEMA,
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


def decode_finding(data: list, path: str) -> Finding:
    """Inverse of encode_finding; raises (KeyError, TypeError, ValueError) on malformed data."""
    line, col, end_line, end_col, code, name, message, severity, fix = data
    for n in (line, col, end_line, end_col):
        if type(n) is not int:
            raise TypeError("position")
    for s in (code, name, message):
        if not isinstance(s, str):
            raise TypeError("text")
    decoded_fix = None
    if fix is not None:
        applicability, description, edits, imports = fix
        decoded_fix = Fix(
            Applicability(applicability), _str(description),
            tuple(Edit(_str(op), Span(*_ints(span, 4)), _str(text), _str(ename))
                  for op, span, text, ename in edits),
            tuple(_str(i) for i in imports),
        )
    return Finding(path, line, col, end_line, end_col, code, name, message, Severity(severity), decoded_fix)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("text")
    return value


def _ints(values: Any, n: int) -> List[int]:
    if not isinstance(values, list) or len(values) != n or any(type(v) is not int for v in values):
        raise TypeError("span")
    return values


# ----------------------------------------------------------------------------- the cache
class ResultCache:
    """Findings of one run key; `lookup` before linting, `store` after, `save` once at the end."""

    def __init__(self, directory: str, key: str) -> None:
        self.directory = directory
        self.key = key
        self.path = os.path.join(directory, f"v{SCHEMA}", key[:32] + ".json")
        self.entries: Dict[str, Entry] = {}
        self.seen: set = set()  # absolute paths looked up or stored in this run
        self.dirty = False
        self._loaded_stat: Optional[Tuple[int, int]] = None
        self._load()

    @classmethod
    def open(cls, settings: Settings, rules: Sequence[Type[Rule]], fingerprint: str) -> "ResultCache":
        return cls(cache_dir_for(settings), run_key(settings, rules, fingerprint))

    # ------------------------------------------------------------------ load / save
    def _read(self) -> Dict[str, Entry]:
        """Entries of the cache file on disk; {} if missing, corrupt or written for another key."""
        try:
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                raw = handle.read()
            self._loaded_stat = (st.st_size, st.st_mtime_ns)
            data = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            self.dirty = os.path.exists(self.path)
            return {}
        if not (isinstance(data, dict) and data.get("schema") == SCHEMA and data.get("key") == self.key
                and isinstance(data.get("files"), dict)):
            self.dirty = True  # foreign: rewrite it
            return {}
        return data["files"]

    def _load(self) -> None:
        self.entries = self._read()

    def save(self) -> None:
        """Prune entries of deleted files, merge what concurrent runs wrote, write atomically."""
        if not self.dirty and not self._prune_needed():
            return
        try:
            on_disk = os.stat(self.path)
            changed = self._loaded_stat != (on_disk.st_size, on_disk.st_mtime_ns)
        except OSError:
            changed = False
        if changed:  # another run wrote meanwhile: keep its entries for files we did not touch
            mine = self.entries
            theirs = self._read()
            for path, entry in theirs.items():
                if path not in self.seen:
                    mine.setdefault(path, entry)
            self.entries = mine
        self.entries = {p: e for p, e in self.entries.items() if p in self.seen or os.path.exists(p)}
        try:
            self._prepare_dir()
            payload = json.dumps({"schema": SCHEMA, "key": self.key, "version": __version__,
                                  "files": self.entries}, separators=(",", ":"))  # ASCII: \u escapes
            write_atomic(self.path, payload.encode("ascii"), durable=False)
            self._remove_stale()
        except OSError:
            pass  # a read-only tree or a full disk: run without a cache, never fail the run
        self.dirty = False

    def _prune_needed(self) -> bool:
        return any(p not in self.seen and not os.path.exists(p) for p in self.entries)

    def _prepare_dir(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by ascend-lint\n*\n")):
            target = os.path.join(self.directory, name)
            if not os.path.exists(target):
                write_atomic(target, text.encode("ascii"), durable=False)

    def _remove_stale(self) -> None:
        """Cache files of run keys nobody used for STALE_SECONDS (old versions, old configs)."""
        folder = os.path.dirname(self.path)
        limit = time.time() - STALE_SECONDS
        for name in os.listdir(folder):
            target = os.path.join(folder, name)
            try:
                if target != self.path and os.stat(target).st_mtime < limit:
                    os.unlink(target)
            except OSError:
                pass

    # ------------------------------------------------------------------ entries
    def lookup(self, path: str, st: os.stat_result) -> Optional[Tuple[str, List[Finding]]]:
        """(hash, findings) if the entry's stat matches (the hash is then trusted); else None.

        A None here is not yet a miss: the caller reads the file and asks `lookup_hash`.
        """
        key = os.path.abspath(path)
        self.seen.add(key)
        entry = self.entries.get(key)
        if not _well_formed(entry) or entry[2] == 0:
            return None
        if entry[1] != st.st_size or entry[2] != st.st_mtime_ns:
            return None
        return self._decode(key, entry, path)

    def lookup_hash(self, path: str, sha: str) -> Optional[List[Finding]]:
        """Findings stored for exactly these bytes, if any."""
        key = os.path.abspath(path)
        self.seen.add(key)
        entry = self.entries.get(key)
        if not _well_formed(entry) or entry[0] != sha:
            return None
        decoded = self._decode(key, entry, path)
        return None if decoded is None else decoded[1]

    def _decode(self, key: str, entry: Entry, path: str) -> Optional[Tuple[str, List[Finding]]]:
        try:
            return entry[0], [decode_finding(f, path) for f in entry[3]]
        except (KeyError, TypeError, ValueError):
            del self.entries[key]  # malformed: a miss, rewritten by store()
            self.dirty = True
            return None

    def store(self, path: str, sha: str, size: int, mtime_ns: int, read_ns: int,
              findings: Iterable[Finding], notes: Sequence[str] = ()) -> None:
        """Remember the findings (and notes) of the bytes hashed to `sha` (size/mtime as read at `read_ns`)."""
        key = os.path.abspath(path)
        self.seen.add(key)
        racy = mtime_ns + RACY_NS >= read_ns
        self.entries[key] = [sha, size, 0 if racy else mtime_ns, [encode_finding(f) for f in findings]]
        if notes:
            self.entries[key].append(list(notes))
        self.dirty = True

    def notes_of(self, path: str) -> Tuple[str, ...]:
        """The notes stored with a file's entry (after a hit)."""
        entry = self.entries.get(os.path.abspath(path))
        if _well_formed(entry) and len(entry) == 5 and all(isinstance(n, str) for n in entry[4]):
            return tuple(entry[4])
        return ()

    def refresh_stat(self, path: str, size: int, mtime_ns: int, read_ns: int) -> None:
        """A hash hit on an entry whose stat was stale or racy: trust the new stat from now on."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None:
            return
        new_mtime = 0 if mtime_ns + RACY_NS >= read_ns else mtime_ns
        if entry[1] != size or entry[2] != new_mtime:
            entry[1], entry[2] = size, new_mtime
            self.dirty = True


def _well_formed(entry: Any) -> bool:
    return (isinstance(entry, list) and len(entry) in (4, 5) and isinstance(entry[0], str)
            and type(entry[1]) is int and type(entry[2]) is int and isinstance(entry[3], list)
            and (len(entry) == 4 or isinstance(entry[4], list)))
