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
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Type

from . import noqa
from ..compat import slotted_dataclass
from ..config import Settings, ancestor, split_up
from ..core_rules import CORE_PACK, PARSE_ERROR_CODE, UNUSED_NOQA_CODE
from ..fileio import SourceError, SourceFile, check_size, decode_source, read_source, split_lines
from ..registry import code_matches, registered_codes
from ..rule import Finding, Rule, Severity, wants_precision
from ..analysis.model import ProjectModel
from ..analysis.summary import Summary, summarize_text
from ..analysis.summary import summarize as summarize_tree
from ..analysis.view import ProjectView
from ..analysis.semantic import NULL_VIEW, FileContext, project_relative
from ..analysis.training_code import path_reason
from .roles import apply_role_policy
from .triggers import TriggerText, alias_words, renamed_imports, renames_trigger
from .walker import Stopped, Walker

# Python 2 statements that Python 3 rejects: `except E, e:`, `print x`, `exec code`, `raise E, msg`
PYTHON2_LINE_RE = re.compile(
    r"\s*(?:except\s+[\w.()]+\s*,\s*\w+\s*:|print\s+[^\s(=]|exec\s+[\"'\w]|raise\s+[\w.]+\s*,)")
NPU_HINTS = ("torch_npu", "mindspore", "mindformers", "mindspeed", "hccl", "Npu", "npu'", 'npu"', "npu:", ".npu(",
             "torch.npu.")
# FileResult note: NPU-context rules that could apply were skipped in a file that uses CUDA (a GPU
# script not yet ported: `--target npu` checks it as NPU code).
NPU_RULES_SKIPPED_FOR_CUDA = "npu-rules-skipped-cuda"


@slotted_dataclass
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    source: Optional[SourceFile] = None
    notes: Tuple[str, ...] = ()  # facts about the run on this file for the summary (see NPU_RULES_SKIPPED_FOR_CUDA)
    summary: Optional[Summary] = None  # the file's project summary (None: it does not parse)
    deps: Optional[list] = None  # the project-model questions its rules asked, with the answers
    failed: bool = False  # it could not be read, decoded or parsed: it contributes no project facts


@dataclass
class Analysis:
    """What linting one source gives: findings, the file's summary (when asked), its deps and notes."""

    findings: List[Finding]
    summary: Optional[Summary] = None
    deps: List[list] = field(default_factory=list)
    notes: Tuple[str, ...] = ()


def error_finding(path: str, reason: str, line: int = 1, col: int = 1) -> Finding:
    return Finding(path, line, col, line, col, PARSE_ERROR_CODE, "unreadable-file", reason, Severity.ERROR)


@contextmanager
def gc_paused() -> Iterator[None]:
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

    # Rules without a trigger in the file are not run, and statements whose lines hold no trigger are
    # not descended into; off only to test that pruning never loses a finding.
    prune = True

    def __init__(self, rules: Sequence[Type[Rule]], settings: Settings, project: object = None) -> None:
        self.rules = list(rules)
        self.settings = settings
        self._file_gates = tuple({r.file_triggers or ("",): None for r in self.rules})
        self._root = os.path.abspath(settings.project_root)
        # a pipeline.index.ProjectIndex (anything with view_for(path)); None: each file is its own project
        self.project = project
        self.precision = wants_precision(self.rules)  # (a file its own project gathers what its rules read)

    # --------------------------------------------------------------- entry points
    def lint_path(self, path: str) -> FileResult:
        try:
            source = read_source(path, self.settings.max_file_size)
        except SourceError as exc:
            return FileResult(path, [error_finding(path, exc.reason, exc.line, exc.col)])
        return self.lint_source(source)

    def lint_bytes(self, raw: bytes, path: str) -> FileResult:
        try:
            check_size(raw, self.settings.max_file_size)
            text, encoding = decode_source(raw)
        except SourceError as exc:
            return FileResult(path, [error_finding(path, exc.reason, exc.line, exc.col)])
        return self.lint_source(SourceFile(path, raw, text, encoding))

    def lint_source(self, source: SourceFile, tree: Optional[ast.Module] = None, summarize: bool = False,
                    light: Optional[Summary] = None) -> FileResult:
        """Lint a decoded source; with `summarize`, also return its project summary and deps."""
        result = FileResult(source.path, source=source)
        try:
            with gc_paused():  # the tree dies (by refcount) inside: no cyclic GC pass over it
                analysis = self.analyse(source.text, source.path, tree, summarize=summarize, light=light)
            result.findings, result.summary, result.deps = analysis.findings, analysis.summary, analysis.deps
            result.notes = analysis.notes
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
            if pattern.startswith("../"):  # from an extended configuration in a directory above
                levels, rest = split_up(pattern)
                if _glob_match(_relative(path, ancestor(self._root, levels)), base, rest):
                    codes.extend(pattern_codes)
            elif _glob_match(rel, base, pattern):
                codes.extend(pattern_codes)
        return codes

    def check(self, text: str, path: str, tree: Optional[ast.Module] = None,
              line_noqa: bool = True, view: Optional[ProjectView] = None) -> List[Finding]:
        """Findings for one decoded source (noqa applied); raises SourceError if it does not parse.

        `line_noqa=False` leaves line `# noqa` comments to the caller (flake8 applies its own). With
        `ignore-noqa` set, no comment suppresses anything. The project facts come from `view`, else from
        the linter's project, else from the file alone.
        """
        return self.analyse(text, path, tree, line_noqa, view).findings

    def analyse(self, text: str, path: str, tree: Optional[ast.Module] = None, line_noqa: bool = True,
                view: Optional[ProjectView] = None, summarize: bool = False,
                light: Optional[Summary] = None, within: Optional[Sequence[Tuple[int, int]]] = None,
                stop: Optional[Callable[[], bool]] = None) -> Analysis:
        """`check`, plus the file's summary (with `summarize`; `light`: its text-only summary if known),
        the project questions its rules asked (deps) and the file's notes for the run's summary. `within`:
        [first, last] line ranges; statements outside them are not descended into (as if they held no
        trigger): the findings there are partial (an editor's re-lint of the edited scopes only). `stop`:
        asked between top-level statements; True ends the lint with `Stopped` (a newer text came)."""
        if view is None and self.project is not None:
            view = self.project.view_for(path)
        rules = self.rules_for(path)
        walked = [r for r in rules if r.pack != CORE_PACK and not r.profile_only]  # (profile rules: run.py)
        walk = self._walk(walked, text, path, tree, view, summarize, light, within, stop)
        lines = walk.lines
        if self.settings.ignore_noqa:
            findings = walk.findings
        else:
            unused_check = "noqa" in text and any(r.code == UNUSED_NOQA_CODE for r in rules)
            if (walk.findings or unused_check) and lines is None:
                lines = split_lines(text)
            findings = noqa.filter_findings(walk.findings, lines if line_noqa and walk.findings else [], text)
            if unused_check:
                ran = {r.code for r in walked} - walk.skipped
                unused = noqa.unused_noqa(path, text, lines or [], walk.findings, ran, registered_codes())
                findings += noqa.filter_findings(unused, lines if line_noqa else [], text)
        findings.sort(key=Finding.sort_key)
        return Analysis(_dedupe(findings), walk.summary, walk.deps, walk.notes)

    def _gathers_precision(self) -> bool:
        """Do the summaries made while linting hold precision decisions? As the project's index gathers them
        (one answer for every file of the project), else as this linter's rules read them."""
        return getattr(self.project, "precision", self.precision)

    def _unparsed_summary(self, text: str, path: str, light: Optional[Summary]) -> Optional[Summary]:
        return _summary_without_tree(text, path, light, self._gathers_precision())

    def _walk(self, rules: List[Type[Rule]], text: str, path: str, tree: Optional[ast.Module],
              view: Optional[ProjectView], summarize: bool, light: Optional[Summary],
              within: Optional[Sequence[Tuple[int, int]]] = None,
              stop: Optional[Callable[[], bool]] = None) -> "_Walk":
        """Run the rules that can apply over one walk of the file (see `_Walk`)."""
        plan = self._plan(rules, text, path, view)
        if not plan.rules:  # nothing could match: not even parsed (the stdlib-sized fast path)
            summary = self._unparsed_summary(text, path, light) if summarize else None
            return _Walk([], plan.skipped, None, plan.notes, summary)
        if tree is None:
            with gc_paused():
                tree = parse(text, path)
        ctx = FileContext(path, text, tree, self.settings.target, self._root, occurs=plan.scan.occurs,
                          project=view or NULL_VIEW, migrating_modules=tuple(self.settings.migrating_modules))
        summary = None
        if summarize or view is None:
            summary = summarize_tree(tree, text, ctx, light, self._gathers_precision())
            if view is not None:
                view.learn_own(summary)
        in_project = view is not None  # (a file alone has no execution roles: nothing is silenced)
        if view is None:  # no project: the file is a project of its own
            view = single_file_view(summary, path)
            ctx.attach(view)
            summary = summary if summarize else None
        instances = self._instances(plan, ctx, text)
        if within is not None and instances:
            findings = self._run_within(instances, ctx, plan, within, stop)
        else:
            findings = self._run(instances, ctx, plan, None, stop) if instances else []
        if findings and in_project and ctx.module is not None:
            findings = apply_role_policy(findings, tree, ctx.facts().roles, instances, self.settings.preview)
        return _Walk(findings, plan.skipped, (ctx.lines if findings else None), plan.notes, summary, view.deps)

    def _run_within(self, instances: List[Rule], ctx: FileContext, plan: "_Plan",
                    within: Sequence[Tuple[int, int]], stop: Optional[Callable[[], bool]]) -> List[Finding]:
        """The rules that report at the node in hand walk only the lines `within`; the rules that decide per
        file (`decides_per_file`: they gather across the file and report at its end) walk the whole file, in
        a walk of their own: their findings are the file's, the others' those of the lines `within`."""
        local = [i for i in instances if not decides_per_file(type(i))]
        whole = [type(i) for i in instances if decides_per_file(type(i))]
        findings = self._run(local, ctx, plan, within, stop) if local else []
        if whole:
            again = FileContext(ctx.path, ctx.text, ctx.tree, self.settings.target, self._root, occurs=plan.scan.occurs,
                                project=ctx.project, migrating_modules=tuple(self.settings.migrating_modules))
            if again.project is not NULL_VIEW:
                again.attach(ctx.project)
            rules = [rule(again, self.settings.rule_options.get(rule.code)) for rule in whole]
            findings += self._run(rules, again, plan, None, stop)
        return findings

    def _plan(self, rules: List[Type[Rule]], text: str, path: str, view: Optional[ProjectView]) -> "_Plan":
        """The rules that may find something in this text (a trigger of theirs occurs in it), and the ones
        silent here because of the file's context."""
        plan = _Plan(rules, set(), (), TriggerText(text))
        if path_reason(project_relative(path, self._root)) is not None:  # a test, benchmark or offline tool
            plan.skip([r for r in rules if r.training_code_only])
        gate = plan.scan.occurs_plainly
        passed = {group: any(map(gate, group)) for group in self._file_gates}  # (few distinct groups)
        plan.rules = [r for r in plan.rules if passed[r.file_triggers or ("",)]]
        if not plan.rules:  # no framework name: nothing could match
            return plan
        plan.aliases = plan.scan.import_aliases()
        plan.renamed = renamed_imports(plan.aliases)
        self._gate_npu(plan, text, view)
        plan.rules = [r for r in plan.rules if self._applies(r, plan)]
        return plan

    def _gate_npu(self, plan: "_Plan", text: str, view: Optional[ProjectView]) -> None:
        """Skip the NPU-context rules in a file that is not NPU code and that no NPU entry script runs."""
        if self.settings.target == "npu" or any(plan.scan.occurs(h) for h in NPU_HINTS) or (
                view is not None and view.npu() is not None):
            return
        gated = [r for r in plan.rules if r.npu_context]
        plan.skip(gated)
        if "cuda" in text and any(self._applies(r, plan) for r in gated):
            plan.notes = (NPU_RULES_SKIPPED_FOR_CUDA,)

    def _applies(self, rule: Type[Rule], plan: "_Plan") -> bool:
        """May the rule match here? (only the triggers of rules still in play are tested)"""
        present = plan.scan.may_occur(rule.triggers or ("",))  # (texts that are not words: maybe)
        return (not self.prune or any(present[t] for t in rule.triggers or ("",))
                or bool(plan.renamed) and renames_trigger(plan.renamed, rule.triggers))

    def _instances(self, plan: "_Plan", ctx: FileContext, text: str) -> List[Rule]:
        """The rules made for this file, but those its context silences (not NPU code, auto-migrated)."""
        instances = []
        for rule in plan.rules:
            if (rule.npu_context and not ctx.npu) or (rule.silent_when_auto_migrated and ctx.auto_migrated):
                plan.skipped.add(rule.code)
                if rule.npu_context and not ctx.npu and "cuda" in text:
                    plan.notes = (NPU_RULES_SKIPPED_FOR_CUDA,)
                continue
            instances.append(rule(ctx, self.settings.rule_options.get(rule.code)))
        return instances

    def _run(self, instances: List[Rule], ctx: FileContext, plan: "_Plan",
             within: Optional[Sequence[Tuple[int, int]]] = None,
             stop: Optional[Callable[[], bool]] = None) -> List[Finding]:
        """One walk of the tree calling each rule's handlers (statements whose lines hold no trigger of the
        rules are not descended into), then each rule's `end_file`: the findings."""
        triggers: Set[str] = set()
        prune = self.prune
        for inst in instances:
            if inst.triggers:
                triggers.update(inst.triggers)
            else:
                prune = False
        hit_lines = None
        if prune:
            present = plan.scan.may_occur(triggers)
            words = alias_words(plan.aliases, tuple(sorted(triggers))) if plan.aliases else ()
            hit_lines = plan.scan.lines(sorted(t for t in triggers if present[t]), words)
        if within is not None:
            wanted = {n for first, last in within for n in range(first, last + 1)}
            hit_lines = sorted(wanted) if hit_lines is None else [n for n in hit_lines if n in wanted]
        try:
            for inst in instances:
                inst.start_file()
            Walker(ctx, _dispatch_table(instances, ctx), hit_lines, stop).run()
            for inst in instances:
                inst.end_file()
        except Stopped:
            raise
        except RecursionError:
            raise SourceError("too deeply nested to analyse (RecursionError)") from None
        except Exception as exc:  # a rule bug must not end the run: report it on this file
            raise SourceError(f"internal error in rule {_failing_rule(exc)} ({exc!r}); please report it") from None
        return [f for inst in instances for f in inst.findings]


@dataclass
class _Plan:
    """Which rules run on a file: those left, the codes skipped for the file's context, the run's notes,
    the file's trigger text and its import aliases."""

    rules: List[Type[Rule]]
    skipped: Set[str]
    notes: Tuple[str, ...]
    scan: TriggerText
    aliases: List[Tuple[str, str]] = field(default_factory=list)  # (imported name, local name)
    renamed: str = ""  # see triggers.renamed_imports

    def skip(self, rules: Sequence[Type[Rule]]) -> None:
        if rules:
            dropped = set(rules)
            self.skipped.update(r.code for r in rules)
            self.rules = [r for r in self.rules if r not in dropped]


@dataclass
class _Walk:
    """One walk's outcome: findings before noqa, codes skipped for the file's context (NPU, migration,
    not training code), the file's lines if split, notes, summary and deps."""

    findings: List[Finding]
    skipped: Set[str]
    lines: Optional[List[str]]
    notes: Tuple[str, ...]
    summary: Optional[Summary] = None
    deps: List[list] = field(default_factory=list)


def _summary_without_tree(text: str, path: str, light: Optional[Summary], precision: bool) -> Optional[Summary]:
    """The summary of a file the rules do not need to parse: its text-only summary, completed from a parse
    (of the parts that can hold them) only when its text may hold facts that need the tree (None: it does not
    parse)."""
    def parsed(source: str) -> Optional[ast.Module]:
        try:
            with gc_paused():
                return parse(source, path)
        except SourceError:
            return None

    return summarize_text(text, light, precision, parsed)


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


def _dispatch_table(instances: Sequence[Rule], ctx: FileContext) -> Dict[type, list]:
    """ast node type -> the bound handlers of the rule instances, in rule order; a handler with
    `handler_triggers` only where the file may hold one of them (a node type no handler is left for is
    not even visited: leaving `visit_Name` out saves ~5 % of a --preview run on diffusers)."""
    table: Dict[type, list] = {}
    for inst in instances:
        needs = inst.handler_triggers
        for node_type, name in _handlers(type(inst)):
            texts = needs.get(name) if needs else None
            if texts is None or not ctx.text.isascii() or any(map(ctx.occurs, texts)):
                table.setdefault(node_type, []).append(getattr(inst, name))
    return table


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


def decides_per_file(rule: Type[Rule]) -> bool:
    """Does the rule report from `end_file`, a decision over the whole file's walk (what it gathered in one
    function can decide what it reports in another)?"""
    return getattr(rule, "end_file", None) is not Rule.end_file


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
