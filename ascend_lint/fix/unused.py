"""The imports a fix leaves unused (stdlib `ast` and text only; used by the fixer).

An import (top-level, or inside a function or block) the file used before the fix and no longer uses is
removed when removing it cannot change what runs (a stdlib module, or a package another import still
loads: `torch` for `torch.optim`); otherwise it stays, marked `# noqa: F401` (`import torch_npu` registers
the NPU backend even when nothing names it any more). Usage is read as pyflakes reads it.
"""
from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..fileio import split_lines
from .imports import IMPORTS, NOQA_F401, STDLIB, is_future

_NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


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
    if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module and not is_future(stmt):
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


def _read_at_the_end(node: ast.AST) -> Set[str]:
    """Names a node makes pyflakes read at the end of the module: in string annotations, in `__all__`."""
    names: Set[str] = set()
    for annotation in _annotations(node):
        for sub in ast.walk(annotation):
            names.update(_string_names(sub))
    if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
        names.update(e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return names


def _bound_by(node: ast.AST) -> List[str]:
    """Names a definition or an import binds where it stands."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"]
    return []


def _children(node: ast.AST, deferred: bool) -> List[Tuple[ast.AST, bool]]:
    """The children to visit, each with whether it runs later (a function's or a lambda's body)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        body = node.body if isinstance(node.body, list) else [node.body]
        return [(child, True) for child in body] + [
            (child, deferred) for child in ast.iter_child_nodes(node) if child not in body]
    return [(child, deferred) for child in ast.iter_child_nodes(node)]


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
            if not isinstance(node.ctx, ast.Store):
                (later if deferred else now).add(node.id)
            elif not deferred:
                binds.add(node.id)
            continue
        later |= _read_at_the_end(node)  # string annotations are read at the end, as pyflakes does
        if not deferred:
            binds.update(_bound_by(node))
        stack.extend(_children(node, deferred))
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
        if not isinstance(stmt, IMPORTS) or is_future(stmt):
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
                if id(stmt) in top or not isinstance(stmt, IMPORTS):
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
    cleaner = _Cleaner(split_lines(text, keepends=True), after, unused + nested, blocks)
    statements = {id(b.stmt): b.stmt for b in cleaner.unused}
    for stmt in sorted(statements.values(), key=lambda st: st.lineno, reverse=True):  # bottom-up: lines stay valid
        cleaner.clean(stmt)
    return "".join(cleaner.lines), cleaner.problems


class _Cleaner:
    """Removes or marks the unused imports of one text, statement by statement (bottom-up)."""

    def __init__(self, lines: List[str], after: ast.Module, unused: List[Binding],
                 blocks: Dict[int, List[ast.stmt]]) -> None:
        self.lines, self.after, self.unused, self.blocks = lines, after, unused, blocks
        self.gone = {id(b.alias) for b in unused}
        self.removable = {id(b.alias) for b in unused if _still_loaded(b.module, self.gone, after)}
        self.problems: List[str] = []
        self.by_stmt: Dict[int, List[Binding]] = {}
        for b in unused:
            self.by_stmt.setdefault(id(b.stmt), []).append(b)
        self.remaining = {id(block): len(block) for block in blocks.values()}  # statements a block keeps

    def _shares_line(self, block: List[ast.stmt], stmt: ast.stmt) -> bool:
        index = block.index(stmt)
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        return (index > 0 and (block[index - 1].end_lineno or 0) >= first) or (
            index + 1 < len(block) and block[index + 1].lineno <= last)

    def _problem(self, stmt: ast.stmt) -> None:
        names = ", ".join(f"`{b.name}`" for b in self.by_stmt[id(stmt)])
        self.problems.append(f"it would leave {names} imported but unused (line {stmt.lineno})")

    def clean(self, stmt: ast.stmt) -> None:
        block = self.blocks.get(id(stmt), self.after.body)
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        if self._shares_line(block, stmt):
            self._problem(stmt)
            return
        staying = [a for a in stmt.names if id(a) not in self.removable]
        if not staying and (block is self.after.body or self.remaining[id(block)] > 1):  # a block keeps one
            del self.lines[first - 1:last]
            if block is not self.after.body:
                self.remaining[id(block)] -= 1
            return
        if staying and len(staying) < len(stmt.names):
            self._keep_only(stmt, staying)
            last = first
        if not staying or any(id(a) not in self.removable for a in stmt.names if id(a) in self.gone):
            marked = _mark_noqa_f401(self.lines[last - 1]) if first == last else None  # F401 is on line 1
            if marked is None:
                self._problem(stmt)
                return
            self.lines[last - 1] = marked

    def _keep_only(self, stmt: ast.stmt, staying: Sequence[ast.alias]) -> None:
        """Rewrite `stmt` on one line with only the `staying` names."""
        lines, first, last = self.lines, stmt.lineno, stmt.end_lineno or stmt.lineno
        tail = lines[last - 1]
        end = _char_col(tail, stmt.end_col_offset or 0)
        head = lines[first - 1][:_char_col(lines[first - 1], stmt.col_offset)]
        lines[first - 1:last] = [head + _render(stmt, staying) + tail[end:]]


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
