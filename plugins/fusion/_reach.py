"""Which assignments of a local name may reach a use of it, inside one function.

The semantic model keeps the last binding of a name in text order; a matcher that follows names through
`if`/`else` needs more: an assignment in the `if` branch never reaches a use in the `else` branch, and after
`if mask is not None: s = s + mask` both the masked and the unmasked value reach the softmax. Assignments
are indexed per function (nested functions, classes and lambdas left out), each with the branches it sits
in, and `reaching(name)` lists the ones that may hold at the use, the last in text order first.
"""
from __future__ import annotations

import ast
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

# A branch: (id of the compound statement, which of its bodies, whether its bodies exclude each other).
Arm = Tuple[int, str, bool]
MAX_REACHING = 6
_CACHE: Dict[int, Tuple[ast.AST, "FunctionDefs"]] = {}
_CACHE_SIZE = 64


class Def(NamedTuple):
    """One assignment: `value` (None: unknown), the unpacked element `index`, its statement and branches."""

    value: Optional[ast.expr]
    index: Optional[int]
    stmt: ast.stmt
    arms: Tuple[Arm, ...]


class FunctionDefs:
    """The assignments to plain names in one function body, in text order, with the branches each sits in."""

    def __init__(self, func: ast.AST) -> None:
        self.func = func
        self.by_name: Dict[str, List[Def]] = {}
        self.nonlocal_names = set()
        args = func.args
        self.params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        self.params.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
        self._block(func.body, ())

    # ------------------------------------------------------------------ index
    def _block(self, stmts: List[ast.stmt], arms: Tuple[Arm, ...]) -> None:
        for stmt in stmts:
            self._record(stmt, arms)
            for body, arm in _bodies(stmt):
                self._block(body, arms + ((arm,) if arm is not None else ()))

    def _record(self, stmt: ast.stmt, arms: Tuple[Arm, ...]) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self._target(target, stmt.value, stmt, arms)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._target(stmt.target, stmt.value, stmt, arms)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            # `s += b` holds `s + b`, the `s` read where the statement starts (the assignment before it)
            left = ast.copy_location(ast.Name(id=stmt.target.id, ctx=ast.Load()), stmt.target)
            value = ast.copy_location(ast.BinOp(left=left, op=stmt.op, right=stmt.value), stmt)
            ast.fix_missing_locations(value)
            self._add(stmt.target.id, Def(value, None, stmt, arms))
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._target(stmt.target, None, stmt, arms + ((id(stmt), "loop", False),))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, None, stmt, arms)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._add(stmt.name, Def(None, None, stmt, arms))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                self._add((alias.asname or alias.name).split(".")[0], Def(None, None, stmt, arms))
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.nonlocal_names.update(stmt.names)

    def _target(self, target: ast.AST, value: Optional[ast.expr], stmt: ast.stmt, arms: Tuple[Arm, ...]) -> None:
        if isinstance(target, ast.Name):
            self._add(target.id, Def(value, None, stmt, arms))
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    self._add(element.id, Def(None if starred else value, None if starred else index, stmt, arms))
                else:
                    self._target(element, None, stmt, arms)
        elif isinstance(target, ast.Starred):
            self._target(target.value, None, stmt, arms)

    def _add(self, name: str, definition: Def) -> None:
        self.by_name.setdefault(name, []).append(definition)

    # ------------------------------------------------------------------ queries
    def is_local(self, name: str) -> bool:
        return name not in self.nonlocal_names and (name in self.by_name or name in self.params)

    def reaching(self, name: ast.Name) -> List[Def]:
        """The assignments of `name` made before it (in text order) that may hold where it is read, the last
        first: one in a branch that excludes the use's branch is left out, and an assignment that runs on
        every path between an earlier one and the use hides the earlier one."""
        start = (name.lineno, name.col_offset)
        before = [d for d in self.by_name.get(name.id, ()) if _end(d.stmt) <= start]
        if not before or not before[-1].arms:
            return before[-1:]  # none, or the last in straight-line code: it runs on every path to the use
        use_arms = set(self._arms_at(start))
        found: List[Def] = []
        hiding: List[Set[Arm]] = []
        for definition in reversed(before):
            if _excludes(definition.arms, use_arms):
                continue  # the other branch of an if/else (or match) the use sits in
            own = set(definition.arms) - use_arms  # branches the use is not in
            if any(arms <= own for arms in hiding):
                continue  # a later assignment on every path through this one replaced it
            found.append(definition)
            if not own or len(found) >= MAX_REACHING:
                break
            hiding.append(own)
        return found

    def _arms_at(self, position: Tuple[int, int]) -> List[Arm]:
        """The branches of the function that hold `position`."""
        arms: List[Arm] = []
        stmts = self.func.body
        while stmts:
            stmt = next((s for s in stmts if _start(s) <= position < _end(s)), None)
            if stmt is None:
                break
            inner = None
            for body, arm in _bodies(stmt):
                if body and _start(body[0]) <= position < _end(body[-1]):
                    inner = body
                    if arm is not None:
                        arms.append(arm)
                    break
            stmts = inner
        return arms


def _bodies(stmt: ast.stmt) -> List[Tuple[List[ast.stmt], Optional[Arm]]]:
    """The statement lists inside a compound statement, each with the branch it is (None: runs whenever the
    statement does). `if`/`else` and `match` cases exclude each other; loops, handlers and `try`'s `else` may
    or may not run."""
    key = id(stmt)
    if isinstance(stmt, ast.If):
        return [(stmt.body, (key, "body", True)), (stmt.orelse, (key, "orelse", True))]
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return [(stmt.body, (key, "loop", False)), (stmt.orelse, (key, "loop-else", False))]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [(stmt.body, None)]
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        bodies: List[Tuple[List[ast.stmt], Optional[Arm]]] = [(stmt.body, None)]
        bodies += [(h.body, (key, f"handler{i}", False)) for i, h in enumerate(stmt.handlers)]
        return bodies + [(stmt.orelse, (key, "else", False)), (stmt.finalbody, None)]
    if type(stmt).__name__ == "Match":
        return [(case.body, (key, f"case{i}", True)) for i, case in enumerate(stmt.cases)]
    return []


def _excludes(arms: Tuple[Arm, ...], use_arms: Set[Arm]) -> bool:
    """Is one of `arms` the other body of an if/else (or another case of a match) that the use sits in?"""
    return any(arm[2] and arm not in use_arms and any(use[0] == arm[0] for use in use_arms) for arm in arms)


def _start(node: ast.AST) -> Tuple[int, int]:
    return node.lineno, node.col_offset


def _end(node: ast.AST) -> Tuple[int, int]:
    return (node.end_lineno or node.lineno), (node.end_col_offset or 0)


def function_defs(func: ast.AST) -> FunctionDefs:
    """The (cached) index of one function."""
    cached = _CACHE.get(id(func))
    if cached is not None and cached[0] is func:
        return cached[1]
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    defs = FunctionDefs(func)
    _CACHE[id(func)] = (func, defs)
    return defs


def encloses(func: ast.AST, node: ast.AST) -> bool:
    """Does `func` hold `node` (by position)?"""
    position = getattr(node, "lineno", None), getattr(node, "col_offset", None)
    return position[0] is not None and _start(func) <= position < _end(func)


def following(func: ast.AST, stmt: ast.stmt) -> List[ast.stmt]:
    """The statements that run after `stmt` in `func` in text order: the rest of its statement list, then the
    rest of each enclosing one (the statements after the `if` it sits in, ...)."""
    def search(block: List[ast.stmt]) -> Optional[List[ast.stmt]]:
        for i, candidate in enumerate(block):
            if candidate is stmt:
                return block[i + 1:]
            for body, _ in _bodies(candidate):
                found = search(body)
                if found is not None:
                    return found + block[i + 1:]
        return None
    return search(func.body) or []
