"""Fix-safety helpers shared by the rule packs (docs/reliability.md, "Fix safety").

A fix that rewrites code the original could not run past on an Ascend host is safe only if that failure
really stopped the program: not where an `except` (or `contextlib.suppress`) around it in the same function
catches it, since the original then went on along the handler's path.
"""
from __future__ import annotations

import ast
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
    """Parent links of one tree, built once on demand (for a fix decided away from the walk's stack)."""

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self._parents: Optional[Dict[int, ast.AST]] = None

    def parents(self) -> Dict[int, ast.AST]:
        if self._parents is None:
            self._parents = {id(child): node for node in ast.walk(self.tree) for child in ast.iter_child_nodes(node)}
        return self._parents

    def chain(self, node: ast.AST) -> List[ast.AST]:
        """The nodes from the root down to `node` (outermost first)."""
        parents, chain = self.parents(), [node]
        while id(chain[-1]) in parents:
            chain.append(parents[id(chain[-1])])
        return chain[::-1]
