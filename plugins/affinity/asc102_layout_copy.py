"""ASC102 contiguous-layout-copy (preview): the other `.contiguous()` copies after a view op."""
from __future__ import annotations

from ascend_lint.rule import Case, Docs

from ._layout import LayoutCopyRule

PATTERNS = {
    "layout-copy": {"remedy": "check that the consumer needs this layout; if it does, produce the tensor in that "
                              "layout (or pick an op that takes a layout argument) instead of copying it"},
    "pieces": {"remedy": "avoid materialising the pieces, or fold the copy into a compute op"},
}


class ContiguousLayoutCopy(LayoutCopyRule):
    code = "ASC102"
    name = "contiguous-layout-copy"
    message = "`.contiguous()` after `{op}` runs as a separate copy kernel on Ascend: {remedy}"
    patterns = PATTERNS
    preview = True
    npu_context = True
    file_triggers = ("contiguous",)
    triggers = ("contiguous",)
    docs = Docs(
        summary="`.contiguous()` after a view op runs a separate copy kernel on Ascend: check the layout is needed.",
        what="Flags `.contiguous()` on the result of a view op (`transpose`, `permute`, `t`, `.T`/`.mT`, "
             "`swapaxes`/`swapdims`, `movedim`, `chunk`, `split`, `tensor_split`, `unbind`, `narrow`, "
             "`expand`; chained, through a local name, or the loop variable of `for piece in x.chunk(...)`) "
             "that is none of ASC101's patterns: a layout change or pieces copied for a consumer that may need "
             "them (a `.view()`, a convolution, a return value).",
        why="On Ascend a non-contiguous to contiguous conversion runs as its own copy kernel (in the ShuffleNetV2 "
            "port the `chunk` pieces' conversion was slow, and chunk + cat + shuffle were folded into one op). "
            "Often the consumer does need the layout, so the remedy is to produce the tensor in the layout "
            "that is needed rather than to drop the copy: a preview rule, for a review of the layout changes.",
        known_problems="Most findings are copies the consumer needs (`.contiguous().view(...)` fails without "
                       "it); a reviewer decides whether the layout change can be avoided. The silent cases of "
                       "ASC101 apply here too: pieces along dim 0, copies feeding custom kernels, collectives "
                       "or raw pointers, `is_contiguous()` guards, `__init__` set-up and eager fallbacks.",
        example="""
            def forward(self, x):
                x1, x2 = x.chunk(2, dim=1)
                return torch.cat((x1, self.branch(x2.contiguous())), dim=1)
        """,
        use_instead="""
            def forward(self, x):
                x1, x2 = x.chunk(2, dim=1)
                return torch.cat((x1, self.branch(x2)), dim=1)  # the conv reads the piece as it is
        """,
        fix_safety="No fix: whether the layout is needed depends on the consumer.",
        source="Ascend PyTorch model tuning case: ShuffleNetV2 on Ascend 910 (chunk + cat + channel shuffle).",
    )
    cases = (
        Case("""
            import torch_npu
            y = x.transpose(1, 2).contiguous()
            """, line=2, message_contains="`.contiguous()` after `transpose` runs as a separate copy"),
    )
    flagged = (
        "import torch, torch_npu\ny = x.permute(0, 2, 1, 3).contiguous()",
        "import torch_npu\na, b = x.chunk(2, dim=1)\nb = b.contiguous()",
        "import torch, torch_npu\ndef f(x):\n    a, b = torch.chunk(x, 2, 1)\n    return a.contiguous()",
        "import torch_npu\ny = x.expand(4, -1, -1).contiguous()",
        "import torch_npu\ndef f(x):\n    parts = x.chunk(4, dim=-1)\n    first = parts[0]\n    return first.contiguous()",
        "import torch, torch_npu\ndef f(x):\n    return torch.split(x, 2, 1)[0].contiguous()",
        "import torch_npu\ndef f(x):\n    seq_dim = 1\n    return x.chunk(2, dim=seq_dim)[0].contiguous()",
        "import torch_npu\ny = x.swapaxes(0, 1).contiguous()",
        "import torch_npu\ny = x.movedim(1, -1).contiguous()",
        "import torch_npu\ny = x.narrow(1, 0, 4).contiguous()",
        "import torch_npu\ny = x.unbind(1)[0].contiguous()",
        "import torch, torch_npu\ny = torch.tensor_split(x, 3, dim=2)[0].contiguous()",
        # loop variables over chunk/split pieces
        "import torch_npu\ndef f(x, n):\n    for m in x.chunk(n, dim=1):\n        use(m.contiguous())",
        "import torch_npu\ndef f(x):\n    for i, m in enumerate(x.split(4, dim=-1)):\n        use(i, m.contiguous())",
    )
    clean = (
        "import torch_npu\ny = x.contiguous()",
        "import torch_npu\ny = x.reshape(4, -1).contiguous()",
        # ASC101's patterns
        "import torch, torch_npu\ndef score(q, k):\n    return torch.matmul(q, k.transpose(-2, -1).contiguous())",
        # pieces along dim 0 are contiguous already
        "import torch_npu\ndef f(x):\n    a, b = x.chunk(2)\n    return a.contiguous()",
        "import torch_npu\ndef f(x):\n    a, b = x.chunk(2, dim=0)\n    return a.contiguous()",
        "import torch_npu\ny = x.narrow(0, 0, 4).contiguous()",
        "import torch_npu\ny = x.unbind()[0].contiguous()",
        "import torch_npu\ndef f(x):\n    dim = 0\n    return x.chunk(2, dim=dim)[0].contiguous()",
        "import torch_npu\ndef f(x, dim=0):\n    return x.split(2, dim)[0].contiguous()",
        "import torch_npu\ndef f(x):\n    seq_dim = 2 if x.ndim == 4 else 0\n    return x.chunk(2, dim=seq_dim)[1].contiguous()",
        "import torch_npu\ndef f(x, n):\n    for m in x.chunk(n):\n        use(m.contiguous())",
        # rebound since the view op; numpy's transpose; another op in between
        "import torch_npu\ndef f(x):\n    y = x.transpose(1, 2)\n    y = y * 2\n    return y.contiguous()",
        "import numpy as np, torch_npu\ny = np.transpose(a)\nz = torch.as_tensor(y).contiguous()",
        "import torch, torch_npu\ny = torch.transpose(x, 0, 1).float().contiguous()",
        # the copy is needed: a custom kernel, a collective, triton, a guard
        "import torch, torch_npu\ny = torch.ops.mylib.rope(x.transpose(1, 2).contiguous())",
        "import torch_npu\ndef f(x, group):\n    x = x.transpose(0, 1).contiguous()\n    return reduce_scatter_to_sequence_parallel_region(x)",
        "import torch_npu\ndef f(x):\n    kernel[(4,)](x.transpose(1, 2).contiguous())",
        "import torch_npu\ndef f(x):\n    x = x.transpose(1, 2)\n    return x if x.is_contiguous() else x.contiguous()",
        "import torch_npu\ndef f(x):\n    y = x.permute(0, 2, 1).contiguous()\n    return npu_chunk_fwd(y)",
        # not NPU code; test code
        "import torch\ny = x.transpose(1, 2).contiguous()",
        "import torch_npu\ndef test_transpose():\n    y = x.transpose(0, 1).contiguous()",
    )
