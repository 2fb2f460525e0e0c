"""The one walk per file: keeps the semantic model current and dispatches nodes to rule handlers.

Statements whose lines hold none of the enabled rules' trigger texts are not descended into (their
bindings and imports are still recorded); compound statements are always entered so that scopes,
loops and guards stay known.
"""
from __future__ import annotations

import ast
from itertools import accumulate
from typing import Callable, Dict, List, Optional, Sequence, Type

from ..analysis.semantic import CHILD_FIELDS, LEAF_TYPES, FileContext, Scope, child_fields

AST = ast.AST

Handler = Callable[[ast.AST], None]


class Stopped(Exception):
    """The walk was told to stop (an editor's newer text made this lint useless)."""


class Walker:
    def __init__(self, ctx: FileContext, table: Dict[Type[ast.AST], List[Handler]],
                 hit_lines: Optional[List[int]], stop: Optional[Callable[[], bool]] = None) -> None:
        self.ctx = ctx
        self.table = table
        self.hit_lines = hit_lines
        self.stop = stop  # asked between top-level statements: True raises Stopped
        # hits_upto[n]: how many hit lines are <= n (a line range holds a hit iff the count grows)
        self.hits_upto: Optional[List[int]] = None
        if hit_lines is not None:
            flags = bytearray((hit_lines[-1] if hit_lines else 0) + 1)
            for line in hit_lines:
                flags[line] = 1
            self.hits_upto = list(accumulate(flags))
        self.skip = LEAF_TYPES.difference(table)  # leaves without handlers: nothing to do there
        self.docstrings_inert = ast.Expr not in table and ast.Constant not in table

    def hit(self, first: int, last: int) -> bool:
        upto = self.hits_upto
        if upto is None:
            return True
        top = len(upto) - 1  # no hit after the last hit line
        return upto[last if last < top else top] > upto[first - 1 if first - 1 < top else top]

    def run(self) -> None:
        if self.stop is None:
            self.stmts(self.ctx.tree.body)
            return
        for stmt in self.ctx.tree.body:
            if self.stop():
                raise Stopped()
            self.stmt(stmt)

    # ----------------------------------------------------------- statements
    def stmts(self, body: List[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        ctx = self.ctx
        cls = node.__class__
        method = _COMPOUND.get(cls)
        if method is not None:
            handlers = self.table.get(cls)
            if handlers:
                ctx.stack.append(node)
                for handler in handlers:
                    handler(node)
                ctx.stack.pop()
            method(self, node)
            return
        upto = self.hits_upto
        if upto is None:
            self.expr(node)
        else:
            top = len(upto) - 1
            first, last = node.lineno - 1, node.end_lineno or node.lineno
            if upto[last if last < top else top] > upto[first if first < top else top]:
                self.expr(node)
        if cls is ast.Assign:
            for target in node.targets:
                ctx.bind_target(target, node.value, node)
        elif cls is ast.AnnAssign:
            ctx.bind_target(node.target, node.value, node)
        elif cls is ast.AugAssign:
            ctx.bind_target(node.target, None, node)
        elif cls is ast.Import or cls is ast.ImportFrom:
            ctx.record_import(node)

    def expr(self, node: ast.AST) -> None:
        """Generic recursive visit with dispatch (expressions and simple statements)."""
        cls = node.__class__
        handlers = self.table.get(cls)
        stack = self.ctx.stack
        stack.append(node)
        if handlers:
            for handler in handlers:
                handler(node)
        skip = self.skip
        fields = CHILD_FIELDS.get(cls) or child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST) and item.__class__ not in skip:
                        self.expr(item)
            elif isinstance(value, AST) and value.__class__ not in skip:
                self.expr(value)
        stack.pop()

    def header_hit(self, node: ast.AST) -> bool:
        """Do the lines of a compound statement's header (decorators included) hold a trigger?"""
        body = getattr(node, "body", None)
        last = body[0].lineno - 1 if body else node.end_lineno
        first = node.lineno
        for decorator in getattr(node, "decorator_list", ()):  # decorators stand above the `def` line
            first = min(first, decorator.lineno)
        return self.hit(first, max(last, node.lineno))

    def header(self, node: ast.stmt, parts: Sequence[Optional[ast.AST]]) -> None:
        """Visit a compound statement's header expressions when its lines are hit."""
        if self.header_hit(node):
            self.visit_parts(node, parts)

    def visit_parts(self, node: ast.AST, parts: Sequence[Optional[ast.AST]]) -> None:
        self.ctx.stack.append(node)
        for part in parts:
            if part is None:
                continue
            if isinstance(part, list):
                for item in part:
                    if item is not None:
                        self.expr(item)
            else:
                self.expr(part)
        self.ctx.stack.pop()

    def function(self, node: ast.AST) -> None:
        ctx = self.ctx
        if self.header_hit(node):  # (the parts list is built only then)
            args = node.args
            self.visit_parts(node, [node.decorator_list, args.defaults, args.kw_defaults, node.returns]
                             + [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs])
        ctx.bind_name(node.name, None, node)
        body = node.body
        if self.hit_lines is not None and not self.hit(self.body_start(body), node.end_lineno or node.lineno):
            self.record_only(body)  # no trigger in the whole body: nothing there for a handler
            return  # (what record_only keeps does not depend on the function's own scope)
        ctx.enter_function(node)
        ctx.stack.append(node)
        self.stmts(body)
        ctx.stack.pop()
        ctx.scopes.pop()

    def body_start(self, body: List[ast.stmt]) -> int:
        """The first line of a body that a handler could care about: a docstring (which names
        `Tensor`, `tensor`, ...) does not count unless some rule handles its node types."""
        first = body[0]
        if (first.__class__ is ast.Expr and first.value.__class__ is ast.Constant
                and isinstance(first.value.value, str) and self.docstrings_inert):
            return body[1].lineno if len(body) > 1 else 1 << 30
        return first.lineno

    def record_only(self, body: List[ast.stmt]) -> None:
        """Walk a body that holds no trigger, keeping only what outlives it: imports, `self.X = ...`
        attributes of the enclosing class, and nested classes (their kinds)."""
        ctx = self.ctx
        for stmt in body:
            cls = stmt.__class__
            if cls is ast.Assign:
                for target in stmt.targets:
                    if target.__class__ is ast.Attribute:
                        ctx.bind_target(target, stmt.value, stmt)
            elif cls is ast.AnnAssign:
                if stmt.target.__class__ is ast.Attribute:
                    ctx.bind_target(stmt.target, stmt.value, stmt)
            elif cls is ast.Import or cls is ast.ImportFrom:
                ctx.record_import(stmt)
            elif cls is ast.ClassDef:
                self.class_def(stmt)
            elif cls in _COMPOUND:
                for name in _BODIES:
                    inner = getattr(stmt, name, None)
                    if inner:
                        self.record_only(inner)
                for part in getattr(stmt, "handlers", None) or getattr(stmt, "cases", None) or ():
                    self.record_only(part.body)

    def class_def(self, node: ast.ClassDef) -> None:
        ctx = self.ctx
        self.header(node, [node.decorator_list, node.bases, [k.value for k in node.keywords]])
        kind = ctx.class_kind(node.bases)
        ctx.scopes.append(Scope(node, "class", node.name, class_kind=kind))
        ctx.stack.append(node)
        self.stmts(node.body)
        ctx.stack.pop()
        ctx.scopes.pop()
        ctx.local_classes[node.name] = kind
        ctx.bind_name(node.name, None, node)

    def loop(self, node: ast.AST) -> None:
        ctx = self.ctx
        if isinstance(node, ast.While):
            self.header(node, [node.test])
        else:
            self.header(node, [node.iter, node.target])
            ctx.bind_target(node.target, None, node)
        ctx.loops.append(node)
        ctx.stack.append(node)
        self.stmts(node.body)
        ctx.stack.pop()
        ctx.loops.pop()
        self.stmts(node.orelse)

    def if_stmt(self, node: ast.If) -> None:
        ctx = self.ctx
        self.header(node, [node.test])
        ctx.stack.append(node)
        ctx.ifs.append((node, False))
        self.stmts(node.body)
        ctx.ifs[-1] = (node, True)
        self.stmts(node.orelse)
        ctx.ifs.pop()
        ctx.stack.pop()

    def with_stmt(self, node: ast.AST) -> None:
        ctx = self.ctx
        self.header(node, [[i.context_expr for i in node.items], [i.optional_vars for i in node.items]])
        for item in node.items:
            if item.optional_vars is not None:
                ctx.bind_target(item.optional_vars, None, node)
        ctx.withs.append(node)
        ctx.stack.append(node)
        self.stmts(node.body)
        ctx.stack.pop()
        ctx.withs.pop()

    def try_stmt(self, node: ast.AST) -> None:
        ctx = self.ctx
        ctx.stack.append(node)
        self.stmts(node.body)
        for handler in node.handlers:
            self.header(handler, [handler.type])
            if handler.name:
                ctx.bind_name(handler.name, None, handler)
            self.stmts(handler.body)
        self.stmts(node.orelse)
        self.stmts(node.finalbody)
        ctx.stack.pop()

    def match_stmt(self, node: ast.AST) -> None:
        self.header(node, [node.subject])
        self.ctx.stack.append(node)
        for case in node.cases:
            if case.guard is not None and self.hit(case.guard.lineno, case.guard.end_lineno):
                self.expr(case.guard)
            self.stmts(case.body)
        self.ctx.stack.pop()


_BODIES = ("body", "orelse", "finalbody")
_COMPOUND: Dict[type, Callable[[Walker, ast.AST], None]] = {
    ast.FunctionDef: Walker.function,
    ast.AsyncFunctionDef: Walker.function,
    ast.ClassDef: Walker.class_def,
    ast.For: Walker.loop,
    ast.AsyncFor: Walker.loop,
    ast.While: Walker.loop,
    ast.If: Walker.if_stmt,
    ast.With: Walker.with_stmt,
    ast.AsyncWith: Walker.with_stmt,
    ast.Try: Walker.try_stmt,
}
if hasattr(ast, "TryStar"):
    _COMPOUND[ast.TryStar] = Walker.try_stmt
if hasattr(ast, "Match"):
    _COMPOUND[ast.Match] = Walker.match_stmt
