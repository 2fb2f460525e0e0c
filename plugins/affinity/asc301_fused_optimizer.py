"""ASC301 fused-optimizer-available, and the optimizer facts ASC30x share (the fused twin table)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.astutil import callee_name, constant, has_star_args


@dataclass(frozen=True)
class FusedTwin:
    """A torch optimizer's NPU fused counterpart and the constructor it has (torch_npu master)."""

    fused: str  # class name in torch_npu.optim (and apex.optimizers)
    params: Tuple[str, ...]  # the fused constructor's parameters, in positional order
    required: Tuple[str, ...] = ()  # parameters the fused class requires (no default)


# torch.optim class -> fused twin. Signatures from torch_npu/optim/npu_fused_*.py (Ascend/pytorch);
# torch's positional order is a prefix-compatible superset.
FUSED_TWINS: Dict[str, FusedTwin] = {
    "SGD": FusedTwin("NpuFusedSGD", ("params", "lr", "momentum", "dampening", "weight_decay", "nesterov"), ("lr",)),
    "Adam": FusedTwin("NpuFusedAdam", ("params", "lr", "betas", "eps", "weight_decay", "amsgrad")),
    "AdamW": FusedTwin("NpuFusedAdamW", ("params", "lr", "betas", "eps", "weight_decay", "amsgrad")),
    "Adadelta": FusedTwin("NpuFusedAdadelta", ("params", "lr", "rho", "eps", "weight_decay")),
    "RMSprop": FusedTwin("NpuFusedRMSprop",
                         ("params", "lr", "alpha", "eps", "weight_decay", "momentum", "centered")),
}
# torch.optim.<submodule>.<Class> spellings (`from torch.optim.sgd import SGD`)
_SUBMODULES = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw", "Adadelta": "adadelta", "RMSprop": "rmsprop"}
FUSED_MODULES = ("torch_npu.optim.", "apex.optimizers.")
FUSED_CLIP_METHODS = ("clip_grad_norm_fused_", "clip_optimizer_grad_norm_fused")
# Keywords that choose torch's own multi-tensor / fused implementation: a deliberate choice when not False.
IMPLEMENTATION_KEYWORDS = ("fused", "foreach")
# bf16 parameters: the NPU fused optimizers accept fp32/fp16 only (TypeError otherwise).
BF16_QUALNAMES = frozenset({"torch.bfloat16"})
BF16_STRINGS = frozenset({"bfloat16", "bf16", "torch.bfloat16"})
PARAM_DTYPE_KEYWORDS = ("torch_dtype", "params_dtype")


def torch_optimizer(qual: Optional[str]) -> Optional[str]:
    """'torch.optim.SGD' / 'torch.optim.sgd.SGD' -> 'SGD' when it has a fused twin."""
    if not qual or not qual.startswith("torch.optim."):
        return None
    parts = qual.split(".")
    name = parts[-1]
    if name not in FUSED_TWINS:
        return None
    if len(parts) == 3 or (len(parts) == 4 and parts[2] == _SUBMODULES[name]):
        return name
    return None


def is_fused_optimizer(qual: Optional[str]) -> bool:
    """torch_npu.optim.NpuFused* / apex.optimizers.NpuFused* (any submodule spelling)."""
    return bool(qual) and qual.startswith(FUSED_MODULES) and qual.rsplit(".", 1)[-1].startswith("NpuFused")


def _group_params(group: ast.Dict) -> Optional[ast.expr]:
    for key, value in zip(group.keys, group.values):
        if isinstance(key, ast.Constant) and key.value == "params":
            return value
    return None


def imported_fused(ctx) -> List[str]:
    """Fused optimizer classes the file imports by name (`from torch_npu.optim import NpuFusedSGD as F`)."""
    return sorted(q for q in ctx.aliases.values() if is_fused_optimizer(q))


def is_plain_optimizer(qual: Optional[str]) -> bool:
    """A torch.optim optimizer class (not a scheduler, not the fused ones)."""
    if not qual or not qual.startswith("torch.optim."):
        return False
    parts = qual.split(".")
    return "lr_scheduler" not in parts and "swa_utils" not in parts and parts[-1][:1].isupper() \
        and parts[-1] != "Optimizer"


class FusedOptimizerAvailable(Rule):
    code = "ASC301"
    name = "fused-optimizer-available"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "`{torch_name}` has an NPU fused twin: use `{fused_name}`{note}"
    npu_context = True
    fix_applicability = Applicability.UNSAFE
    project_facts = frozenset({"precision"})  # (ctx.caller_precision)
    triggers = ("SGD", "Adam", "Adadelta", "RMSprop", "optim", "Fused", "parameters", "bfloat16", "bf16", "dtype")
    docs = Docs(
        summary="A `torch.optim` optimizer that has a faster fused twin in `torch_npu.optim`.",
        what="Flags construction of `torch.optim.SGD`, `Adam`, `AdamW`, `Adadelta` or `RMSprop` in NPU "
             "code: each has a fused twin in `torch_npu.optim` (`NpuFusedSGD`, `NpuFusedAdam`, "
             "`NpuFusedAdamW`, `NpuFusedAdadelta`, `NpuFusedRMSprop`; Ascend apex ships the same classes "
             "as `apex.optimizers.NpuFused*`).",
        why="With mixed precision every parameter update is many tiny operators (add, mul, sqrt, unscale) "
            "per tensor, and on Ascend the host dispatch of those launches is the bottleneck. The fused "
            "optimizer flattens parameters and gradients into combined buffers and updates them with a few "
            "launches per group: in the MobileNetV1 tuning case replacing `torch.optim.SGD` with "
            "`NpuFusedSGD` raised throughput (images/s). Ascend's profiler advisor makes the same "
            "recommendation when it sees `SGD.step` / `AdamW.step` in a timeline.",
        known_problems="Not flagged where the file also constructs a fused implementation of the same algorithm "
                       "(an explicit `if fused: NpuFusedAdam(...) else: torch.optim.Adam(...)` choice, or a "
                       "project's own `...FusedAdamW`), where the optimizer name is bound by an `if`/`try` chain "
                       "whose other branch imports a fused class (`try: from apex.optimizers import FusedAdam as "
                       "AdamW` / `except ImportError: from torch.optim import AdamW`) or another optimizer (`if "
                       "mup: from mup.optim import MuAdam as Adam` / `else: from torch.optim import Adam`), "
                       "where the call already "
                       "chooses torch's own implementation (`fused=` or `foreach=` with any value but a literal "
                       "`False`: `fused=args.fused` is a configurable choice, and on Atlas A2/A3 recent torch_npu "
                       "runs the foreach implementation on the NPU), nor for a throwaway optimizer over fresh "
                       "tensors that only drives an LR scheduler. The fused "
                       "classes accept fp32/fp16 parameters only (they raise `TypeError` on bf16), so nothing is "
                       "reported in a file that may put the parameters in bf16 outside `forward` "
                       "(`model.bfloat16()`, `.to(torch.bfloat16)`, `torch_dtype=`/`params_dtype=`/`dtype=` "
                       "bf16 on a model constructor, `torch.set_default_dtype(torch.bfloat16)`, also through a "
                       "variable that may hold bf16); `autocast(dtype=torch.bfloat16)` and FSDP "
                       "`MixedPrecision(param_dtype=...)` keep fp32 parameters and do not count. Nor where the "
                       "optimizer is built in a function or class whose caller (in any module) passes it a model, "
                       "or its parameters, cast to bf16 (`build_optimizer(model.bfloat16())`, "
                       "`Trainer(model)` after `model = model.to(torch.bfloat16)`). The advice keeps to one family: in a file that "
                       "imports apex (or an apex fused class) it names `apex.optimizers.NpuFused*` (which needs "
                       "`amp.initialize` with O1/O2), else `torch_npu.optim.NpuFused*`: mixing the two in one "
                       "port was reported to change accuracy. `zero_grad(set_to_none=True)` raises on the fused "
                       "classes (see ASC307).",
        example="""
            import torch
            import torch_npu

            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=4e-5)
        """,
        use_instead="""
            import torch
            import torch_npu

            optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=4e-5)
        """,
        fix_safety="Unsafe: the fix replaces the class with `torch_npu.optim.NpuFused<Name>` (spelled with the "
                   "file's own torch_npu import, adding `import torch_npu` when missing); in a file of the apex "
                   "family, with `apex.optimizers.NpuFused<Name>` only through an `apex.optimizers` import the "
                   "file already has (else no fix). It is unsafe because "
                   "mixing the apex and torch_npu fused optimizers in one port was reported to change accuracy, "
                   "the fused classes reject bf16 parameters and `set_to_none=True`, and parameter groups are "
                   "fused lazily. No fix is offered when the call passes an option the fused class lacks "
                   "(`foreach=`, `fused=`, `maximize=`, `capturable=`, `differentiable=`), passes `*args`/"
                   "`**kwargs`, or omits an argument the fused class requires (`lr` for `NpuFusedSGD`), nor in "
                   "a file that imports torch_npu only behind a guard (`try:`/`if`: it also runs without "
                   "torch_npu). An import the replaced class was the last use of (`from torch.optim import SGD`, "
                   "`import torch.optim as optim`) is removed.",
        source="Ascend PyTorch tuning case: MobileNetV1 with fused optimizers; torch_npu/optim/npu_fused_*.py "
               "(constructor signatures); Ascend msprof-analyze advisor rule timeline_fusion_ops.yaml.",
    )
    cases = (
        Case("""
            import torch, torch_npu
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            """, line=2, message_contains="`torch.optim.SGD` has an NPU fused twin",
             fixed="""
            import torch_npu
            opt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)
            """),
    )
    flagged = (
        "import torch_npu\nfrom torch import optim as o\nopt = o.SGD(params, lr=0.1)",
        "import torch_npu\nfrom torch.optim import AdamW\nopt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)",
        "import torch, torch_npu\nopt = torch.optim.Adam(model.parameters(), 1e-3, (0.9, 0.98), 1e-9)",
        "import torch, torch_npu\nopt = torch.optim.Adadelta(model.parameters())",
        "import torch, torch_npu\nopt = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9, centered=True)",
        "import torch_npu\nfrom torch.optim.sgd import SGD\nopt = SGD(model.parameters(), lr=0.1)",
        # an option the fused class lacks: still reported, no fix
        "import torch, torch_npu\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=False)",
        "import torch, torch_npu\nopt = torch.optim.SGD(model.parameters(), lr=0.1, fused=False, maximize=True)",
        # NPU context from an npu device string
        "import torch\nmodel.to('npu:0')\nopt = torch.optim.SGD(model.parameters(), lr=0.1)",
        # the fused twin of another class does not excuse this one
        "import torch, torch_npu\nif cfg.fused:\n    opt = torch_npu.optim.NpuFusedAdam(ps)\nelse:\n"
        "    opt = torch.optim.SGD(ps, lr=0.1)",
        # an explicit literal False leaves the implementation open; autocast bf16 keeps fp32 parameters
        "import torch, torch_npu\nopt = torch.optim.AdamW(ps, lr=1e-3, foreach=False)",
        "import torch, torch_npu\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
        "with torch.autocast('npu', dtype=torch.bfloat16):\n    loss = model(x)",
        "import torch, torch_npu\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.bfloat16()\n"
        "opt = torch.optim.SGD(M().parameters(), lr=0.1)",
        # an apex file: the apex family is named
        "import torch, torch_npu\nfrom apex import amp\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = amp.initialize(model, opt, opt_level='O2')",
    )
    clean = (
        # the branches of an if bind the name to different classes: torch's is one deliberate choice
        "import torch, torch_npu\ndef make(model, mup):\n    if mup:\n        from mup.optim import MuAdam as Adam\n"
        "    else:\n        from torch.optim import Adam\n    return Adam(model.parameters(), lr=1e-3)",
        # no NPU context: a GPU script
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)",
        # a local class that happens to be called SGD
        "import torch_npu\nclass SGD:\n    def __init__(self, params, lr):\n        pass\nopt = SGD(params, lr=0.1)",
        # already fused
        "import torch_npu\nopt = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=0.1)",
        "import torch_npu\nfrom apex.optimizers import NpuFusedAdam\nopt = NpuFusedAdam(model.parameters(), lr=1e-3)",
        # no fused twin
        "import torch, torch_npu\nopt = torch.optim.Adagrad(model.parameters(), lr=0.01)",
        "import torch, torch_npu\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)",
        # referenced, not constructed; subclassed
        "import torch, torch_npu\nOPTIMIZERS = {'sgd': torch.optim.SGD, 'adam': torch.optim.Adam}",
        "import torch, torch_npu\nclass MySGD(torch.optim.SGD):\n    pass",
        # a project's own fused AdamW offered next to the plain one
        "import torch, torch_npu\nfrom .fused import FunctionalFusedAdamW\ndef build(ps, fused):\n"
        "    if fused:\n        return FunctionalFusedAdamW(ps)\n    return torch.optim.AdamW(ps, foreach=False)",
        # a dummy optimizer that only drives an LR scheduler
        "import torch, torch_npu\nopt = torch.optim.Adam([{'params': [torch.nn.Parameter(torch.randn(1))], 'lr': 0.1}])\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, 10)",
        "import torch, torch_npu\nopt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)",
        # a unit test
        "import torch, torch_npu\ndef test_compress():\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)",
        # the explicit fallback of a fused path in the same file
        "import torch, torch_npu\nif args.npu_fused:\n    opt = torch_npu.optim.NpuFusedAdam(ps, lr=1e-3)\nelse:\n"
        "    opt = torch.optim.Adam(ps, lr=1e-3)",
        # a try-import chain that prefers a fused class
        "import torch_npu\ntry:\n    from apex.optimizers import FusedAdam as AdamW\nexcept ImportError:\n"
        "    from torch.optim import AdamW\nopt = AdamW(model.parameters(), lr=1e-3)",
        "import torch, torch_npu\ndef build(ps):\n    if npu_fused:\n        Opt = torch_npu.optim.NpuFusedAdamW\n"
        "    else:\n        from torch.optim import AdamW as Opt\n    return Opt(ps, lr=1e-3)",
        # torch's own fused / multi-tensor implementation chosen, or made configurable
        "import torch, torch_npu\nopt = torch.optim.AdamW(ps, lr=1e-3, fused=fused)",
        "import torch, torch_npu\nopt = torch.optim.AdamW(ps, lr=1e-3, foreach=True)",
        # bf16 parameters: the fused classes reject them
        "import torch, torch_npu\nmodel = Net().npu().bfloat16()\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)",
        "import torch, torch_npu\ndtype = torch.bfloat16 if args.bf16 else torch.float16\nmodel.to(dtype)\n"
        "opt = torch.optim.AdamW(model.parameters(), lr=1e-3)",
        "import torch, torch_npu\nmodel = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)\n"
        "opt = torch.optim.AdamW(model.parameters(), lr=1e-5)",
        "import torch, torch_npu\ndef main(args):\n    if args.bf16:\n        model = model.to(torch.bfloat16)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)",
    )

    def start_file(self) -> None:
        self._candidates: List[Tuple[ast.Call, str]] = []
        self._fused_seen: set = set()
        self._fused_names: set = set()  # names an if/try chain binds to a fused or another class
        self._bf16_params = False

    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node)
        last = callee_name(node)
        if "Fused" in last:  # NpuFusedAdam, apex FusedAdam, a project's FunctionalFusedAdamW, ...
            self._fused_seen.add(last.rsplit("Fused", 1)[-1])
            return
        if not self._bf16_params and self._casts_params_to_bf16(node, qual):
            self._bf16_params = True
        torch_name = torch_optimizer(qual)
        if torch_name is not None and not self._dummy(node) and not self._implementation_chosen(node):
            caller = self.ctx.caller_precision()
            if caller is not None and caller.dtype == "bf16":
                return  # a caller passes a model (or its parameters) cast to bf16, which the fused classes reject
            self._candidates.append((node, torch_name))

    def visit_If(self, node: ast.If) -> None:
        self._alternatives([node.body, node.orelse])

    def visit_Try(self, node: ast.Try) -> None:
        self._alternatives([node.body, node.orelse] + [h.body for h in node.handlers])

    def _alternatives(self, branches: List[List[ast.stmt]]) -> None:
        """Names an if/try chain binds to a choice of optimizer class: one branch binds a fused class
        (`try: from apex.optimizers import FusedAdam as AdamW` / `except ImportError: from torch.optim import
        AdamW`), or branches bind the name to different classes (`if mup: from mup.optim import MuAdam as
        Adam` / `else: from torch.optim import Adam`). The torch class is then one deliberate alternative."""
        sources: Dict[str, set] = {}
        for branch in branches:
            for stmt in branch:
                if isinstance(stmt, ast.ImportFrom):
                    for a in stmt.names:
                        sources.setdefault(a.asname or a.name, set()).add(f"{stmt.module or ''}.{a.name}")
                elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                      and isinstance(stmt.value, (ast.Name, ast.Attribute))):
                    sources.setdefault(stmt.targets[0].id, set()).add(ast.unparse(stmt.value))
        for name, bound in sources.items():
            if any("Fused" in b.rsplit(".", 1)[-1] for b in bound) or len(bound) > 1:
                self._fused_names.add(name)

    @staticmethod
    def _implementation_chosen(node: ast.Call) -> bool:
        """`AdamW(..., fused=fused)` / `foreach=True`: the user picked torch's own fused or multi-tensor
        implementation (or made it configurable); only a literal False leaves the choice open."""
        return any(kw.arg in IMPLEMENTATION_KEYWORDS and constant(kw.value, ast) not in (False, None)
                   for kw in node.keywords)

    def _casts_params_to_bf16(self, call: ast.Call, qual: Optional[str]) -> bool:
        """`model.bfloat16()`, `model.to(torch.bfloat16)`, `from_pretrained(..., torch_dtype=torch.bfloat16)`,
        `nn.Linear(..., dtype=torch.bfloat16)`, `torch.set_default_dtype(torch.bfloat16)`, also through a
        variable that may hold bf16 (`dtype = torch.bfloat16 if args.bf16 else torch.float16`). Casts of
        activations in `forward` and autocast / tensor-factory dtypes do not change the parameters."""
        ctx = self.ctx
        if ctx.in_hot_method():
            return False
        func = call.func
        if isinstance(func, ast.Attribute) and qual is None:
            if func.attr == "bfloat16" and not call.args:
                return True
            if func.attr in ("to", "type"):
                return any(self._may_be_bf16(v) for v in list(call.args) + [k.value for k in call.keywords])
        if qual == "torch.set_default_dtype":
            return bool(call.args) and self._may_be_bf16(call.args[0])
        factory = qual is not None and (qual.count(".") == 1 and qual.startswith("torch.") or "autocast" in qual
                                        or qual.endswith("MixedPrecision"))
        return any((kw.arg in PARAM_DTYPE_KEYWORDS or (kw.arg == "dtype" and not factory))
                   and self._may_be_bf16(kw.value) for kw in call.keywords)

    def _may_be_bf16(self, node: Optional[ast.expr], depth: int = 0) -> bool:
        if node is None or depth > 4:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and node.value in BF16_STRINGS
        if isinstance(node, ast.IfExp):
            return self._may_be_bf16(node.body, depth + 1) or self._may_be_bf16(node.orelse, depth + 1)
        if isinstance(node, ast.Name):
            bound = self.ctx.binding(node.id)
            value = bound.value if bound is not None and bound.index is None else self.ctx.constants.get(node.id)
            return value is not node and self._may_be_bf16(value, depth + 1)
        return self.ctx.qualname(node) in BF16_QUALNAMES

    def _dummy(self, node: ast.Call) -> bool:
        """A throwaway optimizer over fresh tensors (`Adam([nn.Parameter(torch.randn(1))])`), built only to
        drive an LR scheduler or a test: it never updates a model."""
        arg = self.ctx.resolve(node.args[0]) if node.args else None
        if not isinstance(arg, ast.List) or not arg.elts:
            return False
        groups = [self.ctx.resolve(_group_params(e)) if isinstance(e, ast.Dict) else None for e in arg.elts]
        tensors = [t for g in groups if isinstance(g, ast.List) for t in g.elts] if all(
            isinstance(g, ast.List) for g in groups) else arg.elts
        return bool(tensors) and all(isinstance(t, ast.Call) and (self.ctx.call_name(t) or "").startswith("torch.")
                                     for t in tensors)

    def end_file(self) -> None:
        if self._bf16_params:
            return  # the fused classes raise TypeError on bf16 parameters
        self._fused_seen.update(q.rsplit("Fused", 1)[-1] for q in imported_fused(self.ctx))
        family = self._family()
        for node, torch_name in self._candidates:
            twin = FUSED_TWINS[torch_name]
            if torch_name in self._fused_seen or (isinstance(node.func, ast.Name) and node.func.id in self._fused_names):
                continue  # the file offers the fused class itself; this is the deliberate alternative
            unsupported = [f"`{kw.arg}=`" for kw in node.keywords if kw.arg is not None and kw.arg not in twin.params]
            note = f" (it does not accept {', '.join(unsupported)}: drop it first)" if unsupported else ""
            if family == "apex":
                note += " (apex's, as this file uses apex: keep one fused family)"
            fix = None if unsupported or not self._rewritable(node, twin) else self._fix(node, twin, family)
            self.report(node, torch_name=f"torch.optim.{torch_name}", fused_name=f"{family}.optimizers.{twin.fused}"
                        if family == "apex" else f"torch_npu.optim.{twin.fused}", note=note, fix=fix)

    def _family(self) -> str:
        """'apex' or 'torch_npu': the fused family the file already uses (mixing the two in one port was
        reported to change accuracy). An imported fused class decides; else any apex import; else torch_npu."""
        imported = imported_fused(self.ctx)
        if any(q.startswith("torch_npu.") for q in imported):
            return "torch_npu"
        return "apex" if imported or self.ctx.imports("apex") else "torch_npu"

    def _rewritable(self, node: ast.Call, twin: FusedTwin) -> bool:
        """Can the callee be swapped without touching the arguments?"""
        if has_star_args(node) or len(node.args) > len(twin.params):
            return False
        given = set(twin.params[: len(node.args)]) | {kw.arg for kw in node.keywords}
        missing = [name for name in twin.required if name not in given]
        if not missing:
            return True
        # a required option may come from every param group: SGD([{'params': a, 'lr': 0.1}, ...])
        groups = self.ctx.resolve(node.args[0]) if node.args else None
        if not isinstance(groups, ast.List) or not groups.elts:
            return False
        for group in groups.elts:
            if not isinstance(group, ast.Dict):
                return False
            keys = {k.value for k in group.keys if isinstance(k, ast.Constant)}
            if any(name not in keys for name in missing):
                return False
        return True

    def _fix(self, node: ast.Call, twin: FusedTwin, family: str) -> Optional[Fix]:
        ctx = self.ctx
        if ctx.import_status("torch_npu") == "guarded":
            return None  # a file that also runs without torch_npu: the fused class may not exist there
        imports: Tuple[str, ...] = ()
        if family == "apex":  # only through an apex.optimizers spelling the file already has
            direct = ctx.alias_for(f"apex.optimizers.{twin.fused}")
            module = ctx.alias_for("apex.optimizers")
            text = direct or (f"{module}.{twin.fused}" if module else "")
            return Fix(Applicability.UNSAFE, f"Replace with `{text}`",
                       (Edit("replace", ctx.span(node.func), text),)) if text else None
        direct = ctx.alias_for(f"torch_npu.optim.{twin.fused}")
        if direct:
            text = direct
        elif ctx.alias_for("torch_npu.optim"):
            text = f"{ctx.alias_for('torch_npu.optim')}.{twin.fused}"
        elif ctx.alias_for("torch_npu"):
            text = f"{ctx.alias_for('torch_npu')}.optim.{twin.fused}"
        else:
            text = f"torch_npu.optim.{twin.fused}"
            imports = ("torch_npu",)
        return Fix(Applicability.UNSAFE, f"Replace with `{text}`",
                   (Edit("replace", ctx.span(node.func), text),), imports)
