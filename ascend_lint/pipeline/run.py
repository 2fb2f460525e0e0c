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
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..engine.linter import FileResult, Linter, error_finding, parse
from ..fileio import SourceError, decode_source
from ..rule import Finding, wants_precision
from .cache import ResultCache
from .discovery import DiscoveryReport, Target, discover
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
@dataclass
class BufferResult:
    """One buffer linted: its findings, the Linter used, the project questions asked (deps), and the index
    it was linted against (None: linted on its own)."""

    findings: List[Finding]
    linter: Linter
    deps: List[list] = field(default_factory=list)
    index: Optional[ProjectIndex] = None


def lint_buffer(workspace: Workspace, path: str, text: str, tree: Optional[ast.Module] = None,
                in_project: bool = True, replaces_file: bool = True, line_noqa: bool = True) -> BufferResult:
    """The one-file variant of the run: the text of the file at `path` (an editor's buffer, stdin, flake8's
    lines) linted with its configuration and, `in_project`, against its project's model. `replaces_file`:
    the text stands for the file in the model (else the file on disk does: flake8 linting saved files).
    Raises ConfigError when the file's configuration is broken."""
    settings = workspace.resolver.for_path(path)
    index = workspace.index_for(path) if in_project else None
    linter = workspace.linter(settings, index)
    try:
        tree = tree if tree is not None else parse(text, path)
    except SourceError as exc:
        if index is not None and replaces_file:
            index.refresh(path, text)  # a file that does not parse contributes no facts
        return BufferResult([error_finding(path, exc.reason, exc.line, exc.col)], linter, [], index)
    if index is not None and replaces_file:
        index.refresh(path, text, tree)
    try:
        analysis = linter.analyse(text, path, tree, line_noqa)
    except SourceError as exc:
        return BufferResult([error_finding(path, exc.reason, exc.line, exc.col)], linter, [], index)
    return BufferResult(analysis.findings, linter, analysis.deps or [], index)


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
           "fix_files", "index_project", "lint_buffer", "lint_project", "lint_run", "lint_stdin", "settle"]
