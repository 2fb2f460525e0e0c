"""Helpers shared by the migration rules: fix applicability, literal rewrites, backend switches."""
from __future__ import annotations

import ast
import re
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from ascend_lint.rule import Applicability, Edit, Fix
from ascend_lint.semantic import FileContext


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
    "mindtorch packages. A probe that guards a CUDA-only feature without naming it "
    "(`fused_adam_cls is not None and torch.cuda.is_available()`) is still reported."
)


def source(ctx: FileContext, node: ast.AST) -> Optional[str]:
    """The exact source text of `node` (None when it cannot be cut out)."""
    return ctx.segment(node)


def npu_fix(ctx: FileContext, description: str, *edits: Edit) -> Fix:
    """A fix whose result needs torch_npu: safe where the file imports it, else unsafe and it adds the import."""
    if ctx.imports("torch_npu"):
        return Fix(Applicability.SAFE, description, tuple(edits))
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


# What makes CUDA code deliberate rather than a leftover (see `in_backend_switch`).
NPU_WORDS = frozenset({"npu", "npus", "ascend", "hccl"})
# Another backend, or a CUDA-only library, named explicitly: `is_nvidia and ...`, `if is_xformers_available()`.
OTHER_NAME_WORDS = frozenset({"nvidia", "rocm", "hip", "xformers"})
OTHER_STRING_WORDS = OTHER_NAME_WORDS | {"gpu"}  # `dev.startswith("GPU")`
_WORD_RE = re.compile(r"[a-z0-9]+")
NPU_PROBE_RE = re.compile(r"is_(torch_)?npu_available")
GPU_PROBE_RE = re.compile(r"is_\w*gpu\w*_available")  # `is_torch_bf16_gpu_available()`: a GPU capability check
CUDA_PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
NEGATING_OPS = (ast.NotEq, ast.IsNot, ast.NotIn)


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _words(node: ast.AST) -> Tuple[FrozenSet[str], bool]:
    """The whole words of a name, attribute or short string (`input` holds no `npu`), and whether it is a string."""
    if isinstance(node, ast.Name):
        return frozenset(_WORD_RE.findall(node.id.lower())), False
    if isinstance(node, ast.Attribute):
        return frozenset(_WORD_RE.findall(node.attr.lower())), False
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 40:
        return frozenset(_WORD_RE.findall(node.value.lower())), True
    return frozenset(), False


def names_npu(node: ast.AST) -> bool:
    """Does an expression name the NPU (`is_npu_available()`, `args.device == 'npu'`, `torch.npu...`)?"""
    return any(_words(sub)[0] & NPU_WORDS for sub in ast.walk(node))  # a bounded look at one test


def npu_polarity(test: ast.expr) -> int:
    """+1 when a condition holds on the NPU (`if is_npu:`), -1 when it holds elsewhere (`if not is_npu:`,
    `device != 'npu'`), 0 when it does not name the NPU."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -npu_polarity(test.operand)
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            polarity = npu_polarity(value)
            if polarity:
                return polarity
        return 0
    if not names_npu(test):
        return 0
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(right, ast.Constant) and right.value is None:  # `args.npu is not None`: an NPU is set
            return -1 if isinstance(op, (ast.Is, ast.Eq)) else 1
        if isinstance(op, NEGATING_OPS):  # `device != 'npu'`
            return -1
    return 1


def dispatches_elsewhere(node: ast.AST) -> bool:
    """Does a condition select a non-NPU backend explicitly: the device in use (`x.device.type == 'cuda'`,
    `x.is_cuda`, `'cuda' in device`), a GPU vendor or CUDA-only library (`is_nvidia`, `is_xformers_available()`,
    `dev.startswith('GPU')`), or a GPU capability probe (`is_torch_bf16_gpu_available()`)?"""
    for sub in ast.walk(node):  # a bounded look at one test or conditional expression
        if isinstance(sub, ast.Compare) and any(
                isinstance(c, ast.Constant) and cuda_device_string(c.value) for c in [sub.left, *sub.comparators]):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "is_cuda":
            return True
        if isinstance(sub, ast.Call) and GPU_PROBE_RE.fullmatch(_called_name(sub)):
            return True
        words, is_string = _words(sub)
        if words & (OTHER_STRING_WORDS if is_string else OTHER_NAME_WORDS):
            return True
    return False


def _later_tests(if_node: ast.If) -> Iterator[ast.expr]:
    """The tests of the `elif` branches after `if_node` (not of an `if` nested in an `else:` block)."""
    node = if_node.orelse[0] if len(if_node.orelse) == 1 else None
    while isinstance(node, ast.If) and node.col_offset == if_node.col_offset:  # `elif` sits at the `if` column
        yield node.test
        node = node.orelse[0] if len(node.orelse) == 1 else None


def in_backend_switch(ctx: FileContext, cache: Dict[int, bool]) -> bool:
    """Is the current node CUDA code on purpose? Yes on the non-NPU side of a condition that names the NPU
    (`if is_npu: ... else: <here>`, `if "cuda" in d: <here> elif "npu" in d: ...`, `x.npu() if npu else
    <here>`), under a condition that selects another backend explicitly (`dispatches_elsewhere`), or, in a
    function that probes for an NPU, under (or inside) a CUDA availability check: the GPU fallback of a
    device search. Never inside an NPU branch (`if device.type == "npu": torch.cuda.set_device(device)`)."""
    for if_node, in_else in reversed(ctx.ifs):
        polarity = npu_polarity(if_node.test)
        if polarity == (-1 if in_else else 1):
            return False  # inside the NPU branch: CUDA code here is a leftover for sure
        if polarity or dispatches_elsewhere(if_node.test):
            return True
        if not in_else and any(npu_polarity(t) == 1 for t in _later_tests(if_node)):
            return True
    stack = ctx.stack
    for i, node in enumerate(stack[:-1]):
        child = stack[i + 1]
        if isinstance(node, ast.IfExp) and child is not node.test:
            polarity = npu_polarity(node.test)
            if polarity == (1 if child is node.body else -1):
                return False
            if polarity or dispatches_elsewhere(node.test):
                return True
        elif isinstance(node, ast.BoolOp) and dispatches_elsewhere(node):
            return True
    tests = [if_node.test for if_node, _ in ctx.ifs]
    tests += [n.test for n in ctx.stack if isinstance(n, (ast.If, ast.IfExp, ast.While))]
    return gpu_fallback(ctx, cache, tests)


def gpu_fallback(ctx: FileContext, cache: Dict[int, bool], tests: List[ast.expr]) -> bool:
    """In a function that probes for an NPU, code under (or inside) a test calling
    `torch.cuda.is_available()` / `device_count()` is the GPU fallback of a device search."""
    if not any(isinstance(sub, ast.Call) and ctx.qualname(sub.func) in CUDA_PROBES
               for test in tests for sub in ast.walk(test)):
        return False
    func = ctx.function
    if func is None:
        return False
    key = id(func.node)
    if key not in cache:  # `cache` belongs to the rule instance, i.e. to this file
        cache[key] = checks_for_npu(ctx, func.node)
    return cache[key]


def checks_for_npu(ctx: FileContext, func: ast.AST) -> bool:
    """Does this function probe for an NPU (`torch.npu.is_available()`, `import torch_npu`, a helper named
    `is_npu_available`)?"""
    for sub in ast.walk(func):  # a bounded look at the enclosing function, once per function
        if isinstance(sub, ast.Call):
            qual = ctx.qualname(sub.func)
            if qual == "torch.npu.is_available" or NPU_PROBE_RE.search(qual or _called_name(sub)):
                return True
        elif isinstance(sub, ast.Import):
            if any(alias.name.split(".")[0] == "torch_npu" for alias in sub.names):
                return True
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] == "torch_npu":
            return True
    return False


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
