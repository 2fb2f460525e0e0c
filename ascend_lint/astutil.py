"""Small questions about `ast` nodes that rules and the analysis layer share (part of the rule API).

Each helper answers from the node it is given, never from the file: where a question needs the file's
imports, bindings or scopes, ask `self.ctx` instead (docs/rule-api.md lists both).

- containment: `contains(outer, inner)`;
- names: `dotted_name(node)` (`a.b.c`), `receiver_name(node)` (its last name), `callee_name(call)`,
  `method_name(call)`;
- call arguments: `argument(call, name, position)`, `keyword(call, name)`, `has_star_args(call)`;
- literals: `constant(node, default)`;
- parents: `parent_map(root)` (child id -> parent node, for a bounded subtree).
"""
from __future__ import annotations

import ast
from typing import Dict, Iterable, Optional


def contains(outer: ast.AST, inner: ast.AST) -> bool:
    """Does `outer`'s source range hold `inner`'s (a node is inside itself)? By position: for nodes of one
    tree this is "`inner` is `outer` or one of its descendants" unless a node shares its exact range."""
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and (
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset))


def dotted_name(node: ast.AST) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain as written (no import resolution: see `ctx.qualname`), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def receiver_name(node: ast.AST) -> str:
    """The last name of a Name/Attribute: `self.optimizer` -> 'optimizer', `opt` -> 'opt', else ''."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def callee_name(call: ast.Call) -> str:
    """The name a call is made by: `load` for `ms.load(...)` and for `load(...)`; '' for `f()(...)`."""
    return receiver_name(call.func)


def method_name(call: ast.AST) -> Optional[str]:
    """`x.foo(...)` -> 'foo'; None for anything that is not a method call."""
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def argument(call: ast.Call, name: Optional[str], position: Optional[int] = None) -> Optional[ast.expr]:
    """The argument passed as keyword `name` or at `position` (0-based), if any (a position at or after a
    `*args` cannot be read)."""
    if name is not None:
        for kw in call.keywords:
            if kw.arg == name:
                return kw.value
    if position is not None and position < len(call.args):
        if not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
            return call.args[position]
    return None


def keyword(call: ast.Call, name: str) -> Optional[ast.keyword]:
    """The `name=...` keyword node of a call (for its position or to edit it), if passed by keyword."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def has_star_args(call: ast.Call) -> bool:
    """`f(*a)` / `f(**kw)`: arguments that cannot be read statically."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords)


def constant(node: Optional[ast.AST], default: object = None) -> object:
    """The value of a literal (negative numbers included), else `default`."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    return default


def parent_map(root: ast.AST, nodes: Optional[Iterable[ast.AST]] = None) -> Dict[int, ast.AST]:
    """id(child) -> parent for every node under `root` (or only for the children of `nodes`, e.g. the walk's
    ancestor stack). Build it once per subtree you need it for: it walks the whole subtree."""
    parents = ast.walk(root) if nodes is None else nodes
    return {id(child): parent for parent in parents for child in ast.iter_child_nodes(parent)}
