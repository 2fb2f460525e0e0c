"""Per-file summaries: the typed facts a file gives the project model (records.Summary).

Two layers, one function each:
- `light_summary(text)`: from the text alone (textscan.text_rows): imports (function-level ones too),
  top-level classes with their bases as written and their methods, top-level functions and methods with the
  project-looking names they call, `X.attr = f` monkey-patches, whether the file is an entry script, its own
  device context. Every file of the project gets this, linted or not.
- `summarize(tree, text, ctx)`: the light summary plus what needs the syntax tree, taken from the tree the
  engine already parsed: step loops and what they call, precision decisions about the models a file
  trains. Only the parts of the file whose text can hold such facts are looked at (factlines).

The model never sees a tree.
"""
from __future__ import annotations

import ast
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from .data import FP_WORDS
from .factlines import FactLines, any_within, fact_lines, fact_sketch, parser_lines, word_lines
from .nodes import LOOP_TYPES, SCOPE_TYPES, bodies, call_text, statements
from .precision import PrecisionScan
from .records import AmpCall, ModelDecision, StepLoop, Summary
from .semantic import FileContext
from .textscan import NOT_CALLED, known_roots, text_rows

SUMMARY_SCHEMA = Summary.SCHEMA
__all__ = ["SUMMARY_SCHEMA", "Summary", "light_summary", "summarize", "summarize_text"]


def light_summary(text: str, shared: Optional[Dict[Any, Any]] = None, precision: bool = True) -> Summary:
    """The summary of a text alone (see textscan.text_rows). `shared`: names and records equal to one made
    before through the same table become that object. `precision`: are precision decisions gathered (else
    only step loops make a text need its tree)?"""
    return Summary.from_tuple(text_rows(text, shared, precision), shared)


def summarize(tree: ast.Module, text: str, ctx: Any = None, light: Optional[Summary] = None,
              precision: bool = True) -> Summary:
    """The full summary: the light summary (`light`, computed from `text` when not given) plus step loops and
    precision decisions (with `precision`) read from `tree`, the tree the engine parsed (`ctx`: its
    FileContext, when there is one)."""
    summary = light if light is not None else light_summary(text, precision=precision)
    if not summary.light:
        return summary
    return _with_tree_facts(summary, tree, text, ctx, fact_lines(parser_lines(text), summary.defs, precision))


def summarize_text(text: str, light: Optional[Summary], precision: bool,
                   parse: Callable[[str], Optional[ast.Module]]) -> Optional[Summary]:
    """`summarize` for a file no rule parses, from a parse (`parse(text)`: None when it fails) of only what
    can hold its tree facts (see factlines.fact_sketch); the whole file is parsed when that part does not
    parse. None: the file does not parse."""
    summary = light if light is not None else light_summary(text, precision=precision)
    if not summary.light:
        return summary
    lines = fact_lines(parser_lines(text), summary.defs, precision)
    sketch = fact_sketch(text, summary.defs, sorted(set().union(*lines)))
    tree = parse(sketch) if sketch is not None else None
    if tree is None:
        tree = parse(text)
        if tree is None:
            return None
    return _with_tree_facts(summary, tree, text, None, lines)


class _TreeFacts:
    """The step loops and precision decisions of the bodies of one tree (the module's own statements, every
    top-level function and method) whose lines may hold them."""

    def __init__(self, summary: Summary, tree: ast.Module, source: str, ctx: Any) -> None:
        self.summary = summary
        self.tree = tree
        self.source = source
        self.ctx = ctx  # (a FileContext, made for the first loop to test: most files need none)
        self.known: Optional[set] = None  # (made when a step loop or a call is found: most files have none)
        self.fp_lines: Optional[List[int]] = None
        self.steps: List[StepLoop] = []
        self.models: List[ModelDecision] = []
        self.amp_calls: List[AmpCall] = []

    def roots(self) -> set:
        """Names a call read from the tree can start with and still reach project code (`self` too)."""
        if self.known is None:
            summary = self.summary
            self.known = known_roots(summary.imports, summary.classes, summary.defs) | {"self"}
        return self.known

    def read(self, lines: FactLines) -> Summary:
        step_lines, low_lines, other_lines = lines
        for owner, node in bodies(self.tree):
            if owner:
                first, last = node.lineno, node.end_lineno or node.lineno
                body = node.body  # type: ignore[attr-defined]
            else:  # the module's own statements (functions and classes are bodies of their own)
                first, last = 1, 1 << 30
                body = [stmt for stmt in self.tree.body if not isinstance(stmt, SCOPE_TYPES)]
            if any_within(step_lines, first, last):
                self._step_loops(owner, body)
            maybe_low = any_within(low_lines, first, last)
            if maybe_low or any_within(other_lines, first, last):
                PrecisionScan(owner, maybe_low or self._fp_word_within(first, last), self.models,
                              self.amp_calls).scan(body)
        amp_calls = [c for c in self.amp_calls if c.callee.split(".", 1)[0] in self.roots()] if self.amp_calls else ()
        return self.summary.with_tree_facts(self.steps, self.models, amp_calls)

    def _fp_word_within(self, first: int, last: int) -> bool:
        if self.fp_lines is None:
            self.fp_lines = word_lines(parser_lines(self.source), FP_WORDS)
        return any_within(self.fp_lines, first, last)

    def _step_loops(self, owner: str, body: Sequence[ast.stmt]) -> None:
        loops = [stmt for stmt in statements(body) if isinstance(stmt, LOOP_TYPES)]
        if loops and self.ctx is None:
            self.ctx = FileContext("<summary>", self.source, self.tree)  # (it reads the source as given)
        for line, calls in _step_loops(self.ctx, loops):
            calls = {n: at for n, at in calls.items() if n.split(".", 1)[0] in self.roots()}
            self.steps.append(StepLoop(owner, line, calls))  # (with no project call: its owner runs the steps)


def _with_tree_facts(summary: Summary, tree: ast.Module, source: str, ctx: Any, lines: FactLines) -> Summary:
    """`summary` (a text summary) with the step loops and precision decisions read from `tree`."""
    return _TreeFacts(summary, tree, source, ctx).read(lines)


def _is_guard(test: ast.expr) -> bool:
    """`if step % N == 0` / `if i == 10`: a periodic or one-step guard."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return True
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops):
            return True
    return False


def _loop_calls(loop: ast.AST) -> Dict[str, int]:
    """Names called on every pass of a loop body (calls under a periodic or one-step guard excluded)."""
    calls: Dict[str, int] = {}
    todo: List[ast.AST] = list(loop.body)  # type: ignore[attr-defined]
    while todo:
        node = todo.pop()
        if isinstance(node, SCOPE_TYPES):
            continue
        if isinstance(node, ast.If) and _is_guard(node.test):
            todo.extend(node.orelse)
            todo.append(node.test)
            continue
        if isinstance(node, ast.Call):
            name = call_text(node.func)
            if name and name not in NOT_CALLED and (name not in calls or node.lineno < calls[name]):
                calls[name] = node.lineno
        todo.extend(ast.iter_child_nodes(node))
    return calls


def _step_loops(ctx: Any, loops: Sequence[ast.stmt]) -> Iterator[tuple]:
    """(line, {called name: line}) of each step loop among `loops` (the innermost loop that steps)."""
    for loop in loops:
        if ctx.is_step_loop_unwalked(loop):
            yield loop.lineno, _loop_calls(loop)
