"""Where the walk is, as the semantic model tracks it: scopes and the values last bound to local names (a simple
dataflow), and whether the code there is training code (tests, benchmarks, offline tools, weight init and
loading, data collation are not: see training_code). A facet of FileContext (semantic.py), which provides
`scopes`, `aliases`, `constants`, `class_scope`, `qualname()`, `path`, `root` and `tree`.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from . import training_code
from .nodes import FUNC_TYPES, contains
from .records import Reason, Role
from .steps import _called_local_names

_STATEMENT_LISTS = ("body", "orelse", "finalbody")
# statement type -> its fields that hold statements (for the types that have any)
_BODY_FIELDS = {cls: tuple(f for f in _STATEMENT_LISTS if f in cls._fields) for cls in vars(ast).values()
                if isinstance(cls, type) and issubclass(cls, ast.stmt) and set(_STATEMENT_LISTS) & set(cls._fields)}


@dataclass
class Binding:
    """The value last bound to a local name: `value` (or its `index`-th unpacked element)."""

    value: Optional[ast.expr]
    index: Optional[int] = None
    stmt: Optional[ast.stmt] = None
    previous: Optional["Binding"] = None  # the binding this one replaced (`x = f(x)` history)


@dataclass
class Scope:
    node: ast.AST
    kind: str  # "module", "class", "function"
    name: str = ""
    class_kind: Optional[str] = None  # for classes: "module" | "cell" | "function" | None
    hot: bool = False  # forward/construct/autograd method (or nested in one)
    reason: Optional[Reason] = None  # why a function is hot or per-step when the reason is in another place
    step: bool = False  # a function the project model says runs on every training step
    replaced: Optional[Reason] = None  # why the function never runs (monkey-patched away)
    role: Optional[Role] = None  # the project model's role of the function (with its reason)
    bindings: Dict[str, Optional[Binding]] = field(default_factory=dict)
    params: Set[str] = field(default_factory=set)
    defaults: Dict[str, ast.expr] = field(default_factory=dict)
    attributes: Dict[str, ast.expr] = field(default_factory=dict)  # for classes: self.X = value


class ScopeQueries:
    """FileContext's questions about names bound in the current scopes, and about training code."""

    scopes: List[Scope]
    aliases: Dict[str, Optional[str]]
    constants: Dict[str, ast.expr]
    path: str
    root: Optional[str]
    tree: ast.Module
    _file_role: Optional[Tuple[Optional[str]]]
    _scope_roles: Dict[int, Optional[str]]
    _role_spans: Optional[List[Tuple[int, int, str]]]
    _local_calls: Optional[Set[str]]

    def bind_target(self, target: ast.AST, value: Optional[ast.expr], stmt: Optional[ast.stmt]) -> None:
        """Record that `target` now holds `value` (None: unknown)."""
        scope = self.scopes[-1]
        if isinstance(target, ast.Name):
            self.bind_name(target.id, value, stmt)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name) and scope.kind != "class":
                    previous = scope.bindings.get(element.id)
                    scope.bindings[element.id] = (Binding(value, index, stmt, previous)
                                                  if value is not None else None)
                else:
                    self.bind_target(element, None, stmt)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, None, stmt)
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
              and target.value.id == "self" and value is not None):
            cls = self.class_scope
            if cls is not None:
                cls.attributes.setdefault(target.attr, value)

    def bind_name(self, name: str, value: Optional[ast.expr], stmt: Optional[ast.AST]) -> None:
        """Record that the name `name` now holds `value` (None: unknown)."""
        scope = self.scopes[-1]
        if scope.kind != "class":
            scope.bindings[name] = Binding(value, None, stmt, scope.bindings.get(name)) if value is not None else None
        if scope.kind == "module" and name in self.aliases:
            self.aliases[name] = None  # a module-level name shadows an import

    def binding(self, name: str) -> Optional[Binding]:
        """What `name` was last bound to in the enclosing function, if known."""
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                if name in scope.bindings:
                    return scope.bindings[name]
                if name in scope.params:
                    return None
        return self.scopes[0].bindings.get(name)

    def binding_before(self, name: str, node: ast.AST) -> Optional[Binding]:
        """The binding of `name` in effect where `node` starts: a binding made by a statement that
        ends after `node` (the `x` inside `x = f(x)`) is skipped for the one it replaced."""
        bound = self.binding(name)
        start = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        while bound is not None and bound.stmt is not None and (
                (getattr(bound.stmt, "end_lineno", 0) or 0, getattr(bound.stmt, "end_col_offset", 0) or 0) > start):
            bound = bound.previous
        return bound

    def resolve(self, node: ast.expr, depth: int = 4) -> ast.expr:
        """Follow local names to the expression they were bound to (unpacking excluded)."""
        while depth and isinstance(node, ast.Name):
            bound = self.binding(node.id)
            if bound is None or bound.index is not None or bound.value is None:
                break
            node = bound.value
            depth -= 1
        return node

    def int_value(self, node: Optional[ast.expr]) -> Optional[int]:
        """An int read from a literal, a local binding, a parameter default or a module constant."""
        for _ in range(4):
            if node is None:
                return None
            if isinstance(node, ast.Constant):
                value = node.value
                return value if isinstance(value, int) and not isinstance(value, bool) else None
            if not isinstance(node, ast.Name):
                return None
            name = node.id
            node = None
            for scope in reversed(self.scopes):
                if scope.kind != "function":
                    continue
                if name in scope.bindings:
                    bound = scope.bindings[name]
                    node = bound.value if bound and bound.index is None else None
                    break
                if name in scope.defaults:
                    node = scope.defaults[name]
                    break
                if name in scope.params:
                    return None
            else:
                node = self.constants.get(name)
        return None

    def non_training_reason(self, node: Optional[ast.AST] = None) -> Optional[str]:
        """Why the code at `node` (default: where the walk is) is not training code -- 'test code', 'a
        benchmark', 'weight initialisation', ... (see `training_code`) -- or None for training code."""
        if self._file_role is None:
            self._file_role = (training_code.path_reason(project_relative(self.path, self.root)),)
        if self._file_role[0] is not None:
            return self._file_role[0]
        innermost = self.scopes[-1].node
        if node is None or (len(self.scopes) > 1 and contains(innermost, node)):
            for scope in self.scopes[1:]:
                reason = self._scope_role(scope)
                if reason is not None:
                    return reason
            return None
        return self._role_at(node)

    def in_non_training_code(self, node: Optional[ast.AST] = None) -> bool:
        """Tests, benchmarks, offline tools, weight init/loading, data collation: not training code."""
        return self.non_training_reason(node) is not None

    def _scope_role(self, scope: Scope) -> Optional[str]:
        key = id(scope.node)
        if key not in self._scope_roles:
            self._scope_roles[key] = self._def_role(scope.node)
        return self._scope_roles[key]

    def _def_role(self, node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.ClassDef):
            return training_code.class_reason(
                node.name, [self.qualname(b) or (b.id if isinstance(b, ast.Name) else None) for b in node.bases])
        if isinstance(node, FUNC_TYPES):
            reason = training_code.function_reason(node.name)
            if reason == "test code" and node.name in self._called_names():
                return None  # pytest never runs a test its own file calls: `main()` calling `test_train(cfg)` trains
            return reason
        return None

    def _called_names(self) -> Set[str]:
        """Names this file calls as `f(...)` / `self.f(...)` outside its `if __name__ == "__main__":` block
        (a script running its own tests there is still running tests); computed once, only when asked."""
        if self._local_calls is None:
            self._local_calls = set()
            for stmt in self.tree.body:
                if not _is_main_guard(stmt):
                    self._local_calls.update(_called_local_names(stmt))
        return self._local_calls

    def _role_at(self, node: ast.AST) -> Optional[str]:
        """The reason of the outermost function/class that contains `node`, by position (after the walk)."""
        if self._role_spans is None:
            self._role_spans = []
            todo: List[ast.AST] = list(self.tree.body)
            while todo:
                item = todo.pop()
                if isinstance(item, (ast.ClassDef,) + FUNC_TYPES):
                    reason = self._def_role(item)
                    if reason is not None:
                        self._role_spans.append((item.lineno, item.end_lineno or item.lineno, reason))
                        continue
                for name in _BODY_FIELDS.get(item.__class__, ()):  # (its child statements, in ast's order)
                    todo.extend(getattr(item, name))
        line = getattr(node, "lineno", 0)
        for first, last, reason in self._role_spans:
            if first <= line <= last:
                return reason
        return None


def project_relative(path: str, root: Optional[str]) -> str:
    """`path` relative to the project `root` when it lies below it, else `path` as given."""
    if root:
        absolute = os.path.abspath(path)
        below = root if root.endswith(os.sep) else root + os.sep
        if absolute.startswith(below):  # (what relpath gives, without its work)
            rel = absolute[len(below):]
        else:
            try:
                rel = os.path.relpath(absolute, root)
            except ValueError:
                return path
        if not rel.startswith(".."):
            return rel
    return path


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
