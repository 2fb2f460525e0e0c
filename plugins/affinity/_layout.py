"""`.contiguous()` after a view op: which pattern it is, shared by ASC101 (the actionable patterns) and
ASC102 (the other layout copies).

A `.contiguous()` after `transpose`/`permute`/`chunk`/... is classified by what produced the view and by
what consumes the copy:
- channel shuffle: `transpose(1, 2)` / `permute(0, 2, 1, 3, 4)` of a 5-D grouped view (ShuffleNet);
- matmul operand: a last-two-dims transpose whose copy only feeds matmuls (the NPU matmul reads a
  transposed operand as it is, with its transpose flag);
- attention layout: the head transpose (`transpose(1, 2)`, `permute(0, 2, 1, 3)`) in attention code;
- layout copy / pieces: everything else (the copy may well be needed by the consumer);
and is silent (None) where the copy is needed or costs nothing: pieces along dim 0, a copy that feeds a
custom kernel, a collective or a raw pointer, a copy guarded by `is_contiguous()`, set-up in `__init__`,
and eager fallbacks written beside a fused path (`torch_*`/`eager_*`/`*_fallback` functions).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional, Tuple

from ascend_lint.rule import Rule
from ascend_lint.analysis.semantic import FileContext
from ascend_lint.astutil import argument, callee_name, constant

from ._layout_flow import FUSED_ATTENTION_RE, CopyFlow, FusedPaths, Use

VIEW_OPS = frozenset({
    "transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "chunk", "split", "tensor_split",
    "unbind", "narrow", "expand",
})
VIEW_ATTRS = frozenset({"T", "mT"})
PIECE_OPS = frozenset({"chunk", "split", "tensor_split", "unbind"})
# Pieces along dim 0 are contiguous already: (op -> positional index of dim in the method form)
SPLIT_DIM = {"chunk": 1, "split": 1, "tensor_split": 1, "unbind": 0, "narrow": 0}
ATTENTION_NAME_RE = re.compile(r"attention|attn", re.IGNORECASE)
EAGER_FALLBACK_RE = re.compile(
    r"^_*(?:torch|eager|naive|native|reference|ref|slow|math|python|pytorch)_|_(?:eager|naive|native|reference|ref"
    r"|fallback|slow|math|torch|python|pytorch)(?:_|$)|fallback", re.IGNORECASE)


@dataclass(frozen=True)
class LayoutCopy:
    """A `.contiguous()` after a view op and the pattern it belongs to."""

    op: str  # the view op: 'transpose', 'permute', 'chunk', 'T', ...
    pattern: str  # 'channel-shuffle' | 'matmul-operand' | 'attention-layout' | 'layout-copy' | 'pieces'


class LayoutCopyRule(Rule):
    """A rule that reports some of the `.contiguous()` patterns: `patterns` maps each pattern it reports to
    the message fields of its advice."""

    patterns: ClassVar[Dict[str, Dict[str, str]]] = {}

    def start_file(self) -> None:
        self.layout = LayoutClassifier(self.ctx)

    def visit_Call(self, node: ast.Call) -> None:
        found = self.layout.classify(node)
        if found is not None and found.pattern in self.patterns:
            self.report(node, op=found.op, **self.patterns[found.pattern])


class LayoutClassifier:
    """Classifies `.contiguous()` calls of one file (one instance per rule instance); where the copy flows
    and whether a fused path runs instead are answered from per-scope indexes (`_layout_flow`)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.flow = CopyFlow(ctx)
        self.fused = FusedPaths(ctx)
        self._attention: Dict[int, bool] = {}

    def classify(self, node: ast.Call) -> Optional[LayoutCopy]:
        view = self._copied_view(node)
        if view is None or self._needed_or_free(node):
            return None
        producer, op = view
        uses = self.flow.uses(node)
        kinds = [self.flow.use_kind(value, parents) for value, parents in uses]
        if "kernel" in kinds:
            return None
        return LayoutCopy(op, self._pattern(producer, op, uses, kinds))

    def _copied_view(self, node: ast.Call) -> Optional[Tuple[ast.AST, str]]:
        """(the view op call, its op) behind `x.contiguous()`; None when it is no view op or pieces along dim
        0 (contiguous already)."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "contiguous" and not node.args and not node.keywords):
            return None
        producer = self._producer(func.value)
        if producer is None:
            return None
        op = self._view_op(producer)
        if op is None or (op in SPLIT_DIM and self._along_dim0(producer, op)):
            return None
        return producer, op

    def _pattern(self, producer: ast.AST, op: str, uses: List[Use], kinds: List[str]) -> str:
        tensor, rest = self._args(producer)
        dims = self._ints(rest)
        rank = self._rank(tensor, producer)
        if op in ("transpose", "permute") and self._channel_shuffle(op, dims, rank, uses, tensor, producer):
            return "channel-shuffle"
        inner = self._value_at(tensor, producer) if isinstance(tensor, ast.Name) else tensor
        if kinds and all(k in ("matmul", "bmm", "mm") for k in kinds) and self._view_op(inner) is None \
                and self._last_two_swap(op, dims, rank, set(kinds)):
            return "matmul-operand"
        if op in ("transpose", "permute") and rank in (None, 4) and not {"bmm", "mm"} & set(kinds) \
                and self._head_swap(op, dims) and self._in_attention():
            return "attention-layout"
        return "pieces" if op in PIECE_OPS or op == "narrow" else "layout-copy"

    # ------------------------------------------------------------------------------ producer
    def _producer(self, receiver: ast.expr) -> Optional[ast.AST]:
        """The view op call behind the receiver: chained, through local names, pieces of a local list, or
        the loop variable of `for piece in x.chunk(...)`."""
        for _ in range(4):
            if isinstance(receiver, ast.Subscript):
                receiver = receiver.value
            elif isinstance(receiver, ast.Name):
                bound = self.ctx.binding(receiver.id)
                if bound is None or bound.value is None:
                    return self._loop_source(receiver.id)
                receiver = bound.value
            else:
                return receiver
        return receiver

    def _loop_source(self, name: str) -> Optional[ast.AST]:
        """`for m in x.chunk(n, 1):` / `for i, m in enumerate(x.split(k, 1)):` -> the chunk/split call."""
        for loop in reversed(self.ctx.loops):
            if not isinstance(loop, (ast.For, ast.AsyncFor)):
                continue
            target, source = loop.target, loop.iter
            if (isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate"
                    and source.args and isinstance(target, ast.Tuple) and len(target.elts) == 2):
                target, source = target.elts[1], source.args[0]
            if isinstance(target, ast.Name) and target.id == name:
                return source if self._view_op(source) in PIECE_OPS else None
        return None

    def _view_op(self, node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Attribute) and node.attr in VIEW_ATTRS:
            return node.attr
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qual = self.ctx.qualname(func)
        if qual and qual.startswith("torch.") and qual[6:] in VIEW_OPS:
            return qual[6:]
        if isinstance(func, ast.Attribute) and func.attr in VIEW_OPS and qual is None:
            return func.attr
        return None

    def _args(self, call: ast.AST) -> Tuple[Optional[ast.expr], List[ast.expr]]:
        """(the tensor, the remaining positional arguments) of a view op, method or `torch.` form."""
        if not isinstance(call, ast.Call):
            return (call.value if isinstance(call, ast.Attribute) else None), []
        if self.ctx.qualname(call.func) is not None:
            return (call.args[0] if call.args else None), list(call.args[1:])
        return (call.func.value if isinstance(call.func, ast.Attribute) else None), list(call.args)

    def _ints(self, nodes: List[ast.expr]) -> Optional[List[int]]:
        if len(nodes) == 1 and isinstance(nodes[0], (ast.Tuple, ast.List)):
            nodes = list(nodes[0].elts)
        values = [constant(n) for n in nodes]
        return values if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else None

    def _along_dim0(self, call: ast.AST, op: str) -> bool:
        function_form = self.ctx.qualname(call.func) is not None  # torch.chunk(x, 2, 0): one more arg
        pos = SPLIT_DIM[op] + (1 if function_form else 0)
        dim = argument(call, "dim", pos)
        if dim is None:
            return op != "narrow"
        return self._may_be_zero(dim)

    def _may_be_zero(self, dim: ast.expr, depth: int = 0) -> bool:
        """The dim is 0, or may be (`seq_dim = 2 if x.ndim == 4 else 0`): the pieces may be contiguous."""
        if constant(dim) == 0 or self.ctx.int_value(dim) == 0:
            return True
        if isinstance(dim, ast.IfExp) and depth < 3:
            return self._may_be_zero(dim.body, depth + 1) or self._may_be_zero(dim.orelse, depth + 1)
        if isinstance(dim, ast.Name) and depth < 3:
            bound = self.ctx.binding(dim.id)
            if bound is not None and bound.value is not None and bound.index is None:
                return self._may_be_zero(bound.value, depth + 1)
        return False

    # ------------------------------------------------------------------------------ patterns
    def _channel_shuffle(self, op: str, dims: Optional[List[int]], rank: Optional[int],
                         uses: List[Use], tensor: Optional[ast.expr], producer: ast.AST) -> bool:
        """`transpose(1, 2)` / `permute(0, 2, 1, 3, 4)` of a 5-D `view`/`reshape` (the groups split out),
        flattened back to 4-D with the batch and spatial dims kept (`view(b, -1, h, w)`, `flatten(1, 2)`; not
        `view(b * c, t, h, w)`, which moves channels into the batch)."""
        if rank != 5 or dims is None or (op == "transpose" and sorted(dims) != [1, 2]) or (
                op == "permute" and dims != [0, 2, 1, 3, 4]):
            return False
        split = tensor if isinstance(tensor, ast.Call) else self._value_at(tensor, producer)
        for value, parents in uses:
            parent = parents.get(id(value))
            call = parents.get(id(parent)) if isinstance(parent, ast.Attribute) else None
            if not isinstance(call, ast.Call):
                continue
            if parent.attr == "flatten" and [constant(a) for a in call.args] == [1, 2]:
                return True
            if parent.attr in ("view", "reshape") and _shape_len(call) == 4 and _keeps_batch_and_space(split, call):
                return True
        return False

    def _rank(self, tensor: Optional[ast.expr], at: ast.AST) -> Optional[int]:
        """The rank of `tensor` when it comes from a `view`/`reshape` with a literal number of dims."""
        source = tensor if isinstance(tensor, ast.Call) else self._value_at(tensor, at)
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) \
                and source.func.attr in ("view", "reshape"):
            return _shape_len(source)
        return None

    def _value_at(self, expr: Optional[ast.expr], at: ast.AST) -> Optional[ast.expr]:
        """Follow local names to the value they held where `at` starts (`x = x.view(...)` chains)."""
        for _ in range(4):
            if not isinstance(expr, ast.Name):
                break
            bound = self.ctx.binding_before(expr.id, at)
            if bound is None or bound.value is None or bound.index is not None:
                return None
            expr, at = bound.value, bound.value
        return expr

    @staticmethod
    def _last_two_swap(op: str, dims: Optional[List[int]], rank: Optional[int], kinds: set) -> bool:
        """A transpose of the last two dims, which the NPU matmul takes as it is (`bmm` operands are 3-D,
        `mm` operands 2-D)."""
        if op in ("t", "T", "mT"):
            return True
        if dims is None:
            return False
        if kinds == {"bmm"}:
            rank = rank or 3
        elif kinds == {"mm"}:
            rank = rank or 2
        if op in ("transpose", "swapaxes", "swapdims") and len(dims) == 2:
            last_two = {rank - 2, rank - 1} if rank else set()
            return sorted(dims) == [-2, -1] or set(dims) == last_two
        if op == "permute":
            n = len(dims)
            return n >= 2 and dims == list(range(n - 2)) + [n - 1, n - 2]
        return False

    @staticmethod
    def _head_swap(op: str, dims: Optional[List[int]]) -> bool:
        """(B, S, N, D) <-> (B, N, S, D): `transpose(1, 2)` or `permute(0, 2, 1, 3)`."""
        if dims is None:
            return False
        return sorted(dims) == [1, 2] if op == "transpose" else dims == [0, 2, 1, 3]

    def _in_attention(self) -> bool:
        """In attention code: the function or its class is named for it, or it computes one."""
        func = self.ctx.function
        if func is None:
            return False
        cls = self.ctx.class_scope
        if ATTENTION_NAME_RE.search(func.name) or (cls is not None and ATTENTION_NAME_RE.search(cls.name)):
            return True
        key = id(func.node)
        if key not in self._attention:
            names = {callee_name(n) for n in ast.walk(func.node) if isinstance(n, ast.Call)}
            matmul = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in ast.walk(func.node)) \
                or bool(names & {"matmul", "bmm", "baddbmm", "einsum"})
            self._attention[key] = any(FUSED_ATTENTION_RE.search(n) for n in names) or (
                matmul and any(n.endswith("softmax") and "log_softmax" not in n for n in names))
        return self._attention[key]

    # ------------------------------------------------------------------------------ silent cases
    def _needed_or_free(self, node: ast.Call) -> bool:
        """Set-up code, an eager fallback beside a fused path, or a copy guarded by `is_contiguous()`."""
        ctx = self.ctx
        if any(s.kind == "function" and (s.name == "__init__" or EAGER_FALLBACK_RE.search(s.name))
               for s in ctx.scopes):
            return True
        for ancestor in reversed(ctx.stack[:-1]):
            if isinstance(ancestor, ast.stmt):
                break
            if isinstance(ancestor, ast.IfExp) and "is_contiguous" in {
                    n.attr for n in ast.walk(ancestor.test) if isinstance(n, ast.Attribute)}:
                return True
        return self.fused.beside_fused_path()


def _shape_len(call: ast.Call) -> Optional[int]:
    """How many dims `x.view(a, b, c)` / `x.reshape((a, b, c))` gives, if it says."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if not args or any(isinstance(a, ast.Starred) for a in args):
        return None
    return len(args)


def _shape_args(call: ast.AST) -> List[ast.expr]:
    """The dims of `x.view(a, b, c)` / `x.reshape((a, b, c))` as written."""
    args = call.args if isinstance(call, ast.Call) else []
    return list(args[0].elts) if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else list(args)


def _keeps_batch_and_space(split: Optional[ast.AST], merged: ast.Call) -> bool:
    """The 4-D `merged` view keeps the batch and spatial dims of the 5-D `split` one (unknown: assumed)."""
    five, four = _shape_args(split), _shape_args(merged)
    if len(five) != 5 or len(four) != 4:
        return True
    return all(ast.dump(four[i]) == ast.dump(five[j]) or constant(four[i]) == -1 for i, j in ((0, 0), (2, 3), (3, 4)))
