"""Where a `.contiguous()` copy flows, and whether a fused path runs instead of the code around it.

The layout patterns (`_layout.py`) ask these per finding; the answers come from indexes built once per
scope, statement list and branch, so a file of N copies costs O(N), not O(N²) (issue #30).
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_left
from typing import Dict, List, Optional, Tuple

from ascend_lint.analysis.semantic import FileContext
from ascend_lint.astutil import callee_name, contains

MATMUL_FUNCS = frozenset({"torch.matmul", "torch.bmm", "torch.mm", "torch.baddbmm", "torch.addmm", "torch.addbmm",
                          "torch.nn.functional.linear"})
MATMUL_METHODS = frozenset({"matmul", "bmm", "mm"})
MATMUL_KINDS = {"bmm": "bmm", "baddbmm": "bmm", "addbmm": "bmm", "mm": "mm", "addmm": "mm"}
# Consumers that need contiguous memory: custom kernels, collectives, raw pointers.
KERNEL_CALL_RE = re.compile(
    r"^npu_|all_to_all|alltoall|all_gather|allgather|reduce_scatter|all_reduce|allreduce|(?:^|_)a2a(?:_|$)"
    r"|^broadcast$|^i?send$|^i?recv$|scatter_to|gather_from|^data_ptr$|^numpy$|^storage$|^untyped_storage$"
    r"|^apply$|_kernel$|^kernel")
FUSED_ATTENTION_RE = re.compile(r"scaled_dot_product_attention|fusion_attention|flash_attn|flash_attention")

Parents = Dict[int, ast.AST]  # id(child) -> parent
Use = Tuple[ast.AST, Parents]  # a value the copy flows into, and the parent map to read its consumer


class ScopeIndex:
    """One walk of a scope (a function, or the module): parents, and the `Name` nodes of each name in
    source order."""

    def __init__(self, root: ast.AST) -> None:
        self.parents: Parents = {}
        names: Dict[str, List[ast.Name]] = {}
        for node in ast.walk(root):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.Name):
                names.setdefault(node.id, []).append(node)
        self._names = {name: sorted(found, key=_start) for name, found in names.items()}
        self._starts: Dict[str, List[Tuple[int, int]]] = {}

    def names_from(self, name: str, start: Tuple[int, int]) -> List[ast.Name]:
        """The `Name` nodes of `name` that start at or after `start`, in source order."""
        found = self._names.get(name, [])
        starts = self._starts.get(name)
        if starts is None:
            starts = self._starts[name] = [_start(n) for n in found]
        return found[bisect_left(starts, start):]


class CopyFlow:
    """Where a copy's value flows in one file, and what consumes it there."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._scopes: Dict[int, ScopeIndex] = {}

    def uses(self, node: ast.Call) -> List[Use]:
        """The values the copy flows into: itself, through `a if c else b`, or the later loads of the local
        name it is bound to (in the function)."""
        parents = self._scope().parents
        value: ast.AST = node
        parent = parents.get(id(value))
        while isinstance(parent, ast.IfExp) and value is not parent.test:
            value, parent = parent, parents.get(id(parent))
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                return self._later_uses(targets[0].id, parent)
            return []
        return [] if parent is None else [(value, parents)]

    def _later_uses(self, name: str, stmt: ast.stmt) -> List[Use]:
        """Loads of `name` after `stmt` in the enclosing function, up to its next assignment."""
        scope = self._scope()
        parents = scope.parents
        end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
        uses: List[Use] = []
        for n in scope.names_from(name, end):
            if isinstance(n.ctx, ast.Load):
                uses.append((n, parents))
                continue
            rebinding: Optional[ast.AST] = n  # `x = f(x)`: the loads in the statement that rebinds it still use it
            while rebinding is not None and not isinstance(rebinding, ast.stmt):
                rebinding = parents.get(id(rebinding))
            if rebinding is not None:
                uses += [(m, parents) for m in ast.walk(rebinding) if isinstance(m, ast.Name) and m.id == name
                         and isinstance(m.ctx, ast.Load) and all(m is not u for u, _ in uses)]
            break
        return uses

    def _scope(self) -> ScopeIndex:
        """The index of the enclosing function (the module outside functions), built on first use."""
        func = self.ctx.function
        root = func.node if func is not None else self.ctx.tree
        index = self._scopes.get(id(root))
        if index is None:
            index = self._scopes[id(root)] = ScopeIndex(root)
        return index

    def use_kind(self, value: ast.AST, parents: Parents) -> str:
        """What consumes `value`: 'matmul' / 'bmm' / 'mm', 'kernel' (a custom kernel, a collective, a raw
        pointer: the copy is needed), or 'other'."""
        parent = parents.get(id(value))
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult):
            return "matmul"
        if isinstance(parent, ast.keyword):
            parent = parents.get(id(parent))
        if isinstance(parent, ast.Call) and value is not parent.func:
            return self._argument_kind(parent)
        if isinstance(parent, ast.Attribute):
            if parent.attr in MATMUL_METHODS:
                return {"bmm": "bmm", "mm": "mm"}.get(parent.attr, "matmul")
            if KERNEL_CALL_RE.search(parent.attr):
                return "kernel"
        return "other"

    def _argument_kind(self, call: ast.Call) -> str:
        """`use_kind` of a value passed to `call`."""
        if isinstance(call.func, ast.Subscript):  # triton: kernel[grid](x, ...)
            return "kernel"
        qual = self.ctx.qualname(call.func) or ""
        name = callee_name(call)
        if qual in MATMUL_FUNCS or (isinstance(call.func, ast.Attribute) and name in MATMUL_METHODS):
            return MATMUL_KINDS.get(name, "matmul")
        if qual.startswith(("torch.ops.", "torch_npu.")) or "._C." in qual or qual.endswith("._C") \
                or KERNEL_CALL_RE.search(name):
            return "kernel"
        return "other"


class BlockIndex:
    """Per statement list: where each statement stands, and the first `if ...: return fused(...)` in it
    (scanned once, as far as a question needs)."""

    def __init__(self, block: List[ast.stmt]) -> None:
        self.position = {id(stmt): index for index, stmt in enumerate(block)}
        self.scanned = 0
        self.first_fused_return: Optional[int] = None


class FusedPaths:
    """Is the walk in code that a fused op replaces on the NPU: the eager branch of
    `if <fused available>: fused(...) else: <eager>`, or after an `if ...: return fused(...)`?"""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._blocks: Dict[int, BlockIndex] = {}
        self._branches: Dict[int, bool] = {}

    def beside_fused_path(self) -> bool:
        ctx = self.ctx
        func = ctx.function
        for if_node, in_else in ctx.ifs:
            if func is not None and not contains(func.node, if_node):
                continue
            if self.calls_fused(if_node.body if in_else else if_node.orelse):
                return True
        stack = ctx.stack
        for parent, child in zip(stack, stack[1:]):
            if not isinstance(child, ast.stmt):
                continue
            for name in ("body", "orelse", "finalbody"):
                block = getattr(parent, name, None)
                if isinstance(block, list) and self._after_fused_return(block, child):
                    return True
        return False

    def _after_fused_return(self, block: List[ast.stmt], child: ast.stmt) -> bool:
        """Does `child` stand in `block` after an `if ...: return fused(...)`?"""
        index = self._blocks.get(id(block))
        if index is None:
            index = self._blocks[id(block)] = BlockIndex(block)
        at = index.position.get(id(child))
        if at is None:
            return False
        while index.first_fused_return is None and index.scanned < at:
            earlier = block[index.scanned]
            if isinstance(earlier, ast.If) and any(isinstance(n, ast.Return) for n in earlier.body) \
                    and self.calls_fused(earlier.body):
                index.first_fused_return = index.scanned
            index.scanned += 1
        return index.first_fused_return is not None and index.first_fused_return < at

    def calls_fused(self, stmts: List[ast.stmt]) -> bool:
        """Does a branch call a fused op (`torch_npu.*`, `npu_*`, `*fused*`, flash attention)? Once per branch."""
        key = id(stmts)
        if key not in self._branches:
            self._branches[key] = any(self._fused_call(n) for stmt in stmts for n in ast.walk(stmt)
                                      if isinstance(n, ast.Call))
        return self._branches[key]

    def _fused_call(self, call: ast.Call) -> bool:
        name = callee_name(call)
        qual = self.ctx.qualname(call.func) or ""
        return qual.startswith("torch_npu.") or name.startswith("npu_") or "fused" in name.lower() \
            or bool(FUSED_ATTENTION_RE.search(name))


def _start(node: ast.AST) -> Tuple[int, int]:
    return node.lineno, node.col_offset
