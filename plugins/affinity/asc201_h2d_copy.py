"""ASC201 host-to-device-copy-in-forward."""
from __future__ import annotations

import ast
import keyword as pykeyword
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ascend_lint.rule import Applicability, Docs, Edit, Fix, Rule
from ascend_lint.semantic import Scope, argument, constant, keyword, method_name

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
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "__setitem__"})
PURE_BUILTINS = frozenset({"range", "list", "tuple", "len", "int", "float", "bool", "sum", "min", "max", "abs",
                           "sorted", "reversed", "zip", "enumerate", "round", "True", "False", "None"})


class HostToDeviceCopyInForward(Rule):
    code = "ASC201"
    name = "host-to-device-copy-in-forward"
    message = "`{ctor}(...)` in {method} is copied from host to device on every call: {remedy}"
    fix_applicability = Applicability.UNSAFE
    triggers = ("tensor", "Tensor", "from_numpy", ".npu(", ".cuda(", ".to(")
    docs = Docs(
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
                       "part of the computation), nor tensors cached under a condition (`if self.idx is None:`) "
                       "or code in tests (`test_*.py`, functions named `test*`/`bench*`). MindSpore in GRAPH_MODE (or under `@jit`) folds a `Tensor(...)` "
                       "of constants at compile time, so there the finding costs little; in PyNative mode (the "
                       "default of `mindspore.set_context` since 2.x; GRAPH_MODE was the 1.x default) every "
                       "call builds it on the host and copies it.",
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
        fix_safety="Unsafe: offered only for an `nn.Module` whose class has an `__init__`, when the moved "
                   "expression depends on nothing but literals, module constants and `self` attributes set in "
                   "`__init__`. The fix appends `self.register_buffer('<name>', <expr>, persistent=False)` to "
                   "`__init__` and uses `self.<name>` in `forward`. It is unsafe because the tensor now "
                   "follows the module's device and dtype casts (`model.half()` converts a float buffer), it "
                   "appears in `named_buffers()`, and later changes to the `self` attributes no longer reach "
                   "it.",
        source="Ascend PyTorch model tuning case: ShuffleNetV2 on Ascend 910 (domain-notes.md, case 1).",
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
    )

    def __init__(self, ctx, options=None) -> None:
        super().__init__(ctx, options)
        self._reported: Set[int] = set()
        self._buffer_names: Dict[int, Set[str]] = {}  # class node id -> names taken so far
        self._scans: Dict[int, Tuple[Set[str], Set[str]]] = {}

    # ------------------------------------------------------------------ detection
    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if not ctx.in_hot_method() or id(node) in self._reported or ctx.in_test_code():
            return
        method = method_name(node)
        if method in MOVES and self._moves_to_device(node):
            found = self._host_tensor(node.func.value)
            if found is not None:
                ctor, direct = found
                if not self._depends_on_inputs(ctor):
                    self._reported.add(id(ctor))
                    self._flag(node, ctor, buffer_expr=node.func.value if direct else None)
            return
        qual = ctx.call_name(node)
        if qual in TORCH_CTORS:
            device = keyword(node, "device")
            if device is not None and self._is_device(device.value) and not self._depends_on_inputs(node):
                self._flag(node, node, buffer_expr=node)
        elif qual in MS_CTORS and self._hot_class_kind() == "cell":
            data = argument(node, "input_data", 0)
            if data is not None and self._ms_host_data(data) and not self._depends_on_inputs(node):
                self._flag(node, node, buffer_expr=None)

    def _flag(self, node: ast.Call, ctor: ast.Call, buffer_expr: Optional[ast.expr]) -> None:
        if self._lazily_cached():
            return
        ctx = self.ctx
        kind = self._hot_class_kind()
        label = ctx.call_name(ctor) or "tensor"
        label = label.replace("mindspore.", "") if label.startswith("mindspore.") else label
        scalar = isinstance(constant(argument(ctor, "data", 0)), (int, float)) and ctx.call_name(ctor) in TORCH_CTORS
        if scalar:
            remedy = ("a scalar needs no copy: pass the Python number to the op, or fill it on the device with "
                      "`torch.full((), value, device=...)`")
        elif kind == "module":
            remedy = ("create it once in `__init__` with `self.register_buffer(name, tensor, persistent=False)`, "
                      "which `model.to(device)` moves with the model")
        elif kind == "cell":
            remedy = "create it once in `__init__` (`self.name = Tensor(...)`) and use `self.name`"
        elif ctx.hot_reason():
            remedy = "build it once (e.g. a buffer of the calling module) and pass it in"
        else:
            remedy = "build it once outside the Function (e.g. a module buffer) and pass it in"
        fix = self._fix(node, ctor, buffer_expr) if kind == "module" and buffer_expr is not None else None
        self.report(node, ctor=label, method=ctx.hot_label(), remedy=remedy, fix=fix)

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
        return any(hot is None or _inside(hot.node, if_node) for if_node, _ in self.ctx.ifs)

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
        if not init_args or init_args[0].arg != self_name:
            return None
        if node is not ctor and not self._plain_move(node):
            return None
        init_attrs = _init_only_attributes(cls.node, init, self_name)
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
        text = self.ctx.text
        if isinstance(expr, ast.Call) and keyword(expr, "device") is not None:
            if any(isinstance(a, ast.Starred) for a in expr.args):
                return None
            parts = [ast.get_source_segment(text, a) for a in expr.args]
            parts += [ast.get_source_segment(text, kw) for kw in expr.keywords if kw.arg != "device"]
            func = ast.get_source_segment(text, expr.func)
            if func is None or any(p is None for p in parts):
                return None
            return f"{func}({', '.join(parts)})"
        return ast.get_source_segment(text, expr)

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


def _inside(outer: ast.AST, inner: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and (
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset))
