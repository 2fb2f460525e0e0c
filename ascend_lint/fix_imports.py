"""The imports a fix adds or leaves behind (stdlib `ast` and text only; used by the fixer).

- Where a needed module is already imported: by name (`import torch_npu`, `import torch_npu as tnpu`: the
  fix's text is renamed to the alias), loaded in another form (`from torch_npu.contrib import ...`: enough
  for a fix that does not name it), or only conditionally (under `try`/`if`/`with`, in a function or
  class): then the fix is not applied, since its code would run where the import may have failed.
- Where a new import goes: with the file's other imports, above all code that could need it. After the
  run of top-level imports that holds the first import of the framework the module extends (`torch` for
  `torch_npu`), or else after the leading imports (after a module docstring and `from __future__`). An
  import the fixed file does not name (registering `torch_npu` for `.npu()`) carries `# noqa: F401`, so
  pyflakes, flake8 and `ruff --fix` keep it.
- What a fix leaves unused: a top-level import the file used before the fix and no longer uses is removed
  when removing it cannot change what runs (a stdlib module, or a package another import still loads:
  `torch` for `torch.optim`); otherwise it stays, marked `# noqa: F401` (`import torch_npu` registers the
  NPU backend even when nothing names it any more).
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .fileio import split_lines

STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
NOQA_F401 = "  # noqa: F401"
_NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IMPORTS = (ast.Import, ast.ImportFrom)


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
    for node in ast.walk(tree):  # imports anywhere else: conditional, or inside functions and classes
        if isinstance(node, _IMPORTS) and node not in tree.body:
            for module in _modules_of(node):
                facts.guarded.update(m for m in _parents(module) if m not in facts.loaded)
    return facts


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
        if isinstance(stmt, _IMPORTS):
            if previous_was_import:
                runs[-1].append(stmt)
            else:
                runs.append([stmt])
            previous_was_import = True
        else:
            previous_was_import = False
    return runs


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


def anchor_line(tree: ast.Module, modules: Sequence[str]) -> int:
    """The line after which `import M` lines go (0: at the very top)."""
    runs = _runs(tree)
    roots = {m.split(".")[0] for m in modules}
    for run in runs:  # next to the framework the module extends: `torch` for `torch_npu`
        for stmt in run:
            if any(root != own and root.startswith(own + "_")
                   for root in roots for own in {m.split(".")[0] for m in _modules_of(stmt)}):
                return run[-1].end_lineno or run[-1].lineno
    top = _docstring_end(tree)
    leading = next((run for run in runs if run[0] is tree.body[1 if top else 0]), None) if tree.body else None
    if leading is not None:
        return leading[-1].end_lineno or leading[-1].lineno
    futures = [s for s in tree.body if _is_future(s)]
    if futures:
        return futures[-1].end_lineno or futures[-1].lineno
    if top:
        return top
    first = tree.body[0] if tree.body else None
    if first is None:
        return 0
    return min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", ())]) - 1


# ----------------------------------------------------------------------------- what a fix leaves unused
@dataclass(frozen=True)
class Binding:
    stmt: ast.stmt
    alias: ast.alias
    name: str  # the name it binds
    module: str  # the module it imports


def bindings(tree: ast.Module) -> List[Binding]:
    """Names bound by the unconditional top-level imports (not `__future__`, not `*`)."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            out.extend(Binding(stmt, a, a.asname or a.name.split(".")[0], a.name) for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module and not _is_future(stmt):
            out.extend(Binding(stmt, a, a.asname or a.name, stmt.module) for a in stmt.names if a.name != "*")
    return out


def referenced_names(tree: ast.Module) -> Set[str]:
    """Names the file reads (as pyflakes counts them): loads and deletes, names in string annotations,
    and the entries of `__all__`."""
    names: Set[str] = set()
    annotations: List[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                names.add(node.id)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            names.update(e.value for e in ast.walk(node.value)
                         if isinstance(e, ast.Constant) and isinstance(e.value, str))
    for annotation in annotations:
        for sub in ast.walk(annotation):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    parsed = ast.parse(sub.value.strip(), mode="eval")
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
                names.update(n.id for n in ast.walk(parsed) if isinstance(n, ast.Name))
    return names


def newly_unused(before: ast.Module, after: ast.Module) -> List[Binding]:
    """Top-level imports of `after` whose name `before` read and `after` no longer reads."""
    read_before, read_after = referenced_names(before), referenced_names(after)
    return [b for b in bindings(after) if b.name in read_before and b.name not in read_after]


def _still_loaded(module: str, gone: Set[int], tree: ast.Module) -> bool:
    """Is removing an import of `module` invisible: a stdlib module, or its package loaded by an import
    that stays (another import of `torch`, or of an extension such as `torch_npu`, which imports it)?"""
    root = module.split(".")[0]
    if root in STDLIB:
        return True
    for stmt in tree.body:
        if not isinstance(stmt, _IMPORTS) or _is_future(stmt):
            continue
        staying = [a for a in stmt.names if id(a) not in gone]
        if not staying:
            continue
        modules = [stmt.module or ""] if isinstance(stmt, ast.ImportFrom) else [a.name for a in staying]
        for other in modules:
            own = other.split(".")[0]
            if not (isinstance(stmt, ast.ImportFrom) and stmt.level) and (own == root or own.startswith(root + "_")):
                return True
    return False


def _render(stmt: ast.stmt, aliases: Sequence[ast.alias]) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)
    if isinstance(stmt, ast.Import):
        return f"import {names}"
    assert isinstance(stmt, ast.ImportFrom)
    return f"from {'.' * stmt.level}{stmt.module or ''} import {names}"


def clean_unused_imports(text: str, before: ast.Module, after: ast.Module) -> Tuple[str, List[str]]:
    """`text` (whose tree is `after`) without the imports the fixes left unused, or with them marked
    `# noqa: F401` where removing them could change what runs. Returns (text, problems): a problem names
    an import that could be neither removed nor marked (it shares its line with other statements)."""
    unused = newly_unused(before, after)
    if not unused:
        return text, []
    gone = {id(b.alias) for b in unused}
    removable = {id(b.alias) for b in unused if _still_loaded(b.module, gone, after)}
    lines = split_lines(text, keepends=True)
    problems: List[str] = []
    body = after.body
    by_stmt: Dict[int, List[Binding]] = {}
    for b in unused:
        by_stmt.setdefault(id(b.stmt), []).append(b)
    # bottom-up, so earlier line numbers stay valid
    for index in sorted((i for i, s in enumerate(body) if id(s) in by_stmt), reverse=True):
        stmt = body[index]
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        shares = (index > 0 and (body[index - 1].end_lineno or 0) >= first) or (
            index + 1 < len(body) and body[index + 1].lineno <= last)
        names = ", ".join(f"`{b.name}`" for b in by_stmt[id(stmt)])
        if shares:
            problems.append(f"it would leave {names} imported but unused (line {first})")
            continue
        staying = [a for a in stmt.names if id(a) not in removable]
        if not staying:
            del lines[first - 1:last]
            continue
        if len(staying) < len(stmt.names):
            tail = lines[last - 1]
            end = _char_col(tail, stmt.end_col_offset or 0)
            head = lines[first - 1][:_char_col(lines[first - 1], stmt.col_offset)]
            lines[first - 1:last] = [head + _render(stmt, staying) + tail[end:]]
            last = first
        if any(id(a) not in removable for a in stmt.names if id(a) in gone):
            marked = _mark_noqa_f401(lines[last - 1]) if first == last else None  # F401 is reported on line 1
            if marked is None:
                problems.append(f"it would leave {names} imported but unused (line {first})")
                continue
            lines[last - 1] = marked
    return "".join(lines), problems


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _mark_noqa_f401(line: str) -> Optional[str]:
    """The line with F401 added to its `# noqa` (or a new `# noqa: F401`); None if it cannot be added."""
    body = line.rstrip("\r\n")
    ending = line[len(body):]
    match = _NOQA_RE.search(body)
    if match is None:
        if "#" in body and ("'" in body or '"' in body):
            return None  # a '#' that may sit in a string: leave the line alone
        return body.rstrip() + NOQA_F401 + ending
    codes = match.group("codes")
    if not codes:
        return line  # a bare `# noqa` already silences it
    if "F401" in codes.upper():
        return line
    return body[:match.end()] + ", F401" + body[match.end():] + ending
