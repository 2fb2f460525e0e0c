"""ASC205 host-sync-in-forward."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.analysis.placement import DEVICE
from ascend_lint.rule import Case, Docs, Rule

# Tensor methods that copy device data to the host (`asnumpy` is MindSpore's `numpy`).
SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist", "asnumpy"})
# Built-ins that read a tensor's value on the host.
READING_BUILTINS = frozenset({"bool", "float", "int", "print"})


class HostSyncInForward(Rule):
    code = "ASC205"
    name = "host-sync-in-forward"
    message = ("`{expr}` {what} in {where}, on every call: the host waits until the NPU has run every queued "
               "operator; keep the value on the device ({advice})")
    npu_context = True
    preview = True
    triggers = ("item", "cpu", "numpy", "tolist", "print", "bool(", "float(", "int(", "if ", "while ", "assert ")
    docs = Docs(
        summary="`.item()`, `.cpu()`, `print(t)` or `if t:` on a device tensor inside `forward` stalls the NPU on every call.",
        what="Flags, inside a model's `forward` / `construct` (and the functions the project model finds they "
             "call), a read of a device tensor's value on the host: `.item()`, `.cpu()`, `.numpy()`, `.tolist()`, "
             "MindSpore's `.asnumpy()`, `bool(t)`, `float(t)`, `int(t)`, `print(t)` (an f-string too), and a "
             "tensor used as a condition (`if t:`, `while t:`, `assert t`, `a if t else b`, `if (x > 0).any():`). "
             "The tensor must be known to be on the device: an input of `forward`, a parameter or buffer of the "
             "model, or computed from one (ascend_lint/analysis/placement.py); host tensors (`torch.tensor(...)` "
             "without a device, `.cpu()` results) and Python values (shapes, sizes, flags) are not reported.",
        why="Each of these is a device-to-host copy: the host must wait until every queued operator has run "
            "before it can read the value, so it stops launching the next operators and the NPU idles (Ascend's "
            "large-model training guide shows such waits as device free time); in a `forward` it happens on every "
            "step of training and inference. `torch_npu.npu.set_sync_debug_mode(\"warn\")` reports each one at "
            "run time.",
        known_problems="Only tensors whose placement follows from the function itself are checked: a tensor "
                       "passed in from elsewhere to a helper is not known to be on the device. A check that must "
                       "stop the program (`assert` in debug code) is reported too: wrap it in a debug flag.",
        example="""
            class Router(nn.Module):
                def forward(self, x):
                    scores = self.gate(x)
                    if scores.max() > self.threshold:
                        scores = scores / scores.max()
                    return scores
        """,
        use_instead="""
            class Router(nn.Module):
                def forward(self, x):
                    scores = self.gate(x)
                    peak = scores.amax()
                    return torch.where(peak > self.threshold, scores / peak, scores)
        """,
        fix_safety="No fix: where the value is needed on the host depends on the model.",
        source="CANN 7.0 large-model training guide, \"减少同步接口调用\" "
               "(https://www.hiascend.com/document/detail/zh/canncommercial/700/foundmodeldev/foundmodeltrain/"
               "PT_LMTMOG_000080.html); torch_npu `torch_npu.npu.set_sync_debug_mode` "
               "(torch_npu/npu/__init__.py, https://gitee.com/ascend/pytorch).",
    )
    cases = (
        Case("""
            import torch
            import torch_npu
            class M(torch.nn.Module):
                def forward(self, x):
                    n = x.sum().item()
                    return x / n
            """, line=5, message_contains="`x.sum().item()` copies a device tensor to the host with `.item()` in "
                                          "`forward`"),
        # a condition and bool() on results of ops on the inputs and parameters
        Case("""
            import torch
            import torch_npu
            class Gate(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = torch.nn.Parameter(torch.ones(4))
                def forward(self, x):
                    scores = x * self.w
                    if scores.max() > 0:
                        scores = scores / 2
                    return scores, bool(scores.any())
            """, line=9, message_contains="`scores.max() > 0` is a device tensor used as a condition"),
        Case("""
            import torch
            import torch_npu
            class M(torch.nn.Module):
                def forward(self, x):
                    y = x.softmax(-1)
                    print(y)
                    return y
            """, line=6, message_contains="`print(y)` reads a device tensor's value on the host with `print()` in "
                                          "`forward`"),
    )
    flagged = (
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        n = x.sum().item()\n        return x / n",
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        if (x > 0).any():\n            x = x.relu()\n        return x",
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = torch.nn.Linear(4, 4)\n    def forward(self, x):\n"
        "        y = self.proj(x)\n        print(f'out {y}')\n        return y",
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x, mask=None):\n"
        "        ids = x.argmax(-1).tolist()\n        return ids",
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('scale', torch.ones(1))\n    def forward(self, x):\n"
        "        return x * float(self.scale)",
        "import mindspore\nfrom mindspore import nn\nclass Net(nn.Cell):\n    def construct(self, x):\n"
        "        print(x.asnumpy())\n        return x",
        "import mindspore\nfrom mindspore import nn\nmindspore.set_context(mode=mindspore.PYNATIVE_MODE)\n"
        "class Net(nn.Cell):\n    def construct(self, x):\n        if x.sum() > 0:\n            x = x * 2\n"
        "        return x",
    )
    clean = (
        # shapes, sizes and Python flags are values, not tensors
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x, training=False):\n"
        "        if x.shape[0] > 1 and x.dim() == 3 and training:\n            n = int(x.size(1))\n"
        "        if self.training:\n            print(x.shape)\n        return x",
        # host tensors: built without a device, or already copied to the host
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        r = torch.tensor([1.0, 2.0]).float()\n        m = r.mean().item()\n"
        "        idx = torch.arange(4).cpu()\n        ids = idx.tolist()\n        return x * m",
        # host tensors built from an input's Python data (RL rewards): host work, no sync
        "import torch\nimport torch_npu\nclass Critic(torch.nn.Module):\n    def forward(self, x, rewards):\n"
        "        r = torch.tensor(rewards).float()\n        baseline = r.mean().item()\n"
        "        if r.std() > 0:\n            print(r)\n        return x - baseline",
        # `is None` tests and membership are Python values
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x, mask=None):\n"
        "        if mask is not None:\n            x = x.masked_fill(mask, 0)\n        return x",
        # a bare input may be a flag; varargs are a tuple; autograd Function inputs may be anything
        "import torch\nimport torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x, causal, ratio, *args):\n"
        "        if causal and ratio == 4 and args:\n            x = x.tril()\n        print(ratio)\n        return x",
        "import torch\nimport torch_npu\nclass F(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, q, causal):\n        if causal:\n            q = q * 2\n        return q",
        # outside forward: evaluation code and set-up
        "import torch\nimport torch_npu\ndef evaluate(model, x):\n    return model(x).argmax(-1).tolist()",
        # not NPU code
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x / x.sum().item()",
        # a MindSpore cell compiled in GRAPH_MODE: tensor conditions are graph control flow
        "import mindspore\nfrom mindspore import nn\nmindspore.set_context(mode=mindspore.GRAPH_MODE)\n"
        "class Net(nn.Cell):\n    def construct(self, x):\n        if x.sum() > 0:\n            x = x * 2\n"
        "        print(x)\n        return x",
        # a MindSpore cell whose run mode is not known: a tensor condition may be graph control flow
        "import mindspore\nfrom mindspore import nn\nclass Net(nn.Cell):\n    def construct(self, x):\n"
        "        if x.sum() > 0:\n            x = x * 2\n        return x",
        # helper methods and distributed work handles are not tensors
        "import torch\nimport torch_npu\nimport torch.distributed as dist\nclass M(torch.nn.Module):\n"
        "    def busy(self, x):\n        return x.requires_grad\n    def forward(self, x):\n"
        "        handle = dist.all_reduce(x, async_op=True)\n        if handle:\n            handle.wait()\n"
        "        if self.busy(x) and torch.equal(x, x):\n            x = x * 2\n        return x",
        # tests are not training code
        "import torch\nimport torch_npu\nclass TestM(torch.nn.Module):\n    def forward(self, x):\n"
        "        assert x.sum().item() > 0\n        return x",
    )

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in SYNC_METHODS and not node.args and self._on_device(func.value, tensor=True, read=True):
                self._report(node, node, f"copies a device tensor to the host with `.{func.attr}()`",
                             "read it only where it is needed, outside the model")
            return
        if isinstance(func, ast.Name) and func.id in READING_BUILTINS and not self.ctx.is_local(func.id) \
                and self.ctx.aliases.get(func.id) is None:
            tensor = self._read_tensor(node) if func.id == "print" else \
                (node.args[0] if len(node.args) == 1 and not node.keywords else None)
            if tensor is not None and self._on_device(tensor):
                self._report(node, node, f"reads a device tensor's value on the host with `{func.id}()`",
                             "pass tensors on, and print them outside the model" if func.id == "print"
                             else "compute with the tensor itself")

    def visit_If(self, node: ast.If) -> None:
        self._condition(node.test)

    def visit_While(self, node: ast.While) -> None:
        self._condition(node.test)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._condition(node.test)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._condition(node.test)

    # ------------------------------------------------------------------ helpers
    def _condition(self, test: ast.expr) -> None:
        for part in test.values if isinstance(test, ast.BoolOp) else [test]:
            if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not):
                part = part.operand
            if self._on_device(part):
                self._report(part, part, "is a device tensor used as a condition: Python reads its value on the host",
                             "select with `torch.where` or masks instead of branching")
                return

    def _read_tensor(self, call: ast.Call) -> Optional[ast.expr]:
        for arg in call.args:
            values = [v.value for v in arg.values if isinstance(v, ast.FormattedValue)] \
                if isinstance(arg, ast.JoinedStr) else [arg]
            for value in values:
                if self._on_device(value):
                    return value
        return None

    def _on_device(self, node: ast.AST, tensor: bool = False, read: bool = False) -> bool:
        """Is `node` a device tensor in a forward? `read`: an explicit host read (`.item()`, `.asnumpy()`)."""
        ctx = self.ctx
        return ctx.in_hot_method() and ctx.replaced_by() is None and not self._compiled(read) and \
            ctx.placement(node, tensor) is DEVICE

    def _compiled(self, read: bool) -> bool:
        """A MindSpore cell that may run compiled (GRAPH_MODE, most MindSpore training): its `construct` is one
        graph, where a tensor condition is graph control flow and `print` an operator, not a host read. Such
        reads are reported only where the file runs PyNative; explicit reads (`.asnumpy()`), which a graph
        cannot hold, unless GRAPH_MODE is known."""
        cls = self.ctx.class_scope
        if cls is None or cls.class_kind != "cell":
            return False
        if read:
            return self.ctx.graph_mode() is not None
        return self.ctx.run_mode() != "pynative"

    def _report(self, node: ast.AST, shown: ast.AST, what: str, advice: str) -> None:
        text = ast.unparse(shown)
        if len(text) > 60 or "\n" in text:
            text = text[:57] + "..."
        role = self.ctx.hot_role()  # the forward itself, or a function a forward calls, with the reason
        self.report(node, expr=text, what=what, where=role.describe() if role is not None else "`forward`",
                    advice=advice)
