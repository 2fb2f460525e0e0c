"""What a file imports (stdlib `ast` only). As a fix sees it (`import_facts`): the modules it binds by name, the
aliases it gives them, the ones it loads unconditionally and the ones it imports only conditionally or inside
a function (`FileContext.import_status`; the fixer plans its imports from the same facts). And the names it
binds where an import may fail (`optional_imports`)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Set, Tuple

from .nodes import top_level_statements


@dataclass
class ImportFacts:
    bound: Set[str] = field(default_factory=set)  # dotted modules usable by name (`import a.b` -> a, a.b)
    aliases: Dict[str, str] = field(default_factory=dict)  # module -> alias of `import module as alias`
    loaded: Set[str] = field(default_factory=set)  # modules (and parents) imported unconditionally in any form
    guarded: Set[str] = field(default_factory=set)  # modules imported only conditionally / in functions


def _parents(module: str) -> List[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def modules_of(stmt: ast.stmt) -> List[str]:
    if isinstance(stmt, ast.Import):
        return [alias.name for alias in stmt.names]
    if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
        return [stmt.module] + [f"{stmt.module}.{a.name}" for a in stmt.names if a.name != "*"]
    return []


def import_facts(tree: ast.Module) -> ImportFacts:
    facts = ImportFacts()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    facts.aliases.setdefault(alias.name, alias.asname)
                else:
                    facts.bound.update(_parents(alias.name))
        for module in modules_of(stmt):
            facts.loaded.update(_parents(module))
    top = {id(stmt) for stmt in tree.body}
    for node in _nested_statements(tree.body):  # imports anywhere else: conditional, or inside functions
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:  # and classes
            for module in modules_of(node):
                facts.guarded.update(m for m in _parents(module) if m not in facts.loaded)
    return facts


def _nested_statements(body: Sequence[ast.stmt]) -> List[ast.stmt]:
    """Every statement in `body` and in the bodies under it (only statements can hold an import)."""
    found: List[ast.stmt] = []
    stack = list(body)
    while stack:
        stmt = stack.pop()
        found.append(stmt)
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                stack.extend(inner)
        for part in getattr(stmt, "handlers", None) or getattr(stmt, "cases", None) or ():
            stack.extend(part.body)
    return found


def optional_imports(tree: ast.Module) -> Dict[str, Tuple[str, ...]]:
    """Names bound where an import may fail, each with the modules that block imports: names imported in a
    module-level `try:` whose handler catches ImportError (or Exception, or anything), the names that
    `try`/`except` assigns (`HAS_FLASH = True`, `FusedAdam = None`), and names bound under a module-level
    `if is_<x>_available():`. Rules decide which of those packages matter to them."""
    optional: Dict[str, Tuple[str, ...]] = {}
    for stmt in top_level_statements(tree.body):
        if isinstance(stmt, ast.Try) and _guards_import(stmt):
            parts = [stmt.body] + [h.body for h in stmt.handlers] + [stmt.orelse]
        elif isinstance(stmt, ast.If) and _availability_test(stmt.test):
            parts = [stmt.body]  # `if is_fp8_available(): import transformer_engine...`
        else:
            continue
        inner = [s for part in parts for s in top_level_statements(part)]
        modules = tuple(m for s in inner for m in _imported_modules(s))
        for stmt_inner in inner:
            for name in _bound_names(stmt_inner):
                optional[name] = optional.get(name, ()) + modules
    return optional


IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError"})


def _guards_import(node: ast.Try) -> bool:
    """A `try:` around an import whose handler catches the import failing."""
    if not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body):
        return False
    for handler in node.handlers:
        caught = handler.type
        names = [caught] if caught is None or not isinstance(caught, ast.Tuple) else caught.elts
        for name in names:
            if name is None or (isinstance(name, ast.Name) and name.id in IMPORT_ERRORS) or (
                    isinstance(name, ast.Attribute) and name.attr in IMPORT_ERRORS):
                return True
    return False


def _availability_test(test: ast.expr) -> bool:
    """`is_fp8_available()`, `is_flash_attn_available() and x`: a test that an optional package is there."""
    return any(isinstance(n, ast.Call) and "available" in (
        n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id if isinstance(n.func, ast.Name) else "")
        for n in ast.walk(test))


def _imported_modules(stmt: ast.stmt) -> List[str]:
    """`import a.b` -> ['a.b']; `from a.b import c` -> ['a.b.c']."""
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
        return [f"{stmt.module}.{a.name}" for a in stmt.names]
    return []


def _bound_names(stmt: ast.stmt) -> Set[str]:
    """Names a simple statement binds: imports and assignment targets."""
    names: Set[str] = set()
    if isinstance(stmt, ast.Import):
        names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    elif isinstance(stmt, ast.ImportFrom):
        names.update(a.asname or a.name for a in stmt.names if a.name != "*")
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names
