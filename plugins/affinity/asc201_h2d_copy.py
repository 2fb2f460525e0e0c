"""ASC201 host-to-device-copy-in-forward: the rule, its messages and where the copy is real; the value
questions are in `_h2d_values`, the buffer fix in `_h2d_buffer`."""
from __future__ import annotations

import ast
from typing import Dict, Optional, Set, Tuple

from ascend_lint.analysis.placement import Place
from ascend_lint.rule import Applicability, Case, Docs, Rule
from ascend_lint.astutil import argument, constant, contains, keyword, method_name

from ._h2d_buffer import BufferFix
from ._h2d_values import MOVES, TORCH_CTORS, HotValues

MS_CTORS = frozenset({"mindspore.Tensor", "mindspore.tensor"})
# Decorators that compile a MindSpore function or construct into a static graph (constants folded).
JIT_DECORATORS = frozenset({"mindspore.jit", "mindspore.ms_function", "mindspore.common.api.jit",
                            "mindspore.common.api.ms_function"})


class HostToDeviceCopyInForward(BufferFix, HotValues, Rule):
    code = "ASC201"
    name = "host-to-device-copy-in-forward"
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
        known_problems="Tensors whose data depend on the method's input values are not reported (the copy is "
                       "then part of the computation). Data computed from the inputs' shapes alone "
                       "(`torch.tensor(np.arange(x.size(1))[::-1].copy()).to('npu')`, `torch.tensor([n])` with "
                       "`n = x.size(0)`) are reported: they are the same for every input of one shape, yet copied "
                       "on every call; build them on the device (`torch.arange(n, device=x.device).flip(0)`) or "
                       "cache them per shape (no fix is offered for them). A constant repeated a batch-sized "
                       "number of times (`torch.tensor([c] * x.shape[0])`, `[c] * len(x)`, `[c] * b` with "
                       "`b, n = x.shape`) gets the advice `torch.full((n,), c, device=x.device)`. Not reported: "
                       "tensors cached under a condition (`if self.idx is None:`), code in a branch that only "
                       "runs on the CPU (`if x.device.type == 'cpu':`, the `else` of `if x.is_npu:` / `if not "
                       "self.is_cpu_device:`), and moves whose target is a host tensor or device "
                       "(`.to(t.device)` of a tensor built on the host: ascend_lint/analysis/placement.py). "
                       "MindSpore: in PyNative mode every call builds a `Tensor(...)` on the host and copies it, "
                       "which is what the message says; a `construct` compiled into a static graph (GRAPH_MODE, "
                       "which most MindSpore training scripts set, or `@jit`) holds such a tensor of constants as "
                       "a graph constant, uploaded once. So nothing is reported for a `construct` under `@jit` / "
                       "`@ms_function`, in a file that calls `set_context(mode=GRAPH_MODE)`, or in a "
                       "`TrainOneStep*` wrapper cell (the unit `Model.train` compiles and sinks; its constants "
                       "are per-step scalars such as loss-scale flags), nor in a module imported by an entry "
                       "script that sets GRAPH_MODE (unless a PyNative entry script imports it too). Where no "
                       "run mode is known the message says the copy happens in PyNative mode. `@jit` "
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
        # the ShuffleNetV2 seed: host data computed from the input's shape, copied on every call (no fix)
        Case("""
            import numpy as np
            import torch
            from torch import nn
            class ChannelShuffle(nn.Module):
                def forward(self, x):
                    index = torch.tensor(np.arange(x.size(1))[::-1].copy()).to('npu')
                    return x.index_select(1, index)
            """, line=6, message_contains="its data depend only on the input's shape, so build it on the device "
                                          "(`torch.arange(n, device='npu')`, then flip or index it there; "
                                          "`torch.full((1,), n, device=...)` for a size) or cache it per shape"),
        # MindSpore: the copy is real in PyNative mode, which the file sets
        Case("""
            import mindspore as ms
            ms.set_context(mode=ms.PYNATIVE_MODE)
            class Net(ms.nn.Cell):
                def construct(self, x):
                    return x * ms.Tensor([2.0], ms.float32)
            """, line=5, message_contains="copied from host to device on every call in PyNative mode, which this "
                                          "file sets"),
        Case("""
            import mindspore as ms
            class Net(ms.nn.Cell):
                def construct(self, x):
                    return x * ms.Tensor([2.0], ms.float32)
            """, line=4, message_contains="when the cell runs in PyNative mode (GRAPH_MODE and `@jit` fold it"),
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
        # data computed from the input's shape alone: the same per shape, copied on every call
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        n = x.size(0)\n        return x + torch.tensor([n]).to(x.device)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.tensor(list(range(x.shape[-1])), device=x.device)",
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
        # a move to a host tensor's device is no copy to the device; a dtype cast of a device tensor is no move
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g, b):\n"
        "        db = torch.zeros_like(b)\n        return g, db.to(g.dtype)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        ref = torch.zeros(3)\n"
        "        return x + torch.tensor([1.0, 2.0, 3.0]).to(ref.device)",
        # data read from the inputs' values, not only their shapes
        "import torch\nimport numpy as np\nclass M(torch.nn.Module):\n    def forward(self, x, order):\n"
        "        index = torch.tensor(np.asarray(order)[: x.size(1)]).to('npu')\n        return x[:, index]",
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
        if method_name(node) in MOVES:
            if self._moves_to_device(node):
                self._check_move(node)
            return
        qual = ctx.call_name(node)
        if qual in TORCH_CTORS:
            device = keyword(node, "device")
            if device is not None and self._is_device(device.value):
                self._judge(node, node, buffer_expr=node)
        elif qual in MS_CTORS and self._hot_class_kind() == "cell" and not self._graph_compiled():
            data = argument(node, "input_data", 0)
            if data is not None and self._ms_host_data(data) and not self._depends_on_inputs(node):
                self._flag(node, node, buffer_expr=None)

    def _check_move(self, node: ast.Call) -> None:
        """`<host tensor>.to(device)` / `.npu()` / `.cuda()`."""
        found = self._host_tensor(node.func.value)
        if found is not None:
            ctor, direct = found
            if self._judge(node, ctor, buffer_expr=node.func.value if direct else None):
                self._reported.add(id(ctor))

    def _judge(self, node: ast.Call, ctor: ast.Call, buffer_expr: Optional[ast.expr]) -> bool:
        """Report a host tensor placed on the device at `node`: constant data (a buffer can hold them), a
        constant repeated a batch-sized number of times, or data computed from the inputs' shapes alone."""
        if not self._depends_on_inputs(ctor):
            self._flag(node, ctor, buffer_expr=buffer_expr)
            return True
        fill = self._batch_fill(ctor)
        if fill is not None:
            self._flag(node, ctor, buffer_expr=None, fill=fill)
            return True
        if self._shape_dependent(ctor):
            self._flag(node, ctor, buffer_expr=None, shaped=True)
            return True
        return False

    def _moves_to_device(self, call: ast.Call) -> bool:
        """Does `.to(...)` / `.npu()` / `.cuda()` place the tensor on the device? Placement decides where it
        knows (`.to(host_tensor)` is not a move); the target's spelling otherwise."""
        place = self.ctx.placement(call)
        if place is Place.HOST or self.ctx.placement(call.func.value) is Place.DEVICE:
            return False  # to the host, or already on the device (`t.to(x.dtype)` of a device tensor)
        return place is Place.DEVICE or self._target_is_device(call)

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

    def _mode_note(self) -> str:
        """How the message qualifies a MindSpore copy: it is real in PyNative mode, which the file may set."""
        if self.ctx.run_mode() == "pynative":
            return " in PyNative mode, which this file sets"
        return " when the cell runs in PyNative mode (GRAPH_MODE and `@jit` fold it into the graph)"

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

    def _flag(self, node: ast.Call, ctor: ast.Call, buffer_expr: Optional[ast.expr],
              fill: Optional[Tuple[str, str]] = None, shaped: bool = False) -> None:
        if self._lazily_cached():
            return
        ctx = self.ctx
        kind = self._hot_class_kind()
        label = ctx.call_name(ctor) or "tensor"
        label = label.replace("mindspore.", "") if label.startswith("mindspore.") else label
        scalar = isinstance(constant(argument(ctor, "data", 0)), (int, float)) and ctx.call_name(ctor) in TORCH_CTORS
        if shaped:
            remedy = (f"its data depend only on the input's shape, so build it on the device "
                      f"(`torch.arange(n, device={_device_text(node, 'x.device')})`, then flip or index it there; "
                      "`torch.full((1,), n, device=...)` for a size) or cache it per shape")
        elif fill is not None:
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
        mode = self._mode_note() if kind == "cell" else ""
        self.report(node, ctor=label, method=ctx.hot_role().describe(), mode=mode, remedy=remedy, fix=fix)


def _device_text(call: ast.Call, unknown: str = "...") -> str:
    """How the call names its device, for the message: `x.device`, `'npu'`; `unknown` when long or unknown."""
    device = keyword(call, "device")
    value = device.value if device is not None else call.args[0] if method_name(call) == "to" and call.args else None
    text = ast.unparse(value) if value is not None else unknown
    if value is not None and device is None and not isinstance(value, ast.Constant) and "dev" not in text.lower():
        text += ".device"  # `.to(other_tensor)`: the other tensor's device
    return text if len(text) <= 30 else unknown


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
