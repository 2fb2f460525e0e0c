"""ASC201 host-to-device-copy-in-forward."""
from __future__ import annotations

import ast
import keyword as pykeyword
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.analysis.semantic import Scope
from ascend_lint.astutil import argument, callee_name, constant, contains, keyword, method_name

from ._mutation import (FLOWS, MAX_HELPER_DEPTH, MUTATES, READING_BUILTINS, READS, keyword_parameter,
                        method_use, positional_parameter, torch_op_use, writes_in_place)

TORCH_CTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor"} | {
    f"torch.{kind}Tensor" for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char",
                                       "Byte", "Bool")
})
MS_CTORS = frozenset({"mindspore.Tensor", "mindspore.tensor"})
MOVES = ("to", "npu", "cuda")
# Keyword arguments of a constructor that are not its data.
NON_DATA_KEYWORDS = frozenset({"device", "dtype", "requires_grad", "pin_memory", "const_arg", "internal"})
# Builtins a constant-only expression may call (pure, no inputs).
# In-place container methods: a list built empty and appended to holds computed data.
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "__setitem__", "pop", "remove",
                      "clear", "sort", "reverse", "popitem", "discard"})
# Decorators that compile a MindSpore function or construct into a static graph (constants folded).
JIT_DECORATORS = frozenset({"mindspore.jit", "mindspore.ms_function", "mindspore.common.api.jit",
                            "mindspore.common.api.ms_function"})
SIZE_METHODS = frozenset({"size", "numel", "dim"})
# Functions that reorder the list they are given in place (`random.shuffle(self.order)`).
SHUFFLES = frozenset({"shuffle"})
# Tensor attributes that are facts about it, not the tensor: reading them shares nothing.
TENSOR_FACTS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_npu", "requires_grad", "size", "dim",
                          "numel", "item", "tolist", "nelement", "element_size", "stride", "is_contiguous"})
PURE_BUILTINS = frozenset({"range", "list", "tuple", "len", "int", "float", "bool", "sum", "min", "max", "abs",
                           "sorted", "reversed", "zip", "enumerate", "round", "True", "False", "None"})


class HostToDeviceCopyInForward(Rule):
    code = "ASC201"
    name = "host-to-device-copy-in-forward"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "`{ctor}(...)` in {method} is copied from host to device on every call{mode}: {remedy}"
    fix_applicability = Applicability.UNSAFE
    triggers = ("tensor(", "Tensor(", "from_numpy", ".npu(", ".cuda(", ".to(", "set_context")
    docs = Docs(
        summary="A tensor built from host data in `forward` or `construct` is copied to the device on every step.",
        what="Flags, in `forward` of an `nn.Module`, `construct` of a MindSpore `Cell` or `forward`/`backward` "
             "of a `torch.autograd.Function`, a tensor built from host data (`torch.tensor`, "
             "`torch.as_tensor`, `torch.from_numpy`, `torch.Tensor(...)` and the typed `torch.*Tensor` "
             "constructors, over numpy arrays or Python lists/ranges) that is moved to the device with "
             "`.to(<device>)`, `.npu()` or `.cuda()`, or created with `device=<not cpu>`. In a MindSpore "
             "`construct`, `Tensor(...)` / `mindspore.tensor(...)` built from numpy or Python data is itself "
             "the per-call copy and is flagged without a move. Through the project model, a function called from such a method (in any module, up to three calls deep) or assigned as one by a monkey-patch is hot too, and a class deriving from a model base defined in another module or from a well-known third-party base (transformers, mmengine, Megatron, mindformers) is a model.",
        why="Every call pays a host-to-device copy: the host builds the tensor, queues the copy and the "
            "operators after it wait for the transfer. In the ShuffleNetV2 port to Ascend 910, "
            "`index.to('npu')` in `forward` was removed by registering the index tensors as module buffers "
            "(`register_buffer`), which `model.to(device)` moves once.",
        known_problems="Tensors whose data depend on the method's inputs are not reported (the copy is then "
                       "part of the computation), except a constant repeated a batch-sized number of times "
                       "(`torch.tensor([c] * x.shape[0])`, `[c] * len(x)`, `[c] * b` with `b, n = x.shape`), "
                       "which `torch.full((n,), c, device=x.device)` builds on the device; nor tensors cached "
                       "under a condition (`if self.idx is None:`), code in a branch that only runs on the CPU "
                       "(`if x.device.type == 'cpu':`, the `else` of `if x.is_npu:` / `if not "
                       "self.is_cpu_device:`). "
                       "MindSpore: in PyNative mode (the default of `mindspore.set_context` since 2.x) every "
                       "call builds a `Tensor(...)` on the host and copies it, which is what the message says; "
                       "a `construct` compiled into a static graph holds such a tensor of constants as a graph "
                       "constant, uploaded once. So nothing is reported for a `construct` under `@jit` / "
                       "`@ms_function`, in a file that calls `set_context(mode=GRAPH_MODE)`, or in a "
                       "`TrainOneStep*` wrapper cell (the unit `Model.train` compiles and sinks; its constants "
                       "are per-step scalars such as loss-scale flags), nor in a module imported by an entry "
                       "script that sets GRAPH_MODE (unless a PyNative entry script imports it too). `@jit` "
                       "applied to a training step in another module is not seen.",
        example="""
            class ShuffleUnit(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.order = [i // 2 + (i % 2) * (channels // 2) for i in range(channels)]

                def forward(self, x):
                    index = torch.tensor(self.order).to("npu")
                    return x.index_select(1, index)
        """,
        use_instead="""
            class ShuffleUnit(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.order = [i // 2 + (i % 2) * (channels // 2) for i in range(channels)]
                    self.register_buffer("_order_buf", torch.tensor(self.order), persistent=False)

                def forward(self, x):
                    index = self._order_buf
                    return x.index_select(1, index)
        """,
        fix_safety="Unsafe: the fix appends `self.register_buffer('<name>', <expr>, persistent=False)` to "
                   "`__init__` and uses `self.<name>` in `forward`. It is unsafe because the tensor now "
                   "follows the module's device and dtype casts (`model.half()` converts a float buffer) and "
                   "appears in `named_buffers()`. It is offered only where the buffer computes what the "
                   "per-call tensor did: in an `nn.Module` whose `__init__` has no early `return`, when the "
                   "moved expression reads nothing but literals, module constants and `self` attributes that "
                   "`__init__` alone sets to plain data (built from literals, its arguments, module constants, "
                   "builtins or numpy; never a parameter, module or tensor, which change as the model trains, "
                   "and never changed in place elsewhere in the class, `.sort()` and `random.shuffle(...)` "
                   "included); when it sets no `requires_grad` (a buffer would freeze "
                   "`requires_grad=self.training`); and when nothing can tell that every call now shares one "
                   "tensor (a buffer changed in place drifts on every call). The tensor, each local name bound "
                   "to it and each view of it (`t.view(...)`, `t[0]`, `torch.reshape(t, ...)`) may only be "
                   "read: no in-place op (a trailing-`_` method or torch function: `.add_()`, `torch.exp_(t)`, "
                   "`torch.clamp_`; `out=t`; `inplace=True`, also positional as in `F.relu(t, True)`; "
                   "`nn.init.*`; a collective such as `dist.all_reduce(t)`; `t += x`, `t[0] += 1`, "
                   "`t[0] = 1`), no store (`self.cache = t`, `lst.append(t)`, `nn.Parameter(t)`), no return or "
                   "yield, and no call that is not known to only read it. Known to read: torch ops, tensor "
                   "methods that only read their arguments (`x.index_select(1, t)`, `x.masked_fill_(t, 0)`), "
                   "`len`/`print`/`isinstance`, and local functions (of the module, of the method, or of the "
                   "class through `self.`) that only read the parameter receiving it. Any other callee refuses "
                   "the fix: a submodule (`self.act(t)` may be an in-place ReLU), an imported helper, "
                   "`list(t)` (its rows are views). The finding stays.",
        source="Ascend PyTorch model tuning case: ShuffleNetV2 on Ascend 910 (\"[Pytorch] ShufflenetV2模型迁移--昇腾910"
               "训练场景性能调优记录分享\", Huawei Cloud community, https://bbs.huaweicloud.com/blogs/204633); "
               "`torch.nn.Module.register_buffer` (PyTorch API docs).",
    )
    cases = (
        Case("""
            import torch
            from torch import nn
            class Shuffle(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.order = [0, 2, 1, 3]
                def forward(self, x):
                    index = torch.tensor(self.order).to('npu')
                    return x.index_select(1, index)
            """, line=8, message_contains="`torch.tensor(...)` in `forward` is copied from host to device",
             fixed="""
            import torch
            from torch import nn
            class Shuffle(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.order = [0, 2, 1, 3]
                    self.register_buffer('_index_buf', torch.tensor(self.order), persistent=False)
                def forward(self, x):
                    index = self._index_buf
                    return x.index_select(1, index)
            """),
    )
    flagged = (
        # the ShuffleNetV2 index, and every move spelling
        "import torch\nfrom torch import nn\nclass Shuffle(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.order = [0, 2, 1, 3]\n    def forward(self, x):\n"
        "        index = torch.tensor(self.order).to('npu')\n        return x.index_select(1, index)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.tensor([0.5, 2.0]).npu()",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.Tensor([1.0]).cuda()",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.as_tensor([1.0, 2.0]).to(x.device)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.tensor([1.0, 2.0]).float().to(device=x.device, non_blocking=True)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.tensor(list(range(8)), device=x.device)",
        "import torch\nimport numpy as np\nMEAN = np.array([0.485, 0.456, 0.406])\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x - torch.from_numpy(MEAN).view(1, 3, 1, 1).to(x)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        w = torch.LongTensor([1, 2, 3])\n        return x[w.npu()]",
        # resolved through import aliases
        "import torch as th\nfrom torch import nn\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        return x + th.as_tensor([1.0]).npu()",
        # forward/backward of a torch.autograd.Function
        "import torch\nclass Scale(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
        "        return g * torch.tensor([2.0], device='npu')",
        # a scalar constant created on the device in every backward
        "import torch\nclass Loss(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
        "        if torch.ne(g, torch.tensor(1.0, device=g.device)):\n            g = g * 2\n        return g",
        # MindSpore construct: Tensor(...) from numpy or Python data, no move needed
        "import numpy as np\nfrom mindspore import Tensor, nn\nclass Net(nn.Cell):\n    def construct(self, x):\n"
        "        mean = Tensor(np.array([0.5, 0.5, 0.5], np.float32).reshape(1, 3, 1, 1))\n        return x - mean",
        "import mindspore as ms\nclass Net(ms.nn.Cell):\n    def construct(self, x):\n"
        "        return x * ms.Tensor([2.0], ms.float32)",
        # a constant repeated a batch-sized number of times: fill it on the device
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.tensor([1] * x.shape[0]).to(x.device)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        b, n = x.shape\n"
        "        labels = torch.tensor([0.0] * b, device=x.device)\n        return x, labels",
        # a device branch that is not the CPU one
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if x.device.type == 'npu':\n"
        "            x = x + torch.tensor([1.0]).to(x.device)\n        return x",
    )
    clean = (
        # factories that allocate on the device
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.arange(x.shape[1], device=x.device)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.zeros(4, device=x.device)",
        # data that depend on the inputs
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, lengths):\n"
        "        return x[:, torch.tensor(lengths).npu()]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        n = x.size(0)\n        return x + torch.tensor([n]).to(x.device)",
        # outside hot scopes
        "import torch\ndef make_index(order):\n    return torch.tensor(order).to('npu')",
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.index = torch.tensor([0, 2, 1, 3]).npu()",
        # dtype casts and CPU moves
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.tensor([0.5]).to(torch.float16).to(x.dtype).to('cpu')",
        # .to(x.device) of a tensor that is itself an input
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, mask):\n"
        "        return x * mask.to(x.device)",
        # a cached tensor built once (lazy init) is not a per-call copy
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if self.index is None:\n"
        "            self.index = torch.tensor(self.order).npu()\n        return x[:, self.index]",
        # cached in a container or a global under a condition: built once
        "import torch\nclass Attn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, pool):\n"
        "        if 'kv' not in pool:\n            pool['kv'] = torch.tensor([], device=x.device)\n        return x",
        "import torch\nCONST = None\nclass Ckpt(torch.autograd.Function):\n    @staticmethod\n"
        "    def backward(ctx, g):\n        global CONST\n        if CONST is None:\n"
        "            CONST = torch.tensor([65504.0]).npu()\n        return g",
        # a list filled in place from the inputs holds computed data
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, xs):\n        out = []\n"
        "        for x in xs:\n            out.append(len(x))\n        return torch.tensor(out).npu()",
        # a local class called `Tensor` is not torch.Tensor / mindspore.Tensor
        "import torch\nclass Tensor:\n    pass\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return Tensor([1]).to('npu')",
        # MindSpore: a cast of an input, or a tensor built from the input
        "from mindspore import Tensor, nn\nimport mindspore as ms\nclass Net(nn.Cell):\n"
        "    def construct(self, x):\n        return Tensor(x, ms.float32)",
        # MindSpore compiled into a static graph: constants are folded (GRAPH_MODE, @jit, TrainOneStep wrappers)
        "import mindspore as ms\nclass Net(ms.nn.Cell):\n    def construct(self, x):\n"
        "        return x * ms.Tensor([2.0], ms.float32)\nms.set_context(mode=ms.GRAPH_MODE)",
        "import mindspore as ms\nfrom mindspore import jit\nclass Net(ms.nn.Cell):\n    @jit\n"
        "    def construct(self, x):\n        return x * ms.Tensor([2.0], ms.float32)",
        "import mindspore as ms\nfrom mindspore import nn\nclass Step(nn.TrainOneStepWithLossScaleCell):\n"
        "    def construct(self, *inputs):\n        overflow = ms.Tensor(False)\n        return overflow",
        # a CPU-only branch: the host is the device there
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if x.device.type == 'cpu':\n"
        "            return x + torch.tensor([1.0]).to(x.device)\n        return x + 1",
        "import mindspore as ms\nclass Step(ms.nn.Cell):\n    def construct(self, x):\n"
        "        if not self.is_cpu_device:\n            return x\n        else:\n            return ms.Tensor(False)",
        # a list built from the input's values is data, not a fill
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, ids):\n"
        "        return torch.tensor([ids[0]] * x.shape[0]).to(x.device)",
    )

    def start_file(self) -> None:
        self._reported: Set[int] = set()
        self._buffer_names: Dict[int, Set[str]] = {}  # class node id -> names taken so far
        self._scans: Dict[int, Tuple[Set[str], Set[str]]] = {}
        self._parent_maps: Dict[int, Dict[int, ast.AST]] = {}  # hot method id -> child id -> parent (fix only)
        self._class_scans: Dict[tuple, tuple] = {}  # (class, __init__, self name) -> _class_scan (fix only)

    # ------------------------------------------------------------------ detection
    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if not ctx.in_hot_method():
            return
        if id(node) in self._reported or self._in_cpu_branch():
            return
        method = method_name(node)
        if method in MOVES and self._moves_to_device(node):
            found = self._host_tensor(node.func.value)
            if found is not None:
                ctor, direct = found
                if not self._depends_on_inputs(ctor):
                    self._reported.add(id(ctor))
                    self._flag(node, ctor, buffer_expr=node.func.value if direct else None)
                elif self._batch_fill(ctor) is not None:
                    self._reported.add(id(ctor))
                    self._flag(node, ctor, buffer_expr=None, fill=self._batch_fill(ctor))
            return
        qual = ctx.call_name(node)
        if qual in TORCH_CTORS:
            device = keyword(node, "device")
            if device is not None and self._is_device(device.value):
                if not self._depends_on_inputs(node):
                    self._flag(node, node, buffer_expr=node)
                elif self._batch_fill(node) is not None:
                    self._flag(node, node, buffer_expr=None, fill=self._batch_fill(node))
        elif qual in MS_CTORS and self._hot_class_kind() == "cell" and not self._graph_compiled():
            data = argument(node, "input_data", 0)
            if data is not None and self._ms_host_data(data) and not self._depends_on_inputs(node):
                self._flag(node, node, buffer_expr=None)

    # ------------------------------------------------------------ where the copy is real
    def _graph_compiled(self) -> bool:
        """GRAPH_MODE (set by the file or by the entry script that imports it), a `construct` under `@jit` /
        `@ms_function`, or of a `TrainOneStep*` wrapper cell: compiled into a graph whose constants are
        folded (wrappers are what `Model.train` compiles and sinks; their constants are per-step scalars
        such as loss-scale flags)."""
        if self.ctx.graph_mode() is not None:
            return True
        hot = self.ctx.hot_method()
        if hot is not None:
            for decorator in getattr(hot.node, "decorator_list", ()):
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                qual = self.ctx.qualname(target) or ""
                if qual in JIT_DECORATORS or (qual.startswith("mindspore.") and qual.rsplit(".", 1)[-1] in (
                        "jit", "ms_function")):
                    return True
        cls = self._hot_class()
        if cls is not None and isinstance(cls.node, ast.ClassDef):
            return any("TrainOneStep" in ast.unparse(base).rsplit(".", 1)[-1] for base in cls.node.bases)
        return False

    def _in_cpu_branch(self) -> bool:
        """Inside a branch that only runs on the CPU (`if x.device.type == 'cpu':`, the `else` of
        `if x.is_npu:` / `if not self.is_cpu_device:`): there the "device" is the host."""
        hot = self.ctx.hot_method()
        for if_node, in_else in self.ctx.ifs:
            if hot is not None and not contains(hot.node, if_node):
                continue
            side = _cpu_test(if_node.test)
            if side is not None and side == in_else:
                return True
        return False

    def _batch_fill(self, ctor: ast.Call) -> Optional[Tuple[str, str]]:
        """(size, value) for `torch.tensor([c] * x.shape[0])` / `[c] * len(x)`: a constant repeated a
        batch-sized number of times, which `torch.full` builds on the device."""
        data = argument(ctor, "data", 0)
        if not (isinstance(data, ast.BinOp) and isinstance(data.op, ast.Mult)):
            return None
        for seq, count in ((data.left, data.right), (data.right, data.left)):
            if (isinstance(seq, ast.List) and len(seq.elts) == 1
                    and isinstance(constant(seq.elts[0]), (int, float, bool)) and self._size_expr(count)):
                return ast.unparse(count), ast.unparse(seq.elts[0])
        return None

    def _size_expr(self, node: ast.expr, depth: int = 0) -> bool:
        """`x.shape[0]`, `x.size(0)`, `len(x)`, or a local name bound to one of them."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "len":
                return True
            return isinstance(func, ast.Attribute) and func.attr in SIZE_METHODS and self.ctx.qualname(func) is None
        if isinstance(node, ast.Name) and depth < 3:
            bound = self.ctx.binding(node.id)
            if bound is not None and bound.value is not None:
                value = bound.value
                if bound.index is not None and isinstance(value, ast.Attribute) and value.attr == "shape":
                    return True  # `b, n = x.shape`
                return bound.index is None and self._size_expr(value, depth + 1)
        return False

    def _flag(self, node: ast.Call, ctor: ast.Call, buffer_expr: Optional[ast.expr],
              fill: Optional[Tuple[str, str]] = None) -> None:
        if self._lazily_cached():
            return
        ctx = self.ctx
        kind = self._hot_class_kind()
        label = ctx.call_name(ctor) or "tensor"
        label = label.replace("mindspore.", "") if label.startswith("mindspore.") else label
        scalar = isinstance(constant(argument(ctor, "data", 0)), (int, float)) and ctx.call_name(ctor) in TORCH_CTORS
        if fill is not None:
            size, value = fill if len(fill[0]) <= 30 else ("n", fill[1])
            device = _device_text(node)
            remedy = (f"fill it on the device instead: `torch.full(({size},), {value}, device={device})` "
                      "(keep its dtype)")
        elif scalar:
            remedy = ("a scalar needs no copy: pass the Python number to the op, or fill it on the device with "
                      "`torch.full((), value, device=...)`")
        elif kind == "module":
            remedy = ("create it once in `__init__` with `self.register_buffer(name, tensor, persistent=False)`, "
                      "which `model.to(device)` moves with the model")
        elif kind == "cell":
            remedy = "create it once in `__init__` (`self.name = Tensor(...)`) and use `self.name`"
        elif ctx.hot_role().reason:
            remedy = "build it once (e.g. a buffer of the calling module) and pass it in"
        else:
            remedy = "build it once outside the Function (e.g. a module buffer) and pass it in"
        fix = self._fix(node, ctor, buffer_expr) if kind == "module" and buffer_expr is not None else None
        mode = " in PyNative mode (MindSpore's default; GRAPH_MODE and `@jit` fold it)" if kind == "cell" else ""
        self.report(node, ctor=label, method=ctx.hot_role().describe(), mode=mode, remedy=remedy, fix=fix)

    def _hot_class_kind(self) -> Optional[str]:
        cls = self._hot_class()
        return cls.class_kind if cls is not None else None

    def _hot_class(self) -> Optional[Scope]:
        scopes = self.ctx.scopes
        for index, scope in enumerate(scopes):
            if scope.hot:
                return scopes[index - 1] if index and scopes[index - 1].kind == "class" else None
        return None

    def _moves_to_device(self, call: ast.Call) -> bool:
        if method_name(call) in ("npu", "cuda"):
            return True
        device = keyword(call, "device")
        if device is not None:
            return self._is_device(device.value)
        return bool(call.args) and self._is_device(call.args[0], positional=True)

    def _is_device(self, node: ast.expr, positional: bool = False, depth: int = 0) -> bool:
        """A device that is not the CPU (`'npu'`, `x.device`, `torch.device('npu:0')`, `device`, a tensor)."""
        value = constant(node, default=ast)
        if value is not ast:
            if isinstance(value, str):
                return not value.startswith(("cpu", "meta"))
            return isinstance(value, int) and not isinstance(value, bool)
        if isinstance(node, ast.JoinedStr):
            return "cpu" not in ast.unparse(node)
        if isinstance(node, ast.Call):
            if self.ctx.call_name(node) == "torch.device":
                first = argument(node, "type", 0)
                return not (isinstance(constant(first), str) and constant(first).startswith("cpu"))
            return method_name(node) == "format" and "cpu" not in ast.unparse(node.func)
        qual = self.ctx.qualname(node)
        if qual is not None and qual.startswith("torch."):
            return False  # torch.float16, torch.long: a dtype
        if isinstance(node, ast.Attribute):
            return node.attr == "device" or ("device" in node.attr.lower() and "type" not in node.attr.lower())
        if isinstance(node, ast.Name):
            name = node.id.lower()
            if "dtype" in name or "type" in name:
                return False
            if "device" in name or name == "dev":
                return True
            bound = self.ctx.binding(node.id)
            if bound is not None and bound.value is not None and bound.index is None and depth < 3:
                return self._is_device(bound.value, positional, depth + 1)
            func = self.ctx.function
            # `.to(x)` with an input tensor: moves to x's device
            return positional and func is not None and node.id in func.params and node.id != self._self_name()
        return False

    def _host_tensor(self, node: ast.expr) -> Optional[Tuple[ast.Call, bool]]:
        """The host constructor call that `node` evaluates to, and whether it is written inline."""
        direct = True
        for _ in range(8):
            if isinstance(node, ast.Call):
                qual = self.ctx.call_name(node)
                if qual in TORCH_CTORS:
                    return node, direct
                if qual is not None or not isinstance(node.func, ast.Attribute) or node.func.attr in MOVES:
                    return None
                node = node.func.value  # torch.tensor(...).float().view(...)
            elif isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Name):
                bound = self.ctx.binding(node.id)
                if bound is None or bound.value is None or bound.index is not None:
                    return None
                node, direct = bound.value, False
            else:
                return None
        return None

    def _self_name(self) -> Optional[str]:
        hot = self.ctx.hot_method()
        if hot is None or self._hot_class_kind() not in ("module", "cell"):
            return None
        args = hot.node.args
        first = (args.posonlyargs + args.args)[:1]
        return first[0].arg if first else None

    def _depends_on_inputs(self, ctor: ast.Call, depth: int = 0) -> bool:
        """Do the constructor's data read a parameter or an unknown local of the hot method?"""
        data = list(ctor.args) + [kw.value for kw in ctor.keywords if kw.arg not in NON_DATA_KEYWORDS]
        return any(self._expr_depends(expr, depth) for expr in data)

    def _expr_depends(self, expr: ast.expr, depth: int) -> bool:
        ctx = self.ctx
        own = _comprehension_names(expr)
        self_name = self._self_name()
        for name in _loaded_names(expr):
            if name in own or name == self_name or not ctx.is_local(name):
                continue
            bound = ctx.binding(name)
            if bound is None or bound.value is None or depth >= 3:
                return True
            func = ctx.function
            if func is not None and name in self._scan(func.node)[1]:
                return True  # filled in place (`out = []; out.append(...)`): unknown content
            if self._expr_depends(bound.value, depth + 1):
                return True
        return False

    def _ms_host_data(self, node: ast.expr, depth: int = 0, follow: bool = True) -> bool:
        """numpy values and Python literals (lists, tuples, numbers), through locals and constants."""
        if depth > 6:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, bool)) and node.value is not None
        if isinstance(node, (ast.List, ast.Tuple)):
            return bool(node.elts) and all(self._ms_host_data(e, depth + 1, follow) for e in node.elts)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return True
        if isinstance(node, ast.UnaryOp):
            return self._ms_host_data(node.operand, depth + 1, follow)
        if isinstance(node, ast.BinOp):
            return (self._ms_host_data(node.left, depth + 1, follow)
                    and self._ms_host_data(node.right, depth + 1, follow))
        if isinstance(node, ast.Call):
            qual = self.ctx.call_name(node)
            if qual is not None:
                return qual.startswith("numpy.")
            if isinstance(node.func, ast.Attribute):  # np.array(...).reshape(...).astype(...)
                return self._ms_host_data(node.func.value, depth + 1, follow)
            return False
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self._self_name():
            cls = self.ctx.class_scope
            value = cls.attributes.get(node.attr) if cls is not None else None
            return value is not None and self._ms_host_data(value, depth + 1, follow=False)
        if isinstance(node, ast.Name) and follow:
            if self.ctx.is_local(node.id):
                bound = self.ctx.binding(node.id)
                return (bound is not None and bound.value is not None and bound.index is None
                        and self._ms_host_data(bound.value, depth + 1, follow))
            value = self.ctx.constants.get(node.id)
            return value is not None and self._ms_host_data(value, depth + 1, follow=False)
        return False

    def _lazily_cached(self) -> bool:
        """`if self.idx is None: self.idx = torch.tensor(...).npu()`: stored somewhere that outlives the
        call (an attribute, a container slot, a global) under a condition, so built once, not per call."""
        stmt = next((n for n in reversed(self.ctx.stack) if isinstance(n, ast.stmt)), None)
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return False
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(self._persistent(t) for t in targets):
            return False
        hot = self.ctx.hot_method()
        return any(hot is None or contains(hot.node, if_node) for if_node, _ in self.ctx.ifs)

    def _persistent(self, target: ast.AST) -> bool:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            return True
        func = self.ctx.function
        return isinstance(target, ast.Name) and func is not None and target.id in self._scan(func.node)[0]

    def _scan(self, func: ast.AST) -> Tuple[Set[str], Set[str]]:
        """(names declared global/nonlocal, names mutated in place) in a function; cached."""
        key = id(func)
        if key not in self._scans:
            declared: Set[str] = set()
            mutated: Set[str] = set()
            for sub in ast.walk(func):
                if isinstance(sub, (ast.Global, ast.Nonlocal)):
                    declared.update(sub.names)
                elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                      and sub.func.attr in MUTATORS and isinstance(sub.func.value, ast.Name)):
                    mutated.add(sub.func.value.id)
                elif isinstance(sub, (ast.Assign, ast.AugAssign)):
                    for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                            mutated.add(target.value.id)
                        elif isinstance(sub, ast.AugAssign) and isinstance(target, ast.Name):
                            mutated.add(target.id)
            self._scans[key] = (declared, mutated)
        return self._scans[key]

    # ------------------------------------------------------------------ fix
    def _fix(self, node: ast.Call, ctor: ast.Call, buffer_expr: ast.expr) -> Optional[Fix]:
        """Register the constant tensor as a non-persistent buffer in `__init__`, use it in `forward`."""
        ctx = self.ctx
        cls, hot = self._hot_class(), ctx.hot_method()
        if cls is None or hot is None or ctx.function is not hot or not isinstance(cls.node, ast.ClassDef):
            return None
        self_name = self._self_name()
        init = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None or self_name is None:
            return None
        init_args = init.args.posonlyargs + init.args.args
        if not init_args or init_args[0].arg != self_name or any(isinstance(n, ast.Return) for n in ast.walk(init)):
            return None  # (an early `return` could skip the appended register_buffer)
        if node is not ctor and not self._plain_move(node):
            return None
        if _sets_requires_grad(buffer_expr) or self._buffer_visible(node, hot.node):
            return None  # see Fix safety: the shared buffer would be mutated, aliased or returned
        init_attrs = {attr for attr in _init_only_attributes(cls.node, init, self_name)
                      if self._plain_attribute(cls.node, init, self_name, attr)}
        kept: List[ast.AST] = [buffer_expr]
        if buffer_expr is ctor:  # the `device=` keyword is dropped: only the rest must be constant
            kept = list(ctor.args) + [kw.value for kw in ctor.keywords if kw.arg != "device"] + [ctor.func]
        if not all(self._constant_only(part, init_attrs, self_name) for part in kept):
            return None
        source = self._buffer_source(buffer_expr)
        if source is None:
            return None
        name = self._buffer_name(cls.node, buffer_expr)
        text = f"{self_name}.register_buffer({name!r}, {source}, persistent=False)"
        return Fix(
            Applicability.UNSAFE,
            f"Register the tensor once as buffer `{name}` in `__init__` and use `{self_name}.{name}`",
            (Edit("insert_body_end", ctx.span(init), text=text),
             Edit("replace", ctx.span(node), text=f"{self_name}.{name}")),
        )

    # A tensor built per call is private to that call; a buffer is one tensor shared by every call. The
    # fix is offered only where nothing can tell the difference.
    def _buffer_visible(self, node: ast.expr, func: ast.AST) -> bool:
        """Could code see that every call now gets the same tensor: is the value at `node` (or a local name
        bound to it, or a view of it) changed in place, stored, returned or yielded, or passed to code that
        is not known to leave it alone?"""
        return self._escapes(node, func, set(), 0)

    def _escapes(self, node: ast.AST, func: ast.AST, seen: Set[Tuple[int, str]], depth: int) -> bool:
        parents = self._parents(func)
        current = node
        while True:
            parent = parents.get(id(current))
            if isinstance(parent, (ast.Tuple, ast.List)) and isinstance(parents.get(id(parent)), (ast.Call,
                                                                                                   ast.Subscript)):
                current, parent = parent, parents.get(id(parent))  # `torch.cat([x, t])`, `x[:, t]`
            if parent is None:
                return True
            if isinstance(parent, ast.Subscript):
                if parent.value is not current:
                    return False  # used as an index: read
                current = parent  # a view of the same storage flows on (`t[0] = 1` is judged where it lands)
            elif isinstance(parent, ast.IfExp):
                if parent.test is current:
                    return False
                current = parent
            elif isinstance(parent, (ast.BoolOp, ast.Starred)):
                current = parent  # the same tensor flows on
            elif isinstance(parent, ast.Attribute):
                if parent.attr in TENSOR_FACTS:
                    return False
                call = parents.get(id(parent))
                if isinstance(call, ast.Call) and call.func is parent:
                    if parent.attr.endswith("_") or parent.attr in MUTATORS:
                        return True  # in place on the shared tensor
                    current = call  # `.view()`, `.float()`, `.to()` may return the tensor itself or a view
                else:
                    current = parent  # `.data`, `.T`: the same storage
            elif isinstance(parent, ast.keyword):
                current = parent  # an argument by keyword: judged at its call
            elif isinstance(parent, ast.Call):
                use = self._call_use(parent, current, func, seen, depth)
                if use != FLOWS:
                    return use == MUTATES
                current = parent
            elif isinstance(parent, ast.AugAssign):
                return parent.target is current  # `t[0] += 1`, `t.data *= 2` write the shared tensor
            elif isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.FormattedValue, ast.Expr, ast.If,
                                     ast.While, ast.Assert)):
                return False  # a new value is computed from it, or it is only read
            elif isinstance(parent, (ast.Assign, ast.AnnAssign)):
                targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
                if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                    return True  # stored in an attribute or a container slot, unpacked, or written (`t[0] = 1`)
                if targets[0] is current:
                    return False  # the name is rebound: this use ends here
                return self._name_escapes(targets[0].id, func, seen, depth)
            else:
                return True  # returned, yielded, put in a container, bound by `with`/`for`, ...

    def _call_use(self, call: ast.Call, arg: ast.AST, func: ast.AST, seen: Set[Tuple[int, str]],
                  depth: int) -> str:
        """What `call` does with the tensor passed as `arg` (a positional argument or a keyword)."""
        if call.func is arg or (isinstance(arg, ast.keyword) and arg.arg in ("out", None)):
            return MUTATES  # called, written through `out=`, or spread by `**`
        qual = self.ctx.call_name(call)
        if writes_in_place(call, qual):
            return MUTATES
        if qual is not None:
            return torch_op_use(qual) if qual.startswith("torch.") else MUTATES
        callee = call.func
        if isinstance(callee, ast.Attribute):
            if isinstance(callee.value, ast.Name) and callee.value.id == self._self_name():
                method = self._class_method(callee.attr)  # `self.helper(t)`: a method of this class
                return self._helper_use(method, call, arg, True, seen, depth) if method is not None else MUTATES
            return method_use(callee.attr)
        if isinstance(callee, ast.Name):
            if callee.id in READING_BUILTINS and not self.ctx.is_local(callee.id) \
                    and callee.id not in self.ctx.local_functions:
                return READS
            helper = self._local_function(callee.id, func)
            if helper is not None:
                return self._helper_use(helper, call, arg, False, seen, depth)
        return MUTATES  # an unknown callee: not known to leave the tensor alone

    def _helper_use(self, helper: ast.AST, call: ast.Call, arg: ast.AST, method: bool,
                    seen: Set[Tuple[int, str]], depth: int) -> str:
        """A local function given the tensor: READS when its parameter is only read there (judged as in the
        hot method, a return counting as handing it on), else MUTATES."""
        if depth >= MAX_HELPER_DEPTH or isinstance(arg, ast.Starred):
            return MUTATES
        if isinstance(arg, ast.keyword):
            param = keyword_parameter(helper, arg.arg)
        elif any(isinstance(a, ast.Starred) for a in call.args[: call.args.index(arg)]):
            param = None
        else:
            param = positional_parameter(helper, call.args.index(arg), method)
        if param is None:
            return MUTATES
        return MUTATES if self._name_escapes(param, helper, seen, depth + 1) else READS

    def _local_function(self, name: str, func: ast.AST) -> Optional[ast.AST]:
        """A function defined in the hot method or at the top of the module under `name`."""
        for sub in ast.walk(func):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name == name and sub is not func:
                return sub
        return next((s for s in self.ctx.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == name), None)

    def _class_method(self, name: str) -> Optional[ast.AST]:
        cls = self._hot_class()
        if cls is None or not isinstance(cls.node, ast.ClassDef):
            return None
        return next((s for s in cls.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == name and not s.decorator_list), None)

    def _name_escapes(self, name: str, func: ast.AST, seen: Set[Tuple[int, str]], depth: int) -> bool:
        key = (id(func), name)
        if key in seen:
            return False
        seen.add(key)
        parents = self._parents(func)
        for sub in ast.walk(func):  # every use of the local in the function (a bounded look)
            if isinstance(sub, ast.Name) and sub.id == name:
                if isinstance(sub.ctx, ast.Load) and self._escapes(sub, func, seen, depth):
                    return True
                parent = parents.get(id(sub))
                if isinstance(parent, ast.AugAssign) and parent.target is sub:
                    return True  # `total += ...` accumulates into the shared tensor
            elif isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
                return True
        return False

    def _parents(self, func: ast.AST) -> Dict[int, ast.AST]:
        key = id(func)
        if key not in self._parent_maps:
            self._parent_maps[key] = {id(child): node for node in ast.walk(func)
                                      for child in ast.iter_child_nodes(node)}
        return self._parent_maps[key]

    def _plain_attribute(self, cls: ast.ClassDef, init: ast.FunctionDef, self_name: str, attr: str) -> bool:
        """Is `self.<attr>` plain host data fixed at construction: every value `__init__` assigns to it is
        built from literals, `__init__` arguments, module constants and pure builtins/numpy (not a
        parameter, module or tensor, whose value changes as the model trains), and nothing in the class
        changes it in place?"""
        changed, values, params, locals_ = self._class_scan(cls, init, self_name)
        if attr in changed:
            return False
        assigned = values.get(attr, [])
        return bool(assigned) and all(v is not None and self._plain_data(v, params, locals_) for v in assigned)

    def _class_scan(self, cls: ast.ClassDef, init: ast.FunctionDef, self_name: str) -> tuple:
        """One pass over a class for `_plain_attribute`: the `self` attributes changed in place anywhere in
        it, the values `__init__` assigns to each, `__init__`'s parameters and its single-assignment locals."""
        key = (id(cls), id(init), self_name)
        found = self._class_scans.get(key)
        if found is not None:
            return found
        changed: Set[str] = set()
        for sub in ast.walk(cls):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and _self_attr(
                    sub.func.value, self_name) and (sub.func.attr in MUTATORS or sub.func.attr.endswith("_")):
                changed.add(sub.func.value.attr)
            called = (callee_name(sub) if isinstance(sub, ast.Call) else '')
            if called in SHUFFLES or called.endswith("_"):
                changed.update(a.attr for a in sub.args if _self_attr(a, self_name))  # `random.shuffle(self.order)`
            if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for target in targets:
                    if isinstance(target, ast.Subscript) and _self_attr(target.value, self_name):
                        changed.add(target.value.attr)
        params = {a.arg for a in init.args.posonlyargs + init.args.args + init.args.kwonlyargs} - {self_name}
        values: Dict[str, List[Optional[ast.expr]]] = {}
        local_values: Dict[str, List[ast.expr]] = {}  # `half = channels // 2` in __init__
        for sub in ast.walk(init):
            if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                seen: Set[str] = set()
                for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                    if _self_attr(target, self_name) and target.attr not in seen:
                        seen.add(target.attr)
                        values.setdefault(target.attr, []).append(sub.value)
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                local_values.setdefault(sub.targets[0].id, []).append(sub.value)
            elif isinstance(sub, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
                for name in (n.id for n in ast.walk(sub) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)):
                    local_values[name] = []  # bound some other way: not followed
        locals_ = {name: vals[0] for name, vals in local_values.items() if len(vals) == 1 and name not in params}
        found = self._class_scans[key] = (changed, values, params, locals_)
        return found

    def _plain_data(self, expr: ast.expr, params: Set[str], locals_: Dict[str, ast.expr], depth: int = 0) -> bool:
        ctx = self.ctx
        if depth > 4:
            return False
        own = _comprehension_names(expr)
        for sub in ast.walk(expr):
            if isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(sub, ast.Attribute) and not _is_call_target(expr, sub) and (
                    ctx.qualname(sub) or "").split(".")[0] not in ("numpy", "math"):
                return False  # attributes (configs, other members) are not followed: not known to be data
            if isinstance(sub, ast.Call):
                func = sub.func
                qual = ctx.call_name(sub)
                if isinstance(func, ast.Name) and func.id in PURE_BUILTINS and func.id not in params:
                    continue
                if qual is not None and qual.split(".")[0] in ("numpy", "math"):
                    continue
                if isinstance(func, ast.Attribute) and qual is None and not (
                        func.attr.endswith("_") or func.attr in MUTATORS):
                    continue  # a method of plain data: `.reshape(...)`, `.tolist()`
                return False
        for name_node in _name_nodes(expr):
            name = name_node.id
            if name in own or name in params or name in ctx.constants or name in PURE_BUILTINS:
                continue
            if (ctx.aliases.get(name) or "").split(".")[0] in ("numpy", "math"):
                continue
            if name in locals_ and self._plain_data(locals_[name], params, locals_, depth + 1):
                continue
            return False
        return True

    @staticmethod
    def _plain_move(call: ast.Call) -> bool:
        """`.to(device)`, `.npu()`, `.cuda()` that change nothing but the device."""
        extra = [kw for kw in call.keywords if kw.arg not in ("device", "non_blocking")]
        if method_name(call) == "to":
            positional = call.args[1:] if keyword(call, "device") is None else call.args
            return not extra and all(isinstance(constant(a), bool) for a in positional)
        return not extra and len(call.args) <= 1

    def _constant_only(self, expr: ast.expr, init_attrs: Set[str], self_name: str) -> bool:
        ctx = self.ctx
        own = _comprehension_names(expr)
        for sub in ast.walk(expr):
            if isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == self_name:
                if sub.attr not in init_attrs:
                    return False
        for name_node in _name_nodes(expr):
            name = name_node.id
            if name in own:
                continue
            if name == self_name:
                if not _is_attribute_base(expr, name_node):
                    return False
                continue
            if ctx.is_local(name):
                return False
            if name in ctx.constants or ctx.aliases.get(name) or name in PURE_BUILTINS:
                continue
            return False
        return True

    def _buffer_source(self, expr: ast.expr) -> Optional[str]:
        """The source of `expr` without a `device=` keyword (the buffer follows the module)."""
        segment = self.ctx.segment
        if isinstance(expr, ast.Call) and keyword(expr, "device") is not None:
            if any(isinstance(a, ast.Starred) for a in expr.args):
                return None
            parts = [segment(a) for a in expr.args]
            parts += [segment(kw) for kw in expr.keywords if kw.arg != "device"]
            func = segment(expr.func)
            if func is None or any(p is None for p in parts):
                return None
            return f"{func}({', '.join(parts)})"
        return segment(expr)

    def _buffer_name(self, cls: ast.ClassDef, expr: ast.expr) -> str:
        taken = self._buffer_names.get(id(cls))
        if taken is None:
            taken = self._buffer_names[id(cls)] = _class_names(cls)
        stmt = next((n for n in reversed(self.ctx.stack) if isinstance(n, ast.stmt)), None)
        base = ""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                base = target.id
            elif isinstance(target, ast.Attribute):
                base = target.attr
        if not base:
            for sub in ast.walk(expr):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                    base = sub.attr
                    break
                if isinstance(sub, ast.Name) and sub.id in self.ctx.constants:
                    base = sub.id.lower()
                    break
        base = base.strip("_") or "const"
        name = f"_{base}_buf"
        if not name.isidentifier() or pykeyword.iskeyword(name):
            name = "_const_buf"
        candidate, number = name, 2
        while candidate in taken:
            candidate, number = f"{name}{number}", number + 1
        taken.add(candidate)
        return candidate


# ---------------------------------------------------------------------- small AST helpers
def _name_nodes(expr: ast.AST) -> Iterator[ast.Name]:
    return (n for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _loaded_names(expr: ast.AST) -> List[str]:
    return [n.id for n in _name_nodes(expr)]


def _comprehension_names(expr: ast.AST) -> Set[str]:
    names: Set[str] = set()
    for sub in ast.walk(expr):
        if isinstance(sub, ast.comprehension):
            names.update(n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name))
    return names


def _is_attribute_base(expr: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.value is name for sub in ast.walk(expr))


def _self_attrs(target: ast.AST, self_name: Optional[str]) -> Set[str]:
    """`self.x = ...` / `self.cache[k] = ...` -> {'x'} / {'cache'}."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == self_name:
        return {target.attr}
    return set()


def _assigned_self_attrs(node: ast.AST, self_name: str) -> Set[str]:
    out: Set[str] = set()
    for sub in ast.walk(node):
        targets: List[ast.AST] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
            targets = [sub.target]
        for target in targets:
            for element in ast.walk(target):
                if (isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)
                        and element.value.id == self_name and isinstance(element.ctx, ast.Store)):
                    out.add(element.attr)
    return out


def _init_only_attributes(cls: ast.ClassDef, init: ast.FunctionDef, self_name: str) -> Set[str]:
    """`self` attributes assigned in `__init__` and in no other method of the class."""
    attrs = _assigned_self_attrs(init, self_name)
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item is not init:
            attrs -= _assigned_self_attrs(item, self_name)
    return attrs


def _class_names(cls: ast.ClassDef) -> Set[str]:
    """Every attribute name the class already uses (methods, class attributes, `self.X`)."""
    names: Set[str] = set()
    for sub in ast.walk(cls):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            names.add(sub.value)  # register_buffer("name", ...), getattr(self, "name")
    for item in cls.body:
        if isinstance(item, ast.Assign):
            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return names


def _device_text(call: ast.Call) -> str:
    """How the call names its device, for the message: `x.device`, `'npu'`; `...` when long or unknown."""
    device = keyword(call, "device")
    value = device.value if device is not None else call.args[0] if method_name(call) == "to" and call.args else None
    text = ast.unparse(value) if value is not None else "..."
    return text if len(text) <= 30 else "..."


CPU_WORDS = ("cpu",)
DEVICE_WORDS = ("npu", "cuda", "gpu", "ascend")


def _cpu_test(test: ast.expr) -> Optional[bool]:
    """Which branch of `if test:` runs only on the CPU: False for the body, True for the `else`, None if
    the test says nothing about the device."""
    negated = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, not negated
    side: Optional[bool] = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        strings = [constant(e) for e in (test.left, test.comparators[0])]
        text = next((v for v in strings if isinstance(v, str)), None)
        if text is not None and text.split(":")[0] in ("cpu", "npu", "cuda", "gpu"):
            on_cpu = text.startswith("cpu")
            equal = isinstance(test.ops[0], (ast.Eq, ast.Is))
            if equal or isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
                side = not (on_cpu == equal)  # the body runs on the CPU when (cpu, ==) or (npu, !=)
    elif isinstance(test, (ast.Name, ast.Attribute)):
        name = (test.attr if isinstance(test, ast.Attribute) else test.id).lower()
        if any(w in name for w in CPU_WORDS):
            side = False
        elif any(w in name for w in DEVICE_WORDS):
            side = True
    if side is None:
        return None
    return not side if negated else side


def _self_attr(node: ast.AST, self_name: str) -> bool:
    """`self.<any attribute>`."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name


def _is_call_target(expr: ast.AST, attribute: ast.Attribute) -> bool:
    """Is `attribute` the method of a call inside `expr` (`np.array`, `[...].copy`)?"""
    return any(isinstance(sub, ast.Call) and sub.func is attribute for sub in ast.walk(expr))


def _sets_requires_grad(expr: ast.AST) -> bool:
    """A `requires_grad=` other than False, or `.requires_grad_()`: a buffer would freeze that choice (often
    `requires_grad=self.training`, which `train()`/`eval()` toggle)."""
    for sub in ast.walk(expr):
        if isinstance(sub, ast.keyword) and sub.arg == "requires_grad" and constant(sub.value, ast) is not False:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "requires_grad_":
            return True
    return False
