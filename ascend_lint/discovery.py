"""Which files to lint: walk directories for Python files, honouring excludes and .gitignore.

Each directory is listed once (`os.scandir`); its `.gitignore` is read only if the listing shows one,
and once. The `.gitignore` files above a walked directory are looked for up to the repository root
(the nearest directory holding `.git`) or the project root, whichever comes first, once per walked
path. A pattern the matcher rejects (an exclude glob, a `.gitignore` line) is one warning naming
where it came from, and the run goes on without it; a directory that cannot be listed is reported.
"""
from __future__ import annotations

import fnmatch
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .config import Settings

PY_SUFFIXES = (".py", ".pyi")
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ascend_lint_cache", "build", "dist", "node_modules",
    "site-packages", ".eggs", "*.egg-info", ".ipynb_checkpoints", "_build", "buck-out", ".direnv",
    "__pypackages__",
)


RACY_NS = 2_000_000_000  # a directory changed this recently is listed again next time

_NAME_PATTERN = re.compile(r"[\w.*-]+\Z")


@dataclass
class Target:
    path: str
    explicit: bool  # named on the command line (always linted unless --force-exclude)


@dataclass
class DiscoveryReport:
    """What discovery could not do: rejected patterns (warnings) and directories it could not list."""

    warnings: List[str] = field(default_factory=list)
    unreadable: List[Tuple[str, str]] = field(default_factory=list)  # (directory, reason)


class Matcher:
    """Gitignore-style patterns; lines the matcher rejects are dropped with a warning."""

    def __init__(self, lines: Sequence[str], origin: str, report: DiscoveryReport) -> None:
        self._names = None
        patterns = [line for line in lines if line.strip()]
        if all(_NAME_PATTERN.match(p) for p in patterns):  # plain names and `*` globs (the defaults):
            self.empty = not patterns                     # no pathspec needed (it costs ~15 ms to import)
            self._names = re.compile("|".join(fnmatch.translate(p) for p in patterns) or "(?!)").match
            return
        import pathspec  # imported only when there is a gitignore-style pattern to match

        good: List[str] = []
        for number, line in enumerate(lines, 1):
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except Exception as exc:  # GitIgnorePatternError, re.error ([z-a]), ...
                where = f"{origin}:{number}" if origin.endswith(".gitignore") else origin
                report.warnings.append(f"{where}: pattern {line!r} ignored: {exc}")
                continue
            good.append(line)
        self.spec = pathspec.GitIgnoreSpec.from_lines(good)
        patterns = [p for p in self.spec.patterns if p.include is not None]
        # Without negations, "excluded" is "some pattern matches": one combined regex answers it.
        self._any = None
        if patterns and all(p.include for p in patterns):
            self._any = _combined(patterns)
        self.empty = not patterns

    def match(self, rel: str) -> bool:
        if self.empty:
            return False
        if self._names is not None:  # a slash-less pattern matches any component of the path
            names = self._names
            return any(names(part) for part in rel.split("/") if part)
        if self._any is not None:
            return self._any(rel) is not None
        return self.spec.match_file(rel)


def _combined(patterns: Sequence[object]):
    """One regex `match` for all the patterns (their named groups made plain), or None."""
    try:
        texts = [p.regex.pattern.replace("(?P<ps_d>", "(?:") for p in patterns]  # type: ignore[attr-defined]
        return re.compile("|".join(f"(?:{t})" for t in texts)).match
    except (AttributeError, re.error):
        return None


class Excluder:
    """Decides whether a path is excluded by settings or by a .gitignore file."""

    def __init__(self, settings: Settings, report: Optional[DiscoveryReport] = None) -> None:
        self.report = report if report is not None else DiscoveryReport()
        self.root = os.path.abspath(settings.project_root)
        excludes = list(DEFAULT_EXCLUDES if settings.exclude is None else settings.exclude)
        self.matcher = Matcher(excludes + list(settings.extend_exclude), "exclude setting", self.report)
        self._name_memo: Dict[str, bool] = {}
        self.gitignore = settings.respect_gitignore
        self._ignores: Dict[str, Optional[Matcher]] = {}
        self.listing: Optional["Listing"] = None  # the cached listing discover() was given

    # ------------------------------------------------------------ settings patterns
    def by_settings(self, absolute: str, name: str, suffix: str) -> bool:
        key = name + suffix
        hit = self._name_memo.get(key)
        if hit is None:
            hit = self._name_memo[key] = self.matcher.match(key)
        if hit:
            return True
        root = self.root
        if absolute.startswith(root) and absolute[len(root):len(root) + 1] == os.sep:
            rel = absolute[len(root) + 1:].replace(os.sep, "/")
            return self.matcher.match(rel + suffix)
        return False

    # ------------------------------------------------------------------ .gitignore
    def gitignore_in(self, directory: str) -> Optional[Matcher]:
        """The .gitignore of `directory` (absolute), read once; None if it has none."""
        if directory not in self._ignores:
            matcher = None
            path = os.path.join(directory, ".gitignore")
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
            except OSError:
                lines = None
            if lines:
                matcher = Matcher(lines, path, self.report)
                if matcher.empty:
                    matcher = None
            self._ignores[directory] = matcher
        return self._ignores[directory]

    def chain_above(self, absolute: str) -> List[Tuple[str, Matcher]]:
        """(.gitignore's directory, matcher) for the directories above `absolute` up to the
        repository root or the project root, innermost first."""
        chain: List[Tuple[str, Matcher]] = []
        if not self.gitignore or absolute == self.root:
            return chain
        directory = os.path.dirname(absolute)
        inside_root = directory == self.root or directory.startswith(self.root + os.sep)
        while True:
            matcher = self.gitignore_in(directory)
            if matcher is not None:
                chain.append((directory, matcher))
            if (inside_root and directory == self.root) or os.path.isdir(os.path.join(directory, ".git")):
                return chain
            parent = os.path.dirname(directory)
            if parent == directory:
                return chain
            directory = parent

    def ignored_by(self, chain: Sequence[Tuple[str, Optional[Matcher]]], absolute: str, suffix: str) -> bool:
        """Is `absolute` ignored by a .gitignore of `chain` (a None matcher: read that directory's now)?"""
        for base, matcher in chain:
            if matcher is None:
                matcher = self.gitignore_in(base)
                if matcher is None:
                    continue
            rel = absolute[len(base) + 1:] if base != os.sep else absolute[1:]
            if matcher.match(rel.replace(os.sep, "/") + suffix):
                return True
        return False

    def excluded(self, path: str, is_dir: bool) -> bool:
        """For one path named on the command line."""
        absolute = os.path.abspath(path)
        suffix = "/" if is_dir else ""
        if self.by_settings(absolute, os.path.basename(absolute), suffix):
            return True
        if is_dir and os.path.isfile(os.path.join(absolute, "pyvenv.cfg")):
            return True
        return self.ignored_by(self.chain_above(absolute), absolute, suffix)


def discover(paths: Sequence[str], settings: Settings, report: Optional[DiscoveryReport] = None,
             listing: Optional["Listing"] = None) -> Tuple[List[Target], List[str]]:
    """Files to lint (sorted, de-duplicated) and paths that do not exist.

    Rejected patterns and unreadable directories go to `report`; without one they are printed
    to stderr as warnings (never dropped silently). `listing`: the directories' contents as last
    listed, reused where a directory's mtime says nothing was added, removed or renamed in it.
    """
    own = report is None
    report = DiscoveryReport() if report is None else report
    excluder = Excluder(settings, report)
    excluder.listing = listing
    if listing is not None:
        listing.seen.clear()  # (what this walk reaches: prune() forgets the rest)
    found: Dict[str, Target] = {}
    missing: List[str] = []
    for raw in paths:
        if os.path.isdir(raw) and not os.path.islink(raw) or (os.path.isdir(raw) and raw.endswith(os.sep)):
            if settings.force_exclude and excluder.excluded(raw, True):
                continue
            for path in _walk(raw, excluder):
                found.setdefault(os.path.normpath(path), Target(os.path.normpath(path), False))
        elif os.path.isdir(raw):  # a symlink to a directory named explicitly
            for path in _walk(raw, excluder):
                found.setdefault(os.path.normpath(path), Target(os.path.normpath(path), False))
        elif os.path.lexists(raw):
            if settings.force_exclude and excluder.excluded(raw, False):
                continue
            found[os.path.normpath(raw)] = Target(os.path.normpath(raw), True)
        else:
            missing.append(raw)
    if own:
        for message in report.warnings:
            print(f"warning: {message}", file=sys.stderr)
        for directory, reason in report.unreadable:
            print(f"warning: {directory}: directory not linted: {reason}", file=sys.stderr)
    return [found[k] for k in sorted(found)], missing


class Listing:
    """What a walk found in each directory, kept between runs (the project store saves it): a directory
    whose mtime is unchanged (nothing added, removed or renamed in it) and whose `.gitignore`, if any, is
    unchanged is not listed again; an edited `.gitignore` re-lists its directory and everything below.
    Valid only for the settings `key` it was made with (a different key starts empty)."""

    SCHEMA = 1

    def __init__(self, key: str, dirs: Optional[Dict[str, list]] = None) -> None:
        self.key = key
        # absolute directory -> [mtime_ns (0: racy, re-list), [Python files], [sub-directories],
        #                        [.gitignore size, mtime_ns] or None, is a virtualenv]
        self.dirs: Dict[str, list] = dirs or {}
        self.above: Dict[str, list] = {}  # walked top -> [[directory, .gitignore stat]] of the .gitignores above
        self.changed = False
        self.seen: set = set()

    @staticmethod
    def key_for(settings: Settings) -> str:
        return repr((Listing.SCHEMA, settings.exclude, list(settings.extend_exclude), settings.respect_gitignore,
                     os.path.abspath(settings.project_root)))

    def prune(self) -> None:
        """Forget directories the last discover() did not reach (call it after a walk of the whole root)."""
        gone = [d for d in self.dirs if d not in self.seen]
        for directory in gone:
            del self.dirs[directory]
        self.changed = self.changed or bool(gone)


def _stat_pair(path: str) -> Optional[List[int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _walk(top: str, excluder: Excluder) -> Iterator[str]:
    """Python files below `top`; symlinked directories are not followed (no loops)."""
    absolute_top = os.path.abspath(top)
    chain: List[Tuple[str, Optional[Matcher]]] = list(excluder.chain_above(absolute_top))
    listing = excluder.listing
    fresh = False
    if listing is not None:  # the .gitignore files above decide below: any change lists everything again
        above = [[d, _stat_pair(os.path.join(d, ".gitignore"))] for d, _ in chain]
        fresh = listing.above.get(absolute_top) != above
        if fresh:
            listing.above[absolute_top] = above
            listing.changed = True
    todo: List[Tuple[str, str, List[Tuple[str, Optional[Matcher]]], bool]] = [(top, absolute_top, chain, fresh)]
    while todo:
        directory, absolute, chain, fresh = todo.pop()
        known = listing.dirs.get(absolute) if listing is not None else None
        if listing is not None:
            listing.seen.add(absolute)
        previous = known
        if known is not None and not fresh:
            try:
                mtime = os.stat(directory).st_mtime_ns
            except OSError:
                mtime = -1
            if mtime != known[0] or not known[0] or (
                    excluder.gitignore and known[3] != (
                        _stat_pair(os.path.join(absolute, ".gitignore")) if known[3] is not None else None)):
                known = None
        else:
            known = None
        if known is None:
            known = _list_directory(directory, absolute, chain, excluder)
            if known is None:
                continue
            # a .gitignore added, edited or removed here changes what is ignored below: list it all again
            fresh = fresh or (previous is not None and previous[3] != known[3])
            if listing is not None:
                listing.dirs[absolute] = known
                listing.changed = True
        if known[4] and directory != top:  # a virtualenv (found before descending)
            continue
        if known[3] is not None and excluder.gitignore:
            chain = [(absolute, None)] + chain  # (read only if a directory below is listed again)
        for name in known[1]:
            yield os.path.join(directory, name)
        for name in reversed(known[2]):
            todo.append((os.path.join(directory, name), os.path.join(absolute, name), chain, fresh))


def _list_directory(directory: str, absolute: str, chain: List[Tuple[str, Optional[Matcher]]],
                    excluder: Excluder) -> Optional[list]:
    """One directory's Listing entry (None: it cannot be listed, which is reported)."""
    try:
        mtime = os.stat(directory).st_mtime_ns
        with os.scandir(directory) as entries_iter:
            entries = sorted(entries_iter, key=lambda e: e.name)
    except OSError as exc:
        excluder.report.unreadable.append((directory, exc.strerror or str(exc)))
        return None
    if time.time_ns() - mtime < RACY_NS:
        mtime = 0  # changed just now: it may change again within the same mtime tick
    names = {e.name for e in entries}
    ignore = _stat_pair(os.path.join(absolute, ".gitignore")) if ".gitignore" in names else None
    if ignore is not None and excluder.gitignore:
        matcher = excluder.gitignore_in(absolute)
        if matcher is not None:
            chain = [(absolute, matcher)] + chain
    files, subdirs = [], []
    for entry in entries:
        name = entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        child = os.path.join(absolute, name)
        if is_dir:
            if entry.is_symlink():
                continue
            if excluder.by_settings(child, name, "/") or excluder.ignored_by(chain, child, "/"):
                continue
            subdirs.append(name)
        elif name.endswith(PY_SUFFIXES):
            if not (excluder.by_settings(child, name, "") or excluder.ignored_by(chain, child, "")):
                files.append(name)
    return [mtime, files, subdirs, ignore, "pyvenv.cfg" in names]
