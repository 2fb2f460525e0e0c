"""ASC101 contiguous-after-view: the `.contiguous()` copies that have a known Ascend remedy."""
from __future__ import annotations

from ascend_lint.rule import Case, Docs

from ._layout import LayoutCopyRule

PATTERNS = {  # pattern -> what it costs, what to do
    "channel-shuffle": {
        "problem": "of the grouped channels is a channel shuffle done as a framework copy on Ascend",
        "remedy": "call `torch.channel_shuffle(x, groups)` (one ShuffleChannel kernel in torch_npu) or gather the "
                  "channels with `index_select`"},
    "matmul-operand": {
        "problem": "only feeds a matmul, which reads an operand transposed in its last two dims as it is on Ascend",
        "remedy": "drop the copy"},
    "attention-layout": {
        "problem": "copies the attention heads between the (B, S, N, D) and (B, N, S, D) layouts with a separate "
                   "kernel on Ascend",
        "remedy": "`torch_npu.npu_fusion_attention` takes `input_layout='BSND'` (or `'BSH'`) directly, so neither "
                  "the transpose nor the copy is needed"},
}


class ContiguousAfterView(LayoutCopyRule):
    code = "ASC101"
    name = "contiguous-after-view"
    message = "`.contiguous()` after `{op}` {problem}: {remedy}"
    patterns = PATTERNS
    npu_context = True
    file_triggers = ("contiguous",)  # model helpers may not import torch themselves
    triggers = ("contiguous",)
    docs = Docs(
        summary="`.contiguous()` after a view op where Ascend has a better way (shuffle, matmul, attention).",
        what="Flags `.contiguous()` on the result of a view op where Ascend has a better way: (1) the channel "
             "shuffle (`transpose(1, 2)` / `permute(0, 2, 1, 3, 4)` of a 5-D grouped `view`, flattened back to "
             "4-D with the batch and spatial dims kept, over several lines or on one: "
             "`x.view(b, g, c // g, h, w).transpose(1, 2).contiguous().view(b, c, h, w)`, `.flatten(1, 2)`); "
             "(2) a transpose of "
             "the last two dims (`.t()`, `.mT`, `transpose(-2, -1)`, ...) whose copy only feeds matmuls "
             "(`torch.matmul`, `bmm`, `mm`, `@`, `F.linear`); (3) the attention-head transpose "
             "(`transpose(1, 2)`, `permute(0, 2, 1, 3)`) in attention code (a function or class named for "
             "attention, or one that computes softmax/attention). Each pattern has its own advice. The other "
             "`.contiguous()` copies after a view op are ASC102 (preview).",
        why="On Ascend a non-contiguous to contiguous conversion runs as its own copy kernel. In the ShuffleNetV2 "
            "port the `torch.transpose(x, 1, 2).contiguous()` channel shuffle was rewritten as one `index_select` "
            "(a compute op), which took the network to its delivery speed; torch_npu also runs "
            "the `torch.channel_shuffle` op as one ShuffleChannel kernel. torch_npu's `mm`/`bmm` pass an operand "
            "transposed in its last two dims to MatMul/BatchMatMul with the transpose flag, so copying it first "
            "is a kernel for nothing. `npu_fusion_attention` accepts the BSND, BSH and SBH layouts, so attention "
            "written around it needs no head transposes at all.",
        known_problems="Pieces of `chunk`/`split`/`unbind`/`narrow` along dim 0 are contiguous already and are not "
                       "flagged (a dim read from a local, a parameter default or a module constant is resolved; "
                       "a dim that may be 0 counts as 0). Not flagged, because the copy is needed or costs "
                       "nothing there: a copy that feeds a custom kernel (`torch.ops.*`, `torch_npu.*`, `_C` "
                       "extensions, `npu_*` functions, triton `kernel[grid](...)`, an autograd `Function.apply`), "
                       "a collective (`all_to_all`, `all_gather`, `reduce_scatter`, ...) or a raw pointer; "
                       "`x if x.is_contiguous() else x.contiguous()`; set-up in `__init__`; eager fallbacks "
                       "written beside a fused path (functions named `torch_*`, `eager_*`, `*_naive`, "
                       "`*_fallback`, `*_reference`, ...). The rule cannot see shapes: the attention pattern "
                       "is recognised by the permutation and the surrounding code, not by the tensor's rank. A "
                       "5-D transpose flattened to a 4-D view that changes the batch or spatial dims "
                       "(`view(b * c, t, h, w)`: channels moved into the batch) is not a channel shuffle (ASC102).",
        example="""
            def channel_shuffle(x, groups):
                b, c, h, w = x.size()
                x = x.view(b, groups, c // groups, h, w)
                x = torch.transpose(x, 1, 2).contiguous()
                return x.view(b, -1, h, w)
        """,
        use_instead="""
            def channel_shuffle(x, groups):
                return torch.channel_shuffle(x, groups)  # torch_npu: one ShuffleChannel kernel
        """,
        fix_safety="No fix: the rewrite depends on the model.",
        source="Ascend PyTorch model tuning case: ShuffleNetV2 on Ascend 910; Ascend/op-plugin "
               "`op_plugin/ops/aclops/ChannelShuffleKernelNpu.cpp` (ShuffleChannel) and `BmmKernelNpu.cpp` "
               "(`adj_x1`/`adj_x2` for transposed operands); torch_npu `npu_fusion_attention` "
               "(`input_layout` BSH/SBH/BSND/BNSD/TND).",
    )
    cases = (
        # the ShuffleNetV2 channel shuffle, multi-line, through local names
        Case("""
            import torch, torch_npu
            def channel_shuffle(x, groups):
                b, c, h, w = x.size()
                x = x.view(b, groups, c // groups, h, w)
                x = torch.transpose(x, 1, 2)
                x = x.contiguous()
                return x.view(b, -1, h, w)
            """, line=6, message_contains="`.contiguous()` after `transpose` of the grouped channels is a"),
        # the attention-head transposes around a hand-written or fused attention
        Case("""
            import torch, torch_npu
            class SelfAttention(torch.nn.Module):
                def forward(self, x):
                    ctx = self.attend(x)
                    return ctx.permute(0, 2, 1, 3).contiguous().view(x.shape)
            """, line=5, message_contains="`.contiguous()` after `permute` copies the attention heads"),
        # a transposed operand copied only to feed a matmul
        Case("""
            import torch, torch_npu
            def score(q, k):
                return torch.matmul(q, k.transpose(-2, -1).contiguous())
            """, line=3, message_contains="`.contiguous()` after `transpose` only feeds a matmul, which"),
    )
    flagged = (
        "import torch_npu\ndef shuffle(x, g):\n    n, c, h, w = x.shape\n"
        "    return x.reshape(n, g, c // g, h, w).permute(0, 2, 1, 3, 4).contiguous().reshape(n, c, h, w)",
        # transposed operands copied only to feed a matmul
        "import torch_npu\ndef proj(x, w):\n    wt = w.t().contiguous()\n    return x @ wt",
        "import torch, torch_npu\ndef f(a, b):\n    return torch.bmm(a.mT.contiguous(), b)",
        # bmm operands are 3-D: transpose(1, 2) is of the last two dims
        "import torch, torch_npu\ndef f(q, k):\n    return torch.bmm(q, k.transpose(1, 2).contiguous())",
        "import torch, torch_npu\ndef f(q, k, b, s, d):\n    kt = k.view(b, s, d).transpose(1, 2).contiguous()\n"
        "    return torch.matmul(q, kt)",
        # the attention-head transposes around a hand-written attention
        "import torch, torch_npu\ndef block(q, k, v):\n    p = torch.softmax(q @ k.transpose(-1, -2), -1)\n"
        "    return (p @ v).transpose(1, 2).contiguous()",
    )
    clean = (
        "import torch_npu\ny = x.contiguous()",
        "import torch_npu\ny = x.view(4, -1).contiguous()",
        # not NPU code
        "import torch\ndef score(q, k):\n    return torch.matmul(q, k.transpose(-2, -1).contiguous())",
        # other layout copies are ASC102
        "import torch_npu\ny = x.transpose(1, 2).contiguous()",
        "import torch_npu\ndef f(x):\n    a, b = x.chunk(2, dim=1)\n    return a.contiguous()",
        # a transpose that is not of the last two dims: the matmul would copy it anyway
        "import torch, torch_npu\ndef f(a, b):\n    return torch.matmul(a.transpose(0, 1).contiguous(), b)",
        # the matmul operand is also used elsewhere
        "import torch_npu\ndef proj(x, w):\n    wt = w.t().contiguous()\n    save(wt)\n    return x @ wt",
        # the copy feeds a custom kernel or a collective: it is needed
        "import torch, torch_npu\ndef block(q, k, v):\n    p = torch.softmax(q @ k.transpose(-1, -2), -1)\n"
        "    out = (p @ v).transpose(1, 2).contiguous()\n    return torch_npu.npu_rms_norm(out, w)[0]",
        "import torch_npu\ndef a2a(x, group):\n    x = x.transpose(0, 1).contiguous()\n    return all_to_all(x, group)",
        # guarded, set-up, eager fallback beside a fused path
        "import torch_npu\ndef f(q, k):\n    k = k.t()\n    k = k if k.is_contiguous() else k.contiguous()\n    return q @ k",
        "import torch, torch_npu\nclass M(torch.nn.Module):\n    def __init__(self, w):\n"
        "        super().__init__()\n        self.w = torch.nn.Parameter(w.t().contiguous())\n        x @ self.w",
        "import torch, torch_npu\ndef eager_attention_forward(q, k, v):\n"
        "    p = torch.softmax(q @ k.transpose(-1, -2), -1)\n    return (p @ v).transpose(1, 2).contiguous()",
        "import torch, torch_npu\ndef attend(q, k, v, use_flash):\n    if use_flash:\n"
        "        return flash_attn_func(q, k, v)\n    else:\n        q = q.transpose(1, 2).contiguous()\n"
        "        return torch.softmax(q @ k, -1) @ v",
        "import torch, torch_npu\nclass Attn(torch.nn.Module):\n    def unshape(self, x):\n"
        "        if x.is_npu:\n            return torch_npu.npu_confusion_transpose(x, (0, 2, 1, 3), self.s, True)\n"
        "        return x.transpose(1, 2).contiguous().view(self.s)",
        # the copy reaches a custom kernel through `a if c else b` and a name
        "import torch_npu\ndef attn(q, c, has):\n    kv = c.transpose(1, 2).contiguous() if has else None\n"
        "    return npu_sparse_attention(q, kv)",
        # not the channel shuffle: a 5-D permute that is not flattened back to 4-D
        "import torch_npu\ndef ssd(x, b, c, l, h, p):\n    return x.reshape(b, c, l, h, p).permute(0, 2, 1, 3, 4).contiguous()",
        # not the head transpose: a 3-D interleave, or a CTC model (log_softmax is no attention)
        "import torch, torch_npu\nclass Attention(torch.nn.Module):\n    def forward(self, xq):\n"
        "        return xq.view(1, -1, 2).transpose(2, 1).contiguous()",
        "import torch, torch_npu\ndef ctc(x, w):\n    x = torch.matmul(x, w)\n    x = x.transpose(1, 2).contiguous()\n"
        "    return torch.log_softmax(x, -1)",
        # two layout changes in a row: the matmul would copy anyway
        "import torch, torch_npu\ndef f(q, key):\n    return torch.bmm(q, key.transpose(0, 1).transpose(1, 2).contiguous())",
    )
