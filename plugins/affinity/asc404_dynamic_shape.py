"""ASC404 dynamic-shape-in-forward."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.astutil import callee_name, constant

SHAPE_OPS = frozenset({"nonzero", "masked_select", "unique", "argwhere"})
SHAPE_FUNCTIONS = frozenset({f"torch.{op}" for op in SHAPE_OPS} | {f"mindspore.ops.{op}" for op in SHAPE_OPS}
                            | {"mindspore.ops.NonZero", "mindspore.ops.MaskedSelect", "mindspore.ops.Unique"})
MS_PRIMITIVES = frozenset({"mindspore.ops.NonZero", "mindspore.ops.MaskedSelect", "mindspore.ops.Unique"})
# element-wise predicates: their result is a boolean mask
PREDICATES = frozenset({"eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "greater_equal", "less_equal",
                        "not_equal", "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isin", "logical_and",
                        "logical_or", "logical_not", "logical_xor", "bool"})
NOT_MASK_WORDS = frozenset({"idx", "index", "indices", "inds", "ind", "pos", "position", "positions", "ids", "id",
                            "num", "len", "count", "size", "shape"})
SHAPE_PROBLEM = "has a data-dependent shape, which recompiles operators and waits on the device on Ascend"
# calls whose result indexes by position (or selects a slice), not by a boolean mask
INDEX_PRODUCERS = frozenset({"slice", "range", "len", "int", "list", "tuple", "arange", "nonzero", "argwhere",
                             "argsort", "argmax", "argmin", "topk", "randperm", "long", "where", "unique",
                             "searchsorted", "multinomial"})
BOOL_DTYPES = frozenset({"torch.bool", "mindspore.bool_", "mindspore.dtype.bool_"})


class DynamicShapeInForward(Rule):
    code = "ASC404"
    name = "dynamic-shape-in-forward"
    message = "{op} in {method} {problem}: {remedy}"
    preview = True
    triggers = ("nonzero", "masked_select", "unique", "argwhere", "where", "NonZero", "MaskedSelect", "Unique", "[")
    docs = Docs(
        summary="An op with a data-dependent output shape, such as `nonzero` or `x[mask]`, in `forward` or `construct`.",
        what="Flags, inside `forward` of a `torch.nn.Module` (or an autograd Function) and `construct` of a "
             "`mindspore.nn.Cell`: `torch.nonzero`, `masked_select`, `unique`, `argwhere` and one-argument "
             "`torch.where` (function or method form, and their MindSpore `ops` twins), boolean-mask "
             "indexing `x[mask]` and boolean-mask assignment `x[mask] = v`. A mask is a comparison, a "
             "predicate (`eq`, `isnan`, `logical_and`, `.bool()`, ...), `~`/`&`/`|` of masks, or a local "
             "name bound to one or called `*mask*`. Through the project model, a function called from such a method (in any module, up to three calls deep) or assigned as one by a monkey-patch is hot too, and a class deriving from a model base defined in another module or from a well-known third-party base (transformers, mmengine, Megatron, mindformers) is a model.",
        why="These ops give outputs whose shape depends on the data. On Ascend an operator is compiled "
            "for each new shape (CANN migration guide: dynamic shapes recompile operators repeatedly and run "
            "slowly), the host must wait for the device to learn the output size, and NonZero / Index / "
            "IndexPut run on the AI CPU. Ascend's AI CPU replacement guide measured `masked[mask] = 0` at "
            "9.64 ms against 0.175 ms for `masked *= ~mask`.",
        known_problems="A local name containing `mask` is taken to hold a boolean mask (names such as "
                       "`mask_idx` or `mask_pos` are not). `unique` has no static-shape twin: move it out of "
                       "the model. The advice for `x[mask] = v` follows `v`: multiplying by the inverted mask "
                       "only writes zeros, another scalar needs `masked_fill_` / `torch.where`, and a tensor "
                       "of packed values has to be computed at every position first (`torch.where(mask, "
                       "values, x)`).",
        example="""
            class LabelSmoothingCE(nn.Module):
                def forward(self, loss, target):
                    loss[target == self.ignore_index] = 0.0
                    return loss.sum() / torch.nonzero(target != self.ignore_index).size(0)
        """,
        use_instead="""
            class LabelSmoothingCE(nn.Module):
                def forward(self, loss, target):
                    keep = target != self.ignore_index
                    loss = loss * keep
                    return loss.sum() / keep.sum()
        """,
        fix_safety="No fix: the static-shape rewrite depends on how the result is used.",
        source="Ascend msprof-analyze AI CPU operator replacement guide (IndexPut: 9.64 ms vs 0.175 ms); "
               "CANN 6.0.1 PyTorch migration guide, \"dynamic shape\"; CANN 7.0 dynamic-shape tuning case.",
    )
    cases = (
        Case("""
            import torch
            class M(torch.nn.Module):
                def forward(self, x):
                    return torch.nonzero(x > 0)
            """, line=4, message_contains="`torch.nonzero` in `forward` has a data-dependent shape, which"),
    )
    flagged = (
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.nonzero()",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, m):\n"
        "        return torch.masked_select(x, m)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.unique(x)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.where(x > 0)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x[x > 0]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        x[x < 0] = 0\n        return x",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, y):\n        x[:, y.isnan()] += 1\n"
        "        return x",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, labels):\n        pos = labels > 0\n"
        "        return x[pos].sum()",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, valid_mask):\n"
        "        return x[valid_mask]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, a, b):\n        return x[(a > 0) & ~b]",
        "from mindspore import nn, ops\nclass C(nn.Cell):\n    def construct(self, x):\n"
        "        return ops.masked_select(x, x > 0)",
        "from mindspore import nn, ops\nclass C(nn.Cell):\n    def __init__(self):\n        super().__init__()\n"
        "        self.unique = ops.Unique()\n    def construct(self, x):\n        return self.unique(x)",
        "from mindspore import nn\nclass C(nn.Cell):\n    def construct(self, x):\n        x[x > 1] = 1\n"
        "        return x",
    )
    clean = (
        "import torch\ndef count(x):\n    return torch.nonzero(x).size(0)",  # not in forward
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.where(x > 0, x, 0)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, m):\n        return x * m",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.masked_fill(x < 0, 0)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, idx):\n        return x[idx]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x[:, 0]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, mask_idx):\n"
        "        return x[mask_idx]",
        # integer advanced indexing next to a mask-named index array
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
        "        rows = torch.arange(0, g.size(0), device=g.device)\n        g[rows, masked_target] -= 1.0\n"
        "        return g",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, d):\n        return d['key' in d]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, masks, multi):\n"
        "        mask_slice = slice(1, None) if multi else slice(0, 1)\n        return masks[:, mask_slice]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, scores):\n"
        "        keep_mask = torch.argsort(scores)[:16]\n        return x[keep_mask]",  # positions, not a mask
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, mask):\n"
        "        return x.masked_fill(~mask, 0)[mask.sum()]",
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self, labels):\n        super().__init__()\n"
        "        self.keep = labels[labels > 0]",  # __init__ is not hot
        "class M:\n    def forward(self, x):\n        return x[x > 0]",  # not a Module
    )

    def visit_Call(self, node: ast.Call) -> None:
        if not self.ctx.in_hot_method():
            return
        func = node.func
        qual = self.ctx.call_name(node)
        op: Optional[str] = None
        if qual in SHAPE_FUNCTIONS:
            op = qual
        elif qual in ("torch.where", "mindspore.ops.where") and len(node.args) == 1 and not node.keywords:
            op = f"one-argument `{qual}`"
        elif qual is None and isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                cls = self.ctx.class_scope
                bound = cls.attributes.get(func.attr) if cls is not None else None
                if isinstance(bound, ast.Call) and self.ctx.call_name(bound) in MS_PRIMITIVES:
                    op = self.ctx.call_name(bound)
            elif func.attr in SHAPE_OPS:
                op = f".{func.attr}()"
        if op is None:
            return
        name = op.rsplit(".", 1)[-1].lower()
        if "unique" in name:
            scope = self.ctx.hot_method()
            remedy = f"move it out of `{scope.name if scope else 'forward'}` (for example into the data pipeline)"
        else:
            remedy = self._where_remedy()
        label = op if op.startswith("one-argument") else f"`{op}`"
        self.report(node, op=label, method=self._method(), problem=SHAPE_PROBLEM, remedy=remedy)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Del) or not self.ctx.in_hot_method():
            return
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(self._integer_index(p) for p in parts):
            return  # `g[arange, masked_target]`: integer advanced indexing, whatever the names say
        if not any(self._is_mask(p) for p in parts):
            return
        if isinstance(node.ctx, ast.Store):
            self.report(node, op="boolean-mask assignment `x[mask] = v`", method=self._method(),
                        problem="runs as IndexPut on Ascend's AI CPU (measured 9.64 ms against 0.175 ms rewritten)",
                        remedy=self._store_remedy())
        else:
            self.report(node, op="boolean-mask indexing `x[mask]`", method=self._method(),
                        problem=SHAPE_PROBLEM, remedy=self._where_remedy())

    def _integer_index(self, node: ast.AST) -> bool:
        """An index array of positions: `torch.arange(n)` inline or through a local name."""
        if isinstance(node, ast.Name):
            bound = self.ctx.binding_before(node.id, node)
            node = bound.value if bound is not None and bound.index is None and bound.value is not None else node
        return isinstance(node, ast.Call) and not isinstance(node, ast.Slice) and _is_index(node)

    def _is_mask(self, node: ast.AST, depth: int = 0) -> bool:
        if depth > 4:
            return False
        if isinstance(node, ast.Compare):
            return not any(isinstance(op, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in node.ops)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self._is_mask(node.left, depth + 1) or self._is_mask(node.right, depth + 1)
        if isinstance(node, ast.Name):
            return self._mask_held(node, depth)
        if isinstance(node, ast.Call):
            return self._mask_call(node)
        return False

    def _mask_held(self, node: ast.Name, depth: int) -> bool:
        """A local name: its known value decides, then the name (`mask`, `keep`, ...)."""
        bound = self.ctx.binding_before(node.id, node)
        if bound is not None and bound.index is None and bound.value is not None:
            if self._is_mask(bound.value, depth + 1):
                return True
            if _is_index(bound.value):
                return False
        return _mask_name(node.id)

    def _mask_call(self, node: ast.Call) -> bool:
        """A predicate (`torch.isnan(x)`, `x.eq(0)`) or a cast to bool."""
        func = node.func
        qual = self.ctx.call_name(node)
        if qual is not None:
            return qual.startswith(("torch.", "mindspore.ops.")) and qual.rsplit(".", 1)[-1] in PREDICATES
        if isinstance(func, ast.Attribute):
            if func.attr in PREDICATES:
                return True
            if func.attr in ("to", "type", "astype"):
                return any(self.ctx.qualname(a) in BOOL_DTYPES for a in node.args)
        return False

    def _method(self) -> str:
        return self.ctx.hot_role().describe()

    def _where_remedy(self) -> str:
        cls = self.ctx.class_scope
        if cls is not None and cls.class_kind == "cell":
            return "use `ops.select(mask, x, zeros)` or multiply by the mask (`(x * mask).sum()`)"
        return "use `torch.where(mask, x, 0)` or multiply by the mask (`(x * mask).sum()`)"

    def _store_remedy(self) -> str:
        """The static-shape rewrite of `x[mask] = v` depends on v: multiplying by the mask only writes 0."""
        stmt = next((n for n in reversed(self.ctx.stack) if isinstance(n, ast.stmt)), None)
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) else None
        ms = self.ctx.class_scope is not None and self.ctx.class_scope.class_kind == "cell"
        if isinstance(stmt, ast.AugAssign):
            return "apply the update at every position through the mask (`x += v * mask`)"
        scalar = constant(value, default=None)
        if _is_float_call(value):
            scalar = "v"
        if scalar in (0, 0.0, False) and not isinstance(scalar, str):
            return ("use `ops.masked_fill(x, mask, 0)` or multiply by the inverted mask" if ms
                    else "multiply by the inverted mask (`x *= ~mask`) or use `x.masked_fill_(mask, 0)`")
        if isinstance(scalar, (int, float, str)) and not isinstance(scalar, bool) or scalar is True:
            return ("use `ops.masked_fill(x, mask, v)` or `ops.select(mask, v, x)`" if ms
                    else "use `x.masked_fill_(mask, v)` or `torch.where(mask, v, x)`")
        return ("compute the values at every position and use `ops.select(mask, values, x)`" if ms
                else "compute the values at every position and use `torch.where(mask, values, x)`")


def _is_float_call(node: Optional[ast.AST]) -> bool:
    """`float('-inf')`, `-float('inf')`: a scalar written as a call."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float"


def _is_index(node: ast.AST) -> bool:
    """A value that is clearly not a boolean mask: a literal, a slice, arithmetic, an index producer."""
    if isinstance(node, (ast.Constant, ast.Slice, ast.List, ast.Tuple, ast.ListComp, ast.JoinedStr)):
        return True
    if isinstance(node, ast.BinOp) and not isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return True
    if isinstance(node, ast.IfExp):
        return _is_index(node.body) and _is_index(node.orelse)
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call):
        name = callee_name(node)
        return name in INDEX_PRODUCERS
    return False


def _mask_name(name: str) -> bool:
    """`mask`, `valid_mask`, `masks`, `masked_tokens`, but not `mask_idx` / `mask_pos`."""
    words = name.lower().split("_")
    return any("mask" in w for w in words) and not any(w in NOT_MASK_WORDS for w in words)
