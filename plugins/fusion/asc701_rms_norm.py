"""ASC701 handwritten-rms-norm: `x * rsqrt(mean(x**2, -1, keepdim=True) + eps)` -> torch_npu.npu_rms_norm."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from ascend_lint.rule import Case, Docs

from ._match import (CASTS, FusionRule, Lookup, ctx_lookup, is_last_dim, peel, qual_or_method, resolve, same,
                     square_base, src, src_at, uncast)
from ._reach import following
from ascend_lint.astutil import argument, constant


class HandwrittenRmsNorm(FusionRule):
    code = "ASC701"
    name = "handwritten-rms-norm"
    message = "hand-written RMSNorm runs as separate pow/mean/add/rsqrt/mul kernels on Ascend: {call}"
    fused_ops = frozenset({"npu_rms_norm", "npu_add_rms_norm"})
    triggers = ("rsqrt", "sqrt", "rstd", "rms", "norm", "npu_rms_norm", "npu_add_rms_norm")
    docs = Docs(
        summary="A hand-written RMSNorm that `torch_npu.npu_rms_norm` computes in one kernel.",
        what="Flags a hand-written RMS normalisation: `rsqrt(mean(x²) + eps)` (or `1 / sqrt(...)`, "
             "`x / sqrt(...)`) where the mean runs over the last dim with `keepdim=True` and the square is "
             "`x.pow(2)`, `x * x`, `x ** 2`, `x.square()` or `torch.pow(x, 2)`, inline or through local names, "
             "scaled by a weight or not (`w * x * rsqrt(...)`, `x * rsqrt(...) * w`, or no weight at all). The "
             "message names the weight when it sees one: in the product itself, around it, or in the statement "
             "that next reads the normalised name (`h = h * rsqrt(...)`, `return self.weight * h.to(dtype)`).",
        why="Written out, RMSNorm is five or more small kernels (pow, mean, add, rsqrt, mul, plus casts), each "
            "launched from the host; torch_npu's `npu_rms_norm` does it in one. Ascend's profiler advisor "
            "flags the same pow-mean-add-rsqrt-mul sequence (CANN >= 7.0.0) and recommends "
            "`torch_npu.npu_rms_norm`. Signature: `torch_npu.npu_rms_norm(self, gamma, epsilon=1e-06)` returns "
            "a tuple `(y, rstd)`; take element 0. `gamma` is required: a norm without a weight passes a ones "
            "tensor of the last dim's size in the input's dtype (made once, e.g. a buffer, not per call). "
            "Conditions (op-plugin docs): `self` and `gamma` 2-8-D, "
            "`gamma` shaped like the trailing dims of `self` (usually the last dim); on Atlas A2/A3 "
            "fp16/bf16/fp32 inputs (fp16 or bf16 `self` may use an fp32 `gamma`); on Atlas training and "
            "inference series fp16/fp32 with matching `gamma`; on Atlas inference series the last dim must be "
            "at least 32 bytes.",
        known_problems="Not flagged: LayerNorm (the squared term is centred: `(x - mean)`), norms over another "
                       "dim (`dim=1`, PixelNorm), an L2 normalisation (a sum of squares, not a mean), the RMS of "
                       "one tensor scaling another, a mean without `keepdim=True`, an RMS metric without `eps`, "
                       "and files that already call `npu_rms_norm`/`npu_add_rms_norm` (the hand-written block is "
                       "then taken as the fallback of the fused path).",
        example="""
            import torch
            import torch_npu

            class RMSNorm(torch.nn.Module):
                def forward(self, hidden_states):
                    variance = hidden_states.pow(2).mean(-1, keepdim=True)
                    hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
                    return self.weight * hidden_states
        """,
        use_instead="""
            import torch
            import torch_npu

            class RMSNorm(torch.nn.Module):
                def forward(self, hidden_states):
                    return torch_npu.npu_rms_norm(hidden_states, self.weight, epsilon=self.eps)[0]
        """,
        fix_safety="No fix: the fused call also needs the weight and returns a tuple.",
        source="op-plugin docs `(beta) torch_npu.npu_rms_norm` and op_plugin_functions.yaml; msprof-analyze "
               "advisor rules timeline_fusion_ops.yaml.",
    )
    _HEAD = "import torch\nimport torch_npu\n"
    cases = (
        Case("""
            import torch
            import torch_npu
            def f(x, eps):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
            """, line=4, message_contains="hand-written RMSNorm runs as separate pow/mean/add/rsqrt/mul"),
    )
    flagged = (
        _HEAD + "def f(x, w, eps):\n"
        "    variance = x.pow(2).mean(-1, keepdim=True)\n    x = x * torch.rsqrt(variance + eps)\n    return w * x",
        _HEAD + "def f(x, eps):\n    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)",
        _HEAD + "def f(x, eps):\n    return x * (1 / torch.sqrt(torch.mean(x ** 2, -1, keepdim=True) + eps))",
        _HEAD + "def f(x, eps):\n    return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt()",
        # the factor cast before it scales x
        _HEAD + "def f(x, eps):\n    v = x.float().pow(2).mean(-1, keepdim=True)\n"
        "    return x * torch.rsqrt(v + eps).half()",
        _HEAD + "def f(x, eps):\n    return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype)",
    )
    clean = (
        "import torch\ndef f(x, eps):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",  # no NPU
        _HEAD + "def f(x, w, eps):\n    return torch_npu.npu_rms_norm(x, w, epsilon=eps)[0]",
        # LayerNorm: the square is centred
        _HEAD + "def f(x, eps):\n    mu = x.mean(-1, keepdim=True)\n"
        "    var = (x - mu).pow(2).mean(-1, keepdim=True)\n    return (x - mu) * torch.rsqrt(var + eps)",
        # PixelNorm over channels
        _HEAD + "def f(x):\n    return x * torch.rsqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-8)",
        # an RMS metric, no eps and no keepdim
        _HEAD + "def rmse(a, b):\n    return torch.sqrt(((a - b) ** 2).mean())",
        # the factor scales a projection of x, not x (a folded norm)
        _HEAD + "import torch.nn.functional as F\ndef f(x, w, eps):\n"
        "    r = torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)\n    return F.linear(x, w) * r",
    )

    def start_file(self) -> None:
        super().start_file()
        self._factors: Dict[int, Tuple[ast.expr, ast.expr]] = {}  # id(rsqrt call bound to a name) -> (x, eps)

    def visit_Call(self, node: ast.Call) -> None:
        """`rsqrt(mean(x²) + eps)` / `sqrt(...)`: reported where it scales `x` itself."""
        inner = qual_or_method(self.ctx, node, "rsqrt")
        inverse = inner is not None
        if inner is None:
            inner = qual_or_method(self.ctx, node, "sqrt")
            if inner is None:
                return
        match = self._mean_square_plus_eps(inner)
        if match is None:
            return
        stack = self.ctx.stack
        depth = 1  # climb over casts of the factor: `rsqrt(...).half()`, `rsqrt(...).to(x.dtype)`
        while (len(stack) > depth + 2 and isinstance(stack[-depth - 1], ast.Attribute)
               and stack[-depth - 1].attr in CASTS and stack[-depth - 1].value is node
               and isinstance(stack[-depth - 2], ast.Call) and stack[-depth - 2].func is stack[-depth - 1]):
            node, depth = stack[-depth - 2], depth + 2
        parent = stack[-depth - 1] if len(stack) > depth else None
        grand = stack[-depth - 2] if len(stack) > depth + 1 else None
        if not inverse and _is_op(parent, ast.Div) and parent.right is node and constant(parent.left) == 1:
            node, parent, grand, inverse = parent, grand, None, True  # 1 / sqrt(v) is rsqrt(v)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and inverse:
            self._factors[id(node)] = match  # rstd = rsqrt(...): judged where it multiplies
            return
        self._scaled(parent, node, inverse, match)

    def _ancestors(self, node: Optional[ast.AST]) -> List[ast.AST]:
        """The nodes around `node` (one being walked), innermost first."""
        stack = self.ctx.stack
        index = next((i for i in range(len(stack) - 1, -1, -1) if stack[i] is node), 0)
        return stack[index - 1::-1] if index else []

    def visit_BinOp(self, node: ast.BinOp) -> None:
        """`x * rstd` with `rstd` a name bound to a matched rsqrt."""
        if not isinstance(node.op, ast.Mult):
            return
        for side in (node.left, node.right):
            if isinstance(side, ast.Name):
                bound = self.ctx.binding_before(side.id, side)
                if bound is not None and bound.index is None and id(bound.value) in self._factors:
                    if self._scaled(node, side, True, self._factors[id(bound.value)]):
                        del self._factors[id(bound.value)]  # one finding per norm (`a if c else b` uses)
                    return

    def _scaled(self, parent: Optional[ast.AST], factor: ast.AST, inverse: bool,
                match: Tuple[ast.expr, ast.expr]) -> bool:
        """Report `parent` when it is `x * factor` (inverse) or `x / factor` (a sqrt) of the normalised x."""
        base, eps = match
        if inverse and _is_op(parent, ast.Mult):
            other = parent.right if parent.left is factor else parent.left
        elif not inverse and _is_op(parent, ast.Div) and parent.right is factor:
            other = parent.left
        else:
            return False
        look = ctx_lookup(self.ctx)
        weight = None
        if _is_op(other, ast.Mult) and not _same_tensor(look, other, base):
            weight = _other_factor(look, other, base)  # `w * x * rsqrt(...)`: (w * x) scaled
            if weight is None:
                return False
        elif not _same_tensor(look, other, base):
            return False  # e.g. `F.linear(x, w) * rsqrt(...)`: the factor scales something else
        else:
            weight = self._weight_around(parent)
        x, epsilon = src_at(self.ctx, uncast(base), parent, 'x'), src(self.ctx, eps, 'eps')  # the op upcasts
        if weight is not None:
            call = (f"use `torch_npu.npu_rms_norm({x}, {src(self.ctx, weight, 'weight')}, epsilon={epsilon})[0]` "
                    "(it returns (y, rstd))")
        else:
            call = (f"use `torch_npu.npu_rms_norm({x}, gamma, epsilon={epsilon})[0]` (it returns (y, rstd)) with "
                    "`gamma` the weight the result is scaled by, or, for a norm without a weight, a ones tensor of "
                    "the last dim's size in the input's dtype, made once (the op requires `gamma`)")
        self.candidate(parent, self.message.format(call=call))
        return True

    def _weight_around(self, norm: ast.AST) -> Optional[ast.expr]:
        """The weight that scales the normalised tensor: the other factor of a product around it (`w * (x *
        rstd)`, `(x * rstd).to(dtype) * w`), or, when it is assigned to a name, of the product that reads the
        name next (`h = h * rstd; return self.weight * h.to(dtype)`)."""
        ancestors = self._ancestors(norm)
        inner = norm
        for outer in ancestors:
            if isinstance(outer, ast.Attribute) and outer.attr in CASTS:
                inner = outer
                continue
            if isinstance(outer, ast.Call) and outer.func is inner:
                inner = outer
                continue
            break
        else:
            return None
        if _is_op(outer, ast.Mult):
            return outer.right if outer.left is inner else outer.left
        if (isinstance(outer, ast.Assign) and len(outer.targets) == 1 and isinstance(outer.targets[0], ast.Name)
                and self.ctx.function is not None):
            return _weight_after(outer.targets[0].id, following(self.ctx.function.node, outer))
        return None

    def _mean_square_plus_eps(self, node: ast.expr) -> Optional[Tuple[ast.expr, ast.expr]]:
        """(x, eps) for `mean(square(x), -1, keepdim=True) + eps` in its usual spellings."""
        look = ctx_lookup(self.ctx)
        node = peel(look, node)
        mean, eps = None, None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if self._mean_of_square(peel(look, a)) is not None:
                    mean, eps = peel(look, a), b
                    break
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add" \
                and len(node.args) == 1:
            mean, eps = peel(look, node.func.value), node.args[0]
        if mean is None or eps is None:
            return None
        base = self._mean_of_square(mean)
        if base is None:
            return None
        centred = resolve(look, base)
        if isinstance(centred, ast.BinOp) and isinstance(centred.op, ast.Sub):
            return None  # (x - mean)**2: LayerNorm, not RMSNorm
        return base, eps

    def _mean_of_square(self, node: ast.expr) -> Optional[ast.expr]:
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qual = self.ctx.qualname(func)
        if qual == "torch.mean" and node.args:
            operand, offset = node.args[0], 1
        elif isinstance(func, ast.Attribute) and func.attr == "mean" and qual is None:
            operand, offset = func.value, 0
        else:
            return None
        keepdim = constant(argument(node, "keepdim", offset + 1))
        if not is_last_dim(argument(node, "dim", offset)) or keepdim is not True:
            return None
        return square_base(self.ctx, ctx_lookup(self.ctx), operand)


def _is_op(node: Optional[ast.AST], op: type) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, op)


def _other_factor(look: Lookup, product: ast.BinOp, base: ast.expr) -> Optional[ast.expr]:
    """w for the product `w * x` (either order) of the normalised tensor x and a weight."""
    for one, other in ((product.left, product.right), (product.right, product.left)):
        if _same_tensor(look, one, base) and not _same_tensor(look, other, base):
            return other
    return None


def _weight_after(name: str, stmts: List[ast.stmt]) -> Optional[ast.expr]:
    """The weight in the first statement that reads `name`: the other factor of `w * name` (casts of `name`
    looked through); a statement that only casts it in place (`if ...: h = h.to(w.dtype)`) is passed over.
    None when the name is read otherwise first."""
    for stmt in stmts:
        reads = [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        if not reads:
            continue
        for node in ast.walk(stmt):
            if _is_op(node, ast.Mult):
                for one, other in ((node.left, node.right), (node.right, node.left)):
                    if _names(uncast(one), name) and not _names(uncast(other), name):
                        return other
        if not _casts_in_place(stmt, name):
            return None
    return None


def _casts_in_place(stmt: ast.stmt, name: str) -> bool:
    """`name = name.to(dtype)`, alone or as the body of an `if`."""
    if isinstance(stmt, ast.If) and not stmt.orelse:
        return all(_casts_in_place(inner, name) for inner in stmt.body)
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _names(stmt.targets[0], name)
            and uncast(stmt.value) is not stmt.value and _names(uncast(stmt.value), name))


def _names(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _same_tensor(look: Lookup, a: ast.expr, b: ast.expr) -> bool:
    """Are `a` and `b` the same tensor, up to local names and dtype casts?"""
    return same(a, b) or same(peel(look, a), peel(look, b))
