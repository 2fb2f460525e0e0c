"""Running the linter over many files: the project model, the result cache, worker processes, stable output.

With a project index (every face but bare API calls has one), a run is:
1. the index gives every project file's summary: stored ones for unchanged bytes, a cheap text-only one
   for the rest (made in the worker processes with `jobs > 1`); the *provisional* model is built from them
   (before any worker is forked);
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

import importlib
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

from .cache import ResultCache, content_hash
from ..compat import slotted_dataclass
from ..config import Settings
from .discovery import Target
from .progress import Progress
from .workers import make_chunks, pool_context
from ..engine.linter import FileResult, Linter, error_finding
from ..fileio import SourceError, SourceFile, decode_source, read_bytes, read_source, split_lines
from ..heap import after_reading, give_back
from ..analysis.records import Summary
from ..analysis.view import replay
from ..rule import Finding, Rule

# Below this much source, starting worker processes costs more than it saves (measured: a forked
# worker is ready in ~15 ms; linting runs at ~5 MB/s per process on torch-heavy code).
PARALLEL_MIN_BYTES = 256 * 1024
PARALLEL_MIN_FILES = 8

RuleRef = Tuple[str, str, str]  # (module, qualname, pack)


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


def lint_groups(groups: Sequence[Group], jobs: int = 1, keep_sources: bool = True, index=None,
                progress: Optional[Progress] = None) -> List[FileResult]:
    """`lint_targets` for files of one project linted with different settings (hierarchical configuration):
    one project model, each file linted with its group's Linter and cached under its group's run key.
    The steps of the module docstring, in order."""
    run = _Pass(groups, jobs, keep_sources, index, progress or Progress.off())
    run.provisional_model()
    todo = run.answer_from_cache()
    outcomes = list(run.lint(todo, hashing=run.hashing))  # (all of them before the index changes)
    give_back()  # (the texts and trees of the pass)
    run.take(outcomes)
    outcomes.clear()  # (what they held lives on in the results, their deps and the index)
    run.relint_under_final_model()
    run.store()
    return run.sorted_results()


Todo = List[Tuple[str, Optional[str]]]  # (path, hash the cache holds for it)
Stat = Tuple[str, int, int, int]  # (sha, size, mtime, read_ns) of a file read, for storing its result


class _Pass:
    """One lint pass over the groups' files: what is known of each file so far."""

    def __init__(self, groups: Sequence[Group], jobs: int, keep_sources: bool, index, progress: Progress) -> None:
        self.groups = groups
        self.jobs = jobs
        self.keep_sources = keep_sources
        self.index = index
        self.progress = progress
        self.group_of: Dict[str, Group] = {}
        for group in groups:
            if index is not None:
                group.linter.project = index
            for target in group.targets:
                self.group_of.setdefault(target.path, group)
        self.results: Dict[str, FileResult] = {}
        self.deps: Dict[str, Optional[list]] = {}  # path -> deps of its result (None: no project questions)
        self.stats: Dict[str, Stat] = {}
        self.sizes: Dict[str, int] = {}
        self.hashing = any(g.cache is not None for g in groups) or index is not None

    def provisional_model(self) -> None:
        """Build the model of the index's summaries before any worker is forked."""
        if self.index is not None:
            self.index.model()
            give_back()  # (the texts read for the summaries)

    def answer_from_cache(self) -> Todo:
        """Results of the files the cache answers for (by size and mtime); the files left to read."""
        todo: Todo = []
        for path, group in self.group_of.items():
            try:
                st = os.stat(path)
            except OSError:
                todo.append((path, None))
                continue
            self.sizes[path] = st.st_size
            todo.append((path, self._from_cache(path, group.cache, st)))
        self.progress.start("linting", sum(1 for _path, expected in todo if expected != _ANSWERED))
        return [item for item in todo if item[1] != _ANSWERED]

    def _from_cache(self, path: str, cache: Optional[ResultCache], st: os.stat_result) -> Optional[str]:
        """_ANSWERED when the cache answers for the file, else the hash it holds for it (None: none)."""
        if cache is None:
            return None
        hit = cache.lookup(path, st)
        if hit is None:
            return cache.expected_hash(path)
        sha, findings, hit_deps = hit
        if findings and self.keep_sources:
            return sha  # its source is needed: read it (and re-check the hash)
        self.results[path] = FileResult(path, findings, notes=cache.notes_of(path))
        self.deps[path] = hit_deps
        return _ANSWERED

    def lint(self, todo: Todo, hashing: bool) -> Iterator[Outcome]:
        """Lint `todo`, each file with its group's Linter; forked workers see the index as it is now."""
        global _PROJECT_FOR_WORKERS
        _PROJECT_FOR_WORKERS = self.index
        try:
            for group in self.groups:
                part = [item for item in todo if self.group_of[item[0]] is group] if len(self.groups) > 1 else todo
                if not part:
                    continue
                for outcome in _run(group.linter, part, self.sizes, self.jobs, hashing, self.keep_sources):
                    self.progress.advance()
                    yield outcome
        finally:
            _PROJECT_FOR_WORKERS = None

    def take(self, outcomes: Iterable[Outcome]) -> None:
        """Keep each outcome's result, its deps and its stat; give the index the summaries computed."""
        for outcome in outcomes:
            path = outcome.path
            group = self.group_of[path]
            if outcome.hit and group.cache is not None:
                if self._confirmed_hit(outcome, group.cache):
                    continue
                outcome = _lint_one(group.linter, path, None, self.hashing, self.keep_sources)  # malformed entry
            if self.index is not None and outcome.summarized:
                self.index.update(path, outcome.summary, outcome.sha, outcome.size, outcome.mtime_ns,
                                  outcome.read_ns)
            self._keep(outcome)

    def _confirmed_hit(self, outcome: Outcome, cache: ResultCache) -> bool:
        """The bytes read are those the cache holds findings for: take them."""
        path = outcome.path
        found = cache.lookup_hash(path, outcome.sha)
        if found is None:
            return False
        cache.refresh_stat(path, outcome.size, outcome.mtime_ns, outcome.read_ns)
        source = outcome.source if found[0] and self.keep_sources else None
        self.results[path] = FileResult(path, found[0], source, cache.notes_of(path))
        self.deps[path] = found[1]
        return True

    def _keep(self, outcome: Outcome) -> None:
        path = outcome.path
        self.results[path] = FileResult(path, outcome.findings, outcome.source, outcome.notes)
        self.deps[path] = outcome.deps
        if outcome.sha and self.group_of[path].cache is not None:
            self.stats[path] = (outcome.sha, outcome.size, outcome.mtime_ns, outcome.read_ns)

    def relint_under_final_model(self) -> None:
        """Complete the index, build the final model, and lint again every result whose project answers
        changed under it; then save the index."""
        index = self.index
        if index is None:
            return
        index.complete(skip=[r for r in (index.relpath(p) for p in self.results) if r is not None])
        final = index.model()
        again: Todo = [(path, None) for path in sorted(self.results)
                       if not replay(final, self.deps.get(path) or [], index.summary_of)]
        self.progress.start("linting again (project facts changed)", len(again))
        for outcome in list(self.lint(again, hashing=True)):
            self._keep(outcome)
        give_back()
        index.save()

    def store(self) -> None:
        """Store the new results in each group's cache, and save it."""
        for group in self.groups:
            if group.cache is None:
                continue
            for target in group.targets:
                stat = self.stats.get(target.path)
                if stat is not None and self.group_of[target.path] is group:
                    result = self.results[target.path]
                    group.cache.store(target.path, *stat, result.findings, self.deps.get(target.path), result.notes)
            group.cache.save()

    def sorted_results(self) -> List[FileResult]:
        return [self.results[p] for p in sorted(self.results)]


_ANSWERED = "answered by the cache"  # (a `_from_cache` answer: no hash is this string)


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
        source = _source(path, raw) if keep_source else None
        return Outcome(path, [], source, sha, st.st_size, st.st_mtime_ns, read_ns, hit=True)
    index = linter.project
    want, light = _summary_wanted(index, path, sha)
    try:
        text, encoding = decode_source(raw)
    except SourceError as exc:
        return Outcome(path, [error_finding(path, exc.reason, exc.line, exc.col)], None, sha, st.st_size,
                       st.st_mtime_ns, read_ns, deps=[], summarized=index is not None)
    result = linter.lint_source(SourceFile(path, raw, text, encoding), summarize=want, light=light)
    source = result.source if (keep_source and result.findings) else None
    return Outcome(path, result.findings, source, sha, st.st_size, st.st_mtime_ns, read_ns, notes=result.notes,
                   summary=result.summary, deps=result.deps, summarized=want or (result.failed and index is not None))


def _source(path: str, raw: bytes) -> Optional[SourceFile]:
    try:
        text, encoding = decode_source(raw)
    except SourceError:
        return None
    return SourceFile(path, raw, text, encoding)


def _summary_wanted(index, path: str, sha: str) -> Tuple[bool, Optional[Summary]]:
    """(does the index want this file's full summary from its parse?, its text-only summary of these bytes)"""
    if index is None or not hasattr(index, "summaries"):
        return False, None
    rel = index.relpath(path)
    if rel is None:
        return False, None
    known = index.summaries.get(rel)
    same_bytes = index.hashes.get(rel) == sha
    if known is not None and not known.light and same_bytes:
        return False, None
    return True, (known if known is not None and same_bytes else None)


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
    with ProcessPoolExecutor(workers, mp_context=pool_context(), initializer=_init_worker,
                             initargs=(linter.settings, refs)) as pool:
        pending = {pool.submit(_lint_chunk, chunk, hashing, keep_sources) for chunk in chunks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield from future.result()


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
