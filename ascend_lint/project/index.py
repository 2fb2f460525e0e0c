"""The project index: every Python file under the project root, its summary and the model built from them.

One entry point for every face: `ProjectIndex.open(paths, settings)` finds the root, lists the files with
discovery's excludes, and takes each file's summary from the project store when its bytes are unchanged
(else a cheap text-only summary, completed later from the linted tree or a parse). `model()` builds (or
loads) the model; `view_for(path)` is what the engine hands a file's rules; `refresh(path, text)` replaces
one file's summary from an editor buffer or stdin.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import replace
from typing import Any, Dict, Iterable, List, Optional, Sequence

from .model import ProjectModel, module_id
from .root import find_project_root
from .summary import SUMMARY_SCHEMA, Summary, light_summary, summarize
from .view import ProjectView

MAX_FILE_BYTES = 10 * 1024 * 1024  # larger files contribute no facts (generated code, data)


class ProjectIndex:
    """Summaries of a project's files (relative paths, '/'-separated) and the model built from them."""

    def __init__(self, root: str, settings: Any, store: Any = None) -> None:
        self.root = os.path.abspath(root)
        self.settings = settings
        self.store = store  # a cache.ProjectStore, or None (no cache)
        self.summaries: Dict[str, Summary] = {}
        self.hashes: Dict[str, str] = {}
        self._model: Optional[ProjectModel] = None
        self._digest: Optional[str] = None
        self.listed = False

    @classmethod
    def open(cls, paths: Sequence[str], settings: Any, cache: bool = True,
             listed: Optional[Sequence[str]] = None) -> "ProjectIndex":
        """The index of the project that `paths` belong to (its files listed and summarised). `listed`: the
        files discovery found for `paths`, reused when `paths` include the root itself (no second walk)."""
        root = find_project_root(paths, getattr(settings, "config_path", None))
        store = None
        if cache:
            from ..cache import ProjectStore

            store = ProjectStore.open(settings, root)
        index = cls(root, settings, store)
        whole = listed is not None and os.path.abspath(getattr(settings, "project_root", "")) == index.root and \
            any(os.path.isdir(p) and os.path.abspath(p) == index.root for p in paths)
        index.load(list(listed) if whole else None)
        return index

    # ----------------------------------------------------------------- files
    def relpath(self, path: str) -> Optional[str]:
        """The path of a file relative to the root ('/'-separated), None when it lies outside."""
        absolute = path if os.path.isabs(path) and os.sep + "." not in path else os.path.abspath(path)
        prefix = self.root if self.root.endswith(os.sep) else self.root + os.sep
        if not absolute.startswith(prefix):
            return None
        rel = absolute[len(prefix):]
        return rel.replace(os.sep, "/") if os.sep != "/" else rel

    def list_files(self) -> List[str]:
        """Every Python file under the root, with discovery's excludes (symlinked directories not followed)."""
        from ..discovery import discover

        settings = replace(self.settings, project_root=self.root, force_exclude=False)
        targets, _missing = discover([self.root], settings)
        return [t.path for t in targets]

    def load(self, files: Optional[List[str]] = None) -> None:
        """Summaries of every project file (`files`: the listing, when already known): the stored one when
        the bytes are unchanged, else one from the text."""
        files = self.list_files() if files is None else files
        present = []
        for path in files:
            rel = self.relpath(path)
            if rel is None:
                continue
            present.append(rel)
            self._load_one(path, rel)
        if self.store is not None:
            self.store.forget_missing(present)
        self.listed = True
        self._model = None

    def _load_one(self, path: str, rel: str) -> None:
        try:
            st = os.stat(path)
        except OSError:
            return
        if self.store is not None:
            sha = self.store.stat_hash(rel, st.st_size, st.st_mtime_ns)
            summary = self.store.summary(sha) if sha else None
            if summary is not None:
                self.summaries[rel] = summary
                self.hashes[rel] = sha
                return
        raw = _read(path, st)
        if raw is None:
            self.summaries[rel] = _empty()
            return
        self.set_text(rel, raw, None, st)

    def set_text(self, rel: str, raw: bytes, text: Optional[str], st: Any = None, read_ns: int = 0) -> None:
        """A file's text-only summary (stored summaries are reused by content hash)."""
        sha = hashlib.sha256(raw).hexdigest()
        self.hashes[rel] = sha
        stored = self.store.summary(sha) if self.store is not None else None
        if stored is not None:
            self.summaries[rel] = stored
        else:
            if text is None:
                text = _decode(raw)
            self.summaries[rel] = light_summary(text) if text is not None else _empty()
        if self.store is not None and st is not None:
            self.store.put(rel, st.st_size, st.st_mtime_ns, read_ns or time.time_ns(), sha,
                           self.summaries[rel])
        self._model = None

    def update(self, path: str, summary: Optional[Summary], sha: str = "", size: int = 0, mtime_ns: int = 0,
               read_ns: int = 0) -> None:
        """A linted file's summary (None: the file does not parse and contributes no facts)."""
        rel = self.relpath(path)
        if rel is None:
            return
        summary = summary if summary is not None else _empty()
        if self.summaries.get(rel) != summary:
            self.summaries[rel] = summary
            self._model = None
        if sha:
            self.hashes[rel] = sha
            if self.store is not None:
                self.store.put(rel, size, mtime_ns, read_ns, sha, summary)

    def refresh(self, path: str, text: str, tree: Any = None) -> None:
        """Replace one file's summary from a buffer (stdin, an editor, flake8's lines); nothing is stored."""
        rel = self.relpath(path)
        if rel is None:
            return
        if tree is None:
            import ast
            import warnings

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
        summary = summarize(tree, text) if tree is not None else _empty()
        if self.summaries.get(rel) != summary:
            self.summaries[rel] = summary
            self.hashes[rel] = "buffer:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            self._model = None

    def incomplete(self) -> List[str]:
        """Relative paths whose summary still lacks the facts that need the syntax tree."""
        return [rel for rel, s in self.summaries.items() if s.get("light")]

    def complete(self, skip: Iterable[str] = ()) -> None:
        """Parse the files whose summaries still need the tree (not the ones in `skip`: being linted)."""
        from ..engine import parse
        from ..fileio import SourceError

        skipped = set(skip)
        for rel in self.incomplete():
            if rel in skipped:
                continue
            path = os.path.join(self.root, rel)
            try:
                st = os.stat(path)
            except OSError:
                continue
            raw = _read(path, st)
            text = _decode(raw) if raw is not None else None
            summary = _empty()
            if text is not None:
                try:
                    summary = summarize(parse(text, path), text, None, self.summaries[rel])
                except SourceError:
                    pass
            self.update(path, summary, hashlib.sha256(raw).hexdigest() if raw is not None else "",
                        st.st_size, st.st_mtime_ns, time.time_ns())

    # ----------------------------------------------------------------- model
    def digest(self) -> str:
        """A digest of everything the model is built from: the summaries (by hash) and the settings."""
        blob = json.dumps([SUMMARY_SCHEMA, sorted(self.hashes.items()), [rel for rel in sorted(self.summaries)
                           if rel not in self.hashes or self.hashes[rel].startswith("buffer:")],
                           getattr(self.settings, "runtime_migration", "auto"),
                           list(getattr(self.settings, "migrating_modules", []))], default=repr)
        if any(h.startswith("buffer:") for h in self.hashes.values()) or len(self.hashes) != len(self.summaries):
            blob += json.dumps(sorted(self.summaries.items()), sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def model(self) -> ProjectModel:
        """The model of the current summaries (built once per change; loaded from the store when it has it)."""
        if self._model is not None:
            return self._model
        digest = self.digest()
        tables = self.store.model(digest) if self.store is not None else None
        if tables is not None:
            self._model = ProjectModel(tables)
        else:
            self._model = ProjectModel.build(self.summaries, getattr(self.settings, "runtime_migration", "auto"),
                                             getattr(self.settings, "migrating_modules", []))
        self._digest = digest
        return self._model

    def view_for(self, path: str) -> ProjectView:
        """What the rules of the file at `path` see of the project."""
        rel = self.relpath(path)
        model = self.model()
        module = model.module_of(rel) if rel is not None else None
        if module is None and rel is not None:
            module = module_id(rel)  # a file being linted that the listing left out (excluded, stdin)
        return ProjectView(model, module, rel or "")

    def save(self) -> None:
        if self.store is not None:
            model = self.model()
            complete = not self.incomplete() and not any(h.startswith("buffer:") for h in self.hashes.values())
            self.store.save(self._digest if complete else None, model.tables() if complete else None)


def _empty() -> Summary:
    return {"schema": SUMMARY_SCHEMA, "light": False, "imports": [], "classes": {}, "defs": {}, "patches": [],
            "entry": False}


def _read(path: str, st: Any) -> Optional[bytes]:
    import stat as stat_mod

    if not stat_mod.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
        return None  # FIFOs, devices, huge files: no facts (and never a blocking open)
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None


def _decode(raw: bytes) -> Optional[str]:
    from ..fileio import SourceError, decode_source

    try:
        return decode_source(raw)[0]
    except SourceError:
        return None
