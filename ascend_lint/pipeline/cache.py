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
model still gives those answers. Size and mtime only spare re-hashing an unchanged file (git's index trick,
with the same "racy" rule: an entry written within `RACY_NS` of the file's mtime is always re-hashed).

The project store (`<cache dir>/project-v1/<root key>/`) keeps an index (path -> size, mtime, hash),
summaries addressed by content hash in shards, and the last models built, keyed by a digest of the
summaries they were built from.

Corrupt, truncated or foreign cache files and malformed entries are ignored (a miss) and rewritten.
Writes go to a temporary file then `os.replace`, so concurrent runs never see a torn file; the last
writer merges in what others wrote since it loaded. Entries of files that no longer exist are pruned
from the shards a run rewrites, and run keys unused for `STALE_SECONDS` are deleted.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from .. import __version__
from ..config import DEFAULT_CACHE_DIR, Settings
from ..analysis.records import Summary
from .discovery import Listing
from ..fileio import write_atomic
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

Entry = List[Any]  # [sha256 hex, size, mtime_ns (0: re-hash), [encoded findings], deps, ([notes])]


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


# ----------------------------------------------------------------------------- shards
def _shard_of(text: str, shards: int) -> str:
    return "%02x" % (int(hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:4], 16) % shards)


def _listing_entry(value: Any) -> bool:
    """Is `value` a well-formed discovery.Listing entry (see Listing.dirs)?"""
    return isinstance(value, list) and len(value) == 7 and type(value[0]) is int and isinstance(value[1], list) \
        and isinstance(value[2], list) and (value[3] is None or isinstance(value[3], list)) \
        and isinstance(value[5], list) and isinstance(value[6], str)


def _read_json(path: str) -> Tuple[Any, Optional[Tuple[int, int]]]:
    """(data, (size, mtime)) of a JSON file; (None, None) when missing or unreadable, (None, stat) when corrupt."""
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            raw = handle.read()
    except OSError:
        return None, None
    try:
        return json.loads(raw.decode("utf-8")), (st.st_size, st.st_mtime_ns)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None, (st.st_size, st.st_mtime_ns)


def _write_json(path: str, data: Any) -> None:
    payload = json.dumps(data, separators=(",", ":"))  # ASCII: \u escapes
    write_atomic(path, payload.encode("ascii"), durable=False)


def _prepare(directory: str, subdir: str) -> None:
    """Create the cache directory (tagged, git-ignored) and a sub-directory of it."""
    os.makedirs(subdir, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by ascend-lint\n*\n")):
        target = os.path.join(directory, name)
        if not os.path.exists(target):
            write_atomic(target, text.encode("ascii"), durable=False)


class _Shards:
    """A map split over shard files that are loaded on first use and rewritten only when changed."""

    def __init__(self, folder: str, header: Dict[str, Any], shards: int) -> None:
        self.folder = folder
        self.header = header  # must match for a shard to be read (schema, key)
        self.shards = shards
        self.loaded: Dict[str, Dict[str, Any]] = {}
        self.stats: Dict[str, Optional[Tuple[int, int]]] = {}
        self.dirty: set = set()
        self.touched: Dict[str, set] = {}  # shard -> keys written or looked up this run

    def path(self, shard: str) -> str:
        return os.path.join(self.folder, shard + ".json")

    def shard(self, key: str) -> str:
        return _shard_of(key, self.shards)

    def _load(self, shard: str) -> Dict[str, Any]:
        entries = self.loaded.get(shard)
        if entries is None:
            data, stat = _read_json(self.path(shard))
            self.stats[shard] = stat
            if isinstance(data, dict) and all(data.get(k) == v for k, v in self.header.items()) and \
                    isinstance(data.get("entries"), dict):
                entries = data["entries"]
            else:
                entries = {}
                if stat is not None:
                    self.dirty.add(shard)  # corrupt or foreign: rewrite it
            self.loaded[shard] = entries
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
        """Rewrite the changed shards (merging what another run wrote meanwhile); `keep(key)` prunes."""
        if self.dirty:
            os.makedirs(self.folder, exist_ok=True)
        for shard in sorted(self.dirty):
            entries = self.loaded[shard]
            data, stat = _read_json(self.path(shard))
            if stat != self.stats.get(shard) and isinstance(data, dict) and isinstance(data.get("entries"), dict) \
                    and all(data.get(k) == v for k, v in self.header.items()):
                mine = self.touched.get(shard, set())
                for key, value in data["entries"].items():
                    if key not in mine:
                        entries.setdefault(key, value)
            if keep is not None:
                mine = self.touched.get(shard, set())
                for key in [k for k in entries if k not in mine and not keep(k)]:
                    del entries[key]
            _write_json(self.path(shard), dict(self.header, entries=entries))
        self.dirty.clear()


# ----------------------------------------------------------------------------- the result cache
class ResultCache:
    """Findings (and deps) of one run key; `lookup` before linting, `store` after, `save` once at the end."""

    def __init__(self, directory: str, key: str) -> None:
        self.directory = directory
        self.key = key
        self.folder = os.path.join(directory, f"v{SCHEMA}", key[:32])
        self._shards = _Shards(self.folder, {"schema": SCHEMA, "key": self.key}, SHARDS)
        self.seen: set = set()  # absolute paths looked up or stored in this run

    @classmethod
    def open(cls, settings: Settings, rules: Sequence[Type[Rule]], fingerprint: str,
             project: bool = False) -> "ResultCache":
        return cls(cache_dir_for(settings), run_key(settings, rules, fingerprint, project))

    def shard_path(self, path: str) -> str:
        """The shard file that holds `path`'s entry."""
        return self._shards.path(self._shards.shard(os.path.abspath(path)))

    @property
    def entries(self) -> Dict[str, Entry]:
        """Every entry on disk and in memory (reads every shard: for tests and tools, not for runs)."""
        return self._shards.all()

    def entry(self, path: str) -> Optional[Entry]:
        key = os.path.abspath(path)
        self.seen.add(key)
        entry = self._shards.get(key)
        return entry if _well_formed(entry) else None

    # ------------------------------------------------------------------ save
    def save(self) -> None:
        """Write the changed shards (entries of deleted files pruned from them) and drop stale run keys."""
        try:
            if self._shards.dirty:
                _prepare(self.directory, self.folder)
            self._shards.save(keep=os.path.exists)
            self._remove_stale()
        except OSError:
            pass  # a read-only tree or a full disk: run without a cache, never fail the run

    def _remove_stale(self) -> None:
        """Cache folders of run keys nobody used for STALE_SECONDS (old versions, old configs)."""
        parent = os.path.dirname(self.folder)
        limit = time.time() - STALE_SECONDS
        try:
            os.utime(self.folder)
            names = os.listdir(parent)
        except OSError:
            return
        for name in names:
            target = os.path.join(parent, name)
            try:
                if target != self.folder and os.stat(target).st_mtime < limit:
                    for child in os.listdir(target):
                        os.unlink(os.path.join(target, child))
                    os.rmdir(target)
            except OSError:
                pass

    # ------------------------------------------------------------------ entries
    def lookup(self, path: str, st: os.stat_result) -> Optional[Tuple[str, List[Finding], Any]]:
        """(hash, findings, deps) if the entry's stat matches (the hash is then trusted); else None.

        A None here is not yet a miss: the caller reads the file and asks `lookup_hash`.
        """
        entry = self.entry(path)
        if entry is None or entry[2] == 0 or entry[1] != st.st_size or entry[2] != st.st_mtime_ns:
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
            return entry[0], [decode_finding(f, path) for f in entry[3]], entry[4]
        except (KeyError, TypeError, ValueError):
            self._shards.drop(os.path.abspath(path))  # malformed: a miss, rewritten by store()
            return None

    def store(self, path: str, sha: str, size: int, mtime_ns: int, read_ns: int,
              findings: Iterable[Finding], deps: Any = None, notes: Sequence[str] = ()) -> None:
        """Remember the findings, deps and notes of the bytes hashed to `sha` (size/mtime as read at
        `read_ns`)."""
        key = os.path.abspath(path)
        self.seen.add(key)
        racy = mtime_ns + RACY_NS >= read_ns
        entry = [sha, size, 0 if racy else mtime_ns, [encode_finding(f) for f in findings],
                 deps.to_tuple() if hasattr(deps, "to_tuple") else (deps if deps is not None else [])]
        if notes:
            entry.append(list(notes))
        self._shards.put(key, entry)

    def notes_of(self, path: str) -> Tuple[str, ...]:
        """The notes stored with a file's entry (after a hit)."""
        entry = self.entry(path)
        if entry is not None and len(entry) == 6 and all(isinstance(n, str) for n in entry[5]):
            return tuple(entry[5])
        return ()

    def refresh_stat(self, path: str, size: int, mtime_ns: int, read_ns: int) -> None:
        """A hash hit on an entry whose stat was stale or racy: trust the new stat from now on."""
        key = os.path.abspath(path)
        entry = self._shards.get(key)
        if not _well_formed(entry):
            return
        new_mtime = 0 if mtime_ns + RACY_NS >= read_ns else mtime_ns
        if entry[1] != size or entry[2] != new_mtime:
            self._shards.put(key, [entry[0], size, new_mtime, entry[3], entry[4]])


def _well_formed(entry: Any) -> bool:
    return (isinstance(entry, list) and len(entry) in (5, 6) and isinstance(entry[0], str)
            and type(entry[1]) is int and type(entry[2]) is int and isinstance(entry[3], list)
            and isinstance(entry[4], list) and (len(entry) == 5 or isinstance(entry[5], list)))


# ----------------------------------------------------------------------------- the project store
PROJECT_SCHEMA = 5  # (5: summaries in the tuple form of records.Summary, schema 6)


def project_store_dir(settings: Settings, root: str, precision: bool = True) -> str:
    """Where a project's index lives: keyed by the root, the version, the Python (its `ast`) and whether its
    summaries hold precision decisions."""
    stamp = json.dumps([os.path.abspath(root), __version__, list(sys.version_info[:2]), PROJECT_SCHEMA, precision])
    return os.path.join(cache_dir_for(settings), f"project-v{PROJECT_SCHEMA}",
                        hashlib.sha256(stamp.encode("utf-8", "surrogatepass")).hexdigest()[:24])


class ProjectStore:
    """The project index on disk: path -> [size, mtime_ns, sha, shape]; sha -> summary; digest -> model."""

    def __init__(self, directory: str, folder: str) -> None:
        self.directory = directory  # the cache directory (tagged on first write)
        self.folder = folder
        header = {"schema": PROJECT_SCHEMA, "version": __version__}
        self.index: Dict[str, List[Any]] = {}
        self._index_stat: Optional[Tuple[int, int]] = None
        self._index_dirty = False
        self._summaries = _Shards(os.path.join(folder, "summaries"), header, SUMMARY_SHARDS)
        self._typed: Dict[str, Summary] = {}  # sha -> the summary read from the shards (each made once)
        self._listing: Any = None  # discovery.Listing, read on first use
        self._load_index()

    @classmethod
    def open(cls, settings: Settings, root: str, precision: bool = True) -> "ProjectStore":
        return cls(cache_dir_for(settings), project_store_dir(settings, root, precision))

    def _load_index(self) -> None:
        data, stat = _read_json(os.path.join(self.folder, "index.json"))
        self._index_stat = stat
        if isinstance(data, dict) and data.get("schema") == PROJECT_SCHEMA and isinstance(data.get("files"), dict):
            self.index = {k: v for k, v in data["files"].items()
                          if isinstance(v, list) and len(v) == 4 and type(v[0]) is int and type(v[1]) is int
                          and isinstance(v[2], str) and isinstance(v[3], str)}

    def listing(self, key: str) -> Any:
        """The project's directory listing as last walked with settings `key` (a discovery.Listing)."""
        if self._listing is None or self._listing.key != key:
            data, _ = _read_json(os.path.join(self.folder, "listing.json"))
            dirs = data.get("dirs") if isinstance(data, dict) and data.get("key") == key else None
            valid = isinstance(dirs, dict) and all(_listing_entry(v) for v in dirs.values())
            self._listing = Listing(key, dirs if valid else None)
            if valid and isinstance(data.get("above"), dict):
                self._listing.above = data["above"]
        return self._listing

    def stat_entry(self, relpath: str, size: int, mtime_ns: int) -> Optional[Tuple[str, str]]:
        """(content hash, shape) recorded for a file whose size and mtime have not changed (racy: None)."""
        entry = self.index.get(relpath)
        if entry is None or entry[1] == 0 or entry[0] != size or entry[1] != mtime_ns:
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
        """Record a file's stat, hash and shape, and its complete summary."""
        entry = [size, 0 if mtime_ns + RACY_NS >= read_ns else mtime_ns, sha, shape]
        if self.index.get(relpath) != entry:
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
        data, _ = _read_json(os.path.join(self.folder, f"model-{digest[:32]}.json"))
        if isinstance(data, dict) and data.get("digest") == digest and isinstance(data.get("tables"), dict):
            return data["tables"]
        return None

    def save(self, digest: Optional[str] = None, tables: Optional[Dict[str, Any]] = None) -> None:
        try:
            _prepare(self.directory, self.folder)
            self._summaries.save()
            if self._index_dirty:
                _write_json(os.path.join(self.folder, "index.json"), {"schema": PROJECT_SCHEMA, "files": self.index})
                self._index_dirty = False
            if self._listing is not None and self._listing.changed:
                _write_json(os.path.join(self.folder, "listing.json"),
                            {"key": self._listing.key, "above": self._listing.above, "dirs": self._listing.dirs})
                self._listing.changed = False
            if digest is not None and tables is not None and self.model(digest) is None:
                _write_json(os.path.join(self.folder, f"model-{digest[:32]}.json"),
                            {"digest": digest, "tables": tables})
                models = sorted((os.stat(os.path.join(self.folder, n)).st_mtime, n)
                                for n in os.listdir(self.folder) if n.startswith("model-"))
                for _, name in models[:-MODELS_KEPT]:
                    os.unlink(os.path.join(self.folder, name))
        except OSError:
            pass  # a read-only tree or a full disk: run without a store
