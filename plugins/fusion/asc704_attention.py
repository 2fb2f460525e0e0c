"""ASC704 handwritten-attention: `softmax(q @ k^T * scale [+ mask]) [dropout] @ v` -> fused attention."""
from __future__ import annotations

import ast
from typing import Callable, List, Optional, Tuple, TypeVar

from ascend_lint.rule import Case, Docs
from ascend_lint.astutil import argument, constant

from ._match import (MAX_STEPS, FusionRule, Lookup, alternatives, ctx_lookup, is_last_dim, peel, resolve, src,
                     uncast)

T = TypeVar("T")
MATMULS = ("torch.matmul", "torch.bmm")
EINSUMS = ("torch.einsum",)
DROPOUT_FUNCS = ("torch.nn.functional.dropout", "torch.dropout")
# Elementwise clamps a score passes through (`torch.max(scores, floor)`: the old LLaMA mask floor).
CLAMPS = frozenset({"torch.max", "torch.maximum", "torch.clamp", "torch.clamp_min"})
SEARCH_STEPS = 48  # values of local names tried per candidate matmul
SOFTMAX_FUNCS = ("torch.softmax", "torch.nn.functional.softmax")
TRANSPOSES = ("transpose", "swapaxes", "permute", "t")
# MindSpore: MatMul primitives (called through an instance), functions, softmax/dropout and the elementwise
# primitives a score passes through on its way to the softmax (scale, mask, cast).
MS_MATMUL_CLASSES = ("mindspore.ops.BatchMatMul", "mindspore.ops.MatMul")
MS_MATMUL_FUNCS = ("mindspore.ops.matmul", "mindspore.ops.bmm", "mindspore.ops.batch_matmul")
MS_SOFTMAX_FUNCS = ("mindspore.ops.softmax",)
MS_SOFTMAX_CLASSES = ("mindspore.nn.Softmax", "mindspore.ops.Softmax")
MS_TRANSPOSES = ("mindspore.ops.transpose", "mindspore.ops.Transpose", "mindspore.ops.permute")
MS_CASTS = ("mindspore.ops.Cast", "mindspore.ops.cast")
MS_RESHAPES = ("mindspore.ops.reshape", "mindspore.ops.Reshape")
MS_PASS_THROUGH = frozenset(f"mindspore.ops.{name}" for name in (
    "Mul", "RealDiv", "Div", "Add", "Sub", "Cast", "MaskedFill", "mul", "div", "add", "sub", "cast", "masked_fill"))
MS_MESSAGE = ("hand-written attention runs as separate BatchMatMul/Softmax/BatchMatMul kernels on Ascend: use "
              "`ops.flash_attention_score({q}, {k}, {v}, head_num, attn_mask=mask, scalar_value=scale, "
              "input_layout='BNSD')` (Atlas A2; fp16/bf16 inputs; a bool mask where True drops a position)")


class HandwrittenAttention(FusionRule):
    code = "ASC704"
    name = "handwritten-attention"
    message = ("hand-written attention runs as separate matmul/softmax/matmul kernels on Ascend: use "
               "`F.scaled_dot_product_attention({q}, {k}, {v}, attn_mask=<bool mask>)` with 4-D (B, N, S, D) "
               "inputs, or `torch_npu.npu_fusion_attention({q}, {k}, {v}, head_num, 'BNSD', atten_mask=mask, "
               "scale=scale)[0]`")
    fused_ops = frozenset({
        "scaled_dot_product_attention", "npu_prompt_flash_attention", "npu_incre_flash_attention",
        "npu_fused_infer_attention_score",
        "ALL_ATTENTION_FUNCTIONS",  # transformers' attention-interface dispatch (sdpa / flash / npu kernels)
    })
    frameworks = ("torch", "mindspore")
    # npu_fusion_attention(_v2), MindSpore ops.flash_attention_score / FlashAttentionScore, ...
    fused_markers = ("flash_attn", "flash_attention", "fusion_attention", "FlashAttention")
    triggers = ("@", "matmul", "bmm", "einsum", "attn", "scaled_dot_product_attention", "flash_attn", "flash_attention",
                "fusion_attention", "npu_fused_infer_attention_score", "ALL_ATTENTION_FUNCTIONS")
    docs = Docs(
        summary="Hand-written scaled dot-product attention that a fused attention operator computes in one kernel.",
        what="Flags scaled dot-product attention written out in one function: `softmax(S, dim=-1) @ v` (or "
             "`torch.matmul`/`torch.bmm`), where the score S is `q @ k.transpose(-2, -1)` (also "
             "`k.transpose(-1, -2)`, `k.transpose(2, 3)`, `k.mT`, `k.permute(0, 1, 3, 2)`, `torch.baddbmm`, "
             "`torch.einsum('bhid,bhjd->bhij', q, k)`), optionally scaled (`* scale`, `/ math.sqrt(d)`, also "
             "on q and k), masked (`+ mask`, `+= bias`, `.masked_fill(...)`, `torch.where(causal, s, floor)`, "
             "`torch.max(s, floor)`), reshaped per window or head (`view`/`reshape` to 3 dims or more), cast "
             "around the softmax (`s.float()` ... `.to(dtype)`, `.astype(...)`, `dtype=torch.float32`), and "
             "followed by dropout, inline or through local names. A name is followed to every assignment that "
             "may reach it: after `if mask is not None: s = s.masked_fill(...)`, both the masked and the plain "
             "score count, and an assignment in the other branch of an `if`/`else` does not. In MindSpore the "
             "same chain written with `ops.BatchMatMul(transpose_b=True)` / `ops.matmul` (an instance held in "
             "the Cell or a local, or the function), `ops.softmax` / `nn.Softmax` and the "
             "`Mul`/`RealDiv`/`Add`/`Cast`/`Reshape` primitives.",
        why="Written out, attention materialises the S x S score and probability matrices and launches several "
            "kernels per layer (matmul, mul, add/masked_fill, softmax, dropout, matmul); the fused kernel "
            "keeps them on chip. Ascend's profiler advisor recommends `torch_npu.npu_fusion_attention` for this "
            "sequence (CANN >= 7.0.RC1). With torch >= 2.1, torch_npu routes `F.scaled_dot_product_attention` to "
            "the fused kernel only when q/k/v are 4-D (B, N, S, D), the mask is None or bool, the dtype is "
            "fp16/bf16/fp32, N <= 2048, D <= 512 (fp32 also needs D % 4 == 0), and the SoC is Atlas A2/A3; a "
            "float (additive) mask or 3-D inputs silently fall back to the unfused math path. "
            "`torch_npu.npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, "
            "padding_mask=None, atten_mask=None, scale=1., keep_prob=1., pre_tockens=2147483647, "
            "next_tockens=2147483647, ...)` takes layouts BSH/SBH/BSND/BNSD/TND, a bool/uint8 mask where 1 "
            "means masked out, and returns a tuple whose element 0 is the output (documented for Atlas A2 "
            "training; not for Atlas training series). MindSpore's fused kernel is "
            "`mindspore.ops.flash_attention_score(query, key, value, head_num, real_shift=None, drop_mask=None, "
            "padding_mask=None, attn_mask=None, ..., keep_prob=1.0, scalar_value=1.0, ..., input_layout='BSH', "
            "sparse_mode=0)` (MindSpore source, mindspore.ops.function): experimental, Atlas A2 training only, "
            "fp16/bf16 inputs, D a multiple of 16 up to 512, a bool/uint8 `attn_mask` where 1 drops a position; it "
            "returns the output tensor.",
        known_problems="Softmax over scores that are not `q @ k^T` (a router's logits, a linear layer's "
                       "output, `a @ b` without a transposed key), or over a dim other than the last, is not "
                       "flagged. Nor is a softmax whose scores come in as a parameter (ESPnet/WeNet "
                       "`forward_attention(value, scores, mask)`), even when it is cast around or masked in "
                       "both branches of `if mask is not None`: without the `q @ k^T` it may be a router's or "
                       "a classifier's, and on its own it has no fused replacement to recommend "
                       "(`torch_npu.npu_scaled_masked_softmax` needs a bool mask and last two dims of "
                       "32..4096 in steps of 32). Files that already call "
                       "`F.scaled_dot_product_attention`, `npu_fusion_attention`, a flash-attention function "
                       "(any name containing `flash_attn`/`flash_attention`, such as "
                       "`npu_sparse_flash_attention`) or an inference attention kernel, or dispatch through "
                       "transformers' `ALL_ATTENTION_FUNCTIONS` (the eager function is then the fallback of the "
                       "sdpa/flash path), are taken as having the fused path.",
        example="""
            import math
            import torch
            import torch_npu

            def attention(q, k, v, mask):
                scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
                scores = scores + mask
                probs = torch.softmax(scores, dim=-1)
                return torch.matmul(probs, v)
        """,
        use_instead="""
            import torch.nn.functional as F
            import torch_npu

            def attention(q, k, v, bool_mask):
                # bool_mask: True where attention is allowed (SDPA convention)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask)
        """,
        fix_safety="No fix: the mask convention and layout must be adapted by hand.",
        source="op-plugin ScaledDotProductAttentionKernelNpuOpApi.cpp, docs `torch_npu.npu_fusion_attention`, "
               "`torch_npu.npu_scaled_masked_softmax` and op_plugin_functions.yaml; msprof-analyze advisor rules "
               "timeline_fusion_ops.yaml.",
    )
    _IMPORTS = "import math\nimport torch\nimport torch.nn.functional as F\nimport torch_npu\n"
    cases = (
        Case("""
            import math
            import torch
            import torch.nn.functional as F
            import torch_npu
            def f(q, k, v, d):
                return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v
            """, line=6, message_contains="hand-written attention runs as separate matmul/softmax/matmul"),
    )
    flagged = (
        _IMPORTS + "def f(q, k, v, scale, mask):\n    s = torch.matmul(q, k.transpose(-1, -2)) * scale\n"
        "    s = s + mask\n    p = F.softmax(s, dim=-1)\n    p = F.dropout(p, 0.1)\n    return torch.matmul(p, v)",
        _IMPORTS + "def f(q, k, v, mask):\n    w = (q @ k.mT).masked_fill(mask, float('-inf'))\n"
        "    return w.softmax(dim=-1) @ v",
        _IMPORTS + "class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.softmax = torch.nn.Softmax(dim=-1)\n"
        "    def forward(self, q, k, v):\n        attn = self.softmax(torch.matmul(q, k.transpose(2, 3)))\n"
        "        attn = self.attn_dropout(attn)\n        return torch.matmul(attn, v)",
        _IMPORTS + "def f(q, k, v):\n    w = torch.bmm(q, k.transpose(1, 2))\n"
        "    w = F.softmax(w.float(), dim=-1).type_as(w)\n    return torch.bmm(w, v)",
        # MindSpore: BatchMatMul primitives held in the Cell, a local instance, ops functions
        "from mindspore import nn, ops\nclass Attention(nn.Cell):\n    def __init__(self):\n        super().__init__()\n"
        "        self.q_matmul_k = ops.BatchMatMul(transpose_b=True)\n        self.attn_matmul_v = ops.BatchMatMul()\n"
        "        self.softmax = nn.Softmax(axis=-1)\n        self.mul = ops.Mul()\n"
        "    def construct(self, q, k, v):\n        attn = self.mul(self.q_matmul_k(q, k), self.scale)\n"
        "        attn = self.attn_drop(self.softmax(attn))\n        return self.attn_matmul_v(attn, v)",
        "from mindspore import nn, ops\nclass Attention(nn.Cell):\n    def construct(self, q, k, v):\n"
        "        bmm = ops.BatchMatMul(transpose_b=True)\n        attn = bmm(q, k) * self.scale\n"
        "        softmax = nn.Softmax()\n        attn = softmax(attn)\n        return ops.BatchMatMul()(attn, v)",
        "import mindspore as ms\nfrom mindspore import ops\ndef attention(q, k, v):\n"
        "    s = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / 8.0\n    return ops.matmul(ops.softmax(s, axis=-1), v)",
    )
    clean = (
        "import torch\ndef f(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v",
        _IMPORTS + "def f(q, k, v, d):\n    if q.is_npu:\n        return F.scaled_dot_product_attention(q, k, v)\n"
        "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v",
        # softmax over a router's logits
        _IMPORTS + "def f(self, x, experts):\n    w = F.softmax(self.router(x), dim=-1)\n    return w @ experts",
        # softmax over a non-last dim
        _IMPORTS + "def f(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=1) @ v",
        # scores from an untransposed product
        _IMPORTS + "def f(a, b, v):\n    return torch.softmax(a @ b, dim=-1) @ v",
        # MindSpore: a file with the fused op; a softmax over a non-last axis; an untransposed product
        "from mindspore import nn, ops\nclass A(nn.Cell):\n    def construct(self, q, k, v):\n"
        "        if self.use_fa:\n            return ops.flash_attention_score(q, k, v, 8)\n"
        "        s = ops.BatchMatMul(transpose_b=True)(q, k)\n        return ops.BatchMatMul()(ops.softmax(s, -1), v)",
        "from mindspore import ops\ndef f(q, k, v):\n"
        "    return ops.matmul(ops.softmax(ops.BatchMatMul(transpose_b=True)(q, k), axis=1), v)",
        "from mindspore import ops\ndef f(a, b, v):\n    return ops.matmul(ops.softmax(ops.matmul(a, b)), v)",
    )

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self._check(node, node.left, node.right)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        qual = self.ctx.qualname(func)
        if qual in MATMULS and len(node.args) == 2:
            self._check(node, node.args[0], node.args[1])
        elif qual in EINSUMS:
            operands = _einsum(node, _context_spec)
            if operands is not None:
                self._check(node, operands[0], operands[1])
        elif (isinstance(func, ast.Attribute) and func.attr in ("matmul", "bmm") and qual is None
              and len(node.args) == 1):
            self._check(node, func.value, node.args[0])
        else:
            found = self._ms_matmul(ctx_lookup(self.ctx), node)
            if found is not None and not found[2]:
                self._check(node, found[0], found[1], mindspore=True)

    def _check(self, node: ast.AST, probs: ast.expr, value: ast.expr, mindspore: bool = False) -> None:
        look = ctx_lookup(self.ctx)
        self._steps = SEARCH_STEPS  # names followed (each value a name may hold) for this matmul
        scores = self._softmax_input(look, probs)
        if scores is None:
            return
        qk = self._score_matmul(look, scores)
        if qk is None:
            return
        q, k = qk
        mindspore = mindspore or (self.ctx.imports("mindspore") and not self.ctx.imports("torch"))
        template = MS_MESSAGE if mindspore else self.message
        self.candidate(node, template.format(q=src(self.ctx, q, "q", 20), k=src(self.ctx, k, "k", 20),
                                             v=src(self.ctx, value, "v", 20)))

    def _each_value(self, name: ast.Name, match: Callable[[ast.expr], Optional[T]]) -> Optional[T]:
        """The first match over the values `name` may hold where it is read (each assignment that reaches it:
        the masked and the unmasked score after `if mask is not None: s = s + mask`)."""
        for value in alternatives(self.ctx, name):
            if self._steps <= 0:
                return None
            self._steps -= 1
            found = match(value)
            if found is not None:
                return found
        return None

    def _ms_matmul(self, look: Lookup, call: ast.Call) -> Optional[Tuple[ast.expr, ast.expr, bool]]:
        """(a, b, b transposed) for MindSpore `ops.matmul(a, b)`, `ops.BatchMatMul(transpose_b=True)(a, b)` and
        an instance of the primitive held in a local name or a `self` attribute."""
        if len(call.args) != 2 or not self.ctx.imports("mindspore"):
            return None
        if self.ctx.qualname(call.func) in MS_MATMUL_FUNCS:
            return call.args[0], call.args[1], False
        ctor = self._module(call.func, look)
        if isinstance(ctor, ast.Call) and self.ctx.qualname(ctor.func) in MS_MATMUL_CLASSES:
            if constant(argument(ctor, "transpose_a", 0), False):
                return None
            return call.args[0], call.args[1], constant(argument(ctor, "transpose_b", 1), False) is True
        return None

    # ------------------------------------------------------------------ probabilities
    def _softmax_input(self, look: Lookup, node: ast.expr) -> Optional[ast.expr]:
        """S for `softmax(S, dim=-1)` in its spellings, looking through dropout, casts and reshapes."""
        for _ in range(MAX_STEPS):
            node = uncast(node)
            if isinstance(node, ast.Name):
                return self._each_value(node, lambda value: self._softmax_input(look, value))
            if not isinstance(node, ast.Call):
                return None
            qual = self.ctx.qualname(node.func)
            module = self._module(node.func, look)
            found = self._softmax_of(node, qual, module)
            if found is not _NOT_FOUND:
                return found
            inner = self._passed_through(node, qual, module)
            if inner is None:
                return None
            node = inner
        return None

    def _softmax_of(self, call: ast.Call, qual: Optional[str], module: Optional[ast.expr]) -> object:
        """S when `call` is a softmax of S along the last dim, None when along another, else _NOT_FOUND."""
        found = _softmax_function_of(call, qual)
        if found is not _NOT_FOUND or qual in DROPOUT_FUNCS or module is None or len(call.args) != 1:
            return found
        kind = self.ctx.qualname(module.func) if isinstance(module, ast.Call) else None
        if kind == "torch.nn.Softmax":
            return call.args[0] if is_last_dim(argument(module, "dim", 0)) else None
        if kind in MS_SOFTMAX_CLASSES:  # axis defaults to -1
            axis = argument(module, "axis", 0)
            return call.args[0] if axis is None or is_last_dim(axis) else None
        return _NOT_FOUND

    def _passed_through(self, call: ast.Call, qual: Optional[str], module: Optional[ast.expr]) -> Optional[ast.expr]:
        """x when `call` is a dropout (a function, a module, `self.attn_dropout(x)`), a MindSpore cast or a
        reshape of x, else None."""
        if qual in DROPOUT_FUNCS and call.args:
            return call.args[0]
        func = call.func
        kind = qual or (self.ctx.qualname(module.func) if isinstance(module, ast.Call) else None)
        if len(call.args) == 1 and (kind == "torch.nn.Dropout" or (kind or "").startswith("mindspore.")
                                    and kind.endswith("Dropout")):
            return call.args[0]
        if kind in MS_CASTS and len(call.args) == 2:
            return call.args[0]  # self.cast(p, mstype.float16), ops.cast(p, dtype)
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
                and "drop" in func.attr.lower() and len(call.args) == 1):
            return call.args[0]  # self.attn_dropout(p) with the module defined elsewhere
        return self._reshaped(call, qual, kind)

    def _reshaped(self, call: ast.Call, qual: Optional[str], kind: Optional[str]) -> Optional[ast.expr]:
        """x for `x.view(b, h, s, t)` / `x.reshape(...)` / `ops.reshape(x, (...))` to three dims or more (a
        score reshaped to add a mask per window or per head, and back; not a flattening)."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("view", "reshape") and qual is None:
            shape = call.args[0].elts if len(call.args) == 1 and isinstance(call.args[0], ast.Tuple) else call.args
            return func.value if len(shape) >= 3 else None
        if kind in MS_RESHAPES and len(call.args) == 2 and isinstance(call.args[1], ast.Tuple):
            return call.args[0] if len(call.args[1].elts) >= 3 else None
        return None

    def _module(self, func: ast.expr, look: Optional[Lookup] = None) -> Optional[ast.expr]:
        """What a called object was built as: `nn.Softmax()` itself, a local bound to it, a `self` attribute."""
        if isinstance(func, ast.Call):
            return func
        if isinstance(func, ast.Name) and look is not None:
            value = resolve(look, func)
            return value if isinstance(value, ast.Call) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self.ctx.class_scope
            return cls.attributes.get(func.attr) if cls is not None else None
        return None

    # ------------------------------------------------------------------ scores
    def _score_matmul(self, look: Lookup, node: ast.expr) -> Optional[Tuple[ast.expr, ast.expr]]:
        """(q, k) for a score `q @ k^T` reached through scaling, masking, casts and reshapes."""
        for _ in range(MAX_STEPS):
            node = uncast(node)
            if isinstance(node, ast.Name):
                return self._each_value(node, lambda value: self._score_matmul(look, value))
            if isinstance(node, ast.BinOp):
                found, after = self._score_operator(look, node)
            elif isinstance(node, ast.Call):
                found, after = self._score_call(look, node)
            else:
                return None
            if after is None:
                return found
            node = after
        return None

    def _score_operator(self, look: Lookup, node: ast.BinOp) -> Tuple[Optional[Tuple[ast.expr, ast.expr]],
                                                                     Optional[ast.expr]]:
        """One step of `_score_matmul` at an operator: ((q, k) or None, None) to stop, (None, x) to go on."""
        if isinstance(node.op, ast.MatMult):
            return self._qk(look, node.left, node.right), None
        if isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
            return self._score_matmul(look, node.left) or self._score_matmul(look, node.right), None
        if isinstance(node.op, ast.Div):
            return None, node.left
        return None, None

    def _score_call(self, look: Lookup, node: ast.Call) -> Tuple[Optional[Tuple[ast.expr, ast.expr]],
                                                                Optional[ast.expr]]:
        """One step of `_score_matmul` at a call: a matmul, or a scaling, masking, clamp, cast or reshape to
        look through."""
        func = node.func
        qual = self.ctx.qualname(func)
        if qual in MATMULS and len(node.args) == 2:
            return self._qk(look, node.args[0], node.args[1]), None
        if qual == "torch.baddbmm" and len(node.args) >= 3:
            return self._qk(look, node.args[1], node.args[2]), None
        if qual in EINSUMS:
            return _einsum(node, _score_spec), None
        ms_matmul = self._ms_matmul(look, node)
        if ms_matmul is not None:
            a, b, transposed = ms_matmul
            return ((a, b) if transposed else self._qk(look, a, b)), None
        ctor = self._module(func, look)
        kind = qual or (self.ctx.qualname(ctor.func) if isinstance(ctor, ast.Call) else None)
        if kind in MS_PASS_THROUGH and node.args:
            return None, node.args[0]  # self.mul(scores, scale), ops.cast(scores, mstype.float32), ...
        if qual in CLAMPS and _elementwise(node, qual):
            return None, node.args[0]  # torch.max(scores, floor)
        if qual == "torch.where" and len(node.args) == 3:
            return None, node.args[1]  # torch.where(causal_mask, scores, mask_value)
        if isinstance(func, ast.Attribute) and qual is None:
            if func.attr in ("matmul", "bmm") and len(node.args) == 1:
                return self._qk(look, func.value, node.args[0]), None
            if func.attr in ("masked_fill", "masked_fill_", "mul", "div", "add", "mul_", "div_", "add_"):
                return None, func.value
        return None, self._reshaped(node, qual, kind)

    def _qk(self, look: Lookup, q: ast.expr, kt: ast.expr) -> Optional[Tuple[ast.expr, ast.expr]]:
        """(q, k) when `kt` is k transposed in its last two dims, also scaled (`k.transpose(-2, -1) * scale`)."""
        kt = peel(look, kt)
        k = self._transposed(kt)
        if k is None and isinstance(kt, ast.BinOp) and isinstance(kt.op, (ast.Mult, ast.Div)):
            sides = (kt.left, kt.right) if isinstance(kt.op, ast.Mult) else (kt.left,)
            k = next((found for found in (self._transposed(peel(look, side)) for side in sides) if found), None)
        return (q, k) if k is not None else None

    def _transposed(self, node: ast.expr) -> Optional[ast.expr]:
        """k for `k.transpose(-2, -1)`, `k.transpose(2, 3)`, `k.transpose(1, 2)` (3-D), `k.mT`, `k.T`,
        `k.t()`, `k.permute(..., D, S)`, `torch.transpose(k, -2, -1)`."""
        if isinstance(node, ast.Attribute) and node.attr in ("mT", "T") and self.ctx.qualname(node) is None:
            return node.value
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qual = self.ctx.qualname(func)
        ctor = self._module(func)
        kind = qual or (self.ctx.qualname(ctor.func) if isinstance(ctor, ast.Call) else None)
        if kind in MS_TRANSPOSES and len(node.args) == 2:  # ops.transpose(k, (0, 1, 3, 2)), self.transpose(k, perm)
            return node.args[0] if _swaps_last_two(node.args[1]) else None
        if qual == "torch.transpose" and len(node.args) == 3:
            return _swapped_pair(node.args[0], node.args[1:])
        if isinstance(func, ast.Attribute) and qual is None and func.attr in TRANSPOSES:
            return _method_transposed(func, node.args)
        return None


def _elementwise(call: ast.Call, qual: str) -> bool:
    """`torch.max(s, floor)` / `torch.clamp(s, min=m)`: a clamp of s, not a reduction (`torch.max(s, -1)`)."""
    if not call.args or any(k.arg == "dim" for k in call.keywords):
        return False
    if qual.startswith("torch.clamp"):
        return True
    return len(call.args) == 2 and not isinstance(constant(call.args[1]), int)


def _softmax_function_of(call: ast.Call, qual: Optional[str]) -> object:
    """`_softmax_of` for the function and method forms: `torch.softmax(S, -1)`, `ops.softmax(S)`, `S.softmax(-1)`."""
    func = call.func
    if qual in SOFTMAX_FUNCS and call.args:
        return call.args[0] if is_last_dim(argument(call, "dim", 1)) else None
    if qual in MS_SOFTMAX_FUNCS and call.args:
        axis = argument(call, "axis", 1) or argument(call, "dim")
        return call.args[0] if axis is None or is_last_dim(axis) else None
    if (isinstance(func, ast.Attribute) and func.attr == "softmax" and qual is None
            and not (isinstance(func.value, ast.Name) and func.value.id == "self")):
        return func.value if is_last_dim(argument(call, "dim", 0)) else None
    if qual is not None and qual.endswith(".softmax") and call.args and argument(call, "dim", 1) is not None:
        return call.args[0] if is_last_dim(argument(call, "dim", 1)) else None  # fairseq's utils.softmax(x, dim=-1)
    return _NOT_FOUND


def _method_transposed(func: ast.Attribute, dims: List[ast.expr]) -> Optional[ast.expr]:
    """k for `k.t()`, `k.permute(..., D, S)`, MindSpore's `k.transpose(0, 1, 3, 2)`, `k.transpose(-2, -1)`."""
    base = func.value
    if func.attr == "t" and not dims:
        return base
    if func.attr == "permute" or (func.attr == "transpose" and len(dims) >= 3):  # MindSpore's transpose
        packed = len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List))
        return base if _swaps_last_two(ast.Tuple(elts=list(dims[0].elts if packed else dims))) else None
    return _swapped_pair(base, dims)


def _swapped_pair(base: ast.expr, dims: List[ast.expr]) -> Optional[ast.expr]:
    """`base` when `dims` are a literal pair that swaps the last two axes of a 3-D or 4-D score operand."""
    pair = tuple(constant(d) for d in dims)
    return base if len(pair) == 2 and set(pair) in ({-2, -1}, {2, 3}, {1, 2}) else None


def _swaps_last_two(perm: ast.expr) -> bool:
    """A literal permutation that puts the last axis second to last: (0, 1, 3, 2), (0, 2, 3, 1)."""
    if not isinstance(perm, (ast.Tuple, ast.List)):
        return False
    values = [constant(e) for e in perm.elts]
    return len(values) >= 3 and all(isinstance(v, int) for v in values) and values[-2] == len(values) - 1


# ---------------------------------------------------------------------------------------- einsum
def _einsum(call: ast.Call, shape: Callable[[str, str, str], bool]) -> Optional[Tuple[ast.expr, ast.expr]]:
    """The two operands of `torch.einsum(spec, a, b)` (or `(spec, [a, b])`) when `spec` has the `shape`."""
    if not call.args:
        return None
    spec = constant(call.args[0])
    operands = list(call.args[1:])
    if len(operands) == 1 and isinstance(operands[0], (ast.List, ast.Tuple)):
        operands = list(operands[0].elts)
    if not isinstance(spec, str) or len(operands) != 2 or "->" not in spec:
        return None
    inputs, output = spec.replace(" ", "").replace("...", "#").split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2 or not all(parts) or not output:
        return None
    return (operands[0], operands[1]) if shape(parts[0], parts[1], output) else None


def _score_spec(a: str, b: str, out: str) -> bool:
    """`q @ k^T` as einsum: `bhid,bhjd->bhij`, `bct,bcs->bts` (one index contracted, at the same place in
    both operands, as in `q @ k.transpose(-2, -1)`; `bij,bjk->bik` is `a @ b`; the query's and the key's own
    index last in the output, so a softmax over the last dim runs over the keys)."""
    contracted = (set(a) & set(b)) - set(out)
    own_a, own_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    return (_distinct(a, b, out) and len(contracted) == 1 and len(own_a) == len(own_b) == 1
            and len(a) == len(b) and a.index(min(contracted)) == b.index(min(contracted))
            and out[-2:] == own_a[0] + own_b[0] and set(out) == (set(a) | set(b)) - contracted)


def _context_spec(a: str, b: str, out: str) -> bool:
    """`p @ v` as einsum: `bhij,bhjd->bhid`, `bts,bcs->bct` (p contracted over its last index alone; v
    without the query index: `bnij,ijh->bnih` weighs a relative-position table, not values)."""
    return (_distinct(a, b, out) and len(a) >= 3 and a[-2] not in b and (set(a) & set(b)) - set(out) == {a[-1]}
            and set(out) == (set(a) | set(b)) - {a[-1]})


def _distinct(*specs: str) -> bool:
    """Each operand names each of its axes once (no trace or diagonal)."""
    return all(len(set(spec)) == len(spec) for spec in specs)


_NOT_FOUND = object()  # (`_softmax_of`: not a softmax at all)
