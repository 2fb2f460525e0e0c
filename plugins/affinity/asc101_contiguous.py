"""ASC101 contiguous-after-view."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.rule import Docs, Rule
from ascend_lint.semantic import argument, constant

VIEW_OPS = frozenset({
    "transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "chunk", "split", "tensor_split",
    "unbind", "narrow", "expand",
})
VIEW_ATTRS = frozenset({"T", "mT"})
# Pieces along dim 0 are contiguous already: (dim keyword, positional index of dim in the method form)
SPLIT_DIM = {"chunk": 1, "split": 1, "tensor_split": 1, "unbind": 0, "narrow": 0}


class ContiguousAfterView(Rule):
    code = "ASC101"
    name = "contiguous-after-view"
    message = "`.contiguous()` after `{op}` is a slow framework copy on Ascend: {advice}"
    triggers = ("contiguous",)
    docs = Docs(
        what="Flags `.contiguous()` called on the result of a view-producing op (`transpose`, `permute`, "
             "`t`, `.T`/`.mT`, `swapaxes`/`swapdims`, `movedim`, `chunk`, `split`, `tensor_split`, "
             "`unbind`, `narrow`, `expand`), chained or through a local name that was not rebound.",
        why="On Ascend the non-contiguous to contiguous conversion runs as a framework-class copy "
            "(no compute-unit kernel), which is slow. In the ShuffleNetV2 port the "
            "`torch.transpose(x, 1, 2).contiguous()` channel shuffle was rewritten as one "
            "`index_select` over the channel dim (a compute op), and chunk + cat were folded into it; "
            "that took the network to its delivery speed.",
        known_problems="Pieces of `chunk`/`split`/`unbind`/`narrow` along dim 0 are contiguous already and "
                       "are not flagged. A dim given as a variable is assumed not to be 0.",
        example="""
            def channel_shuffle(x, groups):
                b, c, h, w = x.size()
                x = x.view(b, groups, c // groups, h, w)
                x = torch.transpose(x, 1, 2).contiguous()
                return x.view(b, -1, h, w)
        """,
        use_instead="""
            # build the permutation once (e.g. a buffer) and gather with a compute op
            perm = torch.arange(c).view(groups, c // groups).t().reshape(-1)
            x = x.index_select(1, perm.to(x.device))
        """,
        fix_safety="No fix: the rewrite depends on the model.",
        source="Ascend PyTorch model tuning case: ShuffleNetV2 on Ascend 910 (see docs/domain notes).",
    )
    flagged = (
        "y = x.transpose(1, 2).contiguous()",
        "y = torch.transpose(x, 1, 2).contiguous()",
        "y = x.permute(0, 2, 1, 3).contiguous()",
        "y = x.T.contiguous()",
        "a, b = x.chunk(2, dim=1)\nb = b.contiguous()",
        "def f(x):\n    y = x.transpose(1, 2)\n    return y.contiguous()",
        "def f(x):\n    a, b = torch.chunk(x, 2, 1)\n    return a.contiguous()",
        "y = x.expand(4, -1, -1).contiguous()",
    )
    clean = (
        "y = x.contiguous()",
        "y = x.view(4, -1).contiguous()",
        "y = x.reshape(4, -1).contiguous()",
        "def f(x):\n    y = x.transpose(1, 2)\n    y = y * 2\n    return y.contiguous()",
        "def f(x):\n    a, b = x.chunk(2)\n    return a.contiguous()",
        "def f(x):\n    a, b = x.chunk(2, dim=0)\n    return a.contiguous()",
        "y = x.narrow(0, 0, 4).contiguous()",
        "y = x.unbind()[0].contiguous()",
    )

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "contiguous" and not node.args):
            return
        receiver = func.value
        if isinstance(receiver, ast.Subscript):  # x.unbind(1)[0].contiguous()
            receiver = receiver.value
        index: Optional[int] = None
        if isinstance(receiver, ast.Name):
            bound = self.ctx.binding(receiver.id)
            if bound is None or bound.value is None:
                return
            receiver, index = bound.value, bound.index
        op = self._view_op(receiver)
        if op is None:
            return
        if op in SPLIT_DIM and self._along_dim0(receiver, op):
            return
        advice = ("gather with `index_select` instead (as the ShuffleNetV2 channel shuffle does)"
                  if op in ("transpose", "permute", "t", "T", "mT", "swapaxes", "swapdims", "movedim")
                  else "avoid materialising the pieces, or fold the copy into a compute op")
        self.report(node, op=op, advice=advice)

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

    def _along_dim0(self, call: ast.Call, op: str) -> bool:
        function_form = self.ctx.qualname(call.func) is not None  # torch.chunk(x, 2, 0): one more arg
        pos = SPLIT_DIM[op] + (1 if function_form else 0)
        dim = argument(call, "dim", pos)
        if dim is None:
            return op != "narrow"
        return constant(dim) == 0
