"""ASC602 nccl-backend: `init_process_group(backend='nccl')` in NPU code."""
from __future__ import annotations

import ast
from typing import Dict

from ascend_lint.rule import Applicability, Case, Docs, Rule
from ascend_lint.astutil import argument, callee_name

from ._common import NOT_LEFTOVERS, NPU_FIX_SAFETY, in_backend_switch, npu_fix, replace_in_literal

# torch.distributed calls with a `backend` argument: name -> position of `backend`.
BACKEND_CALLS = {"init_process_group": 0, "new_group": 2}


class NcclBackend(Rule):
    code = "ASC602"
    name = "nccl-backend"
    message = "{call}(backend='nccl'): NCCL does not exist on Ascend: use backend='hccl'"
    npu_context = True
    silent_when_auto_migrated = True
    fix_applicability = Applicability.SAFE
    triggers = ("nccl", "init_process_group", "new_group")
    docs = Docs(
        summary="The `nccl` distributed backend in NPU code, where `hccl` is the backend.",
        what="Flags `torch.distributed.init_process_group` and `new_group` called with the `'nccl'` backend "
             "(keyword or positional, or through a local name bound to `'nccl'`) in NPU code.",
        why="NCCL is NVIDIA's collective library; on Ascend the collective backend is HCCL, registered by "
            "torch_npu as `'hccl'`. Initialising with `'nccl'` fails on an Ascend host unless "
            "`transfer_to_npu` rewrites it at run time.",
        known_problems=NOT_LEFTOVERS + (" After the fix, later checks such as `if backend == 'nccl'` must be "
                                        "edited by hand (the Ascend automatic-migration docs note the same)."),
        example="""
            import torch.distributed as dist
            import torch_npu

            dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
        """,
        use_instead="""
            import torch.distributed as dist
            import torch_npu

            dist.init_process_group(backend="hccl", rank=rank, world_size=world_size)
        """,
        fix_safety="The string literal `'nccl'` is replaced by `'hccl'` (quote style kept); `'hccl'` is "
                   "registered by torch_npu. A backend read from a variable is reported without a fix. "
                   + NPU_FIX_SAFETY,
        source="Ascend PyTorch migration guide (manual migration: `backend='nccl'` -> `'hccl'`); "
               "torch_npu/contrib/transfer_to_npu.py (automatic migration patches init_process_group).",
    )
    cases = (
        Case("""
            import torch_npu
            import torch.distributed as dist
            dist.init_process_group(backend='nccl')
            """, line=3, message_contains="init_process_group(backend='nccl')",
             fixed="""
            import torch_npu
            import torch.distributed as dist
            dist.init_process_group(backend='hccl')
            """),
    )
    flagged = (
        "import torch_npu\nimport torch.distributed as dist\ndist.init_process_group('nccl', rank=r, world_size=w)",
        "import torch_npu\nfrom torch.distributed import init_process_group\ninit_process_group(backend=\"nccl\")",
        "import torch_npu\nimport torch\ndef setup():\n    backend = 'nccl'\n"
        "    torch.distributed.init_process_group(backend=backend)",
        "import torch_npu\nimport torch.distributed as dist\ng = dist.new_group(ranks, backend='nccl')",
    )
    clean = (
        "import torch.distributed as dist\ndist.init_process_group(backend='nccl')",  # no NPU context
        "import torch_npu\nimport torch.distributed as dist\ndist.init_process_group(backend='hccl')",
        "import torch_npu\nfrom torch_npu.contrib import transfer_to_npu\nimport torch.distributed as dist\n"
        "dist.init_process_group(backend='nccl')",
        "import torch_npu\nimport torch.distributed as dist\n"
        "dist.init_process_group(backend='hccl' if is_npu else 'nccl')",
        "import torch_npu\nimport torch.distributed as dist\ndist.init_process_group(backend=args.backend)",
        "import torch_npu\nimport torch.distributed as dist\nif dist.get_backend() == 'nccl':\n    pass",
    )

    def start_file(self) -> None:
        self._switches: Dict[int, bool] = {}  # per function: does it probe for an NPU?

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        qual = self.ctx.qualname(func)
        name = callee_name(node)
        if qual is not None:  # `init_process_group as ipg`: the imported name, not the alias
            name = qual.rsplit(".", 1)[-1]
        if name not in BACKEND_CALLS:
            return
        if qual is not None and not qual.startswith("torch.distributed."):
            return
        if qual is None and not isinstance(func, ast.Attribute):
            return
        value = argument(node, "backend", BACKEND_CALLS[name])
        if value is None:
            return
        literal = value
        if isinstance(value, ast.Name):
            bound = self.ctx.binding_before(value.id, value)
            if bound is None or bound.index is not None or bound.value is None:
                return
            literal = bound.value
        if not (isinstance(literal, ast.Constant) and literal.value == "nccl"):
            return
        if in_backend_switch(self.ctx, self._switches):
            return
        fix = None
        if literal is value:
            edit = replace_in_literal(self.ctx, value, "nccl", "hccl")
            if edit is not None:
                fix = npu_fix(self.ctx, "Replace 'nccl' with 'hccl'", edit)
        self.report(value, call=name, fix=fix)
