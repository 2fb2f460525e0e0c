"""ASC703 handwritten-swiglu: `F.silu(a) * b` over halves of one projection -> torch_npu.npu_swiglu."""
from __future__ import annotations

import ast

from ascend_lint.rule import Case, Docs

from ._match import FusionRule, gated, src, src_at


class HandwrittenSwiglu(FusionRule):
    code = "ASC703"
    name = "handwritten-swiglu"
    message = "hand-written SwiGLU runs as separate split/silu/mul kernels on Ascend: {call}"
    fused_ops = frozenset({"npu_swiglu"})
    triggers = ("silu", "SiLU", "act", "swish", "npu_swiglu")
    docs = Docs(
        summary="A hand-written SwiGLU that a `torch_npu` fused operator computes in one kernel.",
        what="Flags `silu(a) * b` (either order) where `a` and `b` are the two halves of one tensor along the "
             "last dim (`a, b = x.chunk(2, dim=-1)`, `c = torch.chunk(x, 2, -1); c[0], c[1]`, or "
             "`x[..., :h]` / `x[..., h:]`) or two projections of the same input (`self.w1(x)`, `self.w3(x)`). "
             "SiLU may be `F.silu`, `torch.nn.functional.silu`, `nn.SiLU()(a)`, a `self.act` attribute set "
             "to `nn.SiLU()` in `__init__`, or `ACT2FN[config.hidden_act]` when the project's configuration "
             "classes default `hidden_act` to `\"silu\"`.",
        why="Written out, SwiGLU is a split, a SiLU and a multiply (plus the split's copies), each a host-launched "
            "kernel over the largest activations of the block. `torch_npu.npu_swiglu(input, dim=-1)` computes "
            "`silu(A) * B` for the first half A and second half B of `input` in one kernel; Ascend's profiler "
            "advisor recommends it for the chunk-silu-mul sequence (CANN >= 7.0.0). Conditions (op-plugin docs, "
            "beta API, listed for Atlas A2 training): 1-8-D input whose `dim` size is even, fp32/fp16/bf16, "
            "contiguous. With two separate projections, concatenate their weights into one Linear (gate rows "
            "first) so the fused op gets one tensor.",
        known_problems="An activation chosen at run time (`ACT2FN[config.hidden_act]`) counts as SiLU when the "
                       "project's configuration classes default that attribute to `\"silu\"` (and none to "
                       "anything else); a value set only in a checkpoint's config file is not seen. Files that "
                       "already call `npu_swiglu` are taken as having the fused path. A block in a function or "
                       "class that a monkey-patch replaces at run time is not flagged (it never runs).",
        example="""
            import torch.nn.functional as F
            import torch_npu

            def swiglu(x):
                gate, up = x.chunk(2, dim=-1)
                return F.silu(gate) * up
        """,
        use_instead="""
            import torch_npu

            def swiglu(x):
                return torch_npu.npu_swiglu(x, dim=-1)
        """,
        fix_safety="No fix: two-projection forms need their weights merged first.",
        source="op-plugin docs `(beta) torch_npu.npu_swiglu` and op_plugin_functions.yaml; msprof-analyze advisor "
               "rules timeline_fusion_ops.yaml.",
    )
    _IMPORTS = "import torch\nimport torch.nn.functional as F\nimport torch_npu\n"
    cases = (
        Case("""
            import torch
            import torch.nn.functional as F
            import torch_npu
            def f(x):
                a, b = x.chunk(2, dim=-1)
                return F.silu(a) * b
            """, line=6, message_contains="hand-written SwiGLU runs as separate split/silu/mul kernels on"),
    )
    flagged = (
        _IMPORTS + "def f(x):\n    a, b = torch.chunk(x, 2, dim=-1)\n    return b * torch.nn.functional.silu(a)",
        _IMPORTS + "def f(x):\n    x = torch.chunk(x, 2, dim=-1)\n    return F.silu(x[0]) * x[1]",
        _IMPORTS + "def f(x, h):\n    return F.silu(x[..., :h]) * x[..., h:]",
        _IMPORTS + "def f(x):\n    a, b = x.chunk(2, -1)\n    return torch.nn.SiLU()(a) * b",
        _IMPORTS + "class MLP(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.act = torch.nn.SiLU()\n    def forward(self, x):\n"
        "        return self.w2(self.act(self.w1(x)) * self.w3(x))",
        _IMPORTS + "def f(self, x):\n    return self.down(F.silu(self.gate(x)) * self.up(x))",
        # an activation looked up by configuration name, the configuration class defaulting it to SiLU
        _IMPORTS + "from transformers.activations import ACT2FN\n"
        "class LlamaConfig:\n    def __init__(self, hidden_act='silu'):\n        self.hidden_act = hidden_act\n"
        "class MLP(torch.nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.act_fn = ACT2FN[config.hidden_act]\n    def forward(self, x):\n"
        "        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
    )
    clean = (
        "import torch.nn.functional as F\ndef f(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.silu(a) * b",
        _IMPORTS + "def f(x):\n    return torch_npu.npu_swiglu(x, dim=-1)\n"
        "def ref(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.silu(a) * b",
        # ACT2FN with a configuration default that is not SiLU; a block replaced by a monkey-patch
        _IMPORTS + "from transformers.activations import ACT2FN\n"
        "class BertConfig:\n    def __init__(self, hidden_act='gelu'):\n        self.hidden_act = hidden_act\n"
        "class MLP(torch.nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.act_fn = ACT2FN[config.hidden_act]\n    def forward(self, x):\n"
        "        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
        _IMPORTS + "class MLP(torch.nn.Module):\n    def forward(self, x):\n"
        "        return self.down(F.silu(self.gate(x)) * self.up(x))\n"
        "def npu_mlp_forward(self, x):\n    return fused_mlp(self, x)\n"
        "MLP.forward = npu_mlp_forward",
        # GELU gating is ASC705's, not SwiGLU
        _IMPORTS + "def f(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.gelu(a) * b",
        # SiLU times something that is not the other half
        _IMPORTS + "def f(x, scale):\n    return F.silu(x) * scale",
        # halves along dim 0
        _IMPORTS + "def f(x):\n    a, b = x.chunk(2)\n    return F.silu(a) * b",
        # an activation chosen at run time
        _IMPORTS + "def f(self, x):\n    return self.act_fn(self.gate(x)) * self.up(x)",
    )

    def visit_BinOp(self, node: ast.BinOp) -> None:
        gate = gated(self.ctx, node, "silu", allow_projections=True)
        if gate is None:
            return
        if gate.source is not None:
            call = f"use `torch_npu.npu_swiglu({src_at(self.ctx, gate.source, node, 'gate_up')}, dim=-1)`"
            if not gate.act_first:
                call += " after swapping the halves (the fused op applies SiLU to the first half)"
        else:
            g, u = src(self.ctx, gate.projections[0], "gate_proj"), src(self.ctx, gate.projections[1], "up_proj")
            call = (f"merge `{g}` and `{u}` into one projection (gate half first) and use "
                    "`torch_npu.npu_swiglu(gate_up, dim=-1)`")
        self.candidate(node, self.message.format(call=call))
