"""What a file imports, as a fix sees it (stdlib `ast` only): the modules it binds by name, the aliases it gives
them, the ones it loads unconditionally and the ones it imports only conditionally or inside a function
(`FileContext.import_status`; the fixer plans its imports from the same facts)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Set


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
    for node in ast.walk(tree):  # imports anywhere else: conditional, or inside functions and classes
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in tree.body:
            for module in modules_of(node):
                facts.guarded.update(m for m in _parents(module) if m not in facts.loaded)
    return facts
