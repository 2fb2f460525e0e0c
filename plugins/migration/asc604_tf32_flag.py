"""ASC604 tf32-flag-on-npu: CUDA TF32 switches set in NPU code (the NPU's knob is HF32)."""
from __future__ import annotations

import ast
from typing import Dict

from ascend_lint.rule import Applicability, Case, Docs, Edit, Rule

from ._common import NOT_LEFTOVERS, npu_fix
from ._switches import in_backend_switch

# CUDA flag -> (torch.npu twin below `torch.`, the twin's default on Ascend)
HF32_TWINS = {
    "torch.backends.cuda.matmul.allow_tf32": ("npu.matmul.allow_hf32", "False"),
    "torch.backends.cudnn.allow_tf32": ("npu.conv.allow_hf32", "True"),
}


class Tf32FlagOnNpu(Rule):
    silent_where_unreached = False  # about the environment or the port, not run-time cost: reported anywhere
    code = "ASC604"
    name = "tf32-flag-on-npu"
    message = "`{flag}` does nothing on Ascend: set `torch.{twin}` (default {default}) instead"
    npu_context = True
    silent_when_auto_migrated = True
    fix_applicability = Applicability.UNSAFE
    triggers = ("allow_tf32",)
    docs = Docs(
        summary="A CUDA TF32 switch in NPU code, where it does nothing.",
        what="Flags assignments to `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32` "
             "in NPU code.",
        why="The CUDA TF32 switches are not wired to the NPU. Ascend's reduced-precision fp32 mode for the Cube "
            "unit is HF32, switched by `torch.npu.matmul.allow_hf32` (default False) and "
            "`torch.npu.conv.allow_hf32` (default True): setting the CUDA flag leaves the NPU at its defaults, "
            "so the precision/speed trade-off the script asked for silently does not happen.",
        known_problems=NOT_LEFTOVERS,
        example="""
            import torch
            import torch_npu

            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        """,
        use_instead="""
            import torch
            import torch_npu

            torch.npu.matmul.allow_hf32 = True
            torch.npu.conv.allow_hf32 = True
        """,
        fix_safety="Unsafe: the assigned flag is replaced by its HF32 twin and the value is kept. That is the "
                   "precision trade-off the CUDA flag asked for, but on the NPU it changes the numbers: the "
                   "original line did nothing there, so the NPU ran at its defaults (matmul HF32 off, conv "
                   "HF32 on). Where the file does not import `torch_npu`, the fix also adds `import torch_npu  "
                   "# noqa: F401`; not offered where torch_npu is imported only behind a guard. No fix when "
                   "the file has no name for the `torch` module.",
        source="torch_npu/npu/__init__.py (`matmul = npu_config._allowHF32Matmul()`, `conv = "
               "npu_config._allowHF32Conv()`) and torch_npu/csrc/framework/LazyInitAclops.cpp (defaults).",
    )
    cases = (
        Case("""
            import torch
            import torch_npu
            torch.backends.cuda.matmul.allow_tf32 = True
            """, line=3, message_contains="`torch.backends.cuda.matmul.allow_tf32` does nothing on Ascend",
             fixed="""
            import torch
            import torch_npu
            torch.npu.matmul.allow_hf32 = True
            """),
    )
    flagged = (
        "import torch\nimport torch_npu\ntorch.backends.cudnn.allow_tf32 = False",
        "import torch_npu\nfrom torch.backends import cudnn\ncudnn.allow_tf32 = True",
        "import torch\ndevice = 'npu'\ntorch.backends.cuda.matmul.allow_tf32 = True",
    )
    clean = (
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True",  # no NPU context
        "import torch\nimport torch_npu\nfrom torch_npu.contrib import transfer_to_npu\n"
        "torch.backends.cuda.matmul.allow_tf32 = True",
        "import torch\nimport torch_npu\ntorch.npu.matmul.allow_hf32 = True",
        "import torch\nimport torch_npu\nprint(torch.backends.cuda.matmul.allow_tf32)",
        "import torch\nimport torch_npu\nif is_npu:\n    torch.npu.matmul.allow_hf32 = True\n"
        "else:\n    torch.backends.cuda.matmul.allow_tf32 = True",
    )

    def start_file(self) -> None:
        self._switches: Dict[int, bool] = {}  # per function: does it probe for an NPU?

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check(node.target)

    def _check(self, target: ast.expr) -> None:
        flag = self.ctx.qualname(target)
        if flag not in HF32_TWINS or in_backend_switch(self.ctx, self._switches):
            return
        twin, default = HF32_TWINS[flag]
        torch_name = self.ctx.alias_for("torch")
        fix = None
        if torch_name is not None and not self.ctx.is_local(torch_name):
            edit = Edit("replace", self.ctx.span(target), f"{torch_name}.{twin}")
            fix = npu_fix(self.ctx, f"Set `torch.{twin}` instead", edit, changes_results=True)
        self.report(target, flag=flag, twin=twin, default=default, fix=fix)
