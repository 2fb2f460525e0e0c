"""ASC306 fused-clip-grad-norm."""
from __future__ import annotations

import ast
from typing import List, Optional, Set

from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.astutil import argument, callee_name

from .asc301_fused_optimizer import FUSED_CLIP_METHODS, imported_fused, is_fused_optimizer

CLIP_FUNCTIONS = ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm",
                  "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm")


def clips_everything(node: Optional[ast.expr]) -> bool:
    """`model.parameters()`, `self.model.module.parameters()`, `amp.master_params(opt)` or a plain name:
    the whole parameter set, which the fused clip covers. A submodule (`model.backbone.parameters()`) is a
    partial clip with its own max_norm, which the fused clip cannot express."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.IfExp):  # `amp.master_params(opt) if use_apex else model.parameters()`
        return clips_everything(node.body) and clips_everything(node.orelse)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = callee_name(node)
    if name == "master_params":
        return True
    if name != "parameters" or not isinstance(func, ast.Attribute):
        return False
    owner = func.value
    if isinstance(owner, ast.Attribute) and owner.attr == "module":
        owner = owner.value
    return isinstance(owner, ast.Name) or (isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name)
                                           and owner.value.id == "self")


class FusedClipGradNorm(Rule):
    code = "ASC306"
    name = "fused-clip-grad-norm"
    message = "`torch.nn.utils.clip_grad_norm_` with an NPU fused optimizer: call `{owner}.{method}(max_norm)` " \
              "instead, which clips the combined gradient buffer in a few launches"
    npu_context = True
    triggers = ("clip_grad_norm", "clip_optimizer_grad_norm", "NpuFused")
    docs = Docs(
        summary="`torch.nn.utils.clip_grad_norm_` next to an NPU fused optimizer, whose own clipping is faster.",
        what="Flags `torch.nn.utils.clip_grad_norm_(...)` in a file whose optimizer is an NPU fused one "
             "(`torch_npu.optim.NpuFused*` or Ascend apex `apex.optimizers.NpuFused*`).",
        why="`clip_grad_norm_` computes one norm per gradient tensor and scales each tensor: two small "
            "operators per parameter, launched one by one from the host. The fused optimizers keep all "
            "gradients in combined buffers and provide `clip_grad_norm_fused_(max_norm, norm_type=2)` "
            "(torch_npu) / `clip_optimizer_grad_norm_fused(max_norm, norm_type=2)` (Ascend apex), which do the "
            "same clipping over the combined buffer. Ascend's profiler advisor recommends "
            "`optimizer.clip_grad_norm_fused_` when it sees the hand clip in a timeline.",
        known_problems="File-level: an optimizer built in another module is not seen. Not flagged in a file that "
                       "already calls the fused clip somewhere (the plain call is then the fallback for a "
                       "non-fused configuration), nor for a partial clip of one submodule "
                       "(`model.backbone.parameters()`), which the fused clip over all parameters cannot express.",
        example="""
            optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)
            ...
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            optimizer.step()
        """,
        use_instead="""
            optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)
            ...
            optimizer.clip_grad_norm_fused_(5.0)
            optimizer.step()
        """,
        fix_safety="No fix: the call must name the fused optimizer object, which the clip call does not mention.",
        source="torch_npu/optim/npu_fused_optim_base.py (clip_grad_norm_fused_); Ascend apex README.zh.md "
               "(clip_optimizer_grad_norm_fused); msprof-analyze advisor timeline_fusion_ops.yaml.",
    )
    cases = (
        Case("""
            import torch, torch_npu
            opt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            """, line=3, message_contains="`torch.nn.utils.clip_grad_norm_` with an NPU fused optimizer"),
    )
    flagged = (
        "import torch_npu\nfrom torch.nn.utils import clip_grad_norm_\nfrom apex.optimizers import NpuFusedAdam\n"
        "def main():\n    optimizer = NpuFusedAdam(model.parameters(), lr=1e-3)\n    train(optimizer)\n"
        "def train(optimizer):\n    clip_grad_norm_(model.parameters(), 1.0)",
        # the usual `master_params(...) if use_apex else model.parameters()` argument
        "import torch, torch_npu\nfrom apex import amp\nopt = torch_npu.optim.NpuFusedAdamW(model.parameters())\n"
        "torch.nn.utils.clip_grad_norm_(amp.master_params(opt) if use_apex else model.parameters(), 1.0)",
        "import torch\nfrom torch_npu.optim import NpuFusedAdamW as FA\nopt = FA(ps)\n"
        "torch.nn.utils.clip_grad_norm(ps, 1.0)",
    )
    clean = (
        # not a fused optimizer
        "import torch, torch_npu\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)",
        # already the fused clip, with the plain call as the fallback
        "import torch, torch_npu\nif args.fused:\n    opt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\nelse:\n"
        "    opt = torch.optim.SGD(ps, lr=0.1)\nif args.fused:\n    opt.clip_grad_norm_fused_(5.0)\nelse:\n"
        "    torch.nn.utils.clip_grad_norm_(ps, 5.0)",
        "import torch_npu\nfrom apex.optimizers import NpuFusedSGD\nopt = NpuFusedSGD(ps, lr=0.1)\n"
        "opt.clip_optimizer_grad_norm_fused(5.0)",
        # a local function with the same name
        "import torch_npu\ndef clip_grad_norm_(ps, n):\n    pass\nopt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\n"
        "clip_grad_norm_(ps, 1.0)",
        # a partial clip of one submodule with its own max_norm: the fused clip covers all parameters
        "import torch, torch_npu\nopt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)\n"
        "torch.nn.utils.clip_grad_norm_(model.module.rpn.parameters(), 10.0)",
        # the value-clipping variant
        "import torch, torch_npu\nopt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\n"
        "torch.nn.utils.clip_grad_value_(ps, 1.0)",
    )

    def start_file(self) -> None:
        self._clips: List[ast.Call] = []
        self._fused: Optional[str] = None  # the first fused optimizer's qualified name
        self._owners: Set[str] = set()
        self._fused_clip = False

    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        name = callee_name(node)
        if name in FUSED_CLIP_METHODS:
            self._fused_clip = True
            return
        qual = ctx.call_name(node)
        if qual in CLIP_FUNCTIONS:
            if clips_everything(argument(node, "parameters", 0)):
                self._clips.append(node)
        elif is_fused_optimizer(qual):
            self._fused = self._fused or qual
            parent = ctx.parent
            owner = "<fused optimizer>"
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is node \
                    and isinstance(parent.targets[0], (ast.Name, ast.Attribute)):
                owner = ast.unparse(parent.targets[0])
            self._owners.add(owner)

    def end_file(self) -> None:
        if self._fused is None and imported_fused(self.ctx):
            self._fused = imported_fused(self.ctx)[0]
        if self._fused is None or self._fused_clip:
            return
        method = "clip_optimizer_grad_norm_fused" if self._fused.startswith("apex.") else "clip_grad_norm_fused_"
        owner = next(iter(self._owners)) if len(self._owners) == 1 else "<fused optimizer>"
        for node in self._clips:
            self.report(node, owner=owner, method=method)
