"""ASC303 amp-combine-grad, and the apex `amp.initialize` facts ASC305/ASC307 share."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.analysis.semantic import FileContext
from ascend_lint.astutil import argument, constant, keyword

from ..migration._switches import in_backend_switch

AMP_INITIALIZE = ("apex.amp.initialize", "apex.amp.frontend.initialize")
COMBINE_LEVELS = ("O1", "O2")  # Ascend apex rejects combine_grad / combine_ddp at other opt levels
_UNKNOWN = object()


def is_amp_initialize(ctx: FileContext, call: ast.Call) -> bool:
    return ctx.call_name(call) in AMP_INITIALIZE


def flag_state(call: ast.Call, name: str) -> str:
    """How `name=` is passed: 'true', 'false' (an explicit opt-out), 'missing' (absent or None),
    'dynamic' (an expression: the user made it configurable) or 'unknown' (hidden in **kwargs)."""
    kw = keyword(call, name)
    if kw is None:
        return "unknown" if any(k.arg is None for k in call.keywords) else "missing"
    value = constant(kw.value, _UNKNOWN)
    if value is _UNKNOWN:
        return "dynamic"
    if value is None:
        return "missing"
    return "true" if value else "false"


def opt_level(call: ast.Call) -> Optional[str]:
    """The literal opt_level ('O1' when omitted); None when it is an expression."""
    node = argument(call, "opt_level", 3)
    if node is None:
        return "O1"
    value = constant(node)
    return value if isinstance(value, str) else None


def combine_allowed(call: ast.Call) -> bool:
    """Can `combine_grad=True` be added without Ascend apex rejecting the configuration?"""
    level = opt_level(call)
    if level is not None and level not in COMBINE_LEVELS:
        return False
    master = argument(call, "master_weights", 7)
    return not (level == "O2" and master is not None and constant(master, _UNKNOWN) is False)


def trains(call: ast.Call) -> bool:
    """amp.initialize(model, optimizer, ...) with amp enabled (not an inference-only cast)."""
    optimizers = argument(call, "optimizers", 1)
    enabled = argument(call, "enabled", 2)
    return optimizers is not None and constant(optimizers, _UNKNOWN) is not None \
        and constant(enabled, True) is not False and not any(isinstance(a, ast.Starred) for a in call.args)


class AmpCombineGrad(Rule):
    code = "ASC303"
    name = "amp-combine-grad"
    message = "apex `amp.initialize` without `combine_grad=True`: add `combine_grad=True` so Ascend apex " \
              "unscales and overflow-checks one combined gradient buffer instead of every tensor"
    npu_context = True
    fix_applicability = Applicability.UNSAFE
    triggers = ("initialize",)
    docs = Docs(
        summary="Ascend apex `amp.initialize` without `combine_grad=True`.",
        what="Flags Ascend apex `amp.initialize(model, optimizer, ...)` called without `combine_grad=True`.",
        why="Ascend's apex fork adds `combine_grad`: with it, loss-scale unscaling and the overflow check run "
            "on one combined (flattened) gradient tensor instead of launching several small operators per "
            "parameter, and the NPU fused optimizers reuse that buffer. Without it, every step pays those "
            "launches on the host, which is what bounds small-operator training on Ascend (the MobileNetV1 "
            "tuning case starts from `amp.initialize(model, optimizer, opt_level='O2', loss_scale=128.0, "
            "combine_grad=True)`).",
        known_problems="Not flagged when `combine_grad` is an expression (configurable) or an explicit `False` "
                       "(a deliberate opt-out), when `opt_level` is a literal other than 'O1'/'O2' (apex rejects "
                       "`combine_grad` there), with `opt_level='O2'` and `master_weights=False` (apex requires "
                       "master weights then), without an optimizer argument, with `enabled=False`, or when "
                       "`**kwargs` may carry it, nor on the GPU side of a device switch (`if device.type == "
                       "'cuda':`). Fused buffers take extra device memory the size of all "
                       "gradients.",
        example="""
            from apex import amp
            import torch_npu

            model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=128.0)
        """,
        use_instead="""
            model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=128.0, combine_grad=True)
        """,
        fix_safety="Unsafe: the fix adds `combine_grad=True`. The update itself is the same arithmetic, but the "
                   "gradients then live in one combined buffer that shares storage with every `.grad`: code that "
                   "replaces or re-allocates gradients (`p.grad = ...`, custom clipping or all-reduce hooks) "
                   "silently stops reaching the optimizer (Ascend apex warns of accuracy problems), the buffer "
                   "costs device memory the size of all gradients (a model that fitted may not), and with a "
                   "runtime `opt_level` apex raises if it turns out to be O0/O3. The keyword exists only in "
                   "Ascend's apex fork; the fix adds no import (`import torch_npu` would not change which apex is "
                   "installed).",
        source="Ascend apex README.zh.md (amp.initialize, combine_grad) and patch/npu.patch; Ascend PyTorch "
               "tuning case: MobileNetV1 mixed precision.",
    )
    cases = (
        Case("""
            import torch_npu
            from apex import amp
            model, opt = amp.initialize(model, opt, opt_level='O2', loss_scale=128.0)
            """, line=3, message_contains="apex `amp.initialize` without `combine_grad=True`",
             fixed="""
            import torch_npu
            from apex import amp
            model, opt = amp.initialize(model, opt, opt_level='O2', loss_scale=128.0, combine_grad=True)
            """),
    )
    flagged = (
        "import torch_npu\nimport apex\nmodel, opt = apex.amp.initialize(model, opt)",
        "import torch_npu\nfrom apex.amp import initialize\nmodel, opt = initialize(model, opt, opt_level='O1', combine_grad=None)",
        # a runtime opt level: still reported (unsafe fix)
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level=args.opt_level)",
        # NPU context from Ascend apex names alone
        "from apex import amp\nfrom apex.optimizers import NpuFusedSGD\nmodel, opt = amp.initialize(model, opt, "
        "opt_level='O2')",
    )
    clean = (
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O2', combine_grad=True)",
        # configurable / deliberately off
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, combine_grad=args.combine)",
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, combine_grad=False)",
        # opt levels where apex rejects combine_grad; O2 without master weights
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O3')",
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O2', "
        "master_weights=False)",
        # no optimizer (inference), amp disabled, hidden kwargs
        "import torch_npu\nfrom apex import amp\nmodel = amp.initialize(model, opt_level='O1')",
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, enabled=False)",
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, **amp_kwargs)",
        # the CUDA side of a device switch
        "import torch_npu\nfrom apex import amp\nif device.type == 'cuda':\n"
        "    model, opt = amp.initialize(model, opt, opt_level='O1')\nelif device.type == 'npu':\n    pass",
        # not apex, and not NPU code
        "import torch_npu\nclass amp:\n    pass\nmodel, opt = amp.initialize(model, opt)",
        "from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O2')",
    )

    def start_file(self) -> None:
        self._switches: dict = {}

    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if not is_amp_initialize(ctx, node) or not trains(node) or not combine_allowed(node):
            return
        if flag_state(node, "combine_grad") != "missing" or in_backend_switch(ctx, self._switches):
            return  # (on the GPU side of a device switch the CUDA apex has no combine_grad)
        fix = Fix(Applicability.UNSAFE, "Add `combine_grad=True`",
                  (Edit("set_keyword", ctx.span(node), "True", "combine_grad"),))
        self.report(node, fix=fix)
