"""Where the caches live and how they hold their maps: the cache directory (created tagged and git-ignored,
used only while cache_io trusts it) and `Shards`, a map split over shard files that a run loads on first use
and rewrites only when changed, merging what another run wrote meanwhile. The result cache and the project
store both keep their entries in `Shards`.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Dict, Optional, Tuple

from ..config import DEFAULT_CACHE_DIR, Settings
from ..fileio import _umask, write_atomic
from .cache_io import SHARD_BYTES, Identity, make_dirs, read_json, untrusted, warn_untrusted, write_json

CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by ascend-lint.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")


# ----------------------------------------------------------------------------- the cache directory
def cache_dir_for(settings: Settings) -> str:
    """`cache-dir` (relative to the settings' directory; the CLI makes the run's absolute, see
    config.ConfigResolver) or `.ascend_lint_cache/` there."""
    root = os.path.abspath(settings.project_root)
    return os.path.join(root, settings.cache_dir or DEFAULT_CACHE_DIR)


def prepare(directory: str, folder: str) -> bool:
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


def trusted(directory: str, folder: str) -> bool:
    """May `folder` (inside the cache `directory`) be used? If not, say why once (cache_io.untrusted)."""
    problem = untrusted(directory, folder)
    if problem:
        warn_untrusted(directory, problem)
    return problem is None


# ----------------------------------------------------------------------------- shards
def shard_of(text: str, shards: int) -> str:
    return "%02x" % (int(hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:4], 16) % shards)


def fit(entries: Dict[str, Any], limit: int) -> Dict[str, Any]:
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


class Shards:
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
        return shard_of(key, self.shards)

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
                write_json(self.path(shard), dict(self.header, entries=fit(entries, SHARD_BYTES)), SHARD_BYTES)
        self.dirty.clear()
