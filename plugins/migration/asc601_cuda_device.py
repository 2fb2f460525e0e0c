"""ASC601 cuda-device: CUDA device placement left in NPU code."""
from __future__ import annotations

import ast
from typing import Dict

from ascend_lint.rule import Applicability, Case, Docs, Edit, Rule
from ascend_lint.astutil import argument, constant

from ._common import (NOT_LEFTOVERS, NPU_FIX_SAFETY, cuda_device_string, npu_fix, option_default, replace_in_literal,
                      source, uses_torch)
from ._flow import DeviceFlow
from ._switches import dispatches_elsewhere, gpu_fallback, in_backend_switch, names_npu, npu_polarity

# Keyword arguments that take a device.
DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_type"})
# Words of a command-line option that takes a device (`--device`, `--device-type`, `--accelerator`).
DEVICE_OPTION_WORDS = frozenset({"device", "accelerator"})
# Calls whose first positional argument is a device (or device type).
DEVICE_CALLS = frozenset({
    "torch.device", "torch.autocast", "torch.amp.autocast", "torch.amp.GradScaler", "torch.set_default_device",
})


class CudaDevice(Rule):
    silent_where_unreached = False  # about the environment or the port, not run-time cost: reported anywhere
    code = "ASC601"
    name = "cuda-device"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "{what} places work on CUDA, which does not exist on Ascend: {remedy}"
    npu_context = True
    silent_when_auto_migrated = True
    fix_applicability = Applicability.SAFE
    triggers = ("cuda",)
    docs = Docs(
        summary="CUDA device placement left over after a GPU-to-NPU port.",
        what="Flags CUDA device placement left over after a GPU to NPU port: `.cuda(...)` calls, "
             "`torch.device('cuda...')`, `'cuda'`/`'cuda:N'` strings passed as a device (`device=`, "
             "`map_location=`, `device_type=`, `.to('cuda')`, `torch.autocast('cuda')`), assigned to a "
             "`*device*` name or (under `--target npu`, when porting) given as the default of a `--device` option "
             "(`parser.add_argument('--device', default='cuda')`), and `'cuda:{}'.format(...)` / `f'cuda:{rank}'` device strings.",
        why="Without `torch_npu.contrib.transfer_to_npu` nothing maps CUDA to the NPU: `.cuda()` and "
            "`'cuda'` devices fail on an Ascend host (no CUDA driver), or silently keep the work on the CPU "
            "when the code falls back. The manual port replaces `torch.device('cuda:N')` with `'npu:N'` and "
            "`.cuda()` with `.npu()` (Ascend PyTorch migration guide, manual migration).",
        known_problems=NOT_LEFTOVERS + (" A file that defines its own `cuda` function or method (a torch emulation, "
                                        "a wrapper delegating to `model.cuda()`) is taken to call that and not "
                                        "flagged; so is a MindSpore-only file (it imports MindSpore and no "
                                        "torch), where the torch_npu advice would not apply."),
        example="""
            import torch_npu

            model = model.cuda()
            x = x.to("cuda:0")
            device = torch.device("cuda:{}".format(rank))
        """,
        use_instead="""
            import torch_npu

            model = model.npu()
            x = x.to("npu:0")
            device = torch.device("npu:{}".format(rank))
        """,
        fix_safety="`.cuda(` becomes `.npu(` and `'cuda'` becomes `'npu'` inside the device string "
                   "(`Tensor.npu` and `Module.npu` take the same arguments). The device string is judged by "
                   "where it is used, not where it is written: it raises on an Ascend host only when it "
                   "reaches `.cuda()`, `.to(...)`, `x.new_*(device=...)` or the `device=`/`map_location=` of a "
                   "torch call (through `torch.device(...)`, `.format(...)`, a conditional, or a local name "
                   "every read of which does). Anywhere else the rewrite is unsafe: `torch.autocast('cuda')`, "
                   "`torch.amp.autocast('cuda')`, `torch.amp.GradScaler('cuda')` and `device_type='cuda'` "
                   "disable themselves with a warning on an Ascend host (the original trained in fp32 without "
                   "loss scaling; the fixed code trains in fp16 with it), a comparison picks another branch, "
                   "and a module-level name, a returned value or one passed to another function goes where the "
                   "linter cannot follow. " + NPU_FIX_SAFETY,
        source="Ascend Extension for PyTorch migration guide (manual migration: device, `.cuda()`), "
               "torch_npu/contrib/transfer_to_npu.py (what automatic migration rewrites).",
    )
    cases = (
        Case("""
            import torch_npu
            model = model.cuda()
            """, line=2, message_contains="`.cuda()` places work on CUDA, which does not exist on Ascend",
             fixed="""
            import torch_npu
            model = model.npu()
            """),
    )
    flagged = (
        "import torch_npu\nmodel = model.cuda()",
        "import torch_npu\nx = batch.cuda(non_blocking=True)",
        "import torch_npu\nimport torch\ndev = torch.device('cuda')",
        "import torch_npu\nimport torch\ndev = torch.device('cuda:0')",
        "import torch_npu\nimport torch\ndev = torch.device('cuda', 1)",
        "import torch_npu\nimport torch\ndev = torch.device('cuda:{}'.format(rank))",
        "import torch_npu\nimport torch\ndev = torch.device(f'cuda:{rank}')",
        "import torch_npu\nx = x.to('cuda')",
        "import torch_npu\nimport torch\nz = torch.zeros(4, device='cuda')",
        "import torch_npu\nimport torch\nsd = torch.load(path, map_location='cuda:0')",
        "import torch_npu\nimport torch\nwith torch.autocast(device_type='cuda'):\n    pass",
        "import torch_npu\ndevice = 'cuda:0'",
        "import torch_npu\nlocal_device = f'cuda:{local_rank}'",
        "import torch\nx = y.to('npu')\nz = w.cuda()",
    )
    clean = (
        # an option default is reported only when porting (`--target npu`, tests/test_migration.py)
        "import torch_npu\nparser.add_argument('--device', default='cuda', help='cuda or cpu')",
        "model = model.cuda()",  # no NPU context
        "import torch_npu\nfrom torch_npu.contrib import transfer_to_npu\nmodel = model.cuda()",
        "import torch_npu\nmodel = model.npu()",
        "import torch_npu\nif args.device == 'npu':\n    model = model.npu()\nelse:\n    model = model.cuda()",
        "import torch_npu\nx = x.npu() if use_npu else x.cuda()",
        "import torch_npu\nif device == 'cuda':\n    pass",
        "import torch_npu\nprint('cuda is not used here')",
        "import torch_npu\nimport torch\ndev = torch.device('npu:0')",
        "import torch_npu\nname = f'cuda:{x} ready'",
        "import torch_npu\nimport torch\nstream = torch.cuda.Stream()",
        "import torch_npu\nclass Tensor:\n    def cuda(self):\n        return self.npu()\n    def pin(self):\n"
        "        return self.cuda()",
        # MindSpore-only code: no torch_npu advice
        "import mindspore as ms\ndevice = 'cuda:0'\nnet = net.cuda()",
        # a per-backend table
        "import torch, torch_npu\nDEVICES = {'cuda': 'cuda:0', 'npu': 'npu:0'}",
        "import torch, torch_npu\nDEVICES = dict(cuda=torch.device('cuda:0'), npu=torch.device('npu:0'))",
        "import torch, torch_npu\nDEVICES = [('cuda', torch.device('cuda:0')), ('npu', torch.device('npu:0'))]",
        "import torch_npu\nparser.add_argument('--backend-kind', default='cuda')",  # not a device option
        "import torch_npu\nparser.add_argument('--device', default='npu')",
    )

    def start_file(self) -> None:
        self._switches: Dict[int, bool] = {}  # per function: does it probe for an NPU?
        self._flow = DeviceFlow(self.ctx)  # where a device string goes (decides the fix's safety)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and self.ctx.qualname(func) is None:
            if "cuda" not in self.ctx.local_functions:  # a file defining `cuda` (a torch emulation) calls its own
                self._report_dot_cuda(node, func)
            return
        if isinstance(func, ast.Attribute) and func.attr == "format" and not node.keywords:
            self._check_format(func)
            return
        option = option_default(node) if self.ctx.target == "npu" else None  # (when porting: see ASC602)
        if option is not None and option[0] & DEVICE_OPTION_WORDS:  # `add_argument('--device', default='cuda')`
            self._check_plain(option[1])
            return
        self._check_device_arguments(node)

    def _check_format(self, func: ast.Attribute) -> None:
        """`'cuda:{}'.format(rank)`: a CUDA device string with one placeholder for the index."""
        fmt = constant(func.value)
        if isinstance(fmt, str) and fmt.startswith("cuda:{") and fmt.endswith("}") and fmt.count("{") == 1:
            self._report_string(func.value, f"`{fmt!r}.format(...)`")

    def _check_device_arguments(self, node: ast.Call) -> None:
        """The devices a call is given: the first argument of a device call (`torch.device(...)`, `x.to(...)`)
        and its device keywords (`device=`, `map_location=`...)."""
        func = node.func
        qual = self.ctx.qualname(func)
        if qual in DEVICE_CALLS or (isinstance(func, ast.Attribute) and func.attr == "to" and qual is None):
            first = argument(node, None, 0)
            if first is not None:
                self._check_plain(first)
        for kw in node.keywords:
            if kw.arg in DEVICE_KEYWORDS:
                self._check_plain(kw.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and "device" in t.id.lower() for t in node.targets):
            self._check_plain(node.value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        values = node.values
        if (len(values) == 2 and isinstance(values[0], ast.Constant) and values[0].value == "cuda:"
                and isinstance(values[1], ast.FormattedValue)):
            self._report_string(node, "`f'cuda:{...}'`")

    # ----------------------------------------------------------------- helpers
    def _check_plain(self, value: ast.expr) -> None:
        if isinstance(value, ast.IfExp):  # 'cuda' if torch.cuda.is_available() else 'cpu'
            if dispatches_elsewhere(value.test) or gpu_fallback(self.ctx, self._switches, [value.test]):
                return
            polarity = npu_polarity(value.test)
            for branch, other, side in ((value.body, value.orelse, 1), (value.orelse, value.body, -1)):
                # the NPU side of the test, or a test without NPU: a CUDA string here is a leftover;
                # the other side of an NPU test, or the alternative of an 'npu' string, is deliberate
                if polarity in (0, side) and not names_npu(other):
                    self._check_plain(branch)
        elif isinstance(value, ast.Constant) and cuda_device_string(value.value):
            self._report_string(value, f"`{value.value!r}`")

    def _report_dot_cuda(self, node: ast.Call, func: ast.Attribute) -> None:
        if in_backend_switch(self.ctx, self._switches) or not uses_torch(self.ctx):
            return
        fix = None
        text = source(self.ctx, func)
        if text is not None and text.endswith("cuda"):
            fix = npu_fix(self.ctx, "Replace `.cuda(` with `.npu(`",
                          Edit("replace", self.ctx.span(func), text[: -len("cuda")] + "npu"))
        self.report(node, what="`.cuda()`", remedy="use `.npu()` (or `.to(device)` with an NPU device)", fix=fix)

    def _report_string(self, node: ast.AST, what: str) -> None:
        """Report a CUDA device literal (a string, a format string or an f-string) at `node`."""
        if in_backend_switch(self.ctx, self._switches) or not uses_torch(self.ctx):
            return
        fix = None
        edit = replace_in_literal(self.ctx, node, "cuda", "npu")
        if edit is not None:
            fix = npu_fix(self.ctx, "Replace the CUDA device with the NPU device", edit,
                          changes_results=not self._flow.fails_everywhere(node))
        self.report(node, what=f"the device string {what}", remedy="use the `npu` device ('npu', 'npu:N')", fix=fix)
