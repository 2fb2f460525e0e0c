"""ASC704 handwritten-attention: `softmax(q @ k^T * scale [+ mask]) [dropout] @ v` -> fused attention."""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from ascend_lint.rule import Case, Docs
from ascend_lint.astutil import argument, constant

from ._match import MAX_STEPS, FusionRule, Lookup, ctx_lookup, is_last_dim, peel, resolve, src

MATMULS = ("torch.matmul", "torch.bmm")
SOFTMAX_FUNCS = ("torch.softmax", "torch.nn.functional.softmax")
TRANSPOSES = ("transpose", "swapaxes", "permute", "t")
# MindSpore: MatMul primitives (called through an instance), functions, softmax/dropout and the elementwise
# primitives a score passes through on its way to the softmax (scale, mask, cast).
MS_MATMUL_CLASSES = ("mindspore.ops.BatchMatMul", "mindspore.ops.MatMul")
MS_MATMUL_FUNCS = ("mindspore.ops.matmul", "mindspore.ops.bmm", "mindspore.ops.batch_matmul")
MS_SOFTMAX_FUNCS = ("mindspore.ops.softmax",)
MS_SOFTMAX_CLASSES = ("mindspore.nn.Softmax", "mindspore.ops.Softmax")
MS_TRANSPOSES = ("mindspore.ops.transpose", "mindspore.ops.Transpose", "mindspore.ops.permute")
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
    triggers = ("@", "matmul", "bmm", "attn", "scaled_dot_product_attention", "flash_attn", "flash_attention",
                "fusion_attention", "npu_fused_infer_attention_score", "ALL_ATTENTION_FUNCTIONS")
    docs = Docs(
        summary="Hand-written scaled dot-product attention that a fused attention operator computes in one kernel.",
        what="Flags scaled dot-product attention written out in one function: `softmax(S, dim=-1) @ v` (or "
             "`torch.matmul`/`torch.bmm`), where the score S is `q @ k.transpose(-2, -1)` (also "
             "`k.transpose(-1, -2)`, `k.transpose(2, 3)`, `k.mT`, `k.permute(0, 1, 3, 2)`, `torch.baddbmm`), "
             "optionally scaled (`* scale`, `/ math.sqrt(d)`), masked (`+ mask`, `.masked_fill(...)`), cast, "
             "and followed by dropout, inline or through local names. In MindSpore the same chain written with "
             "`ops.BatchMatMul(transpose_b=True)` / `ops.matmul` (an instance held in the Cell or a local, or the "
             "function), `ops.softmax` / `nn.Softmax` and the `Mul`/`RealDiv`/`Add`/`Cast` primitives.",
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
                       "output), or over a dim other than the last, is not flagged. Files that already call "
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
        source="op-plugin ScaledDotProductAttentionKernelNpuOpApi.cpp, docs `torch_npu.npu_fusion_attention` and "
               "op_plugin_functions.yaml; msprof-analyze advisor rules timeline_fusion_ops.yaml.",
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
        elif (isinstance(func, ast.Attribute) and func.attr in ("matmul", "bmm") and qual is None
              and len(node.args) == 1):
            self._check(node, func.value, node.args[0])
        else:
            found = self._ms_matmul(ctx_lookup(self.ctx), node)
            if found is not None and not found[2]:
                self._check(node, found[0], found[1], mindspore=True)

    def _check(self, node: ast.AST, probs: ast.expr, value: ast.expr, mindspore: bool = False) -> None:
        look = ctx_lookup(self.ctx)
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

    def _ms_matmul(self, look: Lookup, call: ast.Call) -> Optional[Tuple[ast.expr, ast.expr, bool]]:
        """(a, b, b transposed) for MindSpore `ops.matmul(a, b)`, `ops.BatchMatMul(transpose_b=True)(a, b)` and
        an instance of the primitive held in a local name or a `self` attribute."""
        if len(call.args) != 2:
            return None
        if self.ctx.qualname(call.func) in MS_MATMUL_FUNCS:
            return call.args[0], call.args[1], False
        ctor = self._module(call.func, look)
        if isinstance(ctor, ast.Call) and self.ctx.qualname(ctor.func) in MS_MATMUL_CLASSES:
            if constant(argument(ctor, "transpose_a", 0), False):
                return None
            return call.args[0], call.args[1], constant(argument(ctor, "transpose_b", 1), False) is True
        return None

    def _softmax_input(self, look: Lookup, node: ast.expr) -> Optional[ast.expr]:
        """S for `softmax(S, dim=-1)` in its spellings, looking through dropout and casts."""
        for _ in range(MAX_STEPS):
            node = peel(look, node)
            if not isinstance(node, ast.Call):
                return None
            qual = self.ctx.qualname(node.func)
            module = self._module(node.func, look)
            found = self._softmax_of(node, qual, module)
            if found is not _NOT_FOUND:
                return found
            inner = self._dropout_input(node, qual, module)
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

    def _dropout_input(self, call: ast.Call, qual: Optional[str], module: Optional[ast.expr]) -> Optional[ast.expr]:
        """x when `call` is a dropout of x (a function, a module, `self.attn_dropout(x)`), else None."""
        if qual in DROPOUT_FUNCS and call.args:
            return call.args[0]
        func = call.func
        if module is not None and len(call.args) == 1:
            kind = self.ctx.qualname(module.func) if isinstance(module, ast.Call) else None
            if kind == "torch.nn.Dropout" or (kind or "").startswith("mindspore.") and kind.endswith("Dropout"):
                return call.args[0]
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
                and "drop" in func.attr.lower() and len(call.args) == 1):
            return call.args[0]  # self.attn_dropout(p) with the module defined elsewhere
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

    def _score_matmul(self, look: Lookup, node: ast.expr) -> Optional[Tuple[ast.expr, ast.expr]]:
        """(q, k) for a score `q @ k^T` reached through scaling, masking and casts."""
        for _ in range(MAX_STEPS):
            node = peel(look, node)
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
        """One step of `_score_matmul` at a call: a matmul, or a scaling, masking or cast to look through."""
        func = node.func
        qual = self.ctx.qualname(func)
        if qual in MATMULS and len(node.args) == 2:
            return self._qk(look, node.args[0], node.args[1]), None
        if qual == "torch.baddbmm" and len(node.args) >= 3:
            return self._qk(look, node.args[1], node.args[2]), None
        ms_matmul = self._ms_matmul(look, node)
        if ms_matmul is not None:
            a, b, transposed = ms_matmul
            return ((a, b) if transposed else self._qk(look, a, b)), None
        ctor = self._module(func, look)
        kind = qual or (self.ctx.qualname(ctor.func) if isinstance(ctor, ast.Call) else None)
        if kind in MS_PASS_THROUGH and node.args:
            return None, node.args[0]  # self.mul(scores, scale), ops.cast(scores, mstype.float32), ...
        if isinstance(func, ast.Attribute) and qual is None:
            if func.attr in ("matmul", "bmm") and len(node.args) == 1:
                return self._qk(look, func.value, node.args[0]), None
            if func.attr in ("masked_fill", "masked_fill_", "mul", "div", "add", "mul_", "div_", "add_"):
                return None, func.value
        return None, None

    def _qk(self, look: Lookup, q: ast.expr, kt: ast.expr) -> Optional[Tuple[ast.expr, ast.expr]]:
        k = self._transposed(peel(look, kt))
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


_NOT_FOUND = object()  # (`_softmax_of`: not a softmax at all)
DROPOUT_FUNCS = ("torch.nn.functional.dropout", "torch.dropout")


def _swaps_last_two(perm: ast.expr) -> bool:
    """A literal permutation that puts the last axis second to last: (0, 1, 3, 2), (0, 2, 3, 1)."""
    if not isinstance(perm, (ast.Tuple, ast.List)):
        return False
    values = [constant(e) for e in perm.elts]
    return len(values) >= 3 and all(isinstance(v, int) for v in values) and values[-2] == len(values) - 1
