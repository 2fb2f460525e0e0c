"""Running the linter over many files: the project model, the result cache, worker processes, stable output.

With a project index (every face but bare API calls has one), a run is:
1. the index gives every project file's summary: stored ones for unchanged bytes, a cheap text-only one
   for the rest (made in the worker processes with `jobs > 1`); the *provisional* model is built from them
   (before any worker is forked), and the objects then alive are left out of the GC's passes;
2. files whose findings are not in the cache are linted ONCE against the provisional model, in one pass
   (one set of worker processes: linting the files with step loops first, against a model refreshed with
   them, spared a few files a second lint but cost more in forked workers than it saved); the same
   parse gives their full summary (no second parse), read before the rules run so that the roles the
   file's own step loops give its functions are in its answers already, and their deps (the model
   questions asked);
3. files of the project that are not linted and still lack facts that need a tree are parsed;
4. the final model is built (files found not to parse change the model only here: at most two full
   builds per run), and every result, fresh or cached, whose deps get a different answer from it is
   linted again (in the worker processes too, when there are enough). So editing `train.py` changes the
   findings of `utils.py`, and nothing else is linted twice.

Files are streamed: each is read, linted and dropped, and nothing but its findings is kept (plus its
source when the caller will rewrite it), so memory does not grow with the size of the tree. With
`jobs > 1` and enough work, files go to worker processes in chunks, largest files first; every
worker rebuilds the Linter from the settings and the rules' import paths (the project index is inherited
by forked workers; elsewhere answers are re-checked in the parent). Results come back sorted by path
whatever the worker count, so `-j 1` and `-j 8` print the same.
"""
from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar

from .cache import ResultCache, content_hash
from ..compat import slotted_dataclass
from ..config import Settings
from .discovery import Target
from ..engine.linter import FileResult, Linter, error_finding
from ..fileio import SourceError, SourceFile, decode_source, read_bytes, read_source, split_lines
from ..heap import after_reading, give_back
from ..analysis.view import replay
from ..rule import Finding, Rule

# Below this much source, starting worker processes costs more than it saves (measured: a forked
# worker is ready in ~15 ms; linting runs at ~5 MB/s per process on torch-heavy code).
PARALLEL_MIN_BYTES = 256 * 1024
PARALLEL_MIN_FILES = 8
CHUNKS_PER_WORKER = 8  # enough small tasks that the last ones balance the load
MIN_CHUNK_BYTES = 32 * 1024
FILE_COST = 2048  # a file's cost besides its bytes (open, stat, hash, per-file set-up), in bytes' worth of work

RuleRef = Tuple[str, str, str]  # (module, qualname, pack)
Item = TypeVar("Item", bound=tuple)  # a task: (path, ...)


@slotted_dataclass
class Outcome:
    """What linting one file produced, in a form cheap to send back from a worker."""

    path: str
    findings: List[Finding]
    source: Optional[SourceFile] = None
    sha: str = ""  # "" when the file could not be read (never cached)
    size: int = 0
    mtime_ns: int = 0
    read_ns: int = 0
    hit: bool = False  # the expected hash matched: `findings` is empty and the cache entry stands
    notes: Tuple[str, ...] = ()  # FileResult.notes
    summary: Optional[dict] = None  # the file's full project summary when it was computed
    deps: Optional[list] = None  # the project-model questions asked, with their answers
    summarized: bool = False  # `summary` is meaningful (None then: the file does not parse)


@dataclass
class Group:
    """Files linted with one configuration: its Linter and its result cache (one run key per settings)."""

    linter: Linter
    targets: Sequence[Target]
    cache: Optional[ResultCache] = None


def lint_targets(linter: Linter, targets: Sequence[Target], jobs: int = 1,
                 cache: Optional[ResultCache] = None, keep_sources: bool = True, index=None) -> List[FileResult]:
    """Lint every target; results come back sorted by path whatever the worker count.

    With `cache`, unchanged files are answered from it and new results are stored and saved. With
    `index` (a pipeline.index.ProjectIndex), the rules see the project model (see the module docstring).
    `keep_sources`: results that have findings carry their SourceFile (the fixer and --add-noqa
    need it); otherwise sources are None and reports read lines lazily (see SourceLines).
    """
    return lint_groups([Group(linter, targets, cache)], jobs, keep_sources, index)


def lint_groups(groups: Sequence[Group], jobs: int = 1, keep_sources: bool = True, index=None) -> List[FileResult]:
    """`lint_targets` for files of one project linted with different settings (hierarchical configuration):
    one project model, each file linted with its group's Linter and cached under its group's run key."""
    with _gc_spares_the_project() as spare:
        return _lint_groups(groups, jobs, keep_sources, index, spare)


@contextmanager
def _gc_spares_the_project() -> Iterator:
    """Yields `spare()`: the objects alive when it is called (the project's summaries and model) are left out
    of the cyclic GC's passes until the run ends, so that a pass costs what the run allocates since, not
    the size of the project (and forked workers do not copy the pages a pass would touch). Does nothing if
    the caller froze objects itself."""
    if gc.get_freeze_count():
        yield lambda: None
        return
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def _lint_groups(groups: Sequence[Group], jobs: int, keep_sources: bool, index, spare) -> List[FileResult]:
    group_of: Dict[str, Group] = {}
    for group in groups:
        if index is not None:
            group.linter.project = index
        for target in group.targets:
            group_of.setdefault(target.path, group)
    if index is not None:
        index.model()  # the provisional model, built before any worker is forked
        spare()
        give_back()  # (the texts read for the summaries)
    results: Dict[str, FileResult] = {}
    deps: Dict[str, Optional[list]] = {}  # path -> deps of its result (None: no project questions to check)
    stats: Dict[str, Tuple[str, int, int, int]] = {}  # path -> (sha, size, mtime, read_ns) for storing
    todo: List[Tuple[str, Optional[str]]] = []  # (path, hash the cache holds for it)
    sizes: Dict[str, int] = {}
    for path, group in group_of.items():
        cache = group.cache
        try:
            st = os.stat(path)
        except OSError:
            todo.append((path, None))
            continue
        sizes[path] = st.st_size
        if cache is not None:
            hit = cache.lookup(path, st)
            if hit is not None:
                sha, findings, hit_deps = hit
                if not (findings and keep_sources):
                    results[path] = FileResult(path, findings, notes=cache.notes_of(path))
                    deps[path] = hit_deps
                    continue
                todo.append((path, sha))  # its source is needed: read it (and re-check the hash)
                continue
            todo.append((path, cache.expected_hash(path)))
        else:
            todo.append((path, None))
    hashing = any(g.cache is not None for g in groups) or index is not None
    outcomes = _run_groups(groups, group_of, todo, sizes, jobs, hashing, keep_sources, index)
    give_back()  # (the texts and trees of the pass)
    for outcome in outcomes:
        path = outcome.path
        group = group_of[path]
        cache = group.cache
        if outcome.hit and cache is not None:
            found = cache.lookup_hash(path, outcome.sha)
            if found is not None:
                cache.refresh_stat(path, outcome.size, outcome.mtime_ns, outcome.read_ns)
                results[path] = FileResult(path, found[0], outcome.source if found[0] and keep_sources else None,
                                           cache.notes_of(path))
                deps[path] = found[1]
                continue
            outcome = _lint_one(group.linter, path, None, hashing, keep_sources)  # malformed entry: lint it
        if index is not None and outcome.summarized:
            index.update(path, outcome.summary, outcome.sha, outcome.size, outcome.mtime_ns, outcome.read_ns)
        if outcome.sha and cache is not None:
            stats[path] = (outcome.sha, outcome.size, outcome.mtime_ns, outcome.read_ns)
        results[path] = FileResult(path, outcome.findings, outcome.source, outcome.notes)
        deps[path] = outcome.deps
    outcomes.clear()  # (what they held lives on in results, deps and the index)
    if index is not None:
        index.complete(skip=[r for r in (index.relpath(p) for p in results) if r is not None])
        final = index.model()
        again = [(path, None) for path in sorted(results)  # results whose project answers changed
                 if not replay(final, deps.get(path) or [], index.summary_of)]
        for outcome in _run_groups(groups, group_of, again, sizes, jobs, True, keep_sources, index):
            path = outcome.path
            results[path] = FileResult(path, outcome.findings, outcome.source, outcome.notes)
            deps[path] = outcome.deps
            if outcome.sha and group_of[path].cache is not None:
                stats[path] = (outcome.sha, outcome.size, outcome.mtime_ns, outcome.read_ns)
        give_back()
        index.save()
    for group in groups:
        if group.cache is None:
            continue
        for target in group.targets:
            stat = stats.get(target.path)
            if stat is not None and group_of[target.path] is group:
                sha, size, mtime_ns, read_ns = stat
                group.cache.store(target.path, sha, size, mtime_ns, read_ns, results[target.path].findings,
                                  deps.get(target.path), results[target.path].notes)
        group.cache.save()
    return [results[p] for p in sorted(results)]


def _run_groups(groups: Sequence[Group], group_of: Mapping[str, Group], todo: List[Tuple[str, Optional[str]]],
                sizes: Dict[str, int], jobs: int, hashing: bool, keep_sources: bool, index) -> List[Outcome]:
    """Lint `todo`, each file with its group's Linter; forked workers see `index` as it is now."""
    global _PROJECT_FOR_WORKERS
    outcomes: List[Outcome] = []
    _PROJECT_FOR_WORKERS = index
    try:
        for group in groups:
            part = [item for item in todo if group_of[item[0]] is group] if len(groups) > 1 else todo
            if part:
                outcomes.extend(_run(group.linter, part, sizes, jobs, hashing, keep_sources))
    finally:
        _PROJECT_FOR_WORKERS = None
    return outcomes


# ----------------------------------------------------------------------------- one file
def _lint_one(linter: Linter, path: str, expected: Optional[str], hashing: bool, keep_source: bool) -> Outcome:
    """Read, hash and lint one file; stop after hashing when the bytes are the `expected` ones.

    With a project, the file's summary is computed from the same parse when the index lacks it."""
    read_ns = time.time_ns()
    try:  # regular files only, at most `max-file-size` bytes (fileio.read_bytes)
        raw, st = read_bytes(path, linter.settings.max_file_size)
    except SourceError as exc:
        return Outcome(path, [error_finding(path, exc.reason, exc.line, exc.col)], deps=[])
    sha = content_hash(raw) if hashing else ""
    if expected is not None and sha == expected:
        source = None
        if keep_source:
            try:
                text, encoding = decode_source(raw)
                source = SourceFile(path, raw, text, encoding)
            except SourceError:
                pass
        return Outcome(path, [], source, sha, st.st_size, st.st_mtime_ns, read_ns, hit=True)
    index = linter.project
    want, light = False, None
    if index is not None and hasattr(index, "summaries"):
        rel = index.relpath(path)
        known = index.summaries.get(rel) if rel is not None else None
        if rel is not None and (known is None or known.light or index.hashes.get(rel) != sha):
            want = True
            light = known if known is not None and index.hashes.get(rel) == sha else None
    try:
        text, encoding = decode_source(raw)
    except SourceError as exc:
        return Outcome(path, [error_finding(path, exc.reason, exc.line, exc.col)], None, sha, st.st_size,
                       st.st_mtime_ns, read_ns, deps=[], summarized=index is not None)
    result = linter.lint_source(SourceFile(path, raw, text, encoding), summarize=want, light=light)
    source = result.source if (keep_source and result.findings) else None
    return Outcome(path, result.findings, source, sha, st.st_size, st.st_mtime_ns, read_ns, notes=result.notes,
                   summary=result.summary, deps=result.deps, summarized=want or (result.failed and index is not None))


# ----------------------------------------------------------------------------- many files
def _run(linter: Linter, todo: List[Tuple[str, Optional[str]]], sizes: Dict[str, int], jobs: int,
         hashing: bool, keep_sources: bool) -> Iterator[Outcome]:
    total = sum(sizes.get(p, 0) for p, _ in todo)
    refs = rule_refs(linter.rules)
    if jobs <= 1 or len(todo) < PARALLEL_MIN_FILES or total < PARALLEL_MIN_BYTES or refs is None:
        for path, expected in todo:
            yield _lint_one(linter, path, expected, hashing, keep_sources)
            after_reading(sizes.get(path, 0))
        return
    chunks = make_chunks(todo, sizes, jobs)
    workers = min(jobs, len(chunks))
    with ProcessPoolExecutor(workers, mp_context=_context(), initializer=_init_worker,
                             initargs=(linter.settings, refs)) as pool:
        pending = {pool.submit(_lint_chunk, chunk, hashing, keep_sources) for chunk in chunks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield from future.result()


def map_in_workers(function, chunks: Sequence, jobs: int) -> Iterator:
    """`function(chunk)` for each chunk, in up to `jobs` worker processes, results in the chunks' order."""
    with ProcessPoolExecutor(min(jobs, len(chunks)), mp_context=_context()) as pool:
        yield from pool.map(function, chunks)


def make_chunks(todo: Sequence[Item], sizes: Dict[str, int], jobs: int) -> List[List[Item]]:
    """Tasks of about equal weight (a file's bytes plus FILE_COST), the biggest files first (they would
    otherwise finish last); an item is a tuple whose first field is the file's path."""
    ordered = sorted(todo, key=lambda item: -sizes.get(item[0], 0))
    total = sum(sizes.get(item[0], 0) + FILE_COST for item in todo)
    target = max(total // (jobs * CHUNKS_PER_WORKER), MIN_CHUNK_BYTES)
    chunks: List[List[Item]] = []
    current: List[Item] = []
    weight = 0
    for item in ordered:
        current.append(item)
        weight += sizes.get(item[0], 0) + FILE_COST
        if weight >= target:
            chunks.append(current)
            current, weight = [], 0
    if current:
        chunks.append(current)
    return chunks


def _context() -> multiprocessing.context.BaseContext:
    """fork where it is safe (POSIX, no other threads): workers start in milliseconds."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and os.name == "posix":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def rule_refs(rules: Sequence[Type[Rule]]) -> Optional[List[RuleRef]]:
    """How a worker re-imports each rule; None if one cannot be imported by name."""
    refs = []
    for rule in rules:
        if "<locals>" in rule.__qualname__ or rule.__module__ == "__main__":
            return None
        refs.append((rule.__module__, rule.__qualname__, rule.pack))
    return refs


def rebuild_rules(refs: Sequence[RuleRef]) -> List[Type[Rule]]:
    rules = []
    for module, qualname, pack in refs:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if pack and not obj.pack:
            obj.pack = pack
        rules.append(obj)
    return rules


_WORKER_LINTER: Optional[Linter] = None
_PROJECT_FOR_WORKERS = None  # the project index, inherited by forked workers


def _init_worker(settings: Settings, refs: Sequence[RuleRef]) -> None:
    global _WORKER_LINTER
    _WORKER_LINTER = Linter(rebuild_rules(refs), settings, project=_PROJECT_FOR_WORKERS)


def _lint_chunk(chunk: Sequence[Tuple[str, Optional[str]]], hashing: bool, keep_sources: bool) -> List[Outcome]:
    linter = _WORKER_LINTER
    assert linter is not None, "worker not initialised"
    return [_lint_one(linter, path, expected, hashing, keep_sources) for path, expected in chunk]


# ----------------------------------------------------------------------------- reports
class SourceLines(Mapping[str, List[str]]):
    """path -> source lines for report snippets, read on demand and one file at a time.

    Reports walk findings sorted by path, so holding the last file read is enough; a run over a
    huge tree never holds every file with findings in memory.
    """

    def __init__(self, results: Sequence[FileResult]) -> None:
        self._results = {r.path: r for r in results if r.findings}
        self._last: Tuple[Optional[str], Optional[List[str]]] = (None, None)

    def __getitem__(self, path: str) -> List[str]:
        lines = self.get(path)
        if lines is None:
            raise KeyError(path)
        return lines

    def get(self, path: str, default: Optional[List[str]] = None) -> Optional[List[str]]:  # type: ignore[override]
        if self._last[0] == path:
            return self._last[1] if self._last[1] is not None else default
        result = self._results.get(path)
        if result is None:
            return default
        text: Optional[str] = None
        if result.source is not None:
            text = result.source.text
        else:
            try:
                text = read_source(path).text
            except SourceError:
                text = None
        lines = split_lines(text) if text is not None else None
        self._last = (path, lines)
        return lines if lines is not None else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)
