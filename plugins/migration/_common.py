"""Helpers shared by the migration rules: fix applicability, literal rewrites, command-line options (backend
switches: _switches.py)."""
from __future__ import annotations

import ast
import re
from typing import FrozenSet, Optional, Tuple

from ascend_lint.rule import Applicability, Edit, Fix
from ascend_lint.analysis.semantic import FileContext

from .._safety import failure_caught


# The part of every migration rule's "Known problems" that explains what is not a leftover.
NOT_LEFTOVERS = (
    "Deliberate multi-backend code is not flagged: the non-NPU side of a condition that names the NPU "
    "(`if is_npu: x.npu() else: x.cuda()`, an `if 'cuda' in d:` followed by `elif 'npu' in d:`, "
    "`'npu' if npu else 'cuda'`), code under a device dispatch (`x.device.type == 'cuda'`, `x.is_cuda`) or an "
    "explicit GPU vendor, CUDA-only library or GPU capability test (`is_nvidia`, `is_xformers_available()`, "
    "`is_torch_bf16_gpu_available()`), and, in a function that probes for an NPU, its "
    "`torch.cuda.is_available()` fallback. CUDA code inside an NPU branch "
    "(`if device.type == 'npu': torch.cuda.set_device(device)`) is always flagged. Files migrated at run time "
    "are skipped: they import `torch_npu.contrib.transfer_to_npu`, `mindspeed_llm` (its package `__init__` "
    "applies it) or the mindnlp/mindtorch emulation, or are modules of the mindspeed_llm, mindspeed or "
    "mindtorch packages. Also deliberate: a module-level capability probe (`IS_CUDA_AVAILABLE = "
    "torch.cuda.is_available()`) and code guarded by a variable that holds a CUDA probe (`if IS_CUDA_AVAILABLE:`; "
    "a probe assigned inside a function is still reported, once, where it is assigned); CUDA-only feature "
    "branches: code inside a `try:` that imports an optional package, and code under a test of a name such a "
    "`try` binds (`if FusedAdam is not None:`, `if HAS_FLASH_ATTN:`) or of a name that says it is a fused/CUDA "
    "kernel feature (`fused_adam_cls is not None and torch.cuda.is_available()`). With `--target npu` (a port, "
    "every file declared NPU code), a test that only accepts CUDA (`device.type == 'cuda'`, `'cuda' in device`, "
    "`x.is_cuda`: ASC605 reports the test itself) and a variable or module-level name holding a CUDA probe "
    "(`USE_CUDA = torch.cuda.is_available()`) no longer make the code under them deliberate: a branch with no "
    "NPU arm is what the port must change. A branch whose other side moves the same objects with `.to(...)` "
    "(`model.cuda() if device.type == 'cuda' else model.to(device)`) still has one."
)


def source(ctx: FileContext, node: ast.AST) -> Optional[str]:
    """The exact source text of `node` (None when it cannot be cut out)."""
    return ctx.segment(node)


# Fix safety shared by the migration rules whose fixed code needs torch_npu loaded.
NPU_FIX_SAFETY = (
    "Safe only where the file itself imports `torch_npu` unconditionally (such a file runs only where "
    "torch_npu is installed, so the NPU spelling is the only one that can run) and the rewritten code raises "
    "on an Ascend host, where torch has no CUDA: the original stopped there, so the fix cannot change a "
    "result it computed. Unsafe where an `except` around it in the same function catches that failure (the "
    "original went on in the handler; a caller's `try` in another function is not seen), and where the file "
    "does not import torch_npu: the fix also adds `import torch_npu  # noqa: F401` next to the file's `torch` "
    "import (the `noqa` keeps flake8/ruff from deleting an import used only for its effect), which ties the "
    "file to Ascend. Not offered where the file imports torch_npu only behind a guard (`try:`/`if`, or "
    "inside a function): that file also runs without torch_npu, and the rewritten line would fail there. "
    "Not offered in files that do not use torch (MindSpore-only code gets no torch_npu advice)."
)


def uses_torch(ctx: FileContext) -> bool:
    """Is this torch code? MindSpore-only files (they import a MindSpore framework and no torch) are not:
    torch_npu advice (`.npu()`, `import torch_npu`) does not apply to them."""
    if ctx.imports("torch") or ctx.imports("torch_npu"):
        return True
    return not any(ctx.imports(m) for m in ("mindspore", "mindformers", "mindnlp", "mindcv"))


def npu_fix(ctx: FileContext, description: str, *edits: Edit, changes_results: bool = False) -> Optional[Fix]:
    """A fix whose result needs torch_npu loaded; see NPU_FIX_SAFETY. `changes_results`: the fixed code
    computes something else on the NPU than the original did there (always unsafe). So does code whose
    failure an `except` catches: the original went on along the handler's path."""
    status = ctx.import_status("torch_npu")
    if status == "guarded" or not uses_torch(ctx):
        return None
    if status:
        quiet = changes_results or failure_caught(ctx.stack)
        applicability = Applicability.UNSAFE if quiet else Applicability.SAFE
        return Fix(applicability, description, tuple(edits), imports=("torch_npu",))
    return Fix(Applicability.UNSAFE, description + " (adds `import torch_npu`)", tuple(edits), imports=("torch_npu",))


def replace_in_literal(ctx: FileContext, node: ast.AST, old: str, new: str) -> Optional[Edit]:
    """Replace the first `old` in a string literal's source (quotes, prefix and the rest kept)."""
    text = source(ctx, node)
    if text is None or "\n" in text or old not in text:
        return None
    head = text[: text.index(old)]
    if any(c not in "rRbBuUfF'\"" for c in head):  # `old` must start the literal's text
        return None
    return Edit("replace", ctx.span(node), text.replace(old, new, 1))


WORD_RE = re.compile(r"[a-z0-9]+")  # the whole words of a lowercased name or string


def option_default(call: ast.Call) -> Optional[Tuple[FrozenSet[str], ast.expr]]:
    """For a command-line option, `parser.add_argument('--dist-backend', default='nccl')`: the words of its
    names ({'dist', 'backend'}) and its default."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
        return None
    default = next((kw.value for kw in call.keywords if kw.arg == "default"), None)
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if default is None or not names:
        return None
    return frozenset(w for n in names for w in WORD_RE.findall(n.lower())), default


def cuda_device_string(value: object) -> bool:
    """'cuda', 'cuda:0', 'cuda:1' ..."""
    if not isinstance(value, str):
        return False
    return value == "cuda" or (value.startswith("cuda:") and value[5:].isdigit())


def torch_spelling(ctx: FileContext, chain: ast.AST, module: str) -> Optional[Tuple[ast.Attribute, str]]:
    """For `torch.cuda.X.Y` spelled from the `torch` module name, the `torch.cuda` node and its local base name."""
    node = chain
    while isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.attr == module and ctx.qualname(node.value) == "torch":
            return node, node.value.id
        node = node.value
    return None
