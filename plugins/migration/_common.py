"""Helpers shared by the migration rules: fix applicability, literal rewrites, backend switches."""
from __future__ import annotations

import ast
import re
from typing import Dict, Iterator, Optional, Tuple

from ascend_lint.rule import Applicability, Edit, Fix
from ascend_lint.semantic import FileContext


def source(ctx: FileContext, node: ast.AST) -> Optional[str]:
    """The exact source text of `node` (None when it cannot be cut out)."""
    return ast.get_source_segment(ctx.text, node)


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


# Words that mark a condition as a deliberate backend choice: the NPU itself, or another backend named
# explicitly (`is_nvidia and torch.cuda.get_device_capability()[0] >= 9`, `dev.startswith("GPU")`).
NAME_WORDS = frozenset({"npu", "npus", "ascend", "hccl", "nvidia", "rocm", "hip"})
STRING_WORDS = NAME_WORDS | {"gpu"}
_WORD_RE = re.compile(r"[a-z0-9]+")
NPU_PROBE_RE = re.compile(r"is_(torch_)?npu_available")


def mentions_npu(node: ast.AST) -> bool:
    """Does an expression name the NPU (`is_npu_available()`, `args.device == 'npu'`, `torch.npu...`) or
    another backend explicitly, or dispatch on the device in use (`x.device.type == 'cuda'`, `x.is_cuda`,
    `'cuda' in device`)? Whole words only: `input` does not name the NPU."""
    for sub in ast.walk(node):  # a bounded look at one test or conditional expression
        if isinstance(sub, ast.Compare) and any(
                isinstance(c, ast.Constant) and cuda_device_string(c.value) for c in [sub.left, *sub.comparators]):
            return True  # a device dispatch: the CUDA side runs only on CUDA
        if isinstance(sub, ast.Attribute) and sub.attr == "is_cuda":
            return True
        if isinstance(sub, ast.Name):
            words, allowed = sub.id, NAME_WORDS
        elif isinstance(sub, ast.Attribute):
            words, allowed = sub.attr, NAME_WORDS
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and len(sub.value) < 40:
            words, allowed = sub.value, STRING_WORDS
        else:
            continue
        if any(word in allowed for word in _WORD_RE.findall(words.lower())):
            return True
    return False


def _chain_tests(if_node: ast.If) -> Iterator[ast.expr]:
    """The tests of an if/elif chain: `if a: ... elif b: ...` -> a, b."""
    node: Optional[ast.stmt] = if_node
    while isinstance(node, ast.If):
        yield node.test
        node = node.orelse[0] if len(node.orelse) == 1 else None


def in_backend_switch(ctx: FileContext, cache: Dict[int, bool]) -> bool:
    """Inside code that deliberately chooses a backend: an if/elif chain or conditional expression naming
    the NPU (or another backend explicitly), or a function that itself checks whether an NPU is there."""
    for if_node, _ in ctx.ifs:
        if any(mentions_npu(test) for test in _chain_tests(if_node)):
            return True
    for node in ctx.stack:
        if isinstance(node, (ast.IfExp, ast.BoolOp)) and mentions_npu(node):
            return True
    func = ctx.function
    if func is None:
        return False
    key = id(func.node)
    if key not in cache:  # `cache` belongs to the rule instance, i.e. to this file
        cache[key] = checks_for_npu(ctx, func.node)
    return cache[key]


def checks_for_npu(ctx: FileContext, func: ast.AST) -> bool:
    """Does this function probe for an NPU (`torch.npu.is_available()`, `import torch_npu`, a helper named
    `is_npu_available`)? Then its CUDA branches are one side of a deliberate device selection."""
    for sub in ast.walk(func):  # a bounded look at the enclosing function, once per function
        if isinstance(sub, ast.Call):
            func_node = sub.func
            qual = ctx.qualname(func_node)
            name = qual or (func_node.attr if isinstance(func_node, ast.Attribute)
                            else func_node.id if isinstance(func_node, ast.Name) else "")
            if qual == "torch.npu.is_available" or NPU_PROBE_RE.search(name):
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
