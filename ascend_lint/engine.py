"""Per file: read -> decode -> pre-filter -> parse -> semantic model -> one walk -> findings.

Every face (CLI, flake8 plugin, pre-commit hook, reporters) goes through `Linter`.
"""
from __future__ import annotations

import ast
import fnmatch
import gc
import os
import re
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Type

from . import noqa
from .config import Settings
from .fileio import SourceError, SourceFile, decode_source, read_source
from .registry import PARSE_ERROR_CODE, code_matches
from .rule import Finding, Rule, Severity
from .project.model import ProjectModel
from .project.summary import Summary, light_summary
from .project.summary import summarize as summarize_tree
from .project.view import ProjectView
from .semantic import NULL_VIEW, FileContext
from .walker import Walker, trigger_lines

# Python 2 statements that Python 3 rejects: `except E, e:`, `print x`, `exec code`, `raise E, msg`
PYTHON2_LINE_RE = re.compile(
    r"\s*(?:except\s+[\w.()]+\s*,\s*\w+\s*:|print\s+[^\s(=]|exec\s+[\"'\w]|raise\s+[\w.]+\s*,)")
NPU_HINTS = ("torch_npu", "mindspore", "mindformers", "mindspeed", "hccl", "Npu", "npu'", 'npu"', "npu:", ".npu(")


@dataclass
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    source: Optional[SourceFile] = None
    summary: Optional[Summary] = None  # the file's project summary (None: it does not parse)
    deps: Optional[list] = None  # the project-model questions its rules asked, with the answers
    failed: bool = False  # it could not be read, decoded or parsed: it contributes no project facts


@dataclass
class Analysis:
    """What linting one source gives: findings, the file's summary (when asked) and its deps."""

    findings: List[Finding]
    summary: Optional[Summary] = None
    deps: List[list] = field(default_factory=list)


def error_finding(path: str, reason: str, line: int = 1, col: int = 1) -> Finding:
    return Finding(path, line, col, line, col, PARSE_ERROR_CODE, "unreadable-file", reason, Severity.ERROR)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Parsing allocates many objects that are not cyclic garbage: keep the cyclic GC out of it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


LONG_LINE = 100_000  # Python < 3.11 can crash (not raise) parsing expressions nested this deep


def _guard_old_parser(text: str) -> None:
    """Refuse, before parsing, what makes the parser of Python 3.9/3.10 segfault: huge one-line nests."""
    if sys.version_info >= (3, 11) or len(text) <= LONG_LINE:
        return
    for number, line in enumerate(text.split("\n"), 1):
        if len(line) > LONG_LINE:
            raise SourceError(
                f"line has {len(line):,} characters: too long to parse safely with Python "
                f"{sys.version_info[0]}.{sys.version_info[1]} (its parser can crash); lint it with Python 3.11+",
                number,
            )


def parse(text: str, path: str) -> ast.Module:
    """ast.parse with every failure turned into SourceError (position when known)."""
    _guard_old_parser(text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if "Missing parentheses in call to" in msg or PYTHON2_LINE_RE.match(exc.text or ""):
            msg += " (this looks like Python 2 code, which is not supported)"
        else:
            msg += f" (parsed as Python {sys.version_info[0]}.{sys.version_info[1]})"
        line, col = exc.lineno or 1, exc.offset or 1
        raise SourceError(f"syntax error: {msg}", line, max(col, 1)) from None
    except (RecursionError, MemoryError):
        raise SourceError("too deeply nested for the Python parser (RecursionError/MemoryError)") from None
    except ValueError as exc:
        raise SourceError(f"cannot parse: {exc}") from None


class Linter:
    """Lints sources with a fixed set of enabled rules and settings."""

    def __init__(self, rules: Sequence[Type[Rule]], settings: Settings, project: object = None) -> None:
        self.rules = list(rules)
        self.settings = settings
        self._root = os.path.abspath(settings.project_root)
        # a project.index.ProjectIndex (anything with view_for(path)); None: each file is its own project
        self.project = project

    # --------------------------------------------------------------- entry points
    def lint_path(self, path: str) -> FileResult:
        try:
            source = read_source(path)
        except SourceError as exc:
            return FileResult(path, [error_finding(path, exc.reason, exc.line, exc.col)])
        return self.lint_source(source)

    def lint_bytes(self, raw: bytes, path: str) -> FileResult:
        try:
            text, encoding = decode_source(raw)
        except SourceError as exc:
            return FileResult(path, [error_finding(path, exc.reason, exc.line, exc.col)])
        return self.lint_source(SourceFile(path, raw, text, encoding))

    def lint_source(self, source: SourceFile, tree: Optional[ast.Module] = None, summarize: bool = False,
                    light: Optional[Summary] = None) -> FileResult:
        """Lint a decoded source; with `summarize`, also return its project summary and deps."""
        result = FileResult(source.path, source=source)
        try:
            with _gc_paused():  # the tree dies (by refcount) inside: no cyclic GC pass over it
                analysis = self.analyse(source.text, source.path, tree, summarize=summarize, light=light)
            result.findings, result.summary, result.deps = analysis.findings, analysis.summary, analysis.deps
        except SourceError as exc:
            result.findings = [error_finding(source.path, exc.reason, exc.line, exc.col)]
            result.deps, result.failed = [], True
        return result

    # ------------------------------------------------------------------- core
    def rules_for(self, path: str) -> List[Type[Rule]]:
        ignored = self.ignored_codes(path)
        if not ignored:
            return self.rules
        return [r for r in self.rules if not code_matches(r.code, ignored)]

    def ignored_codes(self, path: str) -> List[str]:
        if not self.settings.per_file_ignores:
            return []
        rel = _relative(path, self._root)
        base = os.path.basename(path)
        codes: List[str] = []
        for pattern, pattern_codes in self.settings.per_file_ignores.items():
            if _glob_match(rel, base, pattern):
                codes.extend(pattern_codes)
        return codes

    def check(self, text: str, path: str, tree: Optional[ast.Module] = None,
              line_noqa: bool = True, view: Optional[ProjectView] = None) -> List[Finding]:
        """Findings for one decoded source (noqa applied); raises SourceError if it does not parse.

        `line_noqa=False` leaves line `# noqa` comments to the caller (flake8 applies its own). The project
        facts come from `view`, else from the linter's project, else from the file alone.
        """
        return self.analyse(text, path, tree, line_noqa, view).findings

    def analyse(self, text: str, path: str, tree: Optional[ast.Module] = None, line_noqa: bool = True,
                view: Optional[ProjectView] = None, summarize: bool = False,
                light: Optional[Summary] = None) -> Analysis:
        """`check`, plus the file's summary (with `summarize`; `light`: its text-only summary if known)
        and the project questions its rules asked (deps)."""
        if view is None and self.project is not None:
            view = self.project.view_for(path)
        rules = self.rules_for(path)
        if self.settings.target != "npu" and not any(h in text for h in NPU_HINTS):
            rules = [r for r in rules if not r.npu_context]
        present: Dict[str, bool] = {}  # trigger -> occurs in the text (each text is scanned once)

        def occurs(trigger: str) -> bool:
            found = present.get(trigger)
            if found is None:
                found = present[trigger] = trigger in text
            return found

        rules = [r for r in rules
                 if any(occurs(t) for t in r.file_triggers or ("",)) and any(occurs(t) for t in r.triggers or ("",))]
        if not rules:  # nothing could match: not even parsed (the stdlib-sized fast path)
            return Analysis([], _summary_without_tree(text, path, light) if summarize else None)
        if tree is None:
            with _gc_paused():
                tree = parse(text, path)
        ctx = FileContext(path, text, tree, self.settings.target, project=view or NULL_VIEW,
                          migrating_modules=tuple(self.settings.migrating_modules))
        summary = None
        if summarize or view is None:
            summary = summarize_tree(tree, text, ctx, light)
        if view is None:  # no project: the file is a project of its own
            view = single_file_view(summary, path)
            ctx.attach(view)
            summary = summary if summarize else None
        instances = []
        for rule in rules:
            if rule.npu_context and not ctx.npu:
                continue
            if rule.silent_when_auto_migrated and ctx.auto_migrated:
                continue
            instances.append(rule(ctx, self.settings.rule_options.get(rule.code)))
        if not instances:
            return Analysis([], summary, view.deps)
        table: Dict[type, list] = {}
        triggers: List[str] = []
        prune = True
        for inst in instances:
            if inst.triggers:
                triggers.extend(t for t in inst.triggers if present.get(t) is not False)
            else:
                prune = False
            for node_type, name in _handlers(type(inst)):
                table.setdefault(node_type, []).append(getattr(inst, name))
        hit_lines = trigger_lines(text, sorted(set(triggers))) if prune else None
        try:
            Walker(ctx, table, hit_lines).run()
            for inst in instances:
                inst.end_file()
        except RecursionError:
            raise SourceError("too deeply nested to analyse (RecursionError)") from None
        except Exception as exc:  # a rule bug must not end the run: report it on this file
            raise SourceError(f"internal error in rule {_failing_rule(exc)} ({exc!r}); please report it") from None
        findings: List[Finding] = [f for inst in instances for f in inst.findings]
        findings = noqa.filter_findings(findings, ctx.lines if line_noqa and findings else [], text)
        findings.sort(key=Finding.sort_key)
        return Analysis(_dedupe(findings), summary, view.deps)



def _summary_without_tree(text: str, path: str, light: Optional[Summary]) -> Optional[Summary]:
    """The summary of a file the rules do not need to parse: its text-only summary, completed from a parse
    only when its text may hold facts that need the tree (None: it does not parse)."""
    summary = light if light is not None else light_summary(text)
    if not summary.get("light"):
        return summary
    try:
        with _gc_paused():
            tree = parse(text, path)
    except SourceError:
        return None
    return summarize_tree(tree, text, None, summary)


class NoProject:
    """A project provider that knows nothing: rules see only the file (benchmarks' baseline; no summary,
    no model)."""

    def view_for(self, path: str) -> ProjectView:
        return NULL_VIEW


def single_file_view(summary: Summary, path: str) -> ProjectView:
    """A view of a project made of this one file (a snippet or a file linted without a project)."""
    name = os.path.basename(path.replace("\\", "/")) or "snippet.py"
    if not name.endswith((".py", ".pyi")):
        name += ".py"
    model = ProjectModel.build({name: summary})
    return ProjectView(model, model.module_of(name), name, {name: summary}.get)


_HANDLERS: Dict[type, List[Tuple[type, str]]] = {}


def _handlers(rule: Type[Rule]) -> List[Tuple[type, str]]:
    """(ast node type, method name) of a rule class's visit_<Node> handlers, computed once per class."""
    found = _HANDLERS.get(rule)
    if found is None:
        found = []
        for name in rule.handler_names():
            node_type = getattr(ast, name[len("visit_"):], None)
            if node_type is not None:
                found.append((node_type, name))
        _HANDLERS[rule] = found
    return found


def _failing_rule(exc: BaseException) -> str:
    """The code of the rule whose handler raised, from the traceback."""
    tb = exc.__traceback__
    code = "?"
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, Rule):
            code = owner.code
        tb = tb.tb_next
    return code


def _dedupe(findings: List[Finding]) -> List[Finding]:
    out: List[Finding] = []
    seen = set()
    for f in findings:
        key = (f.code, f.line, f.col, f.end_line, f.end_col, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _relative(path: str, root: str) -> str:
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, root)
    except ValueError:
        return absolute.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def _glob_match(rel: str, base: str, pattern: str) -> bool:
    pattern = pattern.replace(os.sep, "/")
    if pattern.endswith("/"):
        return rel.startswith(pattern) or ("/" + pattern) in ("/" + rel)
    return (fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(base, pattern)
            or fnmatch.fnmatchcase(rel, "*/" + pattern))


def sorted_findings(results: Sequence[FileResult]) -> List[Finding]:
    out = [f for r in results for f in r.findings]
    out.sort(key=Finding.sort_key)
    return out


def summarize(findings: Sequence[Finding]) -> List[Tuple[str, str, int, bool]]:
    """(code, name, count, fixable) rows for --statistics, most frequent first."""
    counts: Dict[Tuple[str, str], List[int]] = {}
    for f in findings:
        row = counts.setdefault((f.code, f.name), [0, 0])
        row[0] += 1
        row[1] += f.fix is not None
    rows = [(code, name, n, fixable > 0) for (code, name), (n, fixable) in counts.items()]
    rows.sort(key=lambda r: (-r[2], r[0]))
    return rows
