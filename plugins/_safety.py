"""Fix-safety helpers shared by the rule packs (docs/reliability.md, "Fix safety").

A fix that rewrites code the original could not run past on an Ascend host is safe only if that failure
really stopped the program: not where an `except` (or `contextlib.suppress`) around it in the same function
catches it, since the original then went on along the handler's path.
"""
from __future__ import annotations

import ast
import bisect
from typing import Dict, List, Optional

from ascend_lint.astutil import callee_name

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
TRY_NODES = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


def failure_caught(stack: List[ast.AST]) -> bool:
    """Is the innermost node of `stack` (outermost first) in the body of a `try` with a handler that does not
    re-raise, or under `contextlib.suppress(...)`, within its function? (A caller's `try` is not seen.)"""
    for index in range(len(stack) - 2, -1, -1):
        outer, inner = stack[index], stack[index + 1]
        if isinstance(outer, FUNCTION_NODES):
            return False
        if isinstance(outer, TRY_NODES) and inner in outer.body and any(
                not (h.body and isinstance(h.body[-1], ast.Raise)) for h in outer.handlers):
            return True
        if isinstance(outer, (ast.With, ast.AsyncWith)) and inner in outer.body and any(
                isinstance(item.context_expr, ast.Call) and callee_name(item.context_expr) == "suppress"
                for item in outer.items):
            return True
    return False


class Ancestry:
    """The nodes above a node of one tree (for a fix decided away from the walk's stack): found by descending
    from the top-level statement that holds it; `parents()` links the whole tree, built once on demand."""

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self._parents: Optional[Dict[int, ast.AST]] = None
        self._starts: Optional[List[int]] = None  # lines where the top-level statements start
        self._body: List[ast.AST] = []

    def parents(self) -> Dict[int, ast.AST]:
        if self._parents is None:
            self._parents = {id(child): node for node in ast.walk(self.tree) for child in ast.iter_child_nodes(node)}
        return self._parents

    def chain(self, node: ast.AST) -> List[ast.AST]:
        """The nodes from the root down to `node` (outermost first)."""
        if self._parents is None and hasattr(node, "lineno"):
            span = _span(node)
            for top in self._tops(span[0]):
                found = _path(top, node, span)
                if found is not None:
                    return [self.tree] + found
        parents, chain = self.parents(), [node]
        while id(chain[-1]) in parents:
            chain.append(parents[id(chain[-1])])
        return chain[::-1]

    def _tops(self, line: int) -> List[ast.AST]:
        """The top-level statements whose lines hold `line` (several when they share it)."""
        if self._starts is None:
            body = getattr(self.tree, "body", None)
            self._body = body if isinstance(body, list) else []
            self._starts = [s.lineno for s in self._body]
        index = bisect.bisect_right(self._starts, line)
        tops = []
        while index > 0 and (self._body[index - 1].end_lineno or 0) >= line:
            index -= 1
            tops.append(self._body[index])
        return tops


def _span(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore


def _path(tree: ast.AST, node: ast.AST, span: tuple) -> Optional[List[ast.AST]]:
    """The nodes from `tree` down to `node`, descending only into nodes whose span holds `node`'s (and the
    nodes without a position: `arguments`, comprehensions, ...); None if it is not under `tree`."""
    stack = [(tree, [tree])]
    while stack:
        current, chain = stack.pop()
        if current is node:
            return chain
        for child in ast.iter_child_nodes(current):
            if not hasattr(child, "lineno") or (
                    (child.lineno, child.col_offset) <= span[:2]  # type: ignore[attr-defined]
                    and span[2:] <= (child.end_lineno or child.lineno, child.end_col_offset or 0)):  # type: ignore
                stack.append((child, chain + [child]))
    return None
