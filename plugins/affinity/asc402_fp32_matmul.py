"""ASC402 fp32-matmul."""
from __future__ import annotations

import ast
from typing import List, Optional, Sequence, Set, Tuple

from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.astutil import argument, callee_name, constant, contains, method_name

TORCH_MATMULS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.nn.functional.linear"})
MS_FUNCTIONS = frozenset({"mindspore.ops.matmul", "mindspore.ops.functional.matmul"})
MS_PRIMITIVES = frozenset({"mindspore.ops.MatMul", "mindspore.ops.BatchMatMul", "mindspore.nn.MatMul"})
MATMUL_METHODS = frozenset({"matmul", "mm", "bmm"})
APEX_REGISTER = "apex.amp.register_float_function"
FP32 = frozenset({"torch.float32", "torch.float", "mindspore.float32", "mindspore.dtype.float32"})
LOW = frozenset({"torch.float16", "torch.half", "torch.bfloat16", "mindspore.float16", "mindspore.dtype.float16",
                 "mindspore.bfloat16", "mindspore.dtype.bfloat16"})
LOW_STRINGS = frozenset({"float16", "bfloat16", "fp16", "bf16"})
CAST_METHODS = frozenset({"to", "type", "astype"})
# shape-only ops that keep the dtype of their receiver
KEEP_DTYPE = frozenset({"t", "transpose", "permute", "view", "reshape", "contiguous", "unsqueeze", "squeeze",
                        "expand", "expand_as", "flatten", "swapaxes", "swapdims", "clone", "detach"})
# calls showing that the file trains a MindSpore network
MS_TRAINING = frozenset({
    "mindspore.Model", "mindspore.nn.TrainOneStepCell", "mindspore.nn.TrainOneStepWithLossScaleCell",
    "mindspore.amp.build_train_network", "mindspore.value_and_grad", "mindspore.ops.value_and_grad",
    "mindspore.ops.GradOperation", "mindspore.grad", "mindspore.ops.grad",
})
MS_AMP_FUNCTIONS = {"mindspore.amp.auto_mixed_precision": ("amp_level", 1),
                    "mindspore.amp.custom_mixed_precision": (None, None),
                    "mindspore.amp.build_train_network": ("level", 3)}
REMEDY_MS = 'cast the cell with `to_float(mstype.float16)` or train with `Model(..., amp_level="O2")`'
# Shape-only or dtype ops that keep a size-1 axis where it is (for the outer-product test).
KEEP_AXES = frozenset({"float", "double", "half", "to", "type", "expand", "contiguous", "clone", "detach"})
ROPE_WORDS = ("freq", "position", "theta")
ROUTER_WORDS = ("router", "gate", "gating")  # an MoE router's logits (a bound name, a class or function name)
# Tiny geometry: a function that inverts or decomposes a matrix works on 3x3 / 4x4 transforms.
GEOMETRY_CALLS = frozenset({"torch.inverse", "torch.linalg.inv", "torch.linalg.solve", "torch.linalg.det",
                            "torch.det", "torch.linalg.pinv", "torch.pinverse", "torch.linalg.svd", "torch.svd",
                            "torch.cross", "torch.linalg.cross"})
GEOMETRY_METHODS = frozenset({"inverse", "det", "pinverse"})
GEOMETRY_WORDS = ("intrinsic", "extrinsic", "camera", "cam2", "2cam", "lidar2", "2lidar", "ego2", "2ego",
                  "world2", "2world", "homograph", "rot_mat", "rotmat", "rotation", "pose")


class Fp32Matmul(Rule):
    code = "ASC402"
    name = "fp32-matmul"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "{op} {reason}, which misses Ascend's fp16 Cube unit: {remedy}"
    project_facts = frozenset({"precision"})  # (ctx.training_precision)
    triggers = ("matmul", "MatMul", "mm(", "@", "linear", "register_float_function", "to_float", "inverse", "linalg",
                "det(", "svd", "pinv", "cross(",
                "add_flags_recursive", "amp_level", "mixed_precision", "float16", "build_train_network", "Model(",
                "TrainOneStep", "value_and_grad", "GradOperation", "grad(", "compute_type", "compute_dtype")
    docs = Docs(
        summary="A MatMul that runs in fp32 and so misses Ascend's fp16 Cube unit.",
        what="Flags (a) MindSpore `ops.MatMul`, `ops.BatchMatMul`, `P.MatMul`, `nn.MatMul` and `ops.matmul` "
             "used in a Cell of a file that trains a network (`Model`, `TrainOneStepCell`, `value_and_grad`, "
             "...) when nothing in the file casts the network to fp16 (`to_float(mstype.float16)`, "
             "`add_flags_recursive(fp16=True)`, `amp_level` other than \"O0\", `auto_mixed_precision`, "
             "`build_train_network` with a level, a float16 dtype anywhere); (b) any MatMul-family call "
             "(`torch.matmul`, `mm`, `bmm`, `@`, `F.linear`, `ops.matmul`, a MatMul primitive) with an "
             "operand explicitly cast to float32 (`.float()`, `.to(torch.float32)`, "
             "`.astype(mstype.float32)`, a Cast to float32, `dtype=torch.float32`), directly or through a "
             "local name; (c) apex "
             "`amp.register_float_function(torch, 'matmul' | 'mm' | 'bmm')`.",
        why="The Cube unit of the Ascend AI Core computes matrix products in fp16 (bf16 on newer parts); a "
            "float32 MatMul falls back to a far slower path. MindSpore's tuning notes cast such cells with "
            "`add_flags_recursive(fp16=True)` / `to_float(mstype.float16)` or train with "
            "`Model(..., amp_level=\"O2\")`; Ascend's apex guide notes that `register_float_function` forces "
            "an op to fp32, the opposite of what the Cube wants.",
        known_problems="For (a), a Cell defined in a file that does not train it is judged by the script of "
                       "the project that trains it (the project model follows `net = Net(...)` into `Model(...)`, "
                       "`TrainOneStepCell`, `to_float`, `auto_mixed_precision`, and from a network to the Cells "
                       "its `__init__` builds); a Cell no script of the project trains is not checked. For "
                       "MindSpore the cost depends on the chip: the "
                       "default precision mode of Atlas training series (`force_fp16`) already runs an fp32 "
                       "MatMul in fp16, Atlas A2's (`must_keep_origin_dtype`) keeps it in fp32. `amp_level=\"O1\"` counts as a cast (its white "
                       "list runs MatMul in fp16). Not flagged, because they are precision decisions or never "
                       "reach the Cube's tile size: a MatMul inside an explicit `with autocast(..., "
                       "enabled=False):` block (the author forces float32 there on purpose; any context manager "
                       "whose name contains `autocast`, such as a project's `maybe_autocast`); an outer product "
                       "written as a matmul, whose inner dimension is 1 (RoPE's `inv_freq[None, :, None] @ "
                       "position_ids[:, None, :]`, `t.unsqueeze(-1) @ f.unsqueeze(-2)`, any operand named "
                       "`inv_freq`); tiny geometry (an operand named like camera intrinsics/extrinsics, poses or "
                       "rotations, or a function that also inverts or decomposes a matrix with `torch.inverse`, "
                       "`torch.linalg.*`, `.inverse()`); float32 written on purpose: under an `if` whose test names "
                       "fp32/float32 or an upcast (`if args.router_gating_in_fp32:`, `if self.upcast_attention:`), an operand bound to a name saying so "
                       "(`input_fp32`), an MoE router or gate (the result bound to a `router*` name, or a "
                       "function/class named `*router*`/`*gate*`/`*gating*`), whose [tokens x hidden] x [hidden x "
                       "experts] product is kept in fp32 by convention and is a small share of a layer's "
                       "MatMuls. Other deliberate fp32 MatMuls (attention scores upcast for stability, small "
                       "mixing matrices) are still reported: suppress them with `# noqa: ASC402`.",
        example="""
            class Classifier(nn.Module):
                def forward(self, x):
                    return torch.matmul(x.float(), self.weight.float().t())
        """,
        use_instead="""
            class Classifier(nn.Module):
                def forward(self, x):
                    return torch.matmul(x, self.weight.t())  # autocast / apex O2 keeps it in fp16
        """,
        fix_safety="No fix: running a MatMul in fp16 is a precision decision.",
        source="MindSpore performance tuning notes (MatMul in fp16, `add_flags_recursive(fp16=True)`, "
               "`amp_level`); Ascend apex README (`amp.register_float_function`); "
               "`mindspore.amp.auto_mixed_precision` API docs.",
    )
    cases = (
        Case("""
            import torch
            y = torch.matmul(x.float(), w)
            """, line=2, message_contains="`torch.matmul` multiplies an operand cast to float32, which"),
        Case("""
            import mindspore as ms
            from mindspore import ops
            y = ops.matmul(x.astype(ms.float32), w)
            """, line=3, message_contains="`mindspore.ops.matmul` multiplies an operand cast to float32,"),
    )
    flagged = (
        "import torch\ny = torch.mm(a, b.float().t())",
        "import torch\ny = torch.bmm(q.to(torch.float32), k)",
        "import torch\ny = torch.bmm(q.to(dtype=torch.float32), k)",
        "import torch\ndef f(q, k):\n    q = q.float()\n    return q @ k.transpose(-1, -2)",
        "import torch.nn.functional as F\ndef f(x, w):\n    x = x.flatten(2).float()\n    x = x.view(-1, 64)\n"
        "    return F.linear(x, w)",
        "import torch.nn.functional as F\ny = F.linear(x.float(), w)",
        "import torch\ny = x.float().matmul(w)",
        "import torch\nfrom apex import amp\namp.register_float_function(torch, 'bmm')",
        "import mindspore\nfrom mindspore import ops\nfrom mindspore import dtype as mstype\n"
        "cast = ops.Cast()\ny = ops.MatMul()(cast(x, mstype.float32), w)",
        # (a): a Cell with a MatMul in a training script that never casts to fp16
        "from mindspore import nn, ops, Model\n"
        "class Head(nn.Cell):\n    def __init__(self):\n        super().__init__()\n"
        "        self.matmul = ops.MatMul(transpose_b=True)\n"
        "    def construct(self, x, w):\n        return self.matmul(x, w)\n"
        "model = Model(Head(), loss_fn, opt)",
        "from mindspore import nn, Model\nfrom mindspore.ops import operations as P\n"
        "class Attn(nn.Cell):\n    def __init__(self):\n        super().__init__()\n"
        "        self.bmm = P.BatchMatMul()\n"
        "model = Model(Attn(), loss_fn, opt, amp_level='O0')",
        "import mindspore as ms\nfrom mindspore import nn, ops\n"
        "class Net(nn.Cell):\n    def construct(self, x, w):\n        return ops.matmul(x, w)\n"
        "train_net = nn.TrainOneStepCell(nn.WithLossCell(Net(), loss), opt)",
    )
    clean = (
        "import torch\ny = torch.matmul(x, w)",
        "import torch\ny = torch.matmul(x.half(), w.half())",
        "import torch\ny = torch.matmul(x.to(torch.bfloat16), w)",
        "import torch\ny = torch.matmul(x.to(dtype), w)",  # `.to(dtype)`: dtype unknown
        "import torch\ny = torch.matmul(x.to(device), w)",
        "import torch\ny = torch.matmul(x, w).float()",  # the result, not an operand
        "import torch\ndef f(q, k):\n    q = q.float()\n    q = q * 2\n    return q @ k",
        "import torch\nwith torch.autocast('npu'):\n    y = torch.matmul(a, b)",
        "import torch\nwith torch.autocast('npu', enabled=False):\n    y = torch.matmul(a.half(), b.half())",
        # an explicit "force float32" block is a precision decision
        "import torch\nwith torch.autocast('npu', enabled=False):\n    y = torch.matmul(a.float(), b.float())",
        "import torch\nwith torch.npu.amp.autocast(enabled=False):\n    y = a @ b",
        "import torch\ndef f(a, b):\n    with maybe_autocast(device_type='npu', enabled=False):\n        return a.float() @ b",
        # RoPE's frequency table: an outer product (inner dim 1), not a Cube-sized matmul
        "import torch\ndef rope(self, x, position_ids):\n"
        "    inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)\n"
        "    pos = position_ids[:, None, :].float()\n    return (inv @ pos).transpose(1, 2)",
        "import torch\ndef freqs(t, f):\n    return torch.matmul(t.float().unsqueeze(-1), f.unsqueeze(-2))",
        "import torch\ndef freqs(self, t):\n    return torch.matmul(t.float(), self.inv_freq)",
        # tiny geometry: camera intrinsics, a function that inverts a 4x4 pose
        "import torch\ndef project(points, cam_intrinsics):\n    return cam_intrinsics.float() @ points",
        "import torch\ndef to_ego(T, pts):\n    inv = torch.inverse(T.float())\n    return torch.matmul(T.float(), pts)",
        # deliberately float32: a switch or a name that says so, an MoE router
        "import torch.nn.functional as F\ndef route(self, x):\n    if self.config.router_in_fp32:\n"
        "        return F.linear(x.float(), self.weight.float())\n    return F.linear(x, self.weight)",
        "import torch.nn.functional as F\ndef f(x, w):\n    x_fp32 = x.float()\n    return F.linear(x_fp32, w.float())",
        "import torch\ndef scores(self, q, k):\n    if self.upcast_attention:\n        q = q.float()\n"
        "    return torch.bmm(q, k.transpose(-1, -2))",
        "import torch\nimport torch.nn.functional as F\nclass TopKRouter(torch.nn.Module):\n    def forward(self, x):\n"
        "        return F.linear(x.float(), self.weight.float())",
        "import torch\nimport torch.nn.functional as F\ndef f(self, h):\n"
        "    router_logits = F.linear(h.type(torch.float32), self.classifier.weight.type(torch.float32))\n"
        "    return router_logits",
        "import torch\ny = x.float() + w.float()",
        "import torch\nfrom apex import amp\namp.register_float_function(torch, 'softmax')",
        "import torch\nfrom apex import amp\namp.register_half_function(torch, 'bmm')",
        "import torch\ndef matmul(a, b):\n    return a\ny = matmul(a.float(), b)",  # a local function
        # (a) a cast anywhere in the training script
        "from mindspore import nn, ops, Model\nclass Head(nn.Cell):\n    def __init__(self):\n"
        "        super().__init__()\n        self.matmul = ops.MatMul()\n"
        "model = Model(Head(), loss_fn, opt, amp_level='O2')",
        "from mindspore import nn, ops, Model\nclass Head(nn.Cell):\n    def __init__(self):\n"
        "        super().__init__()\n        self.matmul = ops.MatMul()\n"
        "model = Model(Head(), loss_fn, opt, amp_level=args.amp_level)",
        "from mindspore import nn, ops, Model\nfrom mindspore import dtype as mstype\n"
        "class Head(nn.Cell):\n    def __init__(self):\n        super().__init__()\n"
        "        self.matmul = ops.MatMul()\n"
        "net = Head().to_float(mstype.float16)\nmodel = Model(net, loss_fn, opt)",
        "from mindspore import nn, Model\nfrom mindspore.ops import operations as P\n"
        "class Head(nn.Cell):\n    def __init__(self):\n        super().__init__()\n"
        "        self.matmul = P.MatMul()\n"
        "net = Head()\nnet.add_flags_recursive(fp16=True)\nmodel = Model(net, loss_fn, opt)",
        "import mindspore as ms\nfrom mindspore import nn, ops, Model\nclass Head(nn.Cell):\n"
        "    def construct(self, x, w):\n        return ops.matmul(x, w)\n"
        "net = ms.amp.auto_mixed_precision(Head(), 'O2')\nmodel = Model(net, loss_fn, opt)",
        "from mindspore import nn, ops, Model\nfrom mindspore import dtype as mstype\nclass Head(nn.Cell):\n"
        "    def __init__(self):\n        super().__init__()\n        self.matmul = ops.MatMul()\n"
        "        self.cast = ops.Cast()\n    def construct(self, x, w):\n"
        "        return self.matmul(self.cast(x, mstype.float16), self.cast(w, mstype.float16))\n"
        "model = Model(Head(), loss_fn, opt)",
        # (a) a model file that does not train: the cast lives in the training script
        "from mindspore import nn, ops\nclass Head(nn.Cell):\n    def __init__(self):\n"
        "        super().__init__()\n        self.matmul = ops.MatMul()",
        # (a) a MatMul outside any Cell
        "from mindspore import ops, Model\ny = ops.matmul(x, w)\nmodel = Model(net, loss_fn, opt)",
    )

    def start_file(self) -> None:
        self.cell_matmuls: List[Tuple[ast.AST, str]] = []  # (MatMul in a Cell, the Cell's class name)
        self.casts_fp16 = False
        self.trains = False
        self.reported: Set[int] = set()
        self.pending: List[Tuple[ast.AST, str, str, str, Optional[ast.AST]]] = []  # (node, op, reason, remedy, func)
        self.geometry: Set[int] = set()  # ids of functions that invert / decompose matrices
        self.fp32_switches: List[ast.If] = []  # `if self.upcast_attention:` / `if args.fp32_router:`
        self.fp32_text: Optional[bool] = None  # may the file's text name float32 (see _may_say_fp32)

    # --------------------------------------------------------------- handlers
    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node)
        self._evidence(node, qual)
        if qual in GEOMETRY_CALLS or (qual is None and method_name(node) in GEOMETRY_METHODS and not node.args):
            func = self.ctx.function
            self.geometry.add(id(func.node) if func is not None else 0)
        if qual in MS_PRIMITIVES or qual in MS_FUNCTIONS:
            cls = self.ctx.class_scope
            if cls is not None and cls.class_kind == "cell":
                self.cell_matmuls.append((node, cls.name))
        if qual == APEX_REGISTER:
            self._check_registration(node)
            return
        found = self._matmul(node, qual)
        if found is not None:
            label, operands = found
            self._check_operands(node, label, operands)

    def visit_If(self, node: ast.If) -> None:
        if self._may_say_fp32(node.test) and any(
                _says_fp32(_last_name(n)) for n in ast.walk(node.test) if isinstance(n, (ast.Name, ast.Attribute))):
            self.fp32_switches.append(node)

    def _may_say_fp32(self, test: ast.expr) -> bool:
        """Can a name in `test` ask for float32? Not when its lines hold none of the words (ASCII text:
        a non-ASCII identifier may normalise to one)."""
        if self.fp32_text is None:
            text = self.ctx.text
            self.fp32_text = not text.isascii() or any(w in text.lower() for w in FP32_WORDS)
        if not self.fp32_text:
            return False
        lines = self.ctx.lines[test.lineno - 1:test.end_lineno or test.lineno]
        segment = "\n".join(lines).lower()
        return not segment.isascii() or any(w in segment for w in FP32_WORDS)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self._check_operands(node, "`@`", [node.left, node.right])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self.casts_fp16 and node.attr.endswith("float16") and self.ctx.qualname(node) in LOW:
            self.casts_fp16 = True

    def end_file(self) -> None:
        for node, op, reason, remedy, func in self.pending:
            if (id(func) if func is not None else 0) not in self.geometry:
                self.report(node, op=op, reason=reason, remedy=remedy)
        for node, cls in self.cell_matmuls:
            if id(node) in self.reported:
                continue
            trained = self.ctx.training_precision(cls)  # decided by the script that trains the network
            if trained is not None:
                if trained.dtype != "fp32":
                    continue
                reason = f"runs in float32 (the network is trained with {trained.reason.describe()})"
            elif self.trains and not self.casts_fp16:
                reason = "runs in float32 (nothing in this file casts the network to fp16)"
            else:
                continue
            op = self._label(node.func if isinstance(node, ast.Call) else node)
            self.report(node, op=op, reason=reason, remedy=REMEDY_MS)

    # ----------------------------------------------------------- (b) operands
    def _matmul(self, call: ast.Call, qual: Optional[str]):
        """(label, operands) when `call` is a MatMul-family call."""
        func = call.func
        if qual in TORCH_MATMULS or qual in MS_FUNCTIONS:
            return f"`{qual}`", call.args[:2]
        if isinstance(func, ast.Call) and self.ctx.call_name(func) in MS_PRIMITIVES:  # P.MatMul()(a, b)
            return self._label(func.func), call.args[:2]
        if qual is None and isinstance(func, ast.Attribute):
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id == "self":
                bound = self._self_attribute(func.attr)
                if bound is not None and self.ctx.call_name(bound) in MS_PRIMITIVES:
                    return self._label(bound.func), call.args[:2]
                return None
            if func.attr in MATMUL_METHODS:
                return f"`.{func.attr}()`", [receiver] + call.args[:1]
        return None

    def _check_operands(self, node: ast.AST, label: str, operands: Sequence[ast.expr]) -> None:
        if not any(self._bits(op) == 32 for op in operands):
            return
        self.reported.add(id(node))  # (a) must not report it a second time
        if (self._forced_fp32() or self._outer_product(operands) or self._geometry_operand(operands)
                or self._deliberate_fp32(operands)):
            return
        remedy = ("drop the float32 cast (`astype`/`Cast`) and keep the operands in fp16"
                  if self.ctx.imports("mindspore") and not self.ctx.imports("torch")
                  else "drop the float32 cast (`.float()`/`.to(torch.float32)`) and let AMP keep it in fp16/bf16")
        func = self.ctx.function
        self.pending.append((node, label, "multiplies an operand cast to float32", remedy,
                             func.node if func is not None else None))

    def _forced_fp32(self) -> bool:
        """Inside `with autocast(..., enabled=False):` (torch, torch_npu, a project's `maybe_autocast`): the
        author forces float32 here on purpose, a precision decision the rule does not second-guess."""
        for with_node in self.ctx.withs:
            for item in with_node.items:
                expr = item.context_expr
                if not isinstance(expr, ast.Call):
                    continue
                name = callee_name(expr)
                if "autocast" in name.lower() and constant(argument(expr, "enabled"), True) is False:
                    return True
        return False

    def _deliberate_fp32(self, operands: Sequence[ast.expr]) -> bool:
        """Written to be float32: under a switch that names it (`if args.router_gating_in_fp32:`), through a
        name that says so (`input_fp32 = x.float()`), or an MoE router/gate, whose [tokens x hidden] x
        [hidden x experts] product is kept in fp32 by convention and is a small share of a layer's MatMuls."""
        ctx = self.ctx
        if any(if_node in self.fp32_switches for if_node, _ in ctx.ifs):
            return True
        for op in operands:
            if _says_fp32(_last_name(op)):
                return True
            bound = ctx.binding_before(op.id, op) if isinstance(op, ast.Name) else None
            if bound is not None and bound.stmt is not None and any(
                    contains(switch, bound.stmt) for switch in self.fp32_switches):
                return True  # `if self.upcast_attention: q = q.float()`
        stmt = next((n for n in reversed(ctx.stack) if isinstance(n, ast.stmt)), None)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        names = [_last_name(t).lower() for t in targets] + [s.name.lower() for s in ctx.scopes if s.name]
        return any(word in name for name in names for word in ROUTER_WORDS)

    def _outer_product(self, operands: Sequence[ast.expr]) -> bool:
        """An outer product written as a matmul (inner dim 1: `inv_freq[None, :, None] @ pos[:, None, :]`,
        `t.unsqueeze(-1) @ f.unsqueeze(-2)`), such as RoPE's frequency table: nothing for the Cube to do."""
        if len(operands) != 2:
            return False
        left, right = (self._keep_axes(op) for op in operands)
        names = [_last_name(op).lower() for op in (left, right)]
        if any("inv_freq" in name for name in names):
            return True
        rope = any(word in name for name in names for word in ROPE_WORDS)
        return _unit_axis(left, -1, rope) or _unit_axis(right, -2, rope)

    def _keep_axes(self, node: ast.expr) -> ast.expr:
        """Follow local names and dtype/expand calls that keep every axis where it is."""
        for _ in range(8):
            if isinstance(node, ast.Name):
                bound = self.ctx.binding_before(node.id, node)
                if bound is None or bound.index is not None or bound.value is None:
                    return node
                node = bound.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in KEEP_AXES and self.ctx.qualname(node.func) is None):
                node = node.func.value
            else:
                return node
        return node

    def _geometry_operand(self, operands: Sequence[ast.expr]) -> bool:
        """Camera intrinsics, poses, rotations: 3x3 / 4x4 transforms that never reach the Cube's tile size."""
        return any(word in _last_name(self._keep_axes(op)).lower() for op in operands for word in GEOMETRY_WORDS)

    def _bits(self, expr: ast.expr) -> Optional[int]:
        """32 / 16 when `expr` is explicitly cast to float32 / a 16-bit float, else None."""
        node: Optional[ast.expr] = expr
        for _ in range(8):
            if isinstance(node, ast.Call):
                bits, node = self._call_bits(node)
                if node is None:
                    return bits
            else:
                node = self._read_through(node)
                if node is None:
                    return None
        return None

    def _read_through(self, node: ast.expr) -> Optional[ast.expr]:
        """What a local name was bound to, the matrix of `.T`/`.mT`, the value subscripted; None for anything
        else or an unknown binding."""
        if isinstance(node, ast.Name):
            bound = self.ctx.binding_before(node.id, node)  # `x = x.float()`: the x before it
            if bound is None or bound.index is not None or bound.value is None:
                return None
            return bound.value
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            return node.value
        if isinstance(node, ast.Subscript):
            return node.value
        return None

    def _call_bits(self, node: ast.Call) -> Tuple[Optional[int], Optional[ast.expr]]:
        """`_bits` of a call: (bits, None), or (None, the tensor) for an op that keeps the dtype."""
        func = node.func
        if isinstance(func, ast.Attribute) and self.ctx.qualname(func) is None:
            if func.attr == "float" and not node.args and not node.keywords:
                return 32, None
            if func.attr in ("half", "bfloat16") and not node.args:
                return 16, None
            if func.attr in CAST_METHODS:
                return self._dtype_bits(list(node.args) + [k.value for k in node.keywords]), None
            if func.attr in KEEP_DTYPE:
                return None, func.value
        if self._is_cast(node):
            return self._dtype_bits(node.args[1:2]), None
        dtype = argument(node, "dtype")
        return (self._dtype_bits([dtype]) if dtype is not None else None), None

    def _dtype_bits(self, values: Sequence[ast.expr]) -> Optional[int]:
        for value in values:
            qual = self.ctx.qualname(value)
            if qual in FP32:
                return 32
            if qual in LOW:
                return 16
        return None

    def _is_cast(self, call: ast.Call) -> bool:
        """`ops.cast(x, t)`, `ops.Cast()(x, t)`, `self.cast(x, t)` with `self.cast = ops.Cast()`."""
        func = call.func
        if self.ctx.call_name(call) == "mindspore.ops.cast":
            return True
        if isinstance(func, ast.Call) and self.ctx.call_name(func) == "mindspore.ops.Cast":
            return True
        if isinstance(func, ast.Name):
            bound = self.ctx.resolve(func)
            return isinstance(bound, ast.Call) and self.ctx.call_name(bound) == "mindspore.ops.Cast"
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            bound = self._self_attribute(func.attr)
            return bound is not None and self.ctx.call_name(bound) == "mindspore.ops.Cast"
        return False

    def _self_attribute(self, attr: str) -> Optional[ast.Call]:
        cls = self.ctx.class_scope
        value = cls.attributes.get(attr) if cls is not None else None
        return value if isinstance(value, ast.Call) else None

    # ------------------------------------------------------ (c) registration
    def _check_registration(self, call: ast.Call) -> None:
        module = self.ctx.qualname(call.args[0]) if call.args else None
        op = constant(argument(call, "name", 1))
        if module in ("torch", "torch.Tensor") and op in MATMUL_METHODS:
            self.report(call, op=f"`amp.register_float_function({module}, '{op}')`",
                        reason=f"forces `{module}.{op}` to float32",
                        remedy="remove the registration (or use `amp.register_half_function`)")

    # ----------------------------------------------------- (a) file evidence
    def _evidence(self, call: ast.Call, qual: Optional[str]) -> None:
        if qual in MS_TRAINING:
            self.trains = True
        if self.casts_fp16:
            return
        meth = method_name(call)
        if meth == "to_float":
            dst = argument(call, "dst_type", 0)
            self.casts_fp16 = dst is None or self._dtype_bits([dst]) != 32
        elif meth == "add_flags_recursive":
            flag = argument(call, "fp16") or argument(call, "bf16")
            self.casts_fp16 = flag is not None and constant(flag, True) not in (False, None, 0)
        elif qual in MS_AMP_FUNCTIONS:
            name, pos = MS_AMP_FUNCTIONS[qual]
            level = argument(call, name, pos) if name else None  # the level defaults to "O0"
            self.casts_fp16 = name is None or (level is not None and constant(level) != "O0")
        if self.casts_fp16:
            return
        for kw in call.keywords:
            if kw.arg == "amp_level" and constant(kw.value) != "O0":
                self.casts_fp16 = True
            elif kw.arg in ("compute_type", "compute_dtype", "dtype") and constant(kw.value) in LOW_STRINGS:
                self.casts_fp16 = True

    def _label(self, func: ast.AST) -> str:
        qual = self.ctx.qualname(func)
        if qual:
            return "`" + qual.replace("mindspore.ops.", "ops.").replace("mindspore.nn.", "nn.") + "`"
        return "`" + (func.attr if isinstance(func, ast.Attribute) else "MatMul") + "`"


def _unit_axis(node: ast.expr, axis: int, rope: bool) -> bool:
    """Does `node` end with a size-1 axis at `axis` (-1 or -2)? Certain for `x[..., None]`,
    `x[..., None, :]`, `x.unsqueeze(-1)`; for `inv_freq[None, :, None]` / `pos[:, None, :]` (which count
    from the end only if they index every axis) only when the names say RoPE (`rope`)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) >= -axis:
        elts = node.slice.elts
        element = elts[axis]
        ellipsis = any(constant(e) is Ellipsis for e in elts[:axis])
        return isinstance(element, ast.Constant) and element.value is None and (ellipsis or rope)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze":
        return len(node.args) == 1 and constant(node.args[0]) == axis
    return False


FP32_WORDS = ("fp32", "float32", "upcast")


def _says_fp32(name: str) -> bool:
    """`router_gating_in_fp32`, `input_float32`, `upcast_attention`: a name that asks for float32."""
    lowered = name.lower()
    return any(w in lowered for w in FP32_WORDS)


def _last_name(node: ast.expr) -> str:
    """`self.inv_freq[None, :].float()` -> 'inv_freq'; `cam_intrinsics` -> 'cam_intrinsics'."""
    for _ in range(8):
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in KEEP_DTYPE | KEEP_AXES | {"unsqueeze"}):
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""
