"""ASC702 handwritten-rotary-embedding: `x * cos + rotate_half(x) * sin` -> torch_npu.npu_rotary_mul."""
from __future__ import annotations

import ast
from typing import Dict, Optional, Tuple

from ascend_lint.rule import Case, Docs
from ascend_lint.astutil import argument, constant

from ._match import FusionRule, Lookup, body_lookup, ctx_lookup, halves, is_last_dim, resolve, same, src

SELF_NAMES = ("self", "cls")
HALF, INTERLEAVE = "half", "interleave"  # torch_npu.npu_rotary_mul's rotary_mode values
FLATTENS = ("flatten", "reshape", "reshape_as", "view", "view_as")
CATS = ("torch.cat", "torch.concat", "torch.concatenate")


class HandwrittenRotaryEmbedding(FusionRule):
    code = "ASC702"
    name = "handwritten-rotary-embedding"
    message = ("hand-written rotary embedding runs as separate {ops}/mul/add kernels on Ascend: "
               "use `torch_npu.npu_rotary_mul({x}, {cos}, {sin}{mode})`{note}")
    fused_ops = frozenset({"npu_rotary_mul", "npu_apply_rotary_pos_emb", "npu_rotary_position_embedding"})
    triggers = ("cos", "sin", "rot", "rope", "npu_rotary_mul", "npu_apply_rotary_pos_emb",
                "npu_rotary_position_embedding")
    docs = Docs(
        summary="A hand-written rotary position embedding that `torch_npu.npu_rotary_mul` computes in one kernel.",
        what="Flags the rotate-half rotary position embedding `x * cos + rotate_half(x) * sin`, where "
             "`rotate_half` is a function or method of the same file that splits the last dim into two halves "
             "(`chunk(2, dim=-1)` or `x[..., :h]` / `x[..., h:]`) and returns `torch.cat((-x2, x1), dim=-1)`, "
             "or where the rotated tensor is built inline the same way; and the interleaved (GPT-J / "
             "RoFormer) layout, whose rotation pairs neighbouring channels: `stack((-x[..., 1::2], "
             "x[..., ::2]), dim=-1)` flattened back to x's shape (`.flatten(-2)`, `.reshape_as(x)`, "
             "einops `rearrange(..., '... d j -> ... (d j)')`), in a local function such as "
             "`rotate_every_two` or inline. Operands may be in either order.",
        why="Written out, RoPE is chunk (or two slices), neg, cat, two muls and an add per tensor, each a "
            "host-launched kernel, for both q and k in every layer. `torch_npu.npu_rotary_mul(input, r1, r2, "
            "rotary_mode='half')` computes `x * cos + rotate_half(x) * sin` in one kernel; Ascend's profiler "
            "advisor recommends it for the chunk-neg-cat-mul-add sequence (CANN >= 7.0.RC1). Conditions "
            "(op-plugin docs): input, r1 (cos) and r2 (sin) 3-D or 4-D, fp16/bf16/fp32; on Atlas A2/A3 "
            "(jit_compile=False) layouts BNSD/BSND/SBND/TND with D < 896 and even, B and N < 1000, and cos/sin "
            "broadcast as 11SD/B1SD/BNSD (for BNSD); on Atlas training series 4-D input with D = 128 only. "
            "For BNSD input with D not 32-byte aligned the docs advise against the fused op (it can be slower). "
            "The interleaved layout is `rotary_mode='interleave'` (x1 = x[..., ::2], x2 = x[..., 1::2]; cos/sin "
            "already repeated per pair, as the hand-written code has them), documented for Atlas A2/A3 with "
            "`jit_compile=False` only, B*N < 1000, D < 896 and even, cos/sin broadcast as 11SD/1S1D/S11D/T1D.",
        known_problems="A `rotate_half` / `rotate_every_two` imported from another module is not inspected and not "
                       "flagged; the complex-number form (`torch.view_as_complex(...) * freqs_cis`) is not "
                       "matched. Files that already call "
                       "`npu_rotary_mul`, `npu_apply_rotary_pos_emb` or MindSpeed's "
                       "`npu_rotary_position_embedding` are taken as having the fused path.",
        example="""
            import torch
            import torch_npu

            def rotate_half(x):
                x1, x2 = x.chunk(2, dim=-1)
                return torch.cat((-x2, x1), dim=-1)

            def apply_rotary_pos_emb(q, k, cos, sin):
                return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        """,
        use_instead="""
            import torch_npu

            def apply_rotary_pos_emb(q, k, cos, sin):
                return torch_npu.npu_rotary_mul(q, cos, sin), torch_npu.npu_rotary_mul(k, cos, sin)
        """,
        fix_safety="No fix: cos/sin must have a layout the fused op accepts.",
        source="op-plugin docs `torch_npu.npu_rotary_mul` and op_plugin_functions.yaml; msprof-analyze advisor "
               "rules timeline_fusion_ops.yaml.",
    )
    _HALF = ("import torch\nimport torch_npu\n"
             "def rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)\n")
    cases = (
        Case("""
            import torch
            import torch_npu
            def rotate_half(x):
                x1, x2 = x.chunk(2, dim=-1)
                return torch.cat((-x2, x1), dim=-1)
            def rope(q, cos, sin):
                return q * cos + rotate_half(q) * sin
            """, line=7, message_contains="hand-written rotary embedding runs as separate"),
    )
    flagged = (
        _HALF + "def rope(q, cos, sin):\n    return (rotate_half(q) * sin) + (cos * q)",
        "import torch\nimport torch_npu\ndef rotate_half(t):\n    a = t[..., : t.shape[-1] // 2]\n"
        "    b = t[..., t.shape[-1] // 2 :]\n    return torch.cat([-b, a], dim=-1)\n"
        "def rope(x, c, s):\n    return x * c + rotate_half(x) * s",
        "import torch\nimport torch_npu\ndef apply_rope(x, cos, sin):\n    h = x.size(-1) // 2\n"
        "    x1 = x[..., :h]\n    x2 = x[..., h:]\n    rotated = torch.cat((-x2, x1), dim=-1)\n"
        "    return (x * cos) + (rotated * sin)",
        "import torch\nimport torch_npu\nclass Rope(torch.nn.Module):\n"
        "    def rotate_half(self, x):\n        x1, x2 = torch.chunk(x, 2, dim=-1)\n"
        "        return torch.cat((-x2, x1), dim=-1)\n"
        "    def forward(self, q, cos, sin):\n        return q * cos + self.rotate_half(q) * sin",
        # interleaved pairs (GPT-J's rotate_every_two): rotary_mode='interleave'
        "import torch\nimport torch_npu\ndef rotate_every_two(x):\n    x1 = x[:, :, :, ::2]\n    x2 = x[:, :, :, 1::2]\n"
        "    x = torch.stack((-x2, x1), dim=-1)\n    return x.flatten(-2)\n"
        "def rope(x, cos, sin):\n    return (x * cos) + (rotate_every_two(x) * sin)",
    )
    clean = (
        _HALF.replace("import torch_npu\n", "") + "def rope(q, cos, sin):\n    return q * cos + rotate_half(q) * sin",
        _HALF + "def rope(q, cos, sin):\n    return torch_npu.npu_rotary_mul(q, cos, sin)\n"
        "def rope_ref(q, cos, sin):\n    return q * cos + rotate_half(q) * sin",
        # rotate_half of another tensor
        _HALF + "def rope(q, k, cos, sin):\n    return q * cos + rotate_half(k) * sin",
        # not a rotation: cat((x1, x2)) without the negation
        "import torch\nimport torch_npu\ndef swap(x):\n    x1, x2 = x.chunk(2, dim=-1)\n"
        "    return torch.cat((x2, x1), dim=-1)\ndef f(q, cos, sin):\n    return q * cos + swap(q) * sin",
        # halves along dim 0
        "import torch\nimport torch_npu\ndef rot(x):\n    x1, x2 = x.chunk(2)\n    return torch.cat((-x2, x1))\n"
        "def f(q, cos, sin):\n    return q * cos + rot(q) * sin",
    )

    def start_file(self) -> None:
        super().start_file()
        self._rotators: Dict[int, Optional[str]] = {}

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not isinstance(node.op, ast.Add):
            return
        look = ctx_lookup(self.ctx)
        left, right = resolve(look, node.left), resolve(look, node.right)
        for plain, rotated in ((left, right), (right, left)):
            match = self._match(look, plain, rotated)
            if match is not None:
                x, cos, sin, mode = match
                interleave = mode == INTERLEAVE
                self.candidate(node, self.message.format(
                    x=src(self.ctx, x, "x"), cos=src(self.ctx, cos, "cos"), sin=src(self.ctx, sin, "sin"),
                    ops="slice/neg/stack" if interleave else "chunk/neg/cat",
                    mode=", rotary_mode='interleave'" if interleave else "",
                    note=" (the interleave mode needs Atlas A2/A3 with `jit_compile=False`)" if interleave else ""))
                return

    def _match(self, look: Lookup, plain: ast.expr, rotated: ast.expr) -> Optional[Tuple[ast.expr, ...]]:
        """(x, cos, sin, mode) for `x * cos + rotate(x) * sin`."""
        if not (_is_mult(plain) and _is_mult(rotated)):
            return None
        for rot, sin in ((rotated.left, rotated.right), (rotated.right, rotated.left)):
            found = self._rotated_input(look, rot)
            if found is None:
                continue
            x, mode = found
            for xs, cos in ((plain.left, plain.right), (plain.right, plain.left)):
                if same(xs, x) and not same(cos, x):
                    return x, cos, sin, mode
        return None

    def _rotated_input(self, look: Lookup, node: ast.expr) -> Optional[Tuple[ast.expr, str]]:
        """(X, mode) for `rotate_half(X)` / `rotate_every_two(X)` (a verified local rotate function) or the
        rotation written inline: `cat((-x2, x1), -1)` of halves, `stack((-x[..., 1::2], x[..., ::2]), -1)`
        flattened back."""
        node = resolve(look, node)
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        callee = None
        if isinstance(func, ast.Name) and self.ctx.qualname(func) is None:
            callee = func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in SELF_NAMES:
            callee = func.attr
        if callee is not None:
            target = self.ctx.local_functions.get(callee)
            mode = self._rotate_mode(target) if target is not None and node.args else None
            return (node.args[0], mode) if mode is not None else None
        x = _cat_of_halves(self.ctx, look, node)
        if x is not None:
            return x, HALF
        x = _stack_of_pairs(self.ctx, look, node)
        return (x, INTERLEAVE) if x is not None else None

    def _rotate_mode(self, func: ast.AST) -> Optional[str]:
        """HALF / INTERLEAVE when `func(x)` returns x rotated that way, else None (cached)."""
        key = id(func)
        if key not in self._rotators:
            params = [a.arg for a in func.args.posonlyargs + func.args.args if a.arg not in SELF_NAMES]
            mode = None
            returns = [s for s in func.body if isinstance(s, ast.Return) and s.value is not None]
            if params and len(returns) == 1:
                look = body_lookup(func)
                for kind, match in ((HALF, _cat_of_halves), (INTERLEAVE, _stack_of_pairs)):
                    x = match(self.ctx, look, returns[0].value)
                    if isinstance(x, ast.Name) and x.id == params[0]:
                        mode = kind
                        break
            self._rotators[key] = mode
        return self._rotators[key]


def _is_mult(node: ast.expr) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)


def _cat_of_halves(ctx, look: Lookup, node: ast.expr) -> Optional[ast.expr]:
    """X for `torch.cat((-x2, x1), dim=-1)` with x1, x2 the first and second half of X."""
    node = resolve(look, node)
    if not (isinstance(node, ast.Call) and ctx.qualname(node.func) in CATS):
        return None
    parts = argument(node, "tensors", 0)
    if not (isinstance(parts, (ast.Tuple, ast.List)) and len(parts.elts) == 2):
        return None
    if not is_last_dim(argument(node, "dim", 1)):
        return None
    neg, first = parts.elts
    if not (isinstance(neg, ast.UnaryOp) and isinstance(neg.op, ast.USub)):
        return None
    return halves(ctx, look, first, neg.operand)


def _stack_of_pairs(ctx, look: Lookup, node: ast.expr) -> Optional[ast.expr]:
    """X for the interleaved rotation `stack((-X[..., 1::2], X[..., ::2]), dim=-1)` flattened back to X's
    shape (`.flatten(-2)`, `.reshape_as(X)`, `.reshape(X.shape)`, einops `rearrange(..., '... d j -> ... (d j)')`)."""
    node = resolve(look, node)
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in FLATTENS and ctx.qualname(func) is None:
        stacked = func.value
    elif (ctx.qualname(func) or "").endswith("rearrange") and node.args:
        stacked = node.args[0]
    else:
        return None
    stacked = resolve(look, stacked)
    if not (isinstance(stacked, ast.Call) and ctx.qualname(stacked.func) == "torch.stack"):
        return None
    parts = argument(stacked, "tensors", 0)
    dim = argument(stacked, "dim", 1) or argument(stacked, "axis")
    if not (isinstance(parts, (ast.Tuple, ast.List)) and len(parts.elts) == 2) or constant(dim) != -1:
        return None
    neg, even = parts.elts
    if not (isinstance(neg, ast.UnaryOp) and isinstance(neg.op, ast.USub)):
        return None
    odd_source = _strided(resolve(look, neg.operand), 1)
    even_source = _strided(resolve(look, even), 0)
    if odd_source is None or even_source is None or not same(odd_source, even_source):
        return None
    return odd_source


def _strided(node: ast.expr, start: int) -> Optional[ast.expr]:
    """X for `X[..., start::2]` / `X[:, :, :, start::2]` (every other element of the last axis)."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and node.slice.elts):
        return None
    *lead, last = node.slice.elts
    if not (isinstance(last, ast.Slice) and last.upper is None and constant(last.step) == 2):
        return None
    if (constant(last.lower) if last.lower is not None else 0) != start:
        return None
    if not all((isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None)
               or constant(e) is Ellipsis for e in lead):
        return None
    return node.value
