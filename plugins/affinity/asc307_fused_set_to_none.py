"""ASC307 fused-optimizer-set-to-none (severity error)."""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule, Severity
from ascend_lint.astutil import argument, constant, receiver_name

from .._safety import Ancestry, failure_caught
from .asc301_fused_optimizer import imported_fused, is_fused_optimizer, is_plain_optimizer
from .asc303_amp_combine_grad import flag_state, is_amp_initialize

FUSED, PLAIN, UNKNOWN = "fused", "plain", "unknown"
RAISES = "on an NPU fused optimizer raises ValueError (\"set_to_none is not supported in fused optimizers\")"


def optimizer_like(name: str) -> bool:
    name = name.lower()
    return "optim" in name or name == "opt" or name.startswith("opt_") or name.endswith("_opt")


class FusedOptimizerSetToNone(Rule):
    code = "ASC307"
    name = "fused-optimizer-set-to-none"
    message = "`{receiver}.zero_grad(set_to_none=True)` {problem}: use `set_to_none=False`"
    severity = Severity.ERROR
    fix_applicability = Applicability.SAFE
    triggers = ("set_to_none", "zero_grad", "NpuFused", "initialize", "optim", "SGD", "Adam", "Adagrad", "RMSprop",
                "Adadelta", "LBFGS", "Rprop")
    docs = Docs(
        summary="`zero_grad(set_to_none=True)` on an NPU fused optimizer, which raises.",
        what="Flags `optimizer.zero_grad(set_to_none=True)` where the optimizer is an NPU fused one "
             "(`torch_npu.optim.NpuFused*`, `apex.optimizers.NpuFused*`), and `model.zero_grad(set_to_none=True)` "
             "in a file that uses a fused optimizer with apex `combine_grad=True`.",
        why="The fused optimizers keep every gradient as a view into one combined buffer. "
            "`NpuFusedOptimizerBase.zero_grad` raises `ValueError(\"set_to_none is not supported in fused "
            "optimizers\")` for `set_to_none=True`, so the script crashes at its first step; setting a "
            "model's gradients to None under apex `combine_grad` breaks the storage sharing the combined "
            "buffer relies on (Ascend apex even patches `Module.zero_grad` to force `set_to_none=False`).",
        known_problems="The optimizer is followed through local assignments, `self.<attr>` set in the class and "
                       "`model, optimizer = amp.initialize(model, optimizer, ...)`. An optimizer that arrives as a "
                       "parameter is treated as fused when the file constructs fused optimizers and no "
                       "`torch.optim` one.",
        example="""
            optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
            optimizer.zero_grad(set_to_none=True)
        """,
        use_instead="""
            optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
            optimizer.zero_grad(set_to_none=False)
        """,
        fix_safety="Safe where the receiver is built in this file as a fused optimizer: `set_to_none=True` "
                   "raises `ValueError` there, so the original stopped at that line, and `set_to_none=False` is "
                   "the only value the fused optimizers accept. Unsafe where an `except` around the call in the "
                   "same function catches that error (the original went on without zeroing). Unsafe where "
                   "the optimizer is inferred (a "
                   "parameter in a file whose only optimizers are fused, or the model under apex "
                   "`combine_grad`): if it is a plain `torch.optim` optimizer after all, zeroed gradients "
                   "instead of `None` change the update (momentum and weight decay then also touch parameters "
                   "that got no gradient).",
        source="torch_npu/optim/npu_fused_optim_base.py (zero_grad); Ascend apex README.zh.md (zero_grad patch "
               "with combine_grad).",
    )
    cases = (
        Case("""
            import torch_npu
            opt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
            opt.zero_grad(set_to_none=True)
            """, line=3, message_contains="`opt.zero_grad(set_to_none=True)` on an NPU fused optimizer",
             fixed="""
            import torch_npu
            opt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)
            opt.zero_grad(set_to_none=False)
            """),
    )
    flagged = (
        "from torch_npu.optim import NpuFusedAdamW\nclass Trainer:\n    def __init__(self, model):\n"
        "        self.optimizer = NpuFusedAdamW(model.parameters())\n    def step(self, loss):\n"
        "        self.optimizer.zero_grad(True)\n        loss.backward()",
        # through apex amp.initialize
        "from apex import amp\nfrom apex.optimizers import NpuFusedSGD\noptimizer = NpuFusedSGD(ps, lr=0.1)\n"
        "model, optimizer = amp.initialize(model, optimizer, opt_level='O2', combine_grad=True)\n"
        "optimizer.zero_grad(set_to_none=True)",
        # an optimizer parameter in a file whose only optimizer is fused
        "import torch_npu\ndef train(model, optimizer):\n    optimizer.zero_grad(set_to_none=True)\n"
        "def main():\n    train(model, torch_npu.optim.NpuFusedAdam(model.parameters()))",
        # the model, with a fused optimizer and apex combine_grad
        "from apex import amp\nimport torch_npu\nopt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\n"
        "model, opt = amp.initialize(model, opt, combine_grad=True)\nmodel.zero_grad(set_to_none=True)",
    )
    clean = (
        "import torch_npu\nopt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)\n"
        "opt.zero_grad(set_to_none=False)",
        "import torch_npu\nopt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)\nopt.zero_grad()",
        # a torch.optim optimizer accepts set_to_none=True
        "import torch, torch_npu\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nopt.zero_grad(set_to_none=True)",
        "import torch_npu\ndef train(model, optimizer):\n    optimizer.zero_grad(set_to_none=True)",
        # fused and plain optimizers in one file: an unknown optimizer is not assumed fused
        "import torch, torch_npu\ndef train(optimizer):\n    optimizer.zero_grad(set_to_none=True)\n"
        "a = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\nb = torch.optim.AdamW(qs)",
        # the model without apex combine_grad
        "import torch_npu\nopt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\nmodel.zero_grad(set_to_none=True)",
        # the choice is made per optimizer already (a fused branch and a plain one)
        "import torch, torch_npu\nfrom torch_npu.optim import NpuFusedAdamW\n"
        "cls = NpuFusedAdamW if args.fused else torch.optim.AdamW\noptimizer = cls(ps)\nif args.fused:\n"
        "    optimizer.zero_grad()\nelse:\n    optimizer.zero_grad(set_to_none=True)",
        "import torch_npu\nfrom torch_npu.optim import NpuFusedAdamW\ndef step(optimizer):\n"
        "    if use_fused:\n        optimizer.zero_grad()\n    else:\n        optimizer.zero_grad(set_to_none=True)",
        # a configurable value
        "import torch_npu\nopt = torch_npu.optim.NpuFusedSGD(ps, lr=0.1)\nopt.zero_grad(set_to_none=args.none)",
    )

    def start_file(self) -> None:
        self._pending: List[Tuple[ast.Call, ast.expr, str]] = []  # (call, set_to_none arg, receiver kind)
        self._fused_built = False
        self._plain_built = False
        self._combine_grad = False
        self._ancestry = Ancestry(self.ctx.tree)  # parent links, built only if a fused optimizer's fix is decided

    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "zero_grad":
            value = argument(node, "set_to_none", 0)
            if value is not None and constant(value) is True:
                kind = self._kind(func.value)
                if kind == FUSED or not self._other_branch_keeps_grads():
                    self._pending.append((node, value, kind))
            return
        qual = ctx.call_name(node)
        if is_fused_optimizer(qual):
            self._fused_built = True
        elif is_plain_optimizer(qual):
            self._plain_built = True
        elif is_amp_initialize(ctx, node) and flag_state(node, "combine_grad") == "true":
            self._combine_grad = True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self._plain_built and is_plain_optimizer(self.ctx.qualname(node)):
            self._plain_built = True  # `optimizer_cls = torch.optim.AdamW`: a plain optimizer may be in use

    def _other_branch_keeps_grads(self) -> bool:
        """`if fused: opt.zero_grad() else: opt.zero_grad(set_to_none=True)`: the choice is made already."""
        if not self.ctx.ifs:
            return False
        if_node, in_else = self.ctx.ifs[-1]
        other = if_node.body if in_else else if_node.orelse
        for stmt in other:
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "zero_grad":
                    value = argument(sub, "set_to_none", 0)
                    if value is None or constant(value) is False:
                        return True
        return False

    def _kind(self, receiver: ast.expr) -> str:
        """Is the receiver a fused optimizer, some other (plain) optimizer, or not known here?"""
        node: Optional[ast.expr] = receiver
        for _ in range(6):
            if isinstance(node, ast.Name):
                bound = self.ctx.binding(node.id)
                if bound is None or bound.value is None:
                    return UNKNOWN
                node = bound.value
                if bound.index is not None:
                    node = self._unpack(node, bound.index)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                cls = self.ctx.class_scope
                node = cls.attributes.get(node.attr) if cls else None
            elif isinstance(node, ast.Call):
                qual = self.ctx.call_name(node)
                if is_fused_optimizer(qual):
                    return FUSED
                return PLAIN if is_plain_optimizer(qual) else UNKNOWN
            else:
                return UNKNOWN
        return UNKNOWN

    def _unpack(self, value: ast.expr, index: int) -> Optional[ast.expr]:
        """`model, optimizer = amp.initialize(model, optimizer, ...)`: element 1 is the optimizer passed in."""
        if isinstance(value, ast.Call) and is_amp_initialize(self.ctx, value) and index == 1:
            return argument(value, "optimizers", 1)
        if isinstance(value, (ast.Tuple, ast.List)) and index < len(value.elts):
            return value.elts[index]
        return None

    def end_file(self) -> None:
        self._fused_built = self._fused_built or bool(imported_fused(self.ctx))
        self._plain_built = self._plain_built or any(is_plain_optimizer(q) for q in self.ctx.aliases.values())
        for node, value, kind in self._pending:
            name = receiver_name(node.func.value)
            if kind == FUSED:
                problem = RAISES
            elif kind == UNKNOWN and optimizer_like(name) and self._fused_built and not self._plain_built:
                problem = RAISES + " (the file's only optimizers are fused)"
            elif kind == UNKNOWN and not optimizer_like(name) and self._fused_built and self._combine_grad:
                problem = "with a fused optimizer and apex `combine_grad=True` detaches the gradients from the " \
                          "combined buffer"
            else:
                continue
            if value in node.args:
                edit = Edit("replace", self.ctx.span(value), "False")
            else:
                edit = Edit("set_keyword", self.ctx.span(node), "False", "set_to_none")
            receiver = " ".join(ast.unparse(node.func.value).split())
            raised = kind == FUSED and not failure_caught(self._ancestry.chain(node))  # stopped the original
            applicability = Applicability.SAFE if raised else Applicability.UNSAFE  # see Fix safety
            self.report(node, receiver=receiver, problem=problem,
                        fix=Fix(applicability, "Use `set_to_none=False`", (edit,)))
