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
- What a fix leaves unused: an import (top-level, or inside a function or block) the file used before the
  fix and no longer uses is removed when removing it cannot change what runs (a stdlib module, or a package another import still loads:
  `torch` for `torch.optim`); otherwise it stays, marked `# noqa: F401` (`import torch_npu` registers the
  NPU backend even when nothing names it any more).
"""
from __future__ import annotations

import ast
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..analysis.imports import ImportFacts, import_facts  # noqa: F401  (the fixer imports them from here)
from ..analysis.imports import modules_of as _modules_of
from ..fileio import split_lines

STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
NOQA_F401 = "  # noqa: F401"
_NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IMPORTS = (ast.Import, ast.ImportFrom)


# ----------------------------------------------------------------------------- what the file imports
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


def bindings_of(stmt: ast.stmt) -> List[Binding]:
    """Names bound by one top-level import (not `__future__`, not `*`, not relative)."""
    if isinstance(stmt, ast.Import):
        return [Binding(stmt, a, a.asname or a.name.split(".")[0], a.name) for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module and not _is_future(stmt):
        return [Binding(stmt, a, a.asname or a.name, stmt.module) for a in stmt.names if a.name != "*"]
    return []


def bindings(tree: ast.Module) -> List[Binding]:
    """Names bound by the unconditional top-level imports."""
    return [binding for stmt in tree.body for binding in bindings_of(stmt)]


def _string_names(node: ast.AST) -> Set[str]:
    """Names inside a string annotation (`x: "torch.Tensor"`)."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or len(node.value) > 1000:
        return set()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = ast.parse(node.value.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {n.id for n in ast.walk(parsed) if isinstance(n, ast.Name)}


def _annotations(node: ast.AST) -> List[ast.expr]:
    if isinstance(node, ast.arg):
        return [node.annotation] if node.annotation is not None else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.returns] if node.returns is not None else []
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    return []


def _reads(stmt: ast.stmt) -> Tuple[Set[str], Set[str], Set[str]]:
    """(names `stmt` reads when it runs, names read later: in function and lambda bodies, string
    annotations and `__all__`; names it binds at module level)."""
    now: Set[str] = set()
    later: Set[str] = set()
    binds: Set[str] = set()
    stack: List[Tuple[ast.AST, bool]] = [(stmt, False)]
    while stack:
        node, deferred = stack.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                if not deferred:
                    binds.add(node.id)
            else:
                (later if deferred else now).add(node.id)
            continue
        for annotation in _annotations(node):  # string annotations are read at the end, as pyflakes does
            for sub in ast.walk(annotation):
                later.update(_string_names(sub))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not deferred:
            binds.add(node.name)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not deferred:
            binds.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            later.update(e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)
                         and isinstance(e.value, str))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            body = node.body if isinstance(node.body, list) else [node.body]
            stack.extend((child, True) for child in body)
            stack.extend((child, deferred) for child in ast.iter_child_nodes(node)
                         if child not in body)
            continue
        stack.extend((child, deferred) for child in ast.iter_child_nodes(node))
    return now, later, binds


def import_usage(tree: ast.Module) -> Dict[int, bool]:
    """For each top-level import binding (by id of its alias): is it read while it is the binding of its
    name? As pyflakes sees it: module-level code reads the binding active at that point; function bodies,
    string annotations and `__all__` read the last one. (An import shadowed by a later one before any use
    is unused: pyflakes's "redefinition of unused name".)"""
    active: Dict[str, Optional[ast.alias]] = {}
    used: Dict[int, bool] = {}
    read_later: Set[str] = set()
    for stmt in tree.body:
        now, later, binds = _reads(stmt)
        for name in now:
            alias = active.get(name)
            if alias is not None:
                used[id(alias)] = True
        read_later |= later
        for name in binds:
            active[name] = None
        for binding in bindings_of(stmt):
            active[binding.name] = binding.alias
            used.setdefault(id(binding.alias), False)
    for name in read_later:
        alias = active.get(name)
        if alias is not None:
            used[id(alias)] = True
    return used


def _numbered(tree: ast.Module) -> List[Tuple[Tuple[str, int], Binding]]:
    """Each binding keyed by (name, how many bindings of that name came before it)."""
    seen: Dict[str, int] = {}
    out = []
    for binding in bindings(tree):
        number = seen.get(binding.name, 0)
        seen[binding.name] = number + 1
        out.append(((binding.name, number), binding))
    return out


def newly_unused(before: ast.Module, after: ast.Module) -> List[Binding]:
    """Top-level imports of `after` that are unused there and were used in `before`."""
    used_before, used_after = import_usage(before), import_usage(after)
    was_used = {key: used_before.get(id(b.alias), False) for key, b in _numbered(before)}
    numbered = _numbered(after)
    unused = [b for key, b in numbered if was_used.get(key) and not used_after.get(id(b.alias), False)]
    names = {b.name for b in unused}  # an unused duplicate of such an import would become the one warned about
    return unused + [b for _, b in numbered if b.name in names and b not in unused
                     and not used_after.get(id(b.alias), False)]


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


def _nested_unused(before: ast.Module, after: ast.Module) -> Tuple[List[Binding], Dict[int, List[ast.stmt]]]:
    """Imports inside functions, classes and if/try blocks of `after` whose name the file read before
    the fixes and reads nowhere now; and each such statement's block (by statement id)."""
    def loads(tree: ast.Module) -> Set[str]:
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}

    read_before, read_after = loads(before), loads(after)
    top = {id(stmt) for stmt in after.body}
    unused: List[Binding] = []
    blocks: Dict[int, List[ast.stmt]] = {}
    for node in ast.walk(after):
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(node, field_name, None)
            if not isinstance(block, list) or node is after:
                continue
            for stmt in block:
                if id(stmt) in top or not isinstance(stmt, _IMPORTS):
                    continue
                found = [b for b in bindings_of(stmt) if b.name in read_before and b.name not in read_after]
                if found:
                    unused.extend(found)
                    blocks[id(stmt)] = block
    return unused, blocks


def clean_unused_imports(text: str, before: ast.Module, after: ast.Module) -> Tuple[str, List[str]]:
    """`text` (whose tree is `after`) without the imports the fixes left unused, or with them marked
    `# noqa: F401` where removing them could change what runs. Returns (text, problems): a problem names
    an import that could be neither removed nor marked (it shares its line with other statements)."""
    unused = newly_unused(before, after)
    nested, blocks = _nested_unused(before, after)
    if not unused and not nested:
        return text, []
    unused += nested
    gone = {id(b.alias) for b in unused}
    removable = {id(b.alias) for b in unused if _still_loaded(b.module, gone, after)}
    lines = split_lines(text, keepends=True)
    problems: List[str] = []
    by_stmt: Dict[int, List[Binding]] = {}
    for b in unused:
        by_stmt.setdefault(id(b.stmt), []).append(b)
    statements = {id(b.stmt): b.stmt for b in unused}
    remaining = {id(block): len(block) for block in blocks.values()}  # statements a block keeps
    # bottom-up, so earlier line numbers stay valid
    for stmt in sorted(statements.values(), key=lambda st: st.lineno, reverse=True):
        block = blocks.get(id(stmt), after.body)
        index = block.index(stmt)
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        shares = (index > 0 and (block[index - 1].end_lineno or 0) >= first) or (
            index + 1 < len(block) and block[index + 1].lineno <= last)
        names = ", ".join(f"`{b.name}`" for b in by_stmt[id(stmt)])
        if shares:
            problems.append(f"it would leave {names} imported but unused (line {first})")
            continue
        staying = [a for a in stmt.names if id(a) not in removable]
        if not staying and (block is after.body or remaining[id(block)] > 1):  # a block keeps a statement
            del lines[first - 1:last]
            if block is not after.body:
                remaining[id(block)] -= 1
            continue
        if staying and len(staying) < len(stmt.names):
            tail = lines[last - 1]
            end = _char_col(tail, stmt.end_col_offset or 0)
            head = lines[first - 1][:_char_col(lines[first - 1], stmt.col_offset)]
            lines[first - 1:last] = [head + _render(stmt, staying) + tail[end:]]
            last = first
        if not staying or any(id(a) not in removable for a in stmt.names if id(a) in gone):
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
