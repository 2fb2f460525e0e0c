"""Syntax-tree helpers of the analysis layer (stdlib `ast` only): dotted names of calls, fast walks that skip
leaves and fields that never hold a node, the statements of a body and the nodes of one statement."""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Sequence, Tuple

from ..astutil import contains, dotted_name  # noqa: F401  (contains: the layer imports it from here)

LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


call_text = dotted_name  # (the analysis layer's name for it)


_STATEMENT_LISTS = ("body", "orelse", "finalbody")
SKIP_FIELDS = frozenset({"ctx", "type_comment", "kind"})
# Fields that only ever hold strings, numbers or None (never a node): not looked into.
_SCALAR_FIELDS = frozenset({
    ("Name", "id"), ("Constant", "value"), ("Attribute", "attr"), ("keyword", "arg"), ("arg", "arg"),
    ("alias", "name"), ("alias", "asname"), ("ImportFrom", "module"), ("ImportFrom", "level"),
    ("Global", "names"), ("Nonlocal", "names"), ("FormattedValue", "conversion"), ("comprehension", "is_async"),
    ("FunctionDef", "name"), ("AsyncFunctionDef", "name"), ("ClassDef", "name"), ("ExceptHandler", "name"),
    ("MatchAs", "name"), ("MatchStar", "name"), ("MatchMapping", "rest"), ("MatchClass", "kwd_attrs"),
    ("TypeIgnore", "lineno"), ("TypeIgnore", "tag"),
})
CHILD_FIELDS: Dict[type, tuple] = {}  # node type -> the fields that may hold a node (child_fields)


def child_fields(cls: type) -> tuple:
    """The fields of a node type that may hold a node (computed once per type)."""
    fields = CHILD_FIELDS.get(cls)
    if fields is None:
        fields = CHILD_FIELDS[cls] = tuple(f for f in cls._fields
                                           if f not in SKIP_FIELDS and (cls.__name__, f) not in _SCALAR_FIELDS)
    return fields


# Node types that can have no child node (Name, Constant, operators, ...): nothing to look into.
LEAF_TYPES = frozenset(
    cls for cls in vars(ast).values()
    if isinstance(cls, type) and issubclass(cls, ast.AST) and getattr(cls, "_fields", None) is not None
    and not child_fields(cls)
)


def find_nodes(root: ast.AST, types: Tuple[type, ...]) -> List[ast.AST]:
    """The nodes of exactly these `types` under `root` (itself included), in no set order: ast.walk without
    looking into leaves and the fields that never hold a node (~3x faster on whole modules)."""
    found: List[ast.AST] = []
    todo = [root]
    pop, push, leaves, node_type = todo.pop, todo.append, LEAF_TYPES, ast.AST
    while todo:
        node = pop()
        cls = node.__class__
        if cls in types:
            found.append(node)
        for name in CHILD_FIELDS.get(cls) or child_fields(cls):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if item.__class__ not in leaves and isinstance(item, node_type):
                        push(item)
            elif value.__class__ not in leaves and isinstance(value, node_type):
                push(value)
    return found


def child_nodes(node: ast.AST) -> List[ast.AST]:
    """ast.iter_child_nodes as a list, without the leaves (names, constants, operators: they hold no call,
    loop or function) and the fields that never hold a node (for the boolean step scans)."""
    out: List[ast.AST] = []
    cls = node.__class__
    for name in CHILD_FIELDS.get(cls) or child_fields(cls):
        value = getattr(node, name, None)
        if value.__class__ is list:
            out.extend(v for v in value if v.__class__ not in LEAF_TYPES and isinstance(v, ast.AST))
        elif value.__class__ not in LEAF_TYPES and isinstance(value, ast.AST):
            out.append(value)
    return out


def top_level_statements(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    """Module statements, looking into top-level if/try/with blocks (guarded imports)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for name in ("body", "orelse", "finalbody"):
                yield from top_level_statements(getattr(stmt, name, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                yield from top_level_statements(handler.body)


SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# Statements that hold statements of the body they are in.
NESTING_TYPES = LOOP_TYPES + (ast.If, ast.With, ast.AsyncWith, ast.Try) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()) + ((ast.Match,) if hasattr(ast, "Match") else ())
_BLOCK_TYPES = SCOPE_TYPES + NESTING_TYPES


def bodies(tree: ast.Module) -> Iterator[Tuple[str, ast.AST]]:
    """(owner qualname, node) for the module ('') and every top-level function and method."""
    yield "", tree
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt.name, stmt
        elif isinstance(stmt, ast.ClassDef):
            for item in stmt.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{stmt.name}.{item.name}", item


def statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested blocks included, nested functions and classes not entered."""
    todo = list(reversed(body))
    while todo:
        stmt = todo.pop()
        yield stmt
        if not isinstance(stmt, NESTING_TYPES):
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if block:
                todo.extend(reversed(block))
        for handler in getattr(stmt, "handlers", ()) or ():
            todo.extend(reversed(handler.body))
        for case in getattr(stmt, "cases", ()) or ():
            todo.extend(reversed(case.body))


def expressions(stmt: ast.stmt) -> List[ast.AST]:
    """The nodes of a statement that belong to it alone: a compound statement's header, or a simple
    statement whole (nested bodies are statements of their own in `statements`)."""
    if not isinstance(stmt, _BLOCK_TYPES):
        return walk_nodes(stmt)
    nodes: List[ast.AST] = []
    if isinstance(stmt, SCOPE_TYPES):
        return nodes
    for name in ("test", "iter", "target", "subject"):
        value = getattr(stmt, name, None)
        if value is not None:
            nodes += walk_nodes(value)
    for item in getattr(stmt, "items", ()) or ():
        nodes += walk_nodes(item)
    return nodes


# Fields that never hold a node a caller here looks at: contexts and operators (leaves), names and flags.
_PLAIN_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "asname", "module", "level", "kind",
                           "conversion", "is_async", "simple", "type_comment"})
_EXPR_FIELDS: Dict[type, Tuple[str, ...]] = {ast.Constant: ()}  # node class -> the fields that may hold nodes


def walk_nodes(node: ast.AST) -> List[ast.AST]:
    """ast.walk (the same order) without the leaves no caller here looks at: contexts and operators."""
    nodes = [node]
    append = nodes.append
    fields = _EXPR_FIELDS
    AST = ast.AST
    for node in nodes:  # (breadth first: the list grows while it is read)
        names = fields.get(node.__class__)
        if names is None:
            names = fields[node.__class__] = tuple(f for f in node._fields if f not in _PLAIN_FIELDS)
        for name in names:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
            elif isinstance(value, AST):
                append(value)
    return nodes
