"""The imports a fix adds or leaves behind (stdlib `ast` and text only; used by the fixer).

- Where a needed module is already imported: by name (`import torch_npu`, `import torch_npu as tnpu`: the
  fix's text is renamed to the alias), loaded in another form (`from torch_npu.contrib import ...`: enough
  for a fix that does not name it), or only conditionally (under `try`/`if`/`with`, in a function or
  class): then the fix is not applied, since its code would run where the import may have failed.
- Where a new import goes: with the file's other imports, above all code that could need it, where isort
  (and ruff's I001) would put it: in the block (isort section) that holds the first import of the
  framework the module extends (`torch` for `torch_npu`), in module-name order among its plain imports;
  or else in the leading imports' third-party block, or after them as a new block (after a module
  docstring and `from __future__`). An
  import the fixed file does not name (registering `torch_npu` for `.npu()`) carries `# noqa: F401`, so
  pyflakes, flake8 and `ruff --fix` keep it.
- What a fix leaves unused: see unused.py.
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple


STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
NOQA_F401 = "  # noqa: F401"
IMPORTS = (ast.Import, ast.ImportFrom)


# ----------------------------------------------------------------------------- what the file imports
@dataclass
class ImportFacts:
    bound: Set[str] = field(default_factory=set)  # dotted modules usable by name (`import a.b` -> a, a.b)
    aliases: Dict[str, str] = field(default_factory=dict)  # module -> alias of `import module as alias`
    loaded: Set[str] = field(default_factory=set)  # modules (and parents) imported unconditionally in any form
    guarded: Set[str] = field(default_factory=set)  # modules imported only conditionally / in functions


def _parents(module: str) -> List[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _modules_of(stmt: ast.stmt) -> List[str]:
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
        for module in _modules_of(stmt):
            facts.loaded.update(_parents(module))
    top = {id(stmt) for stmt in tree.body}
    for node in _nested_statements(tree.body):  # imports anywhere else: conditional, or inside functions
        if isinstance(node, IMPORTS) and id(node) not in top:  # and classes
            for module in _modules_of(node):
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


def names_module(texts: Sequence[str], module: str) -> bool:
    """Does fix text spell the module's top-level name (`torch_npu.optim.NpuFusedSGD`)?"""
    root = re.escape(module.split(".")[0])
    return any(re.search(rf"(?<![\w.]){root}\b", text) for text in texts)


def plan(facts: ImportFacts, modules: Sequence[str], texts: Sequence[str]) -> Tuple[List[str], Dict[str, str], str]:
    """(modules to import, {module: alias to write instead}, problem) for a fix needing `modules` whose new
    code is `texts`; `problem` is non-empty when the fix must not be applied."""
    needed: List[str] = []
    renames: Dict[str, str] = {}
    for module in modules:
        named = names_module(texts, module)
        if module in facts.bound or (not named and module in facts.loaded):
            continue
        if module in facts.aliases:
            renames[module] = facts.aliases[module]
        elif module in facts.guarded and module not in facts.loaded:
            return [], {}, (f"needs `{module}`, which this file imports only conditionally (under try/if/with) "
                            "or inside a function")
        else:
            needed.append(module)
    return needed, renames, ""


def import_statement(module: str, texts: Sequence[str]) -> str:
    """`import M`, with `# noqa: F401` when the fix's code does not name M (it is imported for its effect)."""
    return f"import {module}" + ("" if names_module(texts, module) else NOQA_F401)


# ----------------------------------------------------------------------------- where a new import goes
def _docstring_end(tree: ast.Module) -> int:
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno or first.lineno
    return 0


def _runs(tree: ast.Module) -> List[List[ast.stmt]]:
    """Runs of consecutive top-level import statements."""
    runs: List[List[ast.stmt]] = []
    previous_was_import = False
    for stmt in tree.body:
        if isinstance(stmt, IMPORTS):
            if previous_was_import:
                runs[-1].append(stmt)
            else:
                runs.append([stmt])
            previous_was_import = True
        else:
            previous_was_import = False
    return runs


def is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


def _blocks(run: List[ast.stmt]) -> List[List[ast.stmt]]:
    """A run's blocks: statements with no line between them (isort's sections are apart by blank lines)."""
    blocks = [[run[0]]]
    for stmt in run[1:]:
        if stmt.lineno > (blocks[-1][-1].end_lineno or blocks[-1][-1].lineno) + 1:
            blocks.append([stmt])
        else:
            blocks[-1].append(stmt)
    return blocks


def _natural(name: str) -> List[object]:
    """isort's (and ruff's) order of module names: case-insensitive, digit runs as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name.lower())]


def _in_order(block: List[ast.stmt], module: str) -> int:
    """The line after which `import module` goes in `block` as isort orders it (plain imports first, by
    module name; then the `from` imports)."""
    plain = [s for s in block if isinstance(s, ast.Import)]
    before = [s for s in plain if _natural(s.names[0].name) <= _natural(module)]
    if before:
        return before[-1].end_lineno or before[-1].lineno
    first = plain[0] if plain else block[0]
    return first.lineno - 1


def _extended_run(runs: List[List[ast.stmt]], roots: Set[str]) -> Optional[List[ast.stmt]]:
    """The block holding the import of the framework a module extends (`torch` for `torch_npu`)."""
    for run in runs:
        for block in _blocks(run):
            for stmt in block:
                owns = {m.split(".")[0] for m in _modules_of(stmt)}
                if any(root != own and root.startswith(own + "_") for root in roots for own in owns):
                    return block
    return None


def _third_party(module: str) -> bool:
    return module.split(".")[0] not in STDLIB and module != "__future__"


def _section(stmt: ast.stmt) -> str:
    """stdlib, third (an absolute import of another package; isort cannot tell first-party ones either
    without configuration) or local (relative)."""
    if isinstance(stmt, ast.ImportFrom) and stmt.level:
        return "local"
    return "third" if any(_third_party(m) for m in _modules_of(stmt)) else "stdlib"


def import_place(tree: ast.Module, modules: Sequence[str]) -> Tuple[int, int, int]:
    """(the line after which `import M` lines go (0: at the very top), blank lines to put before them (a
    new isort section), blank lines to put after them (when they end the file's imports right above code:
    one, two above a `def` or `class`, as isort asks))."""
    runs = _runs(tree)
    first = min(modules, key=_natural) if modules else ""
    block = _extended_run(runs, {m.split(".")[0] for m in modules})
    if block is not None:
        return _in_order(block, first), 0, 0
    top = _docstring_end(tree)
    leading = next((run for run in runs if run[0] is tree.body[1 if top else 0]), None) if tree.body else None
    if leading is None:
        line = _fallback_line(tree, top)
        return line, 0, _blank_lines_wanted(tree, line)
    return _leading_place(tree, leading, first)


def _leading_place(tree: ast.Module, leading: List[ast.stmt], first: str) -> Tuple[int, int, int]:
    """import_place in the file's leading imports: in their third-party block, or after them (as a new
    section when they are all standard library)."""
    blocks = [b for b in _blocks(leading) if not all(is_future(s) for s in b)]
    kinds = [{_section(s) for s in b} for b in blocks]
    third = [b for b, kind in zip(blocks, kinds) if kind == {"third"}]
    if third and _third_party(first):
        return _in_order(third[0], first), 0, 0
    line = leading[-1].end_lineno or leading[-1].lineno
    if blocks and _third_party(first) and all(kind == {"stdlib"} for kind in kinds):
        return line, 1, _blank_lines_wanted(tree, line)
    return line, 0, 0


def _blank_lines_wanted(tree: ast.Module, line: int) -> int:
    """Blank lines to add after an import put after `line` so that the code below it stands as isort
    wants it from the imports (two lines above a `def` or `class`, one above other code)."""
    following = next((s for s in tree.body if s.lineno > line), None)
    if following is None:
        return 0
    start = min([following.lineno] + [d.lineno for d in getattr(following, "decorator_list", ())])
    wanted = 2 if isinstance(following, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else 1
    return max(0, wanted - (start - line - 1))


def _fallback_line(tree: ast.Module, top: int) -> int:
    """After `from __future__` imports, else after the docstring, else above the first statement."""
    futures = [s for s in tree.body if is_future(s)]
    if futures:
        return futures[-1].end_lineno or futures[-1].lineno
    if top:
        return top
    first = tree.body[0] if tree.body else None
    if first is None:
        return 0
    return min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", ())]) - 1


def anchor_line(tree: ast.Module, modules: Sequence[str]) -> int:
    """The line after which `import M` lines go (0: at the very top); see import_place."""
    return import_place(tree, modules)[0]
