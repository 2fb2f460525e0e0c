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
import warnings
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from ..compat import slotted_dataclass
from ..config import CONFIG_NAMES, ConfigError, ConfigResolver, Settings, ancestor, split_up

PY_SUFFIXES = (".py", ".pyi")
RACY_NS = 2_000_000_000  # a directory changed this recently is listed again next time
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ascend_lint_cache", "build", "dist", "node_modules",
    "site-packages", ".eggs", "*.egg-info", ".ipynb_checkpoints", "_build", "buck-out", ".direnv",
    "__pypackages__",
)


_NAME_PATTERN = re.compile(r"[\w.*-]+\Z")


@slotted_dataclass
class Target:
    path: str
    explicit: bool  # named on the command line (always linted unless --force-exclude)


@dataclass
class DiscoveryReport:
    """What discovery could not do: rejected patterns (warnings), directories it could not list and broken
    configurations (each named once; the files they govern are left out)."""

    warnings: List[str] = field(default_factory=list)
    unreadable: List[Tuple[str, str]] = field(default_factory=list)  # (directory, reason)
    refused: List[str] = field(default_factory=list)  # ConfigError messages

    def refuse(self, error: Exception) -> None:
        if str(error) not in self.refused:
            self.refused.append(str(error))


class Matcher:
    """Gitignore-style patterns; lines the matcher rejects are dropped with a warning."""

    def __init__(self, lines: Sequence[str], origin: str, report: DiscoveryReport) -> None:
        self._names = None
        patterns = [line for line in lines if line.strip()]
        # a pattern with a slash before its end matches from the base directory only (gitignore's rule)
        self.anchored = any("/" in p.strip().rstrip("/") for p in patterns)
        if all(_NAME_PATTERN.match(p) for p in patterns):  # plain names and `*` globs (the defaults):
            self.empty = not patterns                     # no pathspec needed (it costs ~15 ms to import)
            self._names = re.compile("|".join(fnmatch.translate(p) for p in patterns) or "(?!)").match
            return
        import pathspec  # imported only when there is a gitignore-style pattern to match

        good: List[str] = []
        for number, line in enumerate(lines, 1):
            try:
                with warnings.catch_warnings():  # a regex Python may read otherwise one day ([[:x:]]): refused
                    warnings.simplefilter("error", FutureWarning)
                    pathspec.GitIgnoreSpec.from_lines([line])
            except Exception as exc:  # GitIgnorePatternError, re.error ([z-a]), FutureWarning, ...
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
        patterns = excludes + list(settings.extend_exclude)
        # patterns an extended configuration in a directory above gave (`../`...): matched from there
        above: Dict[int, List[str]] = {}
        for pattern in patterns:
            if pattern.startswith("../"):
                levels, rest = split_up(pattern)
                above.setdefault(levels, []).append(rest)
        self.matcher = Matcher([p for p in patterns if not p.startswith("../")], "exclude setting", self.report)
        self.above = [(ancestor(self.root, levels), Matcher(rests, "exclude setting", self.report))
                      for levels, rests in sorted(above.items())]
        self._name_memo: Dict[str, bool] = {}
        self.gitignore = settings.respect_gitignore
        self.listing_key = Listing.key_for(settings)  # a Listing entry made under other settings is stale
        self._ignores: Dict[str, Optional[Matcher]] = {}

    # ------------------------------------------------------------ settings patterns
    def by_settings(self, absolute: str, name: str, suffix: str) -> bool:
        root = self.root
        inside = absolute.startswith(root) and absolute[len(root):len(root) + 1] == os.sep
        if inside and self.matcher.anchored:  # an anchored pattern (`/build/`) must not match a bare name
            if self.matcher.match(absolute[len(root) + 1:].replace(os.sep, "/") + suffix):
                return True
        else:
            key = name + suffix
            hit = self._name_memo.get(key)
            if hit is None:
                hit = self._name_memo[key] = self.matcher.match(key)
            if hit:
                return True
            if inside and self.matcher.match(absolute[len(root) + 1:].replace(os.sep, "/") + suffix):
                return True
        for base, matcher in self.above:
            if absolute.startswith(base.rstrip(os.sep) + os.sep):
                if matcher.match(absolute[len(base.rstrip(os.sep)) + 1:].replace(os.sep, "/") + suffix):
                    return True
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
             resolver: Optional["ConfigResolver"] = None,
             project_root: Optional[str] = None,
             listing: Optional["Listing"] = None) -> Tuple[List[Target], List[str]]:
    """Files to lint (sorted, de-duplicated) and paths that do not exist.

    With a `resolver`, each directory's excludes are those of its closest configuration (ruff's
    hierarchical configuration): a directory holding a configuration switches to it for what is below.
    With `project_root` (listing a project's files), a directory whose configuration starts a project of
    its own is left out. Rejected patterns and unreadable directories go to `report`; without one they
    are printed to stderr as warnings (never dropped silently). `listing`: the directories' contents as
    last listed, reused where a directory's mtime says nothing was added, removed or renamed in it.
    """
    own = report is None
    report = DiscoveryReport() if report is None else report
    excluders: Dict[int, Excluder] = {}

    def excluder_of(each: Settings) -> Excluder:
        if id(each) not in excluders:
            excluders[id(each)] = Excluder(each, report)
        return excluders[id(each)]

    switch = _switcher(resolver, excluder_of, project_root) if resolver is not None else None
    if listing is not None:
        listing.seen.clear()  # (what this walk reaches: prune() forgets the rest)
    found: Dict[str, Target] = {}
    missing: List[str] = []
    for raw in paths:
        if not os.path.lexists(raw):
            missing.append(raw)
            continue
        try:  # (each path named: excluded by its own configuration's settings)
            here = excluder_of(resolver.for_path(raw) if resolver is not None else settings)
        except ConfigError as exc:  # a broken configuration stops only the files it governs
            report.refuse(exc)
            continue
        _add_path(found, raw, settings.force_exclude, here, switch, listing)
    if own:
        _print_report(report)
    return [found[k] for k in sorted(found)], missing


def _add_path(found: Dict[str, Target], raw: str, force_exclude: bool, excluder: Excluder, switch,
              listing: Optional["Listing"]) -> None:
    """A file named (a target even when excluded, unless `force_exclude`), or the files below a directory.
    A symlink to a directory, named as such, is walked whatever the excludes say of its name."""
    if os.path.isdir(raw):
        symlink_named = os.path.islink(raw) and not raw.endswith(os.sep)
        if not (force_exclude and not symlink_named and excluder.excluded(raw, True)):
            _add_walked(found, raw, excluder, switch, listing)
    elif not (force_exclude and excluder.excluded(raw, False)):
        path = os.path.normpath(raw)
        found[path] = Target(path, True)


def _print_report(report: DiscoveryReport) -> None:
    for message in report.warnings:
        print(f"warning: {message}", file=sys.stderr)
    for directory, reason in report.unreadable:
        print(f"warning: {directory}: directory not linted: {reason}", file=sys.stderr)
    for message in report.refused:
        print(f"error: {message}", file=sys.stderr)


def _add_walked(found: Dict[str, Target], raw: str, excluder: Excluder, switch, listing: Optional["Listing"]) -> None:
    """The files below directory `raw`, by normalised path (walked from the normalised directory, whose
    entries' names hold no `.`/`..` segments, so only a leading `./` needs removing)."""
    top = os.path.normpath(raw)
    strip = len("." + os.sep) if top == os.curdir else 0
    for path in _walk(top, excluder, switch, listing):
        path = path[strip:]
        if path not in found:
            found[path] = Target(path, False)


SKIP = None  # a _walk switch's answer for a directory that is not walked


def _switcher(resolver: "ConfigResolver", excluder_of, project_root: Optional[str]):
    """`switch(directory, names, current)`: the excluder for what is below a directory (its own
    configuration's, else `current`), or SKIP for a directory that starts another project."""
    root = os.path.abspath(project_root) if project_root else None

    def switch(absolute: str, names, current: Excluder) -> Optional[Excluder]:
        if not names.intersection(CONFIG_NAMES):
            return current
        try:
            settings = resolver.starts_config(absolute, names)
        except ConfigError as exc:  # a broken configuration stops only the files it governs
            current.report.refuse(exc)
            return SKIP
        if settings is None:
            return current
        if root is not None and absolute != root and settings.root_config and \
                os.path.dirname(os.path.abspath(settings.root_config)) == absolute:
            resolver.nested_projects.add(absolute)
            return SKIP
        return excluder_of(settings)

    return switch


class Listing:
    """What a walk found in each directory, kept between runs (the project store saves it): a directory
    whose mtime is unchanged (nothing added, removed or renamed in it) and whose `.gitignore`, if any, is
    unchanged is not listed again; an edited `.gitignore` re-lists its directory and everything below.
    Valid only for the settings `key` it was made with (a different key starts empty)."""

    SCHEMA = 2

    def __init__(self, key: str, dirs: Optional[Dict[str, list]] = None) -> None:
        self.key = key
        # absolute directory -> [mtime_ns (0: racy, re-list), [Python files], [sub-directories],
        #                        [.gitignore size, mtime_ns] or None, is a virtualenv,
        #                        [configuration file names], the key of the settings that filtered it]
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


def _walk(top: str, excluder: Excluder, switch=None, listing: Optional[Listing] = None) -> Iterator[str]:
    """Python files below `top`; symlinked directories are not followed (no loops). `switch`: see
    `_switcher` (hierarchical configuration); `listing`: see `Listing`."""
    absolute_top = os.path.abspath(top)
    chain: List[Tuple[str, Optional[Matcher]]] = list(excluder.chain_above(absolute_top))
    todo = [(top, absolute_top, chain, excluder, _gitignores_above_changed(listing, absolute_top, chain))]
    while todo:
        directory, absolute, chain, excluder, fresh = todo.pop()
        listed = _listed(directory, absolute, chain, excluder, fresh, listing, switch, is_top=directory == top)
        if listed is None:
            continue
        known, excluder, fresh = listed
        if known[3] is not None and excluder.gitignore:
            chain = [(absolute, None)] + chain  # (read only if a directory below is listed again)
        prefix = directory if directory.endswith(os.sep) else directory + os.sep
        for name in known[1]:
            yield prefix + name
        for name in reversed(known[2]):
            todo.append((os.path.join(directory, name), os.path.join(absolute, name), chain, excluder, fresh))


def _gitignores_above_changed(listing: Optional[Listing], absolute_top: str, chain: list) -> bool:
    """Did a .gitignore above `top` change since the listing was made? (then everything is listed again)"""
    if listing is None:
        return False
    above = [[d, _stat_pair(os.path.join(d, ".gitignore"))] for d, _ in chain]
    if listing.above.get(absolute_top) == above:
        return False
    listing.above[absolute_top] = above
    listing.changed = True
    return True


def _listed(directory: str, absolute: str, chain: list, excluder: Excluder, fresh: bool,
            listing: Optional[Listing], switch, is_top: bool) -> Optional[Tuple[list, Excluder, bool]]:
    """(a directory's Listing entry, the excluder for below it, must what is below be listed again?), or
    None when it is not walked (unreadable, a virtualenv, another project)."""
    previous, known = _previous_entry(listing, directory, absolute, fresh, excluder.gitignore)
    scanned = None if known is not None else _scan(directory, excluder.report)
    if known is None and scanned is None:
        return None
    below = _excluder_below(known, scanned, absolute, excluder, switch, is_top)
    if below is SKIP:
        return None
    if known is not None and known[6] != below.listing_key:
        known, scanned = None, _scan(directory, below.report)  # another configuration applies now
        if scanned is None:
            return None
    if known is None:
        known = _list_directory(scanned, absolute, chain, below)
        # a .gitignore added, edited or removed here changes what is ignored below: list it all again
        fresh = fresh or (previous is not None and previous[3] != known[3])
        if listing is not None:
            listing.dirs[absolute] = known
            listing.changed = True
    return known, below, fresh


def _previous_entry(listing: Optional[Listing], directory: str, absolute: str, fresh: bool,
                    gitignore: bool) -> Tuple[Optional[list], Optional[list]]:
    """(the listing's entry for a directory, that entry if it still holds)."""
    if listing is None:
        return None, None
    listing.seen.add(absolute)
    previous = listing.dirs.get(absolute)
    if previous is None or fresh or not _unchanged(directory, absolute, previous, gitignore):
        return previous, None
    return previous, previous


def _excluder_below(known: Optional[list], scanned: Optional[tuple], absolute: str, excluder: Excluder, switch,
                    is_top: bool) -> Optional[Excluder]:
    """The excluder for what is below a directory, or SKIP (a virtualenv, another project)."""
    names = set(known[5]) if known is not None else {e.name for e in scanned[1]}  # type: ignore[index]
    if is_top:
        return excluder
    if known[4] if known is not None else "pyvenv.cfg" in names:
        return SKIP  # a virtualenv (found before descending)
    return switch(absolute, names, excluder) if switch is not None else excluder


def _unchanged(directory: str, absolute: str, known: list, gitignore: bool) -> bool:
    """Does a directory's Listing entry still hold (same mtime, same .gitignore)?"""
    try:
        mtime = os.stat(directory).st_mtime_ns
    except OSError:
        return False
    if not known[0] or mtime != known[0]:
        return False
    return not gitignore or known[3] is None or known[3] == _stat_pair(os.path.join(absolute, ".gitignore"))


def _scan(directory: str, report: DiscoveryReport) -> Optional[Tuple[int, list]]:
    """A directory's mtime (0 when it changed just now) and sorted entries; None (reported) if unreadable."""
    try:
        mtime = os.stat(directory).st_mtime_ns
        with os.scandir(directory) as entries_iter:
            entries = sorted(entries_iter, key=lambda e: e.name)
    except OSError as exc:
        report.unreadable.append((directory, exc.strerror or str(exc)))
        return None
    if time.time_ns() - mtime < RACY_NS:
        mtime = 0  # changed just now: it may change again within the same mtime tick
    return mtime, entries


def _list_directory(scanned: list, absolute: str, chain: List[Tuple[str, Optional[Matcher]]],
                    excluder: Excluder) -> list:
    """One directory's Listing entry: [mtime, Python files, sub-directories, .gitignore stat or None,
    is a virtualenv, configuration file names, the excluder's key]."""
    mtime, entries = scanned
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
    return [mtime, files, subdirs, ignore, "pyvenv.cfg" in names, sorted(names.intersection(CONFIG_NAMES)),
            excluder.listing_key]
