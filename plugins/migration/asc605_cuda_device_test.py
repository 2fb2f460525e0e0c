"""ASC605 cuda-device-test: a test of the device that accepts CUDA and not the NPU, in NPU code."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule

from ._common import cuda_device_string, npu_fix, source, uses_torch
from ._switches import (cuda_only_names, in_backend_switch, later_tests, moves_alike, names_npu, names_other_backend,
                        npu_polarity, npu_sibling, uses_npu)
from .device_tests import DeviceTest, device_subject, device_test, readable_twice

# What the CUDA side of a test switches on, by the names it uses (for the message).
FEATURES = (("pin_memory", "pinned memory"), ("autocast", "autocast"), ("scaler", "loss scaling"),
            ("fused", "a fused optimizer"), ("non_blocking", "asynchronous copies"))
# Calls that only report or stop: a branch of nothing else checks the device, it picks no path.
ERROR_CALLS = frozenset({"exit", "quit", "warn", "warning", "error", "critical", "print"})
PREFIX_CHARS = frozenset("rRbBuUfF'\"")


class CudaDeviceTest(Rule):
    code = "ASC605"
    name = "cuda-device-test"
    preview = True  # new: measured on the precision corpus only after release
    message = "`{test}` is {value} on the NPU, so an NPU run does not take the path a CUDA run takes{what}: " \
              "accept the NPU too"
    npu_context = True
    silent_when_auto_migrated = True
    fix_applicability = Applicability.UNSAFE
    triggers = ("cuda",)
    docs = Docs(
        summary="A test of the device that accepts CUDA and not the NPU (`'cuda' in device`, "
                "`device.type == 'cuda'`) in NPU code.",
        what="Flags tests of the device in use that accept CUDA and not the NPU: `'cuda' in device`, "
             "`device.type == 'cuda'` / `!= 'cuda'`, `device_type in ('cuda', 'mps')`, `device.startswith('cuda')` "
             "and `x.is_cuda`, where the tested value holds a device (a name or attribute that says `device`, "
             "`dev` or `accelerator`, a `.type`, `str(device)`, `cfg['device']`). Typical spots: "
             "`device_type = 'cuda' if 'cuda' in device else 'cpu'` (then `torch.autocast(device_type)`), "
             "`pin_memory=device.type == 'cuda'`, `use_fused = fused_available and device_type == 'cuda'`, "
             "`if device.type == 'cuda': model.cuda(); torch.cuda.set_device(...)`.",
        why="Porting a script rewrites its device to `'npu'`, but a test that asks for `'cuda'` then fails on the "
            "NPU and sends the run down the path meant for the CPU: no autocast (the run trains in fp32), no "
            "pinned memory or asynchronous copies, no fused optimizer. Nothing errors: the port runs, slower, "
            "with other numerics. torch_npu gives the NPU the same features under the device type `'npu'` "
            "(`torch.autocast('npu')`, `torch.amp.GradScaler('npu')`, pinned memory for NPU copies, and the "
            "`_fused_adamw_` kernel that `torch.optim.AdamW(fused=True)` calls, registered by Ascend's "
            "op-plugin), so the CUDA path is the one to take on the NPU too.",
        known_problems="Silent where the test has an NPU twin: the test itself names the NPU (`'cuda' in d or 'npu' "
                       "in d`), an `elif` or the `if` right before or after it tests for the NPU, or the other "
                       "branch or arm uses it (`if d.type == 'cuda': torch.cuda.synchronize() else: "
                       "torch.npu.synchronize()`) or moves the same objects with `.to(...)` where the CUDA side uses"
                       " `.cuda()` (`model.cuda() if d.type == 'cuda' else model.to(d)`, right on the NPU as it is);"
                       " where the test or its CUDA side names another backend in a string (`return 'GPU'`: a "
                       "device-name mapping); on the non-NPU side of an enclosing NPU test; in code of a CUDA-only "
                       "library or feature, or where the CUDA side calls a name imported from one "
                       "(`amp_C.multi_tensor_l2norm`); in an `assert`; where the test decides a `map_location` (a "
                       "checkpoint restored to the CPU is correct on the NPU too); where the CUDA side only raises, "
                       "exits or warns (a check of the device, not a path), or the other side only raises "
                       "`NotImplementedError` (a CUDA-only kernel); inside a branch that only runs on the CPU (`if "
                       "device == 'cpu':`). A value that does not say it holds a device (`backend == 'cuda'`, "
                       "`'cuda' in torch.__version__`, `name.startswith('cuda')`) is not taken for one. "
                       "`torch.cuda.is_available()` deciding a path is ASC603's (its fix, "
                       "`torch.npu.is_available()`, keeps the path on). A path that turns on on the NPU is still "
                       "CUDA's, and the fix cannot tell whether all of it suits the NPU: `fused=True` does for "
                       "`AdamW` (Ascend's op-plugin registers `_fused_adamw_`), not for `Adam` or `SGD` (no "
                       "`_fused_adam_` / `_fused_sgd_` there; use torch_npu's `NpuFused*` optimizers, ASC301), and a"
                       " CUDA side that calls `torch.cuda` APIs or `.cuda()` needs ASC603/ASC601 next (the README's "
                       "porting steps run them after this rule). In multi-backend libraries a list such as `('cuda',"
                       " 'xpu')` can leave the NPU out on purpose (a path for a CUDA/XPU-only package): that is why "
                       "the rule is in preview.",
        example="""
            import torch

            device = "npu"
            device_type = "cuda" if "cuda" in device else "cpu"
            loader = DataLoader(dataset, pin_memory=device_type == "cuda")
            if device_type == "cuda":
                x = x.pin_memory().to(device, non_blocking=True)
        """,
        use_instead="""
            import torch

            device = "npu"
            device_type = "npu" if "npu" in device else ("cuda" if "cuda" in device else "cpu")
            loader = DataLoader(dataset, pin_memory=device_type in ("cuda", "npu"))
            if device_type in ("cuda", "npu"):
                x = x.pin_memory().to(device, non_blocking=True)
        """,
        fix_safety="Unsafe, always: on the NPU the fixed test takes the branch a CUDA run takes (autocast, "
                   "pinned memory, a fused optimizer), so the program computes other numbers there, which is "
                   "the point of the port but not a change to apply unseen. On a CUDA or CPU machine the fixed "
                   "test gives what the original gave, and it needs no torch_npu: `x == 'cuda'` becomes "
                   "`x in ('cuda', 'npu')` (`!=`: `not in`), `'cuda' in x` becomes `'cuda' in x or 'npu' in x` "
                   "(only where `x` can be read twice), `x in ('cuda', 'mps')` gets `'npu'` added, "
                   "`x.startswith('cuda')` becomes `x.startswith(('cuda', 'npu'))`, and a test that picks the "
                   "string `'cuda'` (`'cuda' if 'cuda' in device else 'cpu'`) is put after an NPU test that "
                   "picks `'npu'`: `'npu' if 'npu' in device else ('cuda' if 'cuda' in device else 'cpu')`. "
                   "`x.is_cuda` becomes `x.is_cuda or x.is_npu`: `Tensor.is_npu` exists once torch_npu is "
                   "loaded, so that fix adds `import torch_npu  # noqa: F401` where the file lacks it, and is "
                   "not offered where torch_npu is imported only behind a guard. The quote style is kept.",
        source="torch_npu/_init/registry/backend.py (`rename_privateuse1_backend('npu')`, the `is_npu`/`npu()` "
               "methods) in Ascend/pytorch; op_plugin/config/op_plugin_functions.yaml (`_fused_adamw_`) in "
               "Ascend/op-plugin; torch/utils/_foreach_utils.py `_get_fused_kernels_supported_devices` (the "
               "privateuse1 device is one); Ascend Extension for PyTorch migration guide (manual migration: "
               "device names).",
    )
    cases = (
        Case("""
            import torch_npu
            device = 'cuda'
            device_type = 'cuda' if 'cuda' in device else 'cpu'
            """, line=3, message_contains="`'cuda' in device` is false on the NPU",
             fixed="""
            import torch_npu
            device = 'cuda'
            device_type = 'npu' if 'npu' in device else ('cuda' if 'cuda' in device else 'cpu')
            """),
    )
    flagged = (
        "import torch_npu\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'",
        "import torch_npu\nif device.type == 'cuda':\n    x = x.pin_memory()",
        "import torch_npu\nuse_fused = fused_available and device_type == 'cuda'",
        "import torch_npu\nloader = DataLoader(ds, pin_memory=args.device != 'cuda')",
        "import torch_npu\nif 'cuda' not in str(x.device):\n    pass",
        "import torch_npu\nif device.startswith('cuda'):\n    pass",
        "import torch_npu\nif device_type in ('cuda', 'mps'):\n    pass",
        "import torch_npu\nif cfg['device'] == 'cuda':\n    pass",
        "import torch_npu\nif x.is_cuda:\n    x = x.pin_memory()",
        "import torch_npu\nif not args.accelerator.lower() == 'cuda':\n    pass",
        # inside an NPU branch the CUDA test is a leftover for sure
        "import torch_npu\nif is_npu:\n    amp = device.type == 'cuda'",
        # a branch that only runs on the CUDA side still is a path, not a check
        "import torch_npu\nif device.type != 'cuda':\n    raise SystemExit('needs a GPU')",
    )
    clean = (
        "device_type = 'cuda' if 'cuda' in device else 'cpu'",  # no NPU context
        "import torch_npu\nfrom torch_npu.contrib import transfer_to_npu\nif device.type == 'cuda':\n    pass",
        # the test has an NPU twin
        "import torch_npu\nif 'cuda' in device or 'npu' in device:\n    pass",
        "import torch_npu\nif device.type in ('cuda', 'npu'):\n    pass",
        "import torch_npu\nif device.type == 'cuda':\n    torch.cuda.synchronize()\nelif device.type == 'npu':\n"
        "    torch.npu.synchronize()",
        "import torch_npu\nif device.type == 'cuda':\n    torch.cuda.synchronize()\nelse:\n    torch.npu.synchronize()",
        "import torch_npu\nevent = torch.cuda.Event() if x.device.type == 'cuda' else torch.npu.Event()",
        "import torch_npu\nif is_npu:\n    pass\nelif device.type == 'cuda':\n    pass",
        # the other side moves the same objects with `.to(device)`, which serves the NPU as well
        "import torch_npu\nmodel = model.cuda() if device.type == 'cuda' else model.to(device)",
        "import torch_npu\nif x.is_cuda:\n    y = y.cuda()\nelse:\n    y = y.to(x.device)",
        # two halves of one dispatch; another backend's name; a CUDA-only library's kernel
        "import torch_npu\nimport torch\nif 'npu' in args.device:\n    torch.npu.set_device(args.device)\n"
        "if 'cuda' in args.device:\n    torch.cuda.set_device(args.device)",
        "import torch_npu\ndef ms_device(device_str):\n    if device_str.startswith('cuda'):\n        return 'GPU'\n"
        "    return 'CPU'",
        "import torch_npu\ntry:\n    from amp_C import multi_tensor_l2norm\nexcept ImportError:\n    pass\n"
        "if device.type == 'cuda':\n    norm = multi_tensor_l2norm(2048, flag, [grads], False)",
        "import torch_npu\nassert device_type == 'cuda' or device_type is None, 'needs CUDA'",
        "import torch_npu\ndef backward(ctx, grad):\n    if not grad.is_cuda:\n        raise NotImplementedError\n"
        "    return deform_conv_cuda.backward(grad)",
        "import torch_npu\nif device.type == 'cuda' and not p2p_ok():\n    if 'NCCL_P2P_DISABLE' not in env:\n"
        "        raise NotImplementedError('set NCCL_P2P_DISABLE')",
        # 'cuda' in a string that is not a device
        "import torch_npu\nimport torch\nif 'cuda' in torch.__version__:\n    pass",
        "import torch_npu\nif name.startswith('cuda'):\n    pass",
        "import torch_npu\nif 'cuda' in str(err):\n    pass",
        "import torch_npu\nif backend == 'cuda':\n    pass",
        "import torch_npu\nimport os\nif 'cuda' in os.environ.get('CUDA_VISIBLE_DEVICES', ''):\n    pass",
        # a CPU-only path: restoring to the CPU is right on the NPU too
        "import torch_npu\nimport torch\nsd = torch.load(p, map_location='cpu' if device.type != 'cuda' else None)",
        "import torch_npu\nif device == 'cpu':\n    amp = device_type == 'cuda'",
        # a check of the device, not a path
        "import torch_npu\nimport torch\nif args.device == 'cuda' and not torch.cuda.is_available():\n"
        "    raise ValueError('no GPU')",
        # after the fix: nothing left to report
        "import torch_npu\ndevice_type = 'npu' if 'npu' in device else ('cuda' if 'cuda' in device else 'cpu')",
        "import torch_npu\nif (x.is_cuda or x.is_npu):\n    pass",
        "import torch\nimport torch_npu\nis_cuda_property = torch.Tensor.is_cuda",
    )

    def start_file(self) -> None:
        self._switches: Dict[int, bool] = {}  # per function: does it probe for an NPU?

    def visit_Compare(self, node: ast.Compare) -> None:
        self._check(node)

    def visit_Call(self, node: ast.Call) -> None:
        self._check(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._check(node)

    # ----------------------------------------------------------------- helpers
    def _check(self, node: ast.AST) -> None:
        test = device_test(node)
        if test is None or not uses_torch(self.ctx):
            return
        if test.kind == "is_cuda" and self.ctx.qualname(test.subject) is not None:
            return  # `torch.Tensor.is_cuda`: the property itself, not a test of a tensor
        top, parent, holds = self._top()
        if names_npu(top) or self._npu_arm(top, parent, holds) or self._no_path(top, parent, holds) \
                or in_backend_switch(self.ctx, self._switches, within=top):
            return
        text = " ".join((source(self.ctx, node) or "").split())
        self.report(node, test=text if len(text) <= 60 else text[:57] + "...",
                    value="false" if test.holds_on_cuda else "true", what=self._what(top, parent, holds),
                    fix=self._fix(test, top, parent, holds))

    def _top(self) -> Tuple[ast.expr, Optional[ast.AST], bool]:
        """The whole condition the current test is part of (through `and`/`or`/`not`), what holds it, and
        whether the condition holds on CUDA where the test does (False under an odd number of `not`)."""
        stack = self.ctx.stack
        holds = device_test(stack[-1]).holds_on_cuda
        i = len(stack) - 1
        while i > 0 and (isinstance(stack[i - 1], ast.BoolOp) or (
                isinstance(stack[i - 1], ast.UnaryOp) and isinstance(stack[i - 1].op, ast.Not))):
            if isinstance(stack[i - 1], ast.UnaryOp):
                holds = not holds
            i -= 1
        return stack[i], (stack[i - 1] if i > 0 else None), holds

    @staticmethod
    def _sides(top: ast.expr, parent: Optional[ast.AST], holds: bool) -> Optional[Tuple[List[ast.AST], List[ast.AST]]]:
        """(the CUDA side, the other side) of the `if` or conditional expression `top` is the test of."""
        if isinstance(parent, ast.If) and parent.test is top:
            return (parent.body, parent.orelse) if holds else (parent.orelse, parent.body)
        if isinstance(parent, ast.IfExp) and parent.test is top:
            return ([parent.body], [parent.orelse]) if holds else ([parent.orelse], [parent.body])
        return None

    def _npu_arm(self, top: ast.expr, parent: Optional[ast.AST], holds: bool) -> bool:
        """Does the test have an NPU twin (an `elif` or a neighbouring `if` for the NPU, an other side that uses
        it), or is its CUDA side another backend's or a CUDA-only library's (`return 'GPU'`, `amp_C` kernels)?"""
        if names_other_backend([top]):  # `tensor_device == 'gpu' and new_device == 'cuda'`
            return True
        sides = self._sides(top, parent, holds)
        if sides is None:
            return False
        if isinstance(parent, ast.If) and (any(npu_polarity(t) == 1 for t in later_tests(parent))
                                           or npu_sibling(self.ctx, parent)):
            return True
        if uses_npu(sides[1]) or any(names_npu(n) for n in sides[1] if isinstance(n, ast.expr)) \
                or moves_alike(*sides) or names_other_backend(sides[0]):
            return True
        optional = cuda_only_names(self.ctx)
        return bool(optional) and any(isinstance(n, ast.Name) and n.id in optional
                                      for node in sides[0] for n in ast.walk(node))

    def _no_path(self, top: ast.expr, parent: Optional[ast.AST], holds: bool) -> bool:
        """Is the test no choice of path for the NPU: it decides a `map_location`, its CUDA side only reports
        or stops, or it sits in a branch that only runs on the CPU?"""
        stack = self.ctx.stack
        for node in reversed(stack[: stack.index(top)]):
            if isinstance(node, ast.keyword):
                if node.arg == "map_location":
                    return True
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and "map_location" in t.id for t in targets):
                    return True
                break
            elif isinstance(node, ast.stmt):
                break
        if isinstance(parent, ast.Assert):  # `assert device_type == 'cuda' or ..., 'needs CUDA'`
            return True
        sides = self._sides(top, parent, holds)
        if isinstance(parent, ast.If) and sides is not None and sides[0] and all(map(_reports_only, sides[0])):
            return True
        if isinstance(parent, ast.If) and sides is not None and sides[1] and all(map(_not_implemented, sides[1])):
            return True  # `if not x.is_cuda: raise NotImplementedError`: only a CUDA kernel exists
        return any(_cpu_side(if_node.test, in_else) for if_node, in_else in self.ctx.ifs)

    def _what(self, top: ast.expr, parent: Optional[ast.AST], holds: bool) -> str:
        """What the CUDA side turns on, by the names it uses: ' (pinned memory, autocast)', or ''."""
        sides = self._sides(top, parent, holds)
        if sides is not None:
            if isinstance(parent, ast.IfExp) and isinstance(sides[1][0], ast.Constant):
                return f" (the NPU gets {source(self.ctx, sides[1][0])})"
            names = [n for node in sides[0] for n in _names(node)]
        else:
            names = []
            stack = self.ctx.stack
            above = stack[: stack.index(top)]
            for at in range(len(above) - 1, -1, -1):
                node = above[at]
                if isinstance(node, ast.keyword) and node.arg:  # `pin_memory=...`, `GradScaler(enabled=...)`
                    call = above[at - 1] if at else None
                    names = [node.arg.lower()] + (_names(call.func) if isinstance(call, ast.Call) else [])
                    break
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [n for t in targets for n in _names(t)]
                    break
                if isinstance(node, ast.stmt):
                    break
        found = [label for word, label in FEATURES if any(word in n for n in names)]
        return f" ({', '.join(found)})" if found else ""

    def _fix(self, test: DeviceTest, top: ast.expr, parent: Optional[ast.AST], holds: bool) -> Optional[Fix]:
        ctx = self.ctx
        quote = _quote(source(ctx, test.literal) if test.literal is not None else None)
        npu = f"{quote}npu{quote}"
        subject = source(ctx, test.subject)
        if subject is None or "\n" in subject:
            return None
        if test.kind == "is_cuda":
            if not readable_twice(test.subject):
                return None
            return npu_fix(ctx, "Accept NPU tensors too (`.is_npu`)",
                           Edit("replace", ctx.span(test.node), f"{subject}.is_cuda or {subject}.is_npu"),
                           changes_results=True)
        chain = self._chain(test, top, parent, holds, subject, npu)
        if chain is not None:
            return chain
        edit = self._widen(test, subject, npu)
        if edit is None:
            return None
        return Fix(Applicability.UNSAFE, "Accept the NPU device too", (edit,))

    def _chain(self, test: DeviceTest, top: ast.expr, parent: Optional[ast.AST], holds: bool, subject: str,
               npu: str) -> Optional[Fix]:
        """`'cuda' if 'cuda' in device else 'cpu'` -> `'npu' if 'npu' in device else ('cuda' if ...)`."""
        if not (isinstance(parent, ast.IfExp) and parent.test is top and top is test.node
                and readable_twice(test.subject)):
            return None
        arm = parent.body if holds else parent.orelse
        arm_text, whole = source(self.ctx, arm), source(self.ctx, parent)
        if not (isinstance(arm, ast.Constant) and cuda_device_string(arm.value)) or arm_text is None or whole is None:
            return None
        head = arm_text[: arm_text.index("cuda")]
        if any(c not in PREFIX_CHARS for c in head):
            return None
        npu_test = {"eq": f"{subject} == {npu}", "member": f"{subject} == {npu}", "contains": f"{npu} in {subject}",
                    "prefix": f"{subject}.startswith({npu})"}[test.kind]
        text = f"{arm_text.replace('cuda', 'npu', 1)} if {npu_test} else ({whole})"
        return Fix(Applicability.UNSAFE, "Pick the NPU first, then CUDA as before",
                   (Edit("replace", self.ctx.span(parent), text),))

    def _widen(self, test: DeviceTest, subject: str, npu: str) -> Optional[Edit]:
        """The edit that makes the test accept 'npu' where it accepts 'cuda'."""
        ctx = self.ctx
        literal = source(ctx, test.literal)
        if literal is None or "\n" in literal:
            return None
        if test.kind == "eq":
            parent = ctx.stack[-2] if len(ctx.stack) > 1 else None
            negated = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)  # `not d == 'cuda'`
            op = "in" if test.holds_on_cuda != negated else "not in"
            return Edit("replace", ctx.span(parent if negated else test.node), f"{subject} {op} ({literal}, {npu})")
        if test.kind == "contains":
            if not readable_twice(test.subject):
                return None
            text = f"{literal} in {subject} or {npu} in {subject}" if test.holds_on_cuda else \
                f"{literal} not in {subject} and {npu} not in {subject}"
            return Edit("replace", ctx.span(test.node), text)
        if test.kind == "member":
            names = _appended(ctx, test.literal, npu)
            op = "in" if test.holds_on_cuda else "not in"
            return Edit("replace", ctx.span(test.node), f"{subject} {op} {names}") if names else None
        if not isinstance(test.literal, ast.Constant):
            names = _appended(ctx, test.literal, npu)
            return Edit("replace", ctx.span(test.node), f"{subject}.startswith({names})") if names else None
        prefix = literal.replace("cuda", "npu", 1) if literal.count("cuda") == 1 else npu
        return Edit("replace", ctx.span(test.literal), f"({literal}, {prefix})")


def _appended(ctx, collection: ast.expr, item: str) -> Optional[str]:
    """A tuple, list or set literal with `item` added at its end (None where an element spans lines)."""
    parts = [source(ctx, e) for e in collection.elts]
    if any(p is None or "\n" in p for p in parts):
        return None
    opener, closer = {ast.Tuple: "()", ast.List: "[]", ast.Set: "{}"}[type(collection)]
    return f"{opener}{', '.join(parts + [item])}{closer}"


def _quote(literal: Optional[str]) -> str:
    """The quote character of a string literal's source ('"' when there is none to copy)."""
    for char in literal or "":
        if char in "'\"":
            return char
    return '"'


def _names(node: ast.AST) -> List[str]:
    """The lower-case identifiers, attribute names and keyword names in `node` (a bounded look at one branch)."""
    names = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.append(sub.id.lower())
        elif isinstance(sub, ast.Attribute):
            names.append(sub.attr.lower())
        elif isinstance(sub, ast.keyword) and sub.arg:
            names.append(sub.arg.lower())
    return names


def _reports_only(stmt: ast.stmt) -> bool:
    """`raise ...`, `sys.exit(...)`, `warnings.warn(...)`, `logger.error(...)`, `print(...)`, `assert ...`."""
    if isinstance(stmt, (ast.Raise, ast.Assert)):
        return True
    if isinstance(stmt, ast.If):  # `if "NCCL_P2P_DISABLE" not in os.environ: raise ...`
        return all(map(_reports_only, stmt.body + stmt.orelse))
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name in ERROR_CALLS
    return False


def _not_implemented(stmt: ast.stmt) -> bool:
    """`raise NotImplementedError(...)`: the other side says there is no implementation but CUDA's."""
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _cpu_side(test: ast.expr, in_else: bool) -> bool:
    """Is this branch of `if <test>:` the CPU's (`if device == 'cpu':` body, `if device.type != 'cpu':` else)?"""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    op, left, right = test.ops[0], test.left, test.comparators[0]
    for literal, subject in ((right, left), (left, right)):
        if isinstance(literal, ast.Constant) and literal.value == "cpu" and device_subject(subject):
            holds = isinstance(op, (ast.Eq, ast.In))
            return holds != in_else if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) else False
    return False
