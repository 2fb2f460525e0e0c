"""ASC305 apex-combine-ddp (preview)."""
from __future__ import annotations

import ast
from typing import FrozenSet, List, Tuple

from ascend_lint.rule import Case, Docs, Rule

from .asc303_amp_combine_grad import combine_allowed, flag_state, is_amp_initialize, trains

DDP_CLASSES = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
               "apex.parallel.DistributedDataParallel")


class ApexCombineDdp(Rule):
    code = "ASC305"
    name = "apex-combine-ddp"
    message = "apex `amp.initialize` in a file that wraps the model in DistributedDataParallel: pass " \
              "`combine_grad=True, combine_ddp=True` and drop the DDP wrapper so gradients are all-reduced as " \
              "one combined buffer"
    preview = True
    npu_context = True
    triggers = ("initialize", "DistributedDataParallel", "DDP")
    docs = Docs(
        summary="Ascend apex `amp.initialize` without `combine_ddp=True` in a script that uses DDP.",
        what="Flags Ascend apex `amp.initialize(model, optimizer, ...)` without `combine_ddp=True` in a file that "
             "also wraps the model in `torch.nn.parallel.DistributedDataParallel` (or apex's DDP).",
        why="Ascend apex's `combine_ddp=True` all-reduces the combined gradient buffer built by "
            "`combine_grad=True` in a few large HCCL calls (`ddp_replica_count` buckets) and functionally "
            "replaces framework DDP, which launches one bucketed all-reduce stream per bucket of small "
            "tensors and adds hooks on every parameter; on small-op bound steps that host work is what the "
            "Ascend tuning guides remove.",
        known_problems="File-level: a DDP wrap in another module is not seen; an `amp.initialize` in the other "
                       "branch of an `if` than every DDP wrap (the single-device path) is not flagged. Not flagged when `combine_ddp` is "
                       "an expression (the usual `combine_ddp=args.distributed` switch) or an explicit `False`, when "
                       "`opt_level` is a literal other than 'O1'/'O2', or without an optimizer argument. "
                       "`combine_ddp` requires `combine_grad=True`, broadcasts every parameter from rank 0 at "
                       "initialisation and needs identical parameter shapes on every rank.",
        example="""
            from apex import amp
            from torch.nn.parallel import DistributedDataParallel as DDP

            model, optimizer = amp.initialize(model, optimizer, opt_level="O2", combine_grad=True)
            model = DDP(model, device_ids=[local_rank])
        """,
        use_instead="""
            from apex import amp

            model, optimizer = amp.initialize(model, optimizer, opt_level="O2", combine_grad=True, combine_ddp=True)
        """,
        fix_safety="No fix: the framework DDP wrapper (and any `model.module` access) must be removed by hand.",
        source="Ascend apex README.zh.md and patch/npu.patch (combine_ddp, ddp_replica_count).",
    )
    cases = (
        Case("""
            import torch_npu
            from apex import amp
            from torch.nn.parallel import DistributedDataParallel as DDP
            model, opt = amp.initialize(model, opt, opt_level='O2', combine_grad=True)
            model = DDP(model)
            """, line=4, message_contains="apex `amp.initialize` in a file that wraps the model in"),
    )
    flagged = (
        "import torch, torch_npu\nfrom apex import amp\ndef main():\n"
        "    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])\n"
        "    model, opt = amp.initialize(model, opt, combine_ddp=None)",
    )
    clean = (
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O2', "
        "combine_grad=True, combine_ddp=True)",
        # configurable, with DDP as the fallback
        "import torch_npu\nfrom apex import amp\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model, opt = amp.initialize(model, opt, combine_grad=True, combine_ddp=args.combine_ddp)\n"
        "if not args.combine_ddp:\n    model = DDP(model)",
        # no DDP in the file; a local class called DDP
        "import torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')",
        "import torch_npu\nfrom apex import amp\nclass DDP:\n    pass\nmodel, opt = amp.initialize(model, opt)\n"
        "model = DDP(model)",
        # amp.initialize on the single-device path, DDP on the distributed one
        "import torch, torch_npu\nfrom apex import amp\nif args.distributed:\n"
        "    model, opt = amp.initialize(model, opt, combine_grad=True, combine_ddp=True)\n"
        "    model = torch.nn.parallel.DistributedDataParallel(model)\nelse:\n"
        "    model, opt = amp.initialize(model, opt, combine_grad=True)\n    model = torch.nn.DataParallel(model)",
        # opt level where apex cannot combine
        "import torch, torch_npu\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O0')\n"
        "model = torch.nn.parallel.DistributedDataParallel(model)",
    )

    def start_file(self) -> None:
        self._initializes: List[Tuple[ast.Call, Branches]] = []
        self._ddps: List[Branches] = []

    def _branches(self) -> "Branches":
        """The if/else branches the current node sits in: {(id(if node), in_else)}."""
        return frozenset((id(node), in_else) for node, in_else in self.ctx.ifs)

    def visit_Call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if ctx.call_name(node) in DDP_CLASSES:
            self._ddps.append(self._branches())
        elif is_amp_initialize(ctx, node) and trains(node) and combine_allowed(node) \
                and flag_state(node, "combine_ddp") == "missing" and flag_state(node, "combine_grad") != "false":
            self._initializes.append((node, self._branches()))

    def end_file(self) -> None:
        for node, branches in self._initializes:
            if any(_same_path(branches, ddp) for ddp in self._ddps):
                self.report(node)


Branches = FrozenSet[Tuple[int, bool]]


def _same_path(a: Branches, b: Branches) -> bool:
    """Can both run in one execution, i.e. is no `if` taken one way for `a` and the other way for `b`?"""
    return not any((key, not in_else) in b for key, in_else in a)
