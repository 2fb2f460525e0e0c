"""ASC705 handwritten-geglu: `F.gelu(a) * b` over halves of one projection -> torch_npu.npu_geglu."""
from __future__ import annotations

import ast

from ascend_lint.rule import Case, Docs

from ._match import FusionRule, gated, src_at


class HandwrittenGeglu(FusionRule):
    code = "ASC705"
    name = "handwritten-geglu"
    message = "hand-written GEGLU runs as separate split/gelu/mul kernels on Ascend: use {call}"
    fused_ops = frozenset({"npu_geglu"})
    triggers = ("gelu", "GELU", "act", "npu_geglu")
    docs = Docs(
        summary="A hand-written GEGLU that `torch_npu.npu_geglu` computes in one kernel.",
        what="Flags `gelu(a) * b` (either order) where `a` and `b` are the two halves of one projection along "
             "the last dim (`a, b = proj(x).chunk(2, dim=-1)`, `c[0]`/`c[1]` of such a chunk, or "
             "`x[..., :h]` / `x[..., h:]`). GELU may be `F.gelu` (with or without `approximate='tanh'`), "
             "`nn.GELU()(a)` or a `self.act` attribute set to `nn.GELU(...)` in `__init__`.",
        why="Written out, GEGLU is a split, a GELU and a multiply, each a host-launched kernel over the widest "
            "activations of the block. `torch_npu.npu_geglu(self, dim=-1, approximate=1, activate_left=False)` "
            "does it in one kernel and returns a tuple `(out, gelu)`; take element 0. `approximate`: 0 = exact "
            "(erf, `F.gelu`'s default), 1 = tanh. `activate_left=True` applies GELU to the first half (current "
            "CANN aclnnGeGluV3 docs; some older doc versions describe the flag the other way round, so check the "
            "result once on your CANN version). Ascend's profiler advisor recommends it for the chunk-gelu-mul "
            "sequence (CANN >= 8.0.RC1). Conditions (aclnnGeGluV3 docs): 1-8-D input whose `dim` size is even; "
            "fp32/fp16 on Atlas training and inference series, also bf16 on Atlas A2/A3.",
        known_problems="GELU gating of two separate projections is not flagged (the fused op needs one tensor). "
                       "Files that already call `npu_geglu` are taken as having the fused path. When the code "
                       "picks the approximation at run time (`F.gelu(g, approximate=self.approximate)`, "
                       "`nn.GELU(approximate=arg)`, `ACT2FN[config.hidden_act]`), the message gives no value for "
                       "`approximate`: it says which value goes with which GELU (a fixed value would change the "
                       "results of the other setting).",
        example="""
            import torch.nn.functional as F
            import torch_npu

            def geglu(self, x):
                h, gate = self.proj(x).chunk(2, dim=-1)
                return h * F.gelu(gate)
        """,
        use_instead="""
            import torch_npu

            def geglu(self, x):
                return torch_npu.npu_geglu(self.proj(x), dim=-1, approximate=0)[0]
        """,
        fix_safety="No fix: the approximation and half order must be checked against the CANN version.",
        source="op-plugin op_plugin_functions.yaml (`npu_geglu`), CANN aclnnGeGluV3 docs; msprof-analyze advisor "
               "rules timeline_fusion_ops.yaml.",
    )
    _IMPORTS = "import torch\nimport torch.nn.functional as F\nimport torch_npu\n"
    cases = (
        Case("""
            import torch
            import torch.nn.functional as F
            import torch_npu
            def f(self, x):
                h, gate = self.proj(x).chunk(2, dim=-1)
                return h * F.gelu(gate)
            """, line=6, message_contains="hand-written GEGLU runs as separate split/gelu/mul kernels on"),
        # a fixed approximation: the matching value
        Case("""
            import torch.nn.functional as F
            import torch_npu
            def f(x):
                a, b = x.chunk(2, dim=-1)
                return F.gelu(a, approximate='tanh') * b
            """, line=5, message_contains="approximate=1, activate_left=True)[0]`"),
        # the approximation picked at run time: no fixed value (it would change one setting's results)
        Case("""
            import torch.nn.functional as F
            import torch_npu
            def f(self, x):
                h, gate = self.proj(x).chunk(2, dim=-1)
                return h * F.gelu(gate, approximate=self.approximate)
            """, line=5, message_contains="approximate=approx)[0]` with `approx` 1 if the GELU the code picks at "
                                          "run time is the tanh approximation, 0 if it is the exact (erf) one"),
        Case("""
            import torch
            import torch_npu
            class GEGLU(torch.nn.Module):
                def __init__(self, use_tanh):
                    super().__init__()
                    self.act = torch.nn.GELU(approximate="tanh" if use_tanh else "none")
                def forward(self, x):
                    h, gate = x.chunk(2, dim=-1)
                    return self.act(h) * gate
            """, line=9, message_contains="with `approx` 1 if the GELU the code picks at run time is the tanh"),
    )
    flagged = (
        _IMPORTS + "def f(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.gelu(a, approximate='tanh') * b",
        _IMPORTS + "def f(x):\n    c = torch.chunk(x, 2, -1)\n    return torch.nn.GELU()(c[0]) * c[1]",
    )
    clean = (
        "import torch.nn.functional as F\ndef f(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.gelu(a) * b",
        _IMPORTS + "def f(x):\n    return torch_npu.npu_geglu(x, dim=-1, approximate=0)[0]\n"
        "def ref(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.gelu(a) * b",
        # GELU gating without chunk halves
        _IMPORTS + "def f(self, x):\n    return F.gelu(self.w1(x)) * self.w2(x)",
        _IMPORTS + "def f(x, y):\n    return F.gelu(x) * y",
        _IMPORTS + "def f(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.silu(a) * b",
    )

    def visit_BinOp(self, node: ast.BinOp) -> None:
        gate = gated(self.ctx, node, "gelu", allow_projections=False)
        if gate is None or gate.source is None:
            return
        left = ", activate_left=True" if gate.act_first else ""
        source = src_at(self.ctx, gate.source, node, 'gate_up')
        if gate.tanh is None:  # following a fixed value would change the results of one of the two settings
            call = (f"`torch_npu.npu_geglu({source}, dim=-1, approximate=approx{left})[0]` with `approx` 1 if the "
                    "GELU the code picks at run time is the tanh approximation, 0 if it is the exact (erf) one")
        else:
            call = f"`torch_npu.npu_geglu({source}, dim=-1, approximate={1 if gate.tanh else 0}{left})[0]`"
        self.candidate(node, self.message.format(call=call))
