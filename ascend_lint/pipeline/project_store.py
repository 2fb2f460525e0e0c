"""The project store: every project file's summary, so a warm run re-summarises only changed files.

It lives in `<cache dir>/project-v<PROJECT_SCHEMA>/<root key>/` and keeps an index (path -> stat, hash,
shape), summaries addressed by content hash in shards (cache_store.Shards), the project's directory listing
and the last models built, keyed by a digest of the summaries they were built from. Like the result cache,
it reads everything back as untrusted input (cache_io; cache_entries checks the framing): anything odd is
a miss, and is rewritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .. import __version__
from ..analysis.records import Summary
from ..config import Settings
from .cache_entries import Stamp, index_entry, listing_entry, same_stat, stamp_of, summary_framed, to_record
from .cache_io import FILE_BYTES, read_json, remove_own, write_json
from .cache_store import Shards, cache_dir_for, prepare, trusted
from .discovery import Listing

PROJECT_SCHEMA = 6  # (6: summaries of schema 7, execution-model facts; 5: the tuple form of records.Summary)
SUMMARY_SHARDS = 64
MODELS_KEPT = 2
_MODEL_FILE = re.compile(r"model-[0-9a-f]{32}\.json\Z")


def project_store_dir(settings: Settings, root: str, precision: bool = True) -> str:
    """Where a project's index lives: keyed by the root, the version, the Python (its `ast`) and whether its
    summaries hold precision decisions."""
    stamp = json.dumps([os.path.abspath(root), __version__, list(sys.version_info[:2]), PROJECT_SCHEMA, precision])
    return os.path.join(cache_dir_for(settings), f"project-v{PROJECT_SCHEMA}",
                        hashlib.sha256(stamp.encode("utf-8", "surrogatepass")).hexdigest()[:24])


class ProjectStore:
    """The project index on disk: path -> [size, mtime_ns, sha, shape, ctime_ns, inode]; sha -> summary;
    digest -> model."""

    def __init__(self, directory: str, folder: str) -> None:
        self.directory = directory  # the cache directory (tagged on first write)
        self.folder = folder
        self.enabled = trusted(directory, folder)
        header = {"schema": PROJECT_SCHEMA, "version": __version__}
        self.index: Dict[str, List[Any]] = {}
        self._index_dirty = False
        self._before: Dict[str, Stamp] = {}  # relpath -> its stat when stat_entry missed (before it was read)
        self._summaries = Shards(os.path.join(folder, "summaries"), header, SUMMARY_SHARDS, summary_framed,
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
            self.index = {k: v for k, v in data["files"].items() if index_entry(v)}

    def listing(self, key: str) -> Any:
        """The project's directory listing as last walked with settings `key` (a discovery.Listing)."""
        if self._listing is None or self._listing.key != key:
            data = self._read("listing.json")
            dirs = data.get("dirs") if isinstance(data, dict) and data.get("key") == key else None
            valid = isinstance(dirs, dict) and all(listing_entry(v) for v in dirs.values())
            self._listing = Listing(key, dirs if valid else None)
            if valid and isinstance(data.get("above"), dict):
                self._listing.above = data["above"]
        return self._listing

    def stat_entry(self, relpath: str, st: os.stat_result) -> Optional[Tuple[str, str]]:
        """(content hash, shape) recorded for a file whose size, mtime, ctime and inode have not changed
        (racy: None)."""
        entry = self.index.get(relpath)
        if entry is None or not same_stat(st, entry[0], entry[1], entry[4], entry[5]):
            self._before[relpath] = stamp_of(st)
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
        _size, mtime, ctime, inode = to_record(before, size, mtime_ns, read_ns)
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
            if not prepare(self.directory, os.path.join(self.folder, "summaries")):
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
