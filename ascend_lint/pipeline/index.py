"""The project index: every Python file under the project root, its summary and the model built from them.

One entry point for every face: `ProjectIndex.open(paths, settings)` finds the root, lists the files with
discovery's excludes, and takes each file's summary from the project store when its bytes are unchanged
(else a cheap text-only summary, completed later from the linted tree or a parse). `model()` builds the
model, or loads it from the store when the summaries' *shapes* (everything but line numbers) are those it
was built from; `view_for(path)` is what the engine hands a file's rules; `refresh(path, text)` replaces
one file's summary from an editor buffer or stdin.

Stored summaries are read lazily: a run whose files are unchanged reads only the index, the model and
the summaries of the files it lints.
"""
from __future__ import annotations

import hashlib
import json
import marshal
import os
import stat as stat_mod
import time
from dataclasses import replace
from functools import partial
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..analysis.model import MODEL_SCHEMA, ProjectModel, module_id
from ..analysis.summary import SUMMARY_SCHEMA, Summary, summarize, summarize_text
from ..analysis.textscan import share_rows, text_rows
from ..analysis.view import ProjectView
from ..config import ConfigError
from ..engine.linter import gc_paused, parse
from ..fileio import SourceError, decode_source, read_bytes
from ..heap import after_reading, give_back
from .discovery import DiscoveryReport, Excluder, Listing, discover
from .progress import Progress
from .project_store import ProjectStore
from .root import find_project_root, is_marked
from .scope import ImportScope
from .workers import make_chunks, map_in_workers

MAX_FILE_BYTES = 10 * 1024 * 1024  # larger files contribute no facts (generated code, data)
EARLY_COMPLETE = 50  # at most this many changed files are parsed up front to keep a stored model valid


class _Summaries:
    """relpath -> summary, read from the project store on first use."""

    def __init__(self, index: "ProjectIndex") -> None:
        self.index = index
        self.loaded: Dict[str, Summary] = {}

    def get(self, rel: Optional[str], default: Any = None) -> Any:
        if rel is None:
            return default
        found = self.loaded.get(rel)
        if found is None and rel in self.index.hashes and self.index.store is not None:
            found = self.index.store.summary(self.index.hashes[rel])
            if found is not None:
                self.loaded[rel] = found
        return found if found is not None else default

    def __getitem__(self, rel: str) -> Summary:
        found = self.get(rel)
        if found is None:
            raise KeyError(rel)
        return found

    def __setitem__(self, rel: str, summary: Summary) -> None:
        self.loaded[rel] = summary

    def __contains__(self, rel: object) -> bool:
        return rel in self.index.shapes

    def __iter__(self) -> Iterator[str]:
        return iter(self.index.shapes)

    def __len__(self) -> int:
        return len(self.index.shapes)

    def items(self) -> Iterator:
        for rel in list(self.index.shapes):
            yield rel, self[rel]


def _needs_normalising(path: str) -> bool:
    """Does an absolute path hold `.`/`..` segments or doubled separators (what abspath would change)?"""
    sep = os.sep
    return (sep + "." + sep in path or sep + ".." + sep in path or sep + sep in path[1:]
            or path.endswith((sep + ".", sep + "..")) or (os.altsep is not None and os.altsep in path))


class ProjectIndex:
    """Summaries of a project's files (relative paths, '/'-separated) and the model built from them."""

    def __init__(self, root: str, settings: Any, store: Any = None, resolver: Any = None,
                 precision: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.settings = settings
        self.precision = precision  # are the scripts' precision decisions gathered (a rule reads them)?
        self.store = store  # a cache.ProjectStore, or None (no cache)
        self.resolver = resolver  # a config.ConfigResolver: each directory's excludes are its configuration's
        self.hashes: Dict[str, str] = {}  # relpath -> content hash ("buffer:..." for editor buffers)
        self.shapes: Dict[str, Optional[str]] = {}  # relpath -> shape of its summary (None: not computed yet)
        self.summaries = _Summaries(self)
        self._model: Optional[ProjectModel] = None
        self._digest: Optional[str] = None
        self._tree_changes: Dict[str, Summary] = {}  # files that gained only tree facts since the model
        self._stored_digest: Optional[str] = None  # the digest of the model last loaded from the store
        self._built: Optional[ProjectModel] = None  # the model last built here (its lookups serve the next build)
        self.scope: Optional[ImportScope] = None  # set: the index holds the linted files and what they import
        self.report = DiscoveryReport()  # what listing the files could not do (the faces print it)
        self.progress = Progress.off()
        self._excluders: Dict[int, Excluder] = {}

    @classmethod
    def open(cls, paths: Sequence[str], settings: Any, cache: bool = True,
             listed: Optional[Sequence[str]] = None, resolver: Any = None, jobs: int = 1,
             precision: bool = True, progress: Optional[Progress] = None,
             root: Optional[str] = None) -> "ProjectIndex":
        """The index of the project that `paths` belong to (its files listed and summarised). `listed`: the
        files of this project that discovery found for `paths`, reused when `paths` include the root itself
        (no second walk). With a `resolver` (hierarchical configuration), the model's settings are those of
        the root's configuration, and directories whose configuration starts another project are left out.
        Where no configuration or project marker places the root, the index holds only the files of `paths`
        and what they import (see scope.py). `jobs`: worker processes that may share the text summaries of
        files the store does not have. `precision`: are the scripts' precision decisions gathered (an
        enabled rule reads them)? Summaries with and without them are stored apart. `root`: the project root,
        when the caller knows it."""
        config = getattr(settings, "root_config", None) or getattr(settings, "config_path", None)
        root = root or find_project_root(paths, config)
        if resolver is not None:
            settings = resolver.for_dir(root)
        store = ProjectStore.open(settings, root, precision) if cache else None
        index = cls(root, settings, store, resolver, precision)
        index.progress = progress or Progress.off()
        if not config and not is_marked(root):
            index.scope = ImportScope(root)
        same_excludes = resolver is not None or os.path.abspath(getattr(settings, "project_root", "")) == index.root
        covers_root = any(os.path.isdir(p) and os.path.abspath(p) == index.root for p in paths)
        if listed is not None and same_excludes and covers_root:
            index.load(list(listed), jobs)  # (discovery's listing is the project's)
        elif index.scope is None or covers_root:
            index.load(index.list_files(), jobs)
        else:
            index.follow(list(listed) if listed is not None else index.named_files(paths), jobs)
        return index

    # ----------------------------------------------------------------- files
    def relpath(self, path: str) -> Optional[str]:
        """The path of a file relative to the root ('/'-separated), None when it lies outside."""
        if path and not os.path.isabs(path) and not _needs_normalising(os.sep + path) and os.getcwd() == self.root:
            return path.replace(os.sep, "/") if os.sep != "/" else path  # (a run from the root: discovery's paths)
        prefix = self.root if self.root.endswith(os.sep) else self.root + os.sep
        absolute = path if path.startswith(prefix) and not _needs_normalising(path) else os.path.abspath(path)
        if not absolute.startswith(prefix):
            return None
        rel = absolute[len(prefix):]
        return rel.replace(os.sep, "/") if os.sep != "/" else rel

    def paths(self) -> List[str]:
        """The files the index holds."""
        return [os.path.join(self.root, rel) for rel in self.shapes]

    def _root_settings(self) -> Any:
        """The settings whose excludes list the root (force-exclude off: a listing names no file)."""
        if self.resolver is not None:
            return replace(self.resolver.for_dir(self.root), force_exclude=False)
        return replace(self.settings, project_root=self.root, force_exclude=False)

    def list_files(self) -> List[str]:
        """Every Python file under the root, with discovery's excludes (symlinked directories not followed)."""
        settings = self._root_settings()
        listing = self.store.listing(Listing.key_for(settings)) if self.store is not None else None
        targets, _missing = discover([self.root], settings, self.report, resolver=self.resolver,
                                     project_root=self.root if self.resolver is not None else None, listing=listing)
        if listing is not None:
            listing.prune()
        return [t.path for t in targets]

    def named_files(self, paths: Sequence[str]) -> List[str]:
        """The Python files `paths` name (directories walked), for an index of imported files."""
        return [t.path for t in discover([p for p in paths if p and p != "-"], self._root_settings(), self.report,
                                         resolver=self.resolver)[0]]

    def follow(self, paths: Sequence[str], jobs: int = 1) -> None:
        """Add the files at `paths` and what they import, transitively (an index of imported files)."""
        todo = list(dict.fromkeys(p for p in paths if self.relpath(p) not in self.shapes and self.relpath(p)))
        seen = set(todo)
        while todo:
            self.load(todo, jobs, forget=False)
            found = [imported for path in todo
                     for imported in self._imports_of(path, self.summaries.get(self.relpath(path)))
                     if imported not in seen]
            seen.update(found)
            todo = list(dict.fromkeys(found))

    def _imports_of(self, path: str, summary: Optional[Summary]) -> List[str]:
        """The files `path` imports that the index still lacks and holds (an index of imported files)."""
        if self.scope is None or summary is None:
            return []
        return [imported for imported in self.scope.imported_files(os.path.abspath(path), summary)
                if self.relpath(imported) not in self.shapes and self._wanted(imported)]

    def _wanted(self, path: str) -> bool:
        """Is an imported file one the index holds (not excluded by its configuration; a broken configuration
        leaves its files out, named once)?"""
        try:
            settings = self.resolver.for_file(path) if self.resolver is not None else self._root_settings()
        except ConfigError as exc:
            self.report.refuse(exc)
            return False
        excluder = self._excluders.get(id(settings))
        if excluder is None:
            excluder = self._excluders[id(settings)] = Excluder(settings, self.report)
        return not excluder.excluded(path, False)

    def load(self, files: Optional[List[str]] = None, jobs: int = 1, forget: bool = True) -> None:
        """Summaries of `files` (default: every project file): the stored one when the bytes are unchanged,
        else one from the text (made in `jobs` worker processes when there are enough files). `forget`: the
        store forgets the files that are not in `files` (the whole project was listed)."""
        present, unknown = self._stat_files(self.list_files() if files is None else files)
        self.progress.start("indexing", len(unknown))
        changed = self._summarise(unknown, jobs)
        give_back()  # (the texts read)
        if self.store is not None:
            if forget:
                self.store.forget_missing(present)
            if changed and len(changed) <= EARLY_COMPLETE:
                # a few edited files (pre-commit, an editor): parse them now, so their shapes can be compared
                # with the stored ones and the stored model still serves when only lines moved
                self.complete(only=changed)
        self._model = None

    def _stat_files(self, files: List[str]) -> Tuple[List[str], List[Tuple[str, str, Any, Optional[str]]]]:
        """(relative paths of `files`, (path, rel, stat, recorded hash) of the files whose stat the store does
        not know); the others take the store's hash and shape."""
        present = []
        unknown: List[Tuple[str, str, Any, Optional[str]]] = []
        for path in files:
            rel = self.relpath(path)
            if rel is None:
                continue
            if rel == path:
                rel = path  # (run from the root: the index keys are discovery's strings, not copies)
            present.append(rel)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found = self.store.stat_entry(rel, st) if self.store is not None else None
            if found is not None:
                self.hashes[rel], self.shapes[rel] = found
            else:  # (a touched, checked-out or just-written file may still hold the bytes the store has)
                recorded = self.store.recorded(rel) if self.store is not None else None
                unknown.append((path, rel, st, recorded[0] if recorded is not None else None))
        return present, unknown

    def _summarise(self, unknown: List[Tuple[str, str, Any, Optional[str]]], jobs: int) -> List[str]:
        """Take a summary for each of `unknown`; the relative paths of those the store did not have."""
        changed = []
        with gc_paused():  # (a project's worth of new summaries: no cyclic garbage, no GC pass over them)
            for path, rel, sha, light, st, read_ns in _text_summaries(unknown, jobs, self.precision):
                self.progress.advance()
                if light is None and (self.store is None or self.store.summary(sha) is None):
                    (_rel, sha, light, read_ns), = _summarise_files([(path, rel, None)], self.precision)  # (not stored)
                if sha is None:  # unreadable: no facts
                    self._set(rel, _empty(), "")
                    changed.append(rel)
                elif not self._take(rel, sha, light, st, read_ns):
                    changed.append(rel)
        return changed

    def _set(self, rel: str, summary: Summary, sha: str) -> None:
        self.summaries[rel] = summary
        self.shapes[rel] = None  # computed when a digest needs it
        if sha:
            self.hashes[rel] = sha
        else:
            self.hashes.pop(rel, None)
        self._model = None

    def _take(self, rel: str, sha: str, light: Optional[Summary], st: Any, read_ns: int) -> bool:
        """A file's summary for bytes of hash `sha`: the stored one for these bytes, else its text-only
        `light` one (None only when the store has these bytes). True when the store had it."""
        stored = self.store.summary(sha) if self.store is not None else None
        self._set(rel, stored if stored is not None else light, sha)
        if self.store is not None:
            self.store.put(rel, st.st_size, st.st_mtime_ns, read_ns, sha, self.summaries.get(rel), self.shape(rel))
        return stored is not None

    def shape(self, rel: str) -> str:
        shape = self.shapes.get(rel)
        if shape is None:
            shape = self.shapes[rel] = self.summaries[rel].shape()
        return shape

    def update(self, path: str, summary: Optional[Summary], sha: str = "", size: int = 0, mtime_ns: int = 0,
               read_ns: int = 0) -> None:
        """A linted file's summary (None: the file does not parse and contributes no facts)."""
        rel = self.relpath(path)
        if rel is None:
            return
        summary = summary if summary is not None else _empty()
        old = self.summaries.get(rel)
        if old != summary:
            old_shape = self.shapes.get(rel) if self.store is not None else None
            self.summaries[rel] = summary
            self.shapes[rel] = None
            if old_shape is None or self.shape(rel) != old_shape:  # (the same shape: only lines moved)
                if self._model is not None and old is not None and old.gained_only_tree_facts(summary):
                    self._tree_changes[rel] = summary  # the model is brought up to date cheaply
                else:
                    self._model = None
        if sha:
            if self.hashes.get(rel) != sha:  # (an equal string stays: one copy of each hash)
                self.hashes[rel] = sha
            if self.store is not None:
                self.store.put(rel, size, mtime_ns, read_ns, sha, summary, self.shape(rel))

    def refresh(self, path: str, text: str, tree: Any = None) -> None:
        """Replace one file's summary from a buffer (stdin, an editor, flake8's lines); nothing is stored."""
        rel = self.relpath(path)
        if rel is None:
            return
        if tree is None:
            tree = _parse(text)
        summary = summarize(tree, text, precision=self.precision) if tree is not None else _empty()
        if self.summaries.get(rel) != summary:
            old_shape = self.shape(rel) if rel in self.shapes and self.summaries.get(rel) is not None else None
            model = self._model
            self._set(rel, summary, "buffer:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
            if old_shape is not None and self.shape(rel) == old_shape:
                self._model = model  # only lines moved (typing in an editor): the model stands
        self.follow(self._imports_of(path, summary))  # (an index of imported files: what the buffer imports)

    def incomplete(self) -> List[str]:
        """Relative paths whose summary still lacks the facts that need the syntax tree (only summaries made
        in this run can: stored ones are complete)."""
        return [rel for rel, s in self.summaries.loaded.items() if s.light]

    def complete(self, skip: Iterable[str] = (), only: Optional[Iterable[str]] = None) -> None:
        """Parse the files whose summaries still need the tree (not the ones in `skip`: being linted)."""
        skipped = set(skip)
        wanted = set(only) if only is not None else None
        for rel in self.incomplete():
            if rel in skipped or (wanted is not None and rel not in wanted):
                continue
            path = os.path.join(self.root, rel)
            try:
                st = os.stat(path)
            except OSError:
                continue
            raw = _read(path, st)
            text = _decode(raw) if raw is not None else None
            summary = summarize_text(text, self.summaries.get(rel), self.precision, _parse) if text is not None \
                else None
            self.update(path, summary or _empty(), hashlib.sha256(raw).hexdigest() if raw is not None else "",
                        st.st_size, st.st_mtime_ns, time.time_ns())

    # ----------------------------------------------------------------- model
    def digest(self) -> str:
        """A digest of everything the model is built from: the summaries' shapes and the settings."""
        head = json.dumps([SUMMARY_SCHEMA, MODEL_SCHEMA, getattr(self.settings, "runtime_migration", "auto"),
                           list(getattr(self.settings, "migrating_modules", []))], default=repr)
        lines = [head] + [f"{rel}\0{self.shape(rel)}" for rel in sorted(self.shapes)]
        return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()

    def model(self) -> ProjectModel:
        """The model of the current summaries (built once per change of shape; loaded from the store when
        it has a model of these shapes)."""
        if self._model is not None and not self._tree_changes:
            return self._model
        digest = self.digest() if self.store is not None else None
        tables = self.store.model(digest) if digest is not None else None
        refreshed = None
        if tables is None and self._model is not None:
            refreshed = self._model.with_tree_facts(self._tree_changes)
        self._tree_changes = {}
        stored = ProjectModel.load(tables) if tables is not None else None
        if stored is not None:
            self._model = stored
            self._stored_digest = digest  # (the store has this model: save() need not write it)
        elif refreshed is not None:
            self._model = self._built = refreshed
        else:
            with gc_paused():  # (it makes no cyclic garbage; nor do the summaries read from the store)
                files = {rel: self.summaries[rel] for rel in self.shapes}
                self._model = self._built = ProjectModel.build(files, *self._model_settings(),
                                                               previous=self._built)
        self._digest = digest
        return self._model

    def _model_settings(self) -> Tuple[Any, List[str]]:
        """The settings the model is built with: `runtime-migration` and `migrating-modules`."""
        return getattr(self.settings, "runtime_migration", "auto"), list(getattr(self.settings, "migrating_modules", []))

    def summary_of(self, rel: str) -> Optional[Summary]:
        """A file's current summary (the lines of the places that reasons name)."""
        return self.summaries.get(rel)

    def view_for(self, path: str) -> ProjectView:
        """What the rules of the file at `path` see of the project."""
        rel = self.relpath(path)
        model = self.model()
        return ProjectView(model, module_id(rel) if rel is not None else None, rel or "", self.summary_of)

    def save(self) -> None:
        if self.store is not None:
            model = self.model()
            complete = not self.incomplete() and not any(h.startswith("buffer:") for h in self.hashes.values())
            if complete and self._digest is not None and self._digest == self._stored_digest:
                complete = False  # the stored model is this one
            self.store.save(self._digest if complete else None, model.tables() if complete else None)


PARALLEL_MIN_FILES = 64  # fewer text summaries than this are not worth starting workers for


def in_workers(unknown: Sequence[Any], jobs: int) -> bool:
    """Are these files' text summaries made in worker processes?"""
    return jobs > 1 and len(unknown) >= PARALLEL_MIN_FILES


def _text_summaries(unknown: List[Tuple[str, str, Any, Optional[str]]], jobs: int, precision: bool) -> Iterator[
        Tuple[str, str, Optional[str], Optional[Summary], Any, int]]:
    """(path, rel, content hash or None when unreadable, text-only summary, stat, read time) of each file of
    `unknown` ((path, rel, stat, recorded hash)); the summary is None when the file's bytes are the recorded
    ones (the store has their summary). In worker processes when there are enough files (the bytes stay
    there: only the summaries come back)."""
    stats = {rel: (path, st) for path, rel, st, _recorded in unknown}
    items = [(path, rel, recorded) for path, rel, _st, recorded in unknown]
    if in_workers(unknown, jobs):
        sizes = {path: st.st_size for path, _rel, st, _recorded in unknown}
        chunks = make_chunks(items, sizes, jobs)
        packed = partial(_summarise_packed, precision=precision)
        parts: Iterable[list] = map(marshal.loads, map_in_workers(packed, chunks, jobs))
    else:
        parts = [_summarise_files(items, precision, typed=True)]
    typed: Dict[Any, Any] = {}  # records of the summaries made so far: equal ones become one object
    for part in parts:
        for rel, sha, light, read_ns in part:
            path, st = stats[rel]
            if light is not None and not isinstance(light, Summary):  # (its tuple form, from a worker)
                light = Summary.from_tuple(light, typed)
            yield path, rel, sha, light, st, read_ns


def _summarise_packed(items: Sequence[Tuple[str, str, Optional[str]]], precision: bool) -> bytes:
    """`_summarise_files` for a worker process: marshalled (3x faster than pickling both ways; the names
    and records a chunk's summaries share come back shared)."""
    return marshal.dumps(_summarise_files(items, precision, typed=False))


TextSummary = Tuple[str, Optional[str], Any, int]  # (rel, hash, text-only summary or its tuple form, read time)


def _summarise_files(items: Sequence[Tuple[str, str, Optional[str]]], precision: bool,
                     typed: bool = True) -> List[TextSummary]:
    """(rel, content hash or None when unreadable, text-only summary, read time) of each (path, rel, hash the
    store has for it): no summary (None) for a file whose bytes have that hash. `precision`: see
    textscan.text_rows. `typed`: records.Summary values, else their tuple forms (for marshal), with the names
    and records they share as one object."""
    out = []
    same: Dict[str, Any] = {}  # content hash -> its summary: copies of a file are summarised once
    records: Dict[Any, Any] = {}  # equal names and records of different files become one object
    for path, rel, recorded in items:
        read_ns = time.time_ns()
        try:
            raw = _read(path, os.stat(path))
        except OSError:
            raw = None
        if raw is None:
            out.append((rel, None, _empty() if typed else _EMPTY_ROWS, read_ns))
            continue
        sha = hashlib.sha256(raw).hexdigest()
        if sha == recorded:
            out.append((rel, sha, None, read_ns))
            continue
        light = same.get(sha)
        if light is None:
            text = _decode(raw)
            if text is None:
                light = _empty() if typed else _EMPTY_ROWS
            elif typed:
                light = Summary.from_tuple(text_rows(text, records, precision), records)
            else:
                light = share_rows(text_rows(text, records, precision), records)
            same[sha] = light
        out.append((rel, sha, light, read_ns))
        after_reading(len(raw))
    return out


def tree_facts_only(old: Summary, new: Summary) -> bool:
    """Did a text-only summary become `new` by gaining only the facts read from the tree?"""
    return old.gained_only_tree_facts(new)


def _empty() -> Summary:
    return Summary.empty()


_EMPTY_ROWS = Summary.empty().to_tuple()


def _parse(text: str) -> Any:
    try:
        return parse(text, "<project file>")
    except SourceError:
        return None


def _read(path: str, st: Any) -> Optional[bytes]:
    if not stat_mod.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
        return None  # FIFOs, devices, huge files: no facts (and never a blocking open)
    try:  # the one reader: non-blocking, regular files only (a file swapped for a FIFO meanwhile)
        return read_bytes(path, MAX_FILE_BYTES)[0]
    except SourceError:
        return None


def _decode(raw: bytes) -> Optional[str]:
    try:
        return decode_source(raw)[0]
    except SourceError:
        return None
