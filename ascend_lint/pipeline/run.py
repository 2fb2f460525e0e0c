"""One run, top to bottom: discover -> settings -> project index and model -> lint (in workers) -> fix.

Every face calls this module: the CLI `lint_run` for the paths of a `check` (then reports the `RunResult`),
and `lint_buffer` for one file's text (stdin with `--stdin-filename`, the language server's documents, the
flake8 plugin's files). Each step is a function that hands the next one a named value:

    Request -> find_files -> Found -> settle -> [Project] -> index_project -> ProjectIndex
            -> lint_project -> [FileResult] -> fix_files -> FixOutcome
            [-> profile_results (`--profile`): costs and profile-only findings -> ProfiledRun]  => RunResult

See docs/architecture.md for the layers and one finding's journey through them.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..core_rules import PARSE_ERROR_CODE
from ..engine.linter import FileResult, Linter, decides_per_file, error_finding, parse
from ..engine.walker import Stopped
from ..fileio import SourceError, check_size, decode_source, split_lines
from ..rule import Finding, wants_precision
from .cache import ResultCache
from .discovery import DiscoveryReport, Target, discover
from .incremental import Change, Parsed, kept, merge_scoped, reparse
from .index import ProjectIndex
from .progress import Progress
from .root import find_project_root
from .runner import Group, lint_groups
from .workspace import Configured, Workspace


@dataclass
class FixRequest:
    """Apply the safe fixes (`diff`: print them instead; `show`: list what was applied)."""

    diff: bool = False
    show: bool = False


@dataclass
class Request:
    """What a run is asked to do: the paths, and how."""

    paths: Sequence[str]
    jobs: int = 1
    cache: bool = True
    keep_sources: bool = False  # results with findings carry their source (fixes, `--add-noqa`)
    fix: Optional[FixRequest] = None
    progress: Progress = field(default_factory=Progress.off)
    profile: Optional[str] = None  # an Ascend profile directory: each finding's measured cost, ASC8xx findings
    profile_report: bool = False  # also ask the model the role of each function seen in every profiled step


@dataclass
class Found:
    """Step 1: the files to lint, the paths that do not exist, and what discovery could not do."""

    targets: List[Target]
    missing: List[str]
    report: DiscoveryReport

    def error_results(self) -> List[FileResult]:
        """A result with one error finding for each missing path and each directory that could not be read."""
        results = [FileResult(p, [error_finding(p, "no such file or directory")]) for p in self.missing]
        return results + [FileResult(d, [error_finding(d, f"directory not linted: {why}")])
                          for d, why in self.report.unreadable]


@dataclass
class Project:
    """Step 2: the files of one project, grouped by their configuration (each group with its Linter)."""

    root: str
    groups: List[Configured]

    @property
    def listed(self) -> List[str]:
        return [t.path for g in self.groups for t in g.targets]


@dataclass
class RunResult:
    """What a run gives its face to report: every file's result, the fixes and the broken configurations."""

    results: List[FileResult]
    found: Found
    fixes: Any = None  # a fix.command.FixOutcome when fixes were asked for
    refused: List[str] = field(default_factory=list)  # broken configurations: their files were not linted
    profiled: Any = None  # a profiled.ProfiledRun: the profile read (`Request.profile`)


def lint_run(request: Request, workspace: Workspace) -> RunResult:
    """Lint the request's paths, project by project, then fix them if asked; with a profile, measure them."""
    if request.profile is not None:
        from .profiled import check_profile_path  # (the profile reader is imported only with --profile)

        check_profile_path(request.profile)  # (before any work: a mistyped directory)
    found = find_files(request.paths, workspace)
    projects = settle(found.targets, workspace)
    results = found.error_results()
    indices = []
    for project in projects:
        index = index_project(project, workspace, request)
        indices.append(index)
        results += lint_project(project, index, workspace, request)
    request.progress.finish()
    results.sort(key=lambda r: r.path)
    fixes = fix_files(results, workspace, request.fix)
    profiled = None
    if request.profile is not None:
        from .profiled import profile_results

        profiled = profile_results(request.profile, results, indices, workspace.linter_for, request.profile_report)
        workspace.tell(profiled.warnings)
    return RunResult(results, found, fixes, refused=found.report.refused + workspace.refused, profiled=profiled)


# ----------------------------------------------------------------------------- the steps
def find_files(paths: Sequence[str], workspace: Workspace) -> Found:
    """Step 1: discovery, each directory with its own configuration's excludes; warnings told once."""
    report = DiscoveryReport()
    targets, missing = discover(paths, workspace.resolver.run, report, resolver=workspace.resolver)
    workspace.tell(report.warnings)
    return Found(targets, missing, report)


def settle(targets: Sequence[Target], workspace: Workspace) -> List[Project]:
    """Step 2: each file's settings and Linter, and the project it belongs to (its root configuration's
    directory, else the project markers above the run's paths)."""
    projects: Dict[str, List[Configured]] = {}
    for group in workspace.groups(targets):
        root = find_project_root(workspace.paths, group.settings.root_config)
        projects.setdefault(root, []).append(group)
    return [Project(root, groups) for root, groups in projects.items()]


def index_project(project: Project, workspace: Workspace, request: Request) -> ProjectIndex:
    """Step 3: the project's index: every file's summary (stored, or read from its text), and the model."""
    settings = project.groups[0].settings
    precision = wants_precision(r for g in project.groups for r in g.linter.rules)
    index = ProjectIndex.open(workspace.paths, settings, cache=request.cache, listed=project.listed,
                              resolver=workspace.resolver, jobs=request.jobs, precision=precision,
                              progress=request.progress)
    if index.report.warnings or index.report.refused:
        request.progress.finish()  # (a warning starts on a line of its own)
        workspace.heard(index.report)
    return index


def lint_project(project: Project, index: ProjectIndex, workspace: Workspace, request: Request) -> List[FileResult]:
    """Step 4: lint the project's files against its model (in worker processes when it pays), each file with
    its configuration's Linter and result cache."""
    groups = [Group(g.linter, g.targets, _result_cache(g, workspace, request)) for g in project.groups]
    return lint_groups(groups, request.jobs, request.keep_sources, index, request.progress)


def _result_cache(group: Configured, workspace: Workspace, request: Request) -> Optional[ResultCache]:
    if not request.cache:
        return None
    return ResultCache.open(group.settings, group.linter.rules, workspace.registry.fingerprint(), project=True)


def fix_files(results: List[FileResult], workspace: Workspace, fix: Optional[FixRequest]) -> Any:
    """Step 5: apply (or, with `diff`, print) the safe fixes; the results become those of the fixed files."""
    if fix is None:
        return None
    from ..fix.command import fix_results  # (libcst is imported only when fixes are asked for: start-up)

    run = workspace.resolver.run
    return fix_results(results, workspace.linter(run), run, diff=fix.diff, show=fix.show,
                       linters=workspace.linter_for)


# ----------------------------------------------------------------------------- one file's text
LINTED, SCOPED, SYNTAX_ERROR, TOO_LARGE = "linted", "scoped", "syntax-error", "too-large"


@dataclass
class BufferResult:
    """One buffer linted: its findings, the Linter used, the project questions asked (deps), and the index
    it was linted against (None: linted on its own). `status`: LINTED (the whole file), SCOPED (only the
    edited scopes; the rest of the findings carried from `previous`: lint the whole file again when the
    edits pause), SYNTAX_ERROR or TOO_LARGE. `parsed`: the last text that parsed, with its tree, for the
    next edit to reuse (editors only)."""

    findings: List[Finding]
    linter: Linter
    deps: List[list] = field(default_factory=list)
    index: Optional[ProjectIndex] = None
    status: str = LINTED
    text: str = ""
    parsed: Optional[Parsed] = None

    @property
    def complete(self) -> bool:
        return self.status != SCOPED


def lint_buffer(workspace: Workspace, path: str, text: str, tree: Optional[ast.Module] = None,
                in_project: bool = True, replaces_file: bool = True, line_noqa: bool = True,
                previous: Optional[BufferResult] = None, scoped: bool = False,
                stop: Optional[Callable[[], bool]] = None) -> BufferResult:
    """The one-file variant of the run: the text of the file at `path` (an editor's buffer, stdin, flake8's
    lines) linted with its configuration and, `in_project`, against its project's model. `replaces_file`:
    the text stands for the file in the model (else the file on disk does: flake8 linting saved files).
    A text over `max-file-size` is not linted: one ASC000 says so. Raises ConfigError when the file's
    configuration is broken.

    `previous` (an editor's earlier result for this file) is reused: only what the edit touched is parsed
    again (incremental.reparse); while the text does not parse, the findings of the last text that did are
    kept (moved with the edit) next to the syntax error; with `scoped`, an edit inside function or class
    bodies lints only those scopes (status SCOPED: the project model is not refreshed). `stop` is asked
    while linting: True ends the lint with engine.walker.Stopped (a newer text came)."""
    settings = workspace.resolver.for_path(path)
    index = workspace.index_for(path) if in_project else None
    linter = workspace.linter(settings, index)
    try:
        check_size(text.encode("utf-8", "surrogatepass"), settings.max_file_size)
    except SourceError as exc:
        if index is not None and replaces_file:
            index.refresh(path, "")  # (not read: it contributes no facts)
        return BufferResult([error_finding(path, exc.reason)], linter, [], index, TOO_LARGE, text)
    base = previous.parsed if previous is not None else None
    change = None
    try:
        if tree is not None:
            parsed = Parsed.of(text, tree)
        elif base is not None:
            parsed, change = reparse(base, text, path)
        else:
            parsed = Parsed.of(text, parse(text, path))
    except SourceError as exc:
        if index is not None and replaces_file:
            index.refresh(path, text)  # a file that does not parse contributes no facts
        error = error_finding(path, exc.reason, exc.line, exc.col)
        return BufferResult(_kept(previous, text) + [error], linter, [], index, SYNTAX_ERROR, text, base)
    if change is not None and change.delta:  # (the previous tree's statements moved: it is used up)
        previous.parsed = None  # type: ignore[union-attr]
    if scoped and change is not None and change.scoped and previous is not None and previous.status in (
            LINTED, SCOPED) and previous.text == base.text:  # type: ignore[union-attr]
        return _lint_scopes(linter, path, parsed, change, previous, line_noqa, stop)
    if stop is not None and stop():
        raise Stopped()
    if index is not None and replaces_file:
        index.refresh(path, text, parsed.tree)
    try:
        analysis = linter.analyse(text, path, parsed.tree, line_noqa, stop=stop)
    except SourceError as exc:
        return BufferResult([error_finding(path, exc.reason, exc.line, exc.col)], linter, [], index, SYNTAX_ERROR,
                            text, parsed)
    return BufferResult(analysis.findings, linter, analysis.deps or [], index, LINTED, text, parsed)


def _kept(previous: Optional[BufferResult], text: str) -> List[Finding]:
    """The findings of the last text that parsed, moved with the edits since (none without one)."""
    if previous is None or previous.status == TOO_LARGE:
        return []
    old = [f for f in previous.findings if f.code != PARSE_ERROR_CODE]
    if not old:
        return []
    return kept(old, split_lines(previous.text, keepends=True), split_lines(text, keepends=True))


def _lint_scopes(linter: Linter, path: str, parsed: Parsed, change: Change, previous: BufferResult,
                 line_noqa: bool, stop: Optional[Callable[[], bool]]) -> BufferResult:
    """Lint only the edited region; the other findings are the previous ones, moved (see merge_scoped)."""
    try:
        analysis = linter.analyse(parsed.text, path, parsed.tree, line_noqa, within=[(change.first, change.new_last)],
                                  stop=stop)
    except SourceError as exc:
        return BufferResult([error_finding(path, exc.reason, exc.line, exc.col)], linter, [], previous.index,
                            SYNTAX_ERROR, parsed.text, parsed)
    file_level = [r.code for r in linter.rules_for(path) if decides_per_file(r)]
    findings = merge_scoped(previous.findings, analysis.findings, change, file_level)
    return BufferResult(findings, linter, previous.deps, previous.index, SCOPED, parsed.text, parsed)


def fix_buffer(result: BufferResult, path: str) -> Any:
    """The safe fixes of the buffer of `path` linted whole (LINTED), applied as `--fix` applies them (a
    fix.fixer.FileFix; its text is the buffer's when nothing applies): an editor's "fix all". The buffer's
    tree and findings are the first round's."""
    from ..fix.fixer import FileFix, fix_text  # (libcst is imported only when fixes are asked for)

    if result.status != LINTED:
        return FileFix(result.text)
    parsed = result.parsed  # (None once a later edit moved its statements)
    tree = parsed.tree if parsed is not None and parsed.text == result.text else None
    return fix_text(result.text, path, result.findings, result.linter, result.linter.settings, linted=True,
                    tree=tree)


def lint_stdin(workspace: Workspace, raw: bytes, path: Optional[str]) -> Tuple[FileResult, Linter]:
    """Stdin's bytes: with `--stdin-filename` (`path`), linted as that file of its project (its configuration,
    the other files' facts); else on their own with the run's settings. The result and the Linter used."""
    settings = workspace.resolver.for_path(path) if path else workspace.resolver.run
    linter = workspace.linter(settings)
    if path:
        index = workspace.index_for(path)
        try:
            text = decode_source(raw)[0]
        except SourceError:
            text = ""
        index.refresh(path, text)
        index.complete()
        linter = workspace.linter(settings, index)
    return linter.lint_bytes(raw, path or "-"), linter


__all__ = ["BufferResult", "FixRequest", "Found", "Project", "Request", "RunResult", "find_files",
           "fix_buffer", "fix_files", "index_project", "lint_buffer", "lint_project", "lint_run", "lint_stdin",
           "settle"]
