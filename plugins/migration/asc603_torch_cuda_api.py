"""ASC603 torch-cuda-api: `torch.cuda.*` APIs in NPU code, with their torch.npu twins."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple
from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.astutil import contains

from .._safety import Ancestry, failure_caught
from ._common import NOT_LEFTOVERS, NPU_FIX_SAFETY, npu_fix, torch_spelling
from ._switches import in_backend_switch
from .twins import Twin, lookup

PREFIX = "torch.cuda."


class TorchCudaApi(Rule):
    silent_where_unreached = False  # about the environment or the port, not run-time cost: reported anywhere
    code = "ASC603"
    name = "torch-cuda-api"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "{message}"
    npu_context = True
    silent_when_auto_migrated = True
    fix_applicability = Applicability.SAFE
    triggers = ("cuda",)
    docs = Docs(
        summary="A `torch.cuda` API in NPU code, with its `torch_npu` twin where there is one.",
        what="Flags `torch.cuda.<api>` calls and attributes (and names imported from `torch.cuda`) in NPU code, "
             "using one table of torch_npu twins (plugins/migration/twins.py): `set_device`, `device_count`, "
             "`is_available`, `current_device`, `synchronize`, `manual_seed(_all)`, `empty_cache`, the memory "
             "statistics, `Stream`, `Event`, `amp.autocast`, `amp.GradScaler`, ... An API whose NPU counterpart "
             "differs (`CUDAGraph` -> `NPUGraph`, `DoubleTensor`) or that has none (`nvtx`, `get_arch_list`, "
             "`get_device_capability`) is reported with a note and no fix.",
        why="On an Ascend host `torch.cuda` talks to no device: `is_available()` is False and `device_count()` "
            "is 0 (so the code silently falls back to the CPU), and calls such as `synchronize()` or "
            "`set_device()` raise. torch_npu mirrors the CUDA API under `torch.npu` "
            "(`torch.cuda.*** -> torch_npu.npu.***` in the Ascend API support list).",
        known_problems=NOT_LEFTOVERS + " The port itself is not a leftover: an assignment over a CUDA name "
                       "(`torch.cuda.synchronize = torch.npu.synchronize`) and a type annotation "
                       "(`stream: torch.cuda.Stream`, `-> torch.cuda.Event`) are not reported. APIs missing from "
                       "the table are not reported.",
        example="""
            import torch
            import torch_npu

            torch.cuda.set_device(local_rank)
            scaler = torch.cuda.amp.GradScaler()
            with torch.cuda.amp.autocast():
                loss = model(x)
        """,
        use_instead="""
            import torch
            import torch_npu

            torch.npu.set_device(local_rank)
            scaler = torch.npu.amp.GradScaler()
            with torch.npu.amp.autocast():
                loss = model(x)
        """,
        fix_safety="For the 1:1 twins: `torch.cuda` becomes `torch.npu` with the file's own name for `torch` "
                   "(`th.cuda.X` -> `th.npu.X`), and `from torch.cuda.amp import autocast` becomes "
                   "`from torch_npu.npu.amp import autocast` (that import loads torch_npu itself, so it adds "
                   "none). No fix for twins that differ, for APIs without a twin, or where the spelling cannot "
                   "be kept simply (`from torch import cuda; cuda.synchronize()`). Entries of a per-backend "
                   "table are deliberate and not reported, whatever its spelling: "
                   "`{'cuda': torch.cuda.synchronize, 'npu': torch.npu.synchronize}`, "
                   "`dict(cuda=..., npu=...)`, `[('cuda', ...), ('npu', ...)]`. The rename is safe only for APIs "
                   "that fail on an Ascend host (`synchronize`, `set_device`, `current_device`, `Stream`, "
                   "`Event`, ...) and only where they are called (`torch.cuda.synchronize()`; for an imported "
                   "name, every use in the file a call): the original stopped there. A reference "
                   "(`hook = torch.cuda.synchronize`) raises nothing until some later call the linter may not "
                   "see, so its rename is unsafe. It is unsafe for the APIs that answer quietly without CUDA "
                   "(`is_available()` is "
                   "False, `device_count()` 0, `manual_seed` and `empty_cache` do nothing, `amp.autocast` and "
                   "`GradScaler` disable themselves with a warning): there the original ran another path (on "
                   "the CPU, in fp32, unseeded), and the NPU one computes different numbers. " + NPU_FIX_SAFETY,
        source="torch_npu/npu/__init__.py `__all__` and torch_npu/npu/amp (Ascend/pytorch); Ascend Extension for "
               "PyTorch API list, torch.cuda and torch.cuda.amp support tables.",
    )
    cases = (
        Case("""
            import torch
            import torch_npu
            torch.cuda.set_device(rank)
            """, line=3, message_contains="`torch.cuda.set_device` does not reach the NPU on Ascend",
             fixed="""
            import torch
            import torch_npu
            torch.npu.set_device(rank)
            """),
    )
    flagged = (
        "import torch\nimport torch_npu\ntorch.cuda.set_device(rank)",
        # the value side of an assignment is a use
        "import torch\nimport torch_npu\nsync = torch.cuda.synchronize",
        # a default value next to an annotation is evaluated
        "import torch\nimport torch_npu\ndef run(x, stream: object = torch.cuda.current_stream()):\n    return x",
        "import torch\nimport torch_npu\nn = torch.cuda.device_count()",
        "import torch\nimport torch_npu\nscaler = torch.cuda.amp.GradScaler()",
        "import torch\nimport torch_npu\nwith torch.cuda.amp.autocast():\n    pass",
        "import torch as th\nimport torch_npu\nth.cuda.synchronize()",
        "import torch_npu\nfrom torch.cuda.amp import autocast, GradScaler",
        "import torch_npu\nfrom torch import cuda\ncuda.empty_cache()",
        "import torch\nimport torch_npu\ng = torch.cuda.CUDAGraph()",
        "import torch\nimport torch_npu\ntorch.cuda.nvtx.range_push('step')",
        "import torch\nimport torch_npu\nif not torch.cuda.is_available():\n    raise SystemExit",
    )
    clean = (
        "import torch\ntorch.cuda.set_device(rank)",  # no NPU context
        "import torch\nimport torch_npu\nfrom torch_npu.contrib import transfer_to_npu\ntorch.cuda.set_device(rank)",
        "import torch\nimport torch_npu\ntorch.npu.set_device(rank)",
        "import torch\nimport torch_npu\nif torch.npu.is_available():\n    torch.npu.synchronize()\n"
        "elif torch.cuda.is_available():\n    torch.cuda.synchronize()",
        "import torch\nimport torch_npu\nn = torch.npu.device_count() if use_npu else torch.cuda.device_count()",
        "import torch\nimport torch_npu\nmodule = torch.cuda",
        "import torch\nimport torch_npu\ntry:\n    pass\nexcept torch.cuda.OutOfMemoryError:\n    pass",
        # the port itself: NPU functions assigned over CUDA names
        "import torch\nimport torch_npu\ntorch.cuda.synchronize = torch.npu.synchronize\n"
        "torch.cuda.current_device = torch.npu.current_device",
        # torch.cuda.Stream used only as a type annotation
        "import torch\nimport torch_npu\nfrom typing import Optional\n"
        "def run(x, stream: Optional[torch.cuda.Stream] = None) -> torch.cuda.Event:\n"
        "    pending: torch.cuda.Stream = torch.npu.current_stream()\n    return torch.npu.Event()",
        "import torch\nimport torch_npu\nfrom torch.cuda import Stream\ndef run(x, s: Stream):\n    return x",
        # a per-backend dispatch table is deliberate multi-backend code
        "import torch\nimport torch_npu\nAVAILABLE = {'cuda': torch.cuda.is_available(), 'npu': torch.npu.is_available()}",
        "import torch\nimport torch_npu\nSYNC = {'gpu': torch.cuda.synchronize, 'npu': torch.npu.synchronize}",
        "import torch\nimport torch_npu\nSYNC = dict(cuda=torch.cuda.synchronize, npu=torch.npu.synchronize)",
        "import torch\nimport torch_npu\nSYNC = [('cuda', torch.cuda.synchronize), ('npu', torch.npu.synchronize)]",
    )

    def start_file(self) -> None:
        self._switches: Dict[int, bool] = {}  # per function: does it probe for an NPU?
        self._ancestry = Ancestry(self.ctx.tree)  # parent links, built only to judge an import's fix

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parent = self.ctx.parent
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # only the outermost attribute of a chain
        if not isinstance(node.ctx, ast.Load) or self._in_annotation():
            return  # the port itself (`torch.cuda.synchronize = torch.npu.synchronize`), or a type
        self._check(node)

    def _annotation_only(self, name: str) -> bool:
        """Is an imported name used, and only in type annotations (`from torch.cuda import Stream` for
        `s: Stream`)? (Walks the file: only asked for an import from `torch.cuda`.)"""
        annotations = [n for sub in ast.walk(self.ctx.tree) for n in _annotations(sub)]
        uses = [n for n in ast.walk(self.ctx.tree) if isinstance(n, ast.Name) and n.id == name]
        return bool(uses) and all(any(contains(a, use) for a in annotations) for use in uses)

    def _in_annotation(self) -> bool:
        """Is the node being visited part of a type annotation (`stream: torch.cuda.Stream`, `-> ...`)?
        Annotations are not evaluated as API calls (and never are under `from __future__ import annotations`)."""
        stack = self.ctx.stack
        for outer, inner in zip(stack, stack[1:]):
            if isinstance(outer, (ast.arg, ast.AnnAssign)) and outer.annotation is inner:
                return True
            if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    outer.returns is inner or _in_parameter_annotation(outer, stack[-1])):
                return True
        return False

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        """`from torch.cuda.amp import autocast`: reported (and fixed) at the import, not at each use."""
        module = node.module or ""
        if node.level or not (module == "torch.cuda" or module.startswith(PREFIX)):
            return
        found = self._imported_twins(node, module)
        if not found or in_backend_switch(self.ctx, self._switches):
            return
        fix = self._import_fix(node, module, found)
        for index, (alias, twin) in enumerate(found):
            full = f"{module}.{alias.name}"
            self.report(alias if hasattr(alias, "lineno") else node, message=self._message(full, twin),
                        fix=fix if index == 0 else None)

    def _imported_twins(self, node: ast.ImportFrom, module: str) -> List[Tuple[ast.alias, Twin]]:
        """The names the import takes from `module` (a `torch.cuda` module) that have a twin, less those used
        only in type annotations."""
        found = [(alias, lookup(f"{module[len('torch.cuda.'):]}.{alias.name}".lstrip(".")))
                 for alias in node.names if alias.name != "*"]
        return [(alias, twin) for alias, twin in found
                if twin is not None and not self._annotation_only(alias.asname or alias.name)]

    def _import_fix(self, node: ast.ImportFrom, module: str, found: List[Tuple[ast.alias, Twin]]) -> Optional[Fix]:
        """The import from `torch_npu.npu...` instead, when every name it takes has an exact twin and it is one
        line; safe where torch_npu is imported, every twin fails without CUDA and every use is a call (None:
        no fix, also where torch_npu is imported behind a guard: this import must keep working without it)."""
        if not (len(found) == len(node.names) and all(t.exact for _, t in found) and node.lineno == node.end_lineno):
            return None
        quiet = any(not t.fails_without_cuda for _, t in found) or not all(
            self._only_called(alias.asname or alias.name) for alias, _ in found)
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
        text = f"from torch_npu.npu{module[len('torch.cuda'):]} import {names}"
        status = self.ctx.import_status("torch_npu")
        if status == "guarded":
            return None
        applicability = Applicability.SAFE if status and not quiet else Applicability.UNSAFE
        return Fix(applicability, f"Import from `torch_npu.npu{module[len('torch.cuda'):]}`",
                   (Edit("replace", self.ctx.span(node), text),))

    # ----------------------------------------------------------------- helpers
    def _check(self, node: ast.expr) -> None:
        qual = self.ctx.qualname(node)
        if qual is None or not qual.startswith(PREFIX):
            return
        twin = lookup(qual[len(PREFIX):])
        if twin is None or in_backend_switch(self.ctx, self._switches):
            return
        fix = None
        if twin.exact:
            spelled = torch_spelling(self.ctx, node, "cuda")
            if spelled is not None:
                inner, base = spelled
                parent = self.ctx.parent
                called = isinstance(parent, ast.Call) and parent.func is node  # a reference raises nothing
                fix = npu_fix(self.ctx, f"Replace `{qual}` with `{twin.npu}`",
                              Edit("replace", self.ctx.span(inner), f"{base}.npu"),
                              changes_results=not (twin.fails_without_cuda and called))
        self.report(node, message=self._message(qual, twin), fix=fix)

    def _only_called(self, name: str) -> bool:
        """Is every read of an imported name in this file a call, outside any `except` that would catch its
        failure? (Then the original raised at each use on an Ascend host; a name another module imports from
        this one is not seen.)"""
        ancestry = self._ancestry
        for sub in ast.walk(self.ctx.tree):  # (only for an import that would get a safe fix)
            if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load):
                parent = ancestry.parents().get(id(sub))
                if not (isinstance(parent, ast.Call) and parent.func is sub) or failure_caught(ancestry.chain(sub)):
                    return False
        return True

    @staticmethod
    def _message(qual: str, twin: Twin) -> str:
        if twin.npu is None:
            return f"`{qual}` has no torch.npu twin and does nothing useful on Ascend: {twin.note}"
        head = f"`{qual}` does not reach the NPU on Ascend: use `{twin.npu}`"
        if twin.exact:
            return head + (f" ({twin.note})" if twin.note else "")
        return f"{head}, which is not a drop-in rename: {twin.note}"


def _in_parameter_annotation(func: ast.AST, node: ast.AST) -> bool:
    """Is `node` inside the annotation of one of `func`'s parameters?"""
    args = func.args
    params = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    return any(p.annotation is not None and contains(p.annotation, node) for p in params)


def _annotations(node: ast.AST) -> list:
    """The annotation expressions a node holds (a parameter's, a return's, an annotated assignment's)."""
    if isinstance(node, (ast.arg, ast.AnnAssign)):
        return [node.annotation] if node.annotation is not None else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.returns] if node.returns is not None else []
    return []
