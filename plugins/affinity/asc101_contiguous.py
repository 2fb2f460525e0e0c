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
    file_triggers = ("contiguous",)  # model helpers may not import torch themselves
    triggers = ("contiguous",)
    docs = Docs(
        summary="`.contiguous()` after a view op such as `transpose` or `chunk` makes a slow framework copy on Ascend.",
        what="Flags `.contiguous()` called on the result of a view-producing op (`transpose`, `permute`, "
             "`t`, `.T`/`.mT`, `swapaxes`/`swapdims`, `movedim`, `chunk`, `split`, `tensor_split`, "
             "`unbind`, `narrow`, `expand`), chained or through a local name that was not rebound.",
        why="On Ascend the non-contiguous to contiguous conversion runs as a framework-class copy "
            "(no compute-unit kernel), which is slow. In the ShuffleNetV2 port the "
            "`torch.transpose(x, 1, 2).contiguous()` channel shuffle was rewritten as one "
            "`index_select` over the channel dim (a compute op), and chunk + cat were folded into it; "
            "that took the network to its delivery speed.",
        known_problems="Pieces of `chunk`/`split`/`unbind`/`narrow` along dim 0 are contiguous already and "
                       "are not flagged; a dim read from a local, a parameter default or a module constant "
                       "is resolved, a dim that may be 0 (`2 if x.ndim == 4 else 0`) counts as 0, and any "
                       "other variable dim is assumed not to be 0. The rule cannot see shapes: a `transpose` "
                       "of a size-1 dim or `t()` of a 1-D tensor is a no-op copy and is still reported.",
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
        "import torch\ny = x.transpose(1, 2).contiguous()",
        "y = torch.transpose(x, 1, 2).contiguous()",
        "import torch\ny = x.permute(0, 2, 1, 3).contiguous()",
        "import torch\ny = x.T.contiguous()",
        "import torch\na, b = x.chunk(2, dim=1)\nb = b.contiguous()",
        "import torch\ndef f(x):\n    y = x.transpose(1, 2)\n    return y.contiguous()",
        "def f(x):\n    a, b = torch.chunk(x, 2, 1)\n    return a.contiguous()",
        "import torch\ny = x.expand(4, -1, -1).contiguous()",
        # the ShuffleNetV2 channel shuffle, multi-line, through local names
        "import torch\ndef channel_shuffle(x, groups):\n    b, c, h, w = x.size()\n"
        "    x = x.view(b, groups, c // groups, h, w)\n    x = torch.transpose(x, 1, 2)\n"
        "    x = x.contiguous()\n    return x.view(b, -1, h, w)",
        # a piece of a chunk along a non-zero dim, through a local list
        "import torch\ndef f(x):\n    parts = x.chunk(4, dim=-1)\n    first = parts[0]\n    return first.contiguous()",
        "import torch\ndef f(x):\n    return torch.split(x, 2, 1)[0].contiguous()",
        "import torch\ndef f(x):\n    seq_dim = 1\n    return x.chunk(2, dim=seq_dim)[0].contiguous()",
        "import torch\ny = x.swapaxes(0, 1).contiguous()",
        "import torch\ny = x.movedim(1, -1).contiguous()",
        "import torch\ny = x.mT.contiguous()",
        "import torch\ny = x.narrow(1, 0, 4).contiguous()",
        "import torch\ny = x.unbind(1)[0].contiguous()",
        "import torch\ny = torch.tensor_split(x, 3, dim=2)[0].contiguous()",
    )
    clean = (
        "import torch\ny = x.contiguous()",
        "import torch\ny = x.view(4, -1).contiguous()",
        "import torch\ny = x.reshape(4, -1).contiguous()",
        "import torch\ndef f(x):\n    y = x.transpose(1, 2)\n    y = y * 2\n    return y.contiguous()",
        "import torch\ndef f(x):\n    a, b = x.chunk(2)\n    return a.contiguous()",
        "import torch\ndef f(x):\n    a, b = x.chunk(2, dim=0)\n    return a.contiguous()",
        "import torch\ny = x.narrow(0, 0, 4).contiguous()",
        "import torch\ny = x.unbind()[0].contiguous()",
        # a dim that resolves to 0, or may be 0
        "import torch\ndef f(x):\n    dim = 0\n    return x.chunk(2, dim=dim)[0].contiguous()",
        "import torch\ndef f(x, dim=0):\n    return x.split(2, dim)[0].contiguous()",
        "import torch\ndef f(x):\n    seq_dim = 2 if x.ndim == 4 else 0\n    return x.chunk(2, dim=seq_dim)[1].contiguous()",
        # rebound since the view op; numpy's transpose has no contiguous
        "import torch\ndef f(x):\n    y = x.permute(0, 2, 1)\n    y = y.reshape(4, -1)\n    return y.contiguous()",
        "import numpy as np\ny = np.transpose(a)\nz = torch.as_tensor(y).contiguous()",
        # another op between the view and the copy: `.contiguous()` is not called on the view
        "import torch\ny = torch.transpose(x, 0, 1).float().contiguous()",
    )

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "contiguous" and not node.args):
            return
        receiver = func.value
        for _ in range(4):  # x.unbind(1)[0], a local name, or a piece of one: `parts = x.chunk(2, 1); parts[0]`
            if isinstance(receiver, ast.Subscript):
                receiver = receiver.value
            elif isinstance(receiver, ast.Name):
                bound = self.ctx.binding(receiver.id)
                if bound is None or bound.value is None:
                    return
                receiver = bound.value
            else:
                break
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
