"""ASC403 float64-on-npu."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.rule import Case, Docs, Rule

TORCH_F64 = frozenset({"torch.float64", "torch.double"})
MS_F64 = frozenset({"mindspore.float64", "mindspore.double", "mindspore.dtype.float64", "mindspore.dtype.double"})
# methods whose dtype argument makes (or casts to) a tensor of that dtype
DTYPE_METHODS = frozenset({"to", "type", "astype", "new_tensor", "new_zeros", "new_ones", "new_full", "new_empty",
                           "cast"})
DTYPE_KEYWORDS = frozenset({"dtype", "dst_type"})
HOST_METHODS = frozenset({"cpu", "numpy", "item", "tolist"})
# torch factories that make a host tensor unless given `device=`
HOST_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange",
                            "linspace", "logspace", "rand", "randn", "randint", "randperm", "eye", "Tensor"})
DEVICE_METHODS = frozenset({"npu", "cuda", "to"})
DATA_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "mindspore.Tensor", "mindspore.tensor"})
# framework functions that take a dtype without making a tensor of it
DTYPE_QUERIES = frozenset({"finfo", "iinfo", "promote_types", "can_cast", "is_floating_point", "dtype_to_nptype",
                           "dtype_to_pytype"})


class Float64OnNpu(Rule):
    code = "ASC403"
    name = "float64-on-npu"
    message = "{form} makes a float64 tensor, which Ascend cannot compute on the AI Core (AI CPU fallback or " \
              "rejected): use {replacement}"
    preview = True
    npu_context = True
    triggers = ("double", "float64")
    docs = Docs(
        summary="A float64 tensor in NPU code, which the Ascend AI Core cannot compute on.",
        what="Flags `.double()` on tensors and modules, and float64 dtypes (`torch.float64`, `torch.double`, "
             "`mstype.float64`) passed as a `dtype=` argument, to a cast (`.to`, `.type`, `.astype`, "
             "`ops.Cast()(x, t)`, `ops.cast`), to a tensor constructor (`torch.*`, `mindspore.Tensor`) or to "
             "`torch.set_default_dtype`, in NPU code.",
        why="float64 is not a Cube (or, for most ops, a Vector) type on the Ascend AI Core: such ops fall back "
            "to the AI CPU or are rejected. MindSpore's `ops.MatMul` docs say float64 is not supported on "
            "Ascend; torch_npu's `transfer_to_npu` maps `torch.cuda.DoubleTensor` to a float tensor because "
            "\"the double type is not supported\"; Ascend's profiler advisor suggests converting double "
            "operators to float.",
        known_problems="Tensors made by a torch factory without `device=` (and not moved with `.npu()`/`.to()`) "
                       "and values after `.cpu()` are taken to live on the host and are not reported; other "
                       "host tensors (e.g. in a data transform) still are. Comparisons "
                       "(`x.dtype == torch.float64`), dtype tables and the body of a `def double(self)` that "
                       "implements the cast are not reported.",
        example="""
            def accuracy(logits, target):
                return logits.argmax(dim=1).eq(target).double().mean() * 100.0
        """,
        use_instead="""
            def accuracy(logits, target):
                return logits.argmax(dim=1).eq(target).float().mean() * 100.0
        """,
        fix_safety="No fix: float32 has less precision than float64.",
        source="`mindspore.ops.MatMul` API docs (float64 unsupported on Ascend); torch_npu "
               "`contrib/transfer_to_npu.py` (DoubleTensor); msprof-analyze advisor AI CPU rules.",
    )
    cases = (
        Case("""
            import torch_npu
            acc = logits.argmax(1).eq(target).double().mean()
            """, line=2, message_contains="`.double()` makes a float64 tensor, which Ascend cannot compute"),
    )
    flagged = (
        "import torch_npu\nmodel = Net().double()",
        "import torch, torch_npu\nx = torch.zeros(4, dtype=torch.float64, device='npu')",
        "import torch, torch_npu\nx = torch.tensor(values, dtype=torch.float64).npu()",
        "import torch, torch_npu\nx = torch.arange(0, dim, 2, device=dev).double()",
        "import torch, torch_npu\nx = y.to(torch.double)",
        "import torch, torch_npu\nx = y.to('npu', torch.float64)",
        "import torch, torch_npu\nx = y.type(torch.float64)",
        "import torch, torch_npu\ntorch.set_default_dtype(torch.float64)",
        "import mindspore as ms\nx = ms.Tensor(arr, ms.float64)",
        "from mindspore import dtype as mstype\nx = y.astype(mstype.float64)",
        "from mindspore import ops\nimport mindspore.common.dtype as mstype\nx = ops.Cast()(y, mstype.float64)",
        "from mindspore import ops\nfrom mindspore import dtype as mstype\nx = ops.cast(y, mstype.float64)",
        "from mindspore import ops, Tensor\nfrom mindspore import dtype as mstype\n"
        "x = ops.ones((2, 2), dtype=mstype.float64)",
        # in construct, an op between the casts runs in float64 on every call
        "import mindspore as ms\nfrom mindspore import nn, ops\nclass T(nn.Cell):\n    def construct(self, x, g):\n"
        "        return ops.grid_sample(x.astype(ms.float64), g.astype(ms.float64)).astype(x.dtype)",
    )
    clean = (
        "import torch_npu\nacc = logits.argmax(1).eq(target).float().mean()",
        "import torch, torch_npu\nx = torch.zeros(4, dtype=torch.float32)",
        "import torch, torch_npu\nok = x.dtype == torch.float64",  # a comparison
        "import torch, torch_npu\nDTYPES = {'fp64': torch.float64, 'fp32': torch.float32}",  # a table
        "import torch, torch_npu\nis_double = x.dtype in (torch.float64, torch.double)",
        "import numpy as np\nimport torch_npu\na = np.zeros(4, dtype=np.float64)",  # host numpy
        "import torch_npu\ny = x.cpu().double()",  # explicitly on the host
        "import torch, torch_npu\nx = torch.tensor(values, dtype=torch.float64)",  # a host tensor
        "import torch, torch_npu\ninv_freq = 1.0 / base ** (torch.arange(0, dim, 2).double() / dim)",  # host
        "import torch_npu\nv = np.double(3)",
        "import torch\nacc = logits.eq(target).double().mean()",  # no NPU context
        "import torch_npu\nx = y.to(dtype)",  # dtype unknown
        "import mindspore\nclass Tensor:\n    def double(self):\n        return self.to(mindspore.float64)",
        "import torch, torch_npu\neps = torch.finfo(torch.float64).eps",
        "from mindspore import dtype as mstype\nx = y.astype(mstype.float32)",
        # float64 only as an intermediate, a one-element value, restoring a float64 input
        "import torch, torch_npu\ninv = 1.0 / (base ** (torch.arange(0, d, 2, device=dev) / d).double()).to(dtype=dt)",
        "import torch, torch_npu\ninv_scale = scale.double().reciprocal().float()",
        "import torch, torch_npu\nt0 = torch.tensor([start_time], dtype=torch.double, device='npu')",
        "import torch, torch_npu\ndef wrap(x):\n    if x.dtype == torch.double:\n        y = f(x.float())\n"
        "        return y.double()\n    return f(x)",
    )

    def visit_Call(self, node: ast.Call) -> None:
        if self._implements_double() or self._deliberate():
            return
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "double" and not node.args and not node.keywords
                and self.ctx.qualname(func) is None and not self._on_host(func.value)):
            self.report(node, form="`.double()`", replacement="`.float()`")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr not in ("float64", "double"):
            return
        qual = self.ctx.qualname(node)
        if (qual not in TORCH_F64 and qual not in MS_F64) or self._implements_double() or self._deliberate():
            return
        if not self._makes_tensor(node):
            return
        if qual in TORCH_F64:
            self.report(node, form=f"`{qual}`", replacement="`torch.float32`")
        else:
            self.report(node, form="`mstype.float64`", replacement="`mstype.float32`")

    def _makes_tensor(self, node: ast.AST) -> bool:
        """Is the dtype `node` an argument that creates or casts a tensor?"""
        stack = self.ctx.stack
        parent: Optional[ast.AST] = stack[-2] if len(stack) > 1 else None
        if isinstance(parent, ast.keyword):
            if parent.arg not in DTYPE_KEYWORDS:
                return False
            call = stack[-3] if len(stack) > 2 else None
            moved = len(stack) > 3 and isinstance(stack[-4], ast.Attribute) and stack[-4].attr in DEVICE_METHODS
            return not (isinstance(call, ast.Call) and self._host_creation(call) and not moved)
        if not isinstance(parent, ast.Call) or node not in parent.args:
            return False
        func = parent.func
        if isinstance(func, ast.Call):  # ops.Cast()(x, t)
            return (self.ctx.call_name(func) or "").startswith("mindspore.")
        qual = self.ctx.call_name(parent)
        if qual is not None:
            return qual.startswith(("torch.", "mindspore.")) and qual.rsplit(".", 1)[-1] not in DTYPE_QUERIES
        return isinstance(func, ast.Attribute) and func.attr in DTYPE_METHODS

    def _deliberate(self) -> bool:
        """float64 that costs no per-step device op: outside forward and the step loop, an intermediate cast
        back in the same expression (`(x.double() ** e).to(dtype)`, `s.double().reciprocal().float()`), a tiny
        one-element value
        (`torch.tensor([t0], dtype=torch.double, device=d)` for a start-up all-reduce), or code that
        handles float64 inputs on purpose (under `if x.dtype == torch.double:`, restoring the caller's dtype)."""
        stack = self.ctx.stack
        per_step = self.ctx.in_hot_method() or self.ctx.in_step_loop()
        for index in range(len(stack) - 1, 0, -1):
            node = stack[index]
            if isinstance(node, ast.stmt):
                break
            if isinstance(node, ast.Call) and not per_step and self._casts_down(node):
                return True  # set-up math in float64, cast back (in forward the op between would still run)
            if isinstance(node, ast.Call) and self._one_element(node):
                return True
        for if_node, _ in self.ctx.ifs:
            if any(isinstance(n, ast.Compare) and any(self.ctx.qualname(c) in TORCH_F64 | MS_F64
                                                      for c in [n.left] + n.comparators)
                   for n in ast.walk(if_node.test)):
                return True
        return False

    def _casts_down(self, call: ast.Call) -> bool:
        """`.float()`, `.half()`, `.bfloat16()`, `.type_as(y)`, `.to(dtype=<not float64>)` on a value."""
        func = call.func
        if not isinstance(func, ast.Attribute) or self.ctx.qualname(func) is not None:
            return False
        if func.attr in ("float", "half", "bfloat16", "type_as"):
            return True
        if func.attr in ("to", "astype", "type"):
            values = list(call.args) + [kw.value for kw in call.keywords if kw.arg in ("dtype", None)]
            dtypes = [v for v in values if not (isinstance(v, ast.Constant) and isinstance(v.value, str))]
            return bool(dtypes) and not any(self.ctx.qualname(v) in TORCH_F64 | MS_F64 for v in dtypes)
        return False

    def _one_element(self, call: ast.Call) -> bool:
        qual = self.ctx.call_name(call) or ""
        if qual not in DATA_CONSTRUCTORS or not call.args:
            return False
        data = call.args[0]
        return isinstance(data, ast.Constant) or (isinstance(data, (ast.List, ast.Tuple)) and len(data.elts) == 1)

    def _implements_double(self) -> bool:
        """Inside `def double(self)`: a tensor library defining the cast, not a use of it."""
        func = self.ctx.function
        return func is not None and func.name in ("double", "float64")

    def _on_host(self, receiver: ast.AST) -> bool:
        """`x.cpu().double()`, `t.numpy().double()`: the value is explicitly on the host."""
        for _ in range(6):
            if not isinstance(receiver, ast.Call) or not isinstance(receiver.func, ast.Attribute):
                return False
            if receiver.func.attr in HOST_METHODS or self._host_creation(receiver):
                return True
            receiver = receiver.func.value
        return False

    def _host_creation(self, call: ast.Call) -> bool:
        """`torch.arange(n)`, `torch.tensor(x)`: made without `device=`, so on the host."""
        qual = self.ctx.call_name(call) or ""
        return (qual.startswith("torch.") and qual[6:] in HOST_FACTORIES
                and not any(kw.arg in ("device", None) for kw in call.keywords))
