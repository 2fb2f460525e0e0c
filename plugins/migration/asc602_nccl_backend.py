"""ASC602 nccl-backend: `init_process_group(backend='nccl')` in NPU code."""
from __future__ import annotations

import ast
from typing import Dict, Optional, Set

from ascend_lint.rule import Applicability, Case, Docs, Rule
from ascend_lint.astutil import argument, callee_name

from ._common import NOT_LEFTOVERS, NPU_FIX_SAFETY, npu_fix, option_default, replace_in_literal
from ._switches import in_backend_switch

# torch.distributed calls with a `backend` argument: name -> position of `backend`.
BACKEND_CALLS = {"init_process_group": 0, "new_group": 2}


class NcclBackend(Rule):
    silent_where_unreached = False  # about the environment or the port, not run-time cost: reported anywhere
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
             "(keyword or positional, or through a local name bound to `'nccl'`), and (under `--target npu`, when "
             "porting: launch scripts often pass the NPU value) the `'nccl'` default of a command-line option whose value the file passes as the backend (`parser.add_argument("
             "'--dist-backend', default='nccl')` with `init_process_group(backend=args.dist_backend)`), in NPU "
             "code.",
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
                   "registered by torch_npu. Where the backend is a local name, the literal it is bound to is "
                   "replaced, an unsafe fix (whatever else reads the name sees `'hccl'` too); a backend read "
                   "from a command-line option (`args.dist_backend`) is fixed at the option's default, and one "
                   "from anywhere else is reported without a fix. An option's `choices` are left as they are: "
                   "add `'hccl'` to them by hand. " + NPU_FIX_SAFETY,
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
        "import torch_npu\nparser.add_argument('--dist-backend', default='hccl', choices=['nccl', 'hccl'])",
        "parser.add_argument('--dist-backend', default='nccl')",  # no NPU context
        # an option the file never passes as the backend (a launcher passes `--dist-backend hccl`, or nothing)
        "import torch_npu\nparser.add_argument('--dist-backend', default='nccl', type=str)",
        # an option default is reported only when porting (`--target npu`, tests/test_migration.py): launch
        # scripts often pass `--dist-backend hccl`
        "import torch_npu\nimport torch.distributed as dist\n"
        "parser.add_argument('--dist-backend', default='nccl', type=str)\n"
        "dist.init_process_group(backend=args.dist_backend)",
    )

    def start_file(self) -> None:
        self._switches: Dict[int, bool] = {}  # per function: does it probe for an NPU?
        self._defaults: Dict[str, ast.expr] = {}  # option name -> its 'nccl' default (not in a backend switch)
        self._passed: Set[str] = set()  # attribute names passed as the backend (`backend=args.dist_backend`)

    def visit_Call(self, node: ast.Call) -> None:
        option = option_default(node) if self.ctx.target == "npu" else None
        if option is not None:  # `parser.add_argument('--dist-backend', default='nccl')`, when porting (--target npu):
            # elsewhere launch scripts often pass `--dist-backend hccl` (16 of 16 such findings DEBATABLE on tuning)
            self._note_default(node, option[1])
            return
        name = self._backend_call(node)
        value = argument(node, "backend", BACKEND_CALLS[name]) if name is not None else None
        if value is None:
            return
        if isinstance(value, ast.Attribute) and not in_backend_switch(self.ctx, self._switches):
            self._passed.add(value.attr)
        literal = self._nccl_literal(value)
        if literal is None or in_backend_switch(self.ctx, self._switches):
            return
        edit = replace_in_literal(self.ctx, literal, "nccl", "hccl")  # (at the binding for a local name)
        fix = None
        if edit is not None:  # other reads of a bound name see 'hccl' too: unsafe there
            fix = npu_fix(self.ctx, "Replace 'nccl' with 'hccl'" + ("" if literal is value else " where it is bound"),
                          edit, changes_results=literal is not value)
        self.report(value, call=name, fix=fix)

    def _note_default(self, node: ast.Call, default: ast.expr) -> None:
        """Remember an option's 'nccl' default (outside a backend switch): reported if the file passes the
        option as the backend (end_file)."""
        dest = _dest(node)
        if isinstance(default, ast.Constant) and default.value == "nccl" and dest \
                and not in_backend_switch(self.ctx, self._switches):
            self._defaults[dest] = default

    def _backend_call(self, node: ast.Call) -> Optional[str]:
        """The name of the torch.distributed call with a backend argument this is (`init_process_group`,
        `new_group`; an unresolved name only as a method, `dist.new_group(...)`), else None."""
        func = node.func
        qual = self.ctx.qualname(func)
        name = callee_name(node)
        if qual is not None:  # `init_process_group as ipg`: the imported name, not the alias
            name = qual.rsplit(".", 1)[-1]
        if name not in BACKEND_CALLS:
            return None
        if qual is not None and not qual.startswith("torch.distributed."):
            return None
        if qual is None and not isinstance(func, ast.Attribute):
            return None
        return name

    def _nccl_literal(self, value: ast.expr) -> Optional[ast.Constant]:
        """The 'nccl' string the backend argument is: the argument itself, or the value a local name is bound
        to before it (None: anything else)."""
        literal = value
        if isinstance(value, ast.Name):
            bound = self.ctx.binding_before(value.id, value)
            if bound is None or bound.index is not None or bound.value is None:
                return None
            literal = bound.value
        return literal if isinstance(literal, ast.Constant) and literal.value == "nccl" else None

    def end_file(self) -> None:
        """The 'nccl' default of an option whose value the file passes as the backend (in any order)."""
        for dest, default in self._defaults.items():
            if dest not in self._passed:
                continue
            edit = replace_in_literal(self.ctx, default, "nccl", "hccl")
            fix = npu_fix(self.ctx, "Replace 'nccl' with 'hccl'", edit) if edit is not None else None
            self.report(default, message=f"the default 'nccl' of the backend option `{dest}` does not exist on "
                                         "Ascend: use 'hccl'", fix=fix)


def _dest(call: ast.Call) -> Optional[str]:
    """The attribute an `add_argument` call stores to: `dest=`, else its first long option (`--dist-backend`
    -> `dist_backend`), else its positional name."""
    for kw in call.keywords:
        if kw.arg == "dest":
            return kw.value.value if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str) else None
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = [n for n in names if n.startswith("--")] or [n for n in names if not n.startswith("-")]
    return long[0].lstrip("-").replace("-", "_") if long else None
