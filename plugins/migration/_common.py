"""Helpers shared by the migration rules: fix applicability, literal rewrites, backend switches."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

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


def mentions_npu(node: ast.AST) -> bool:
    """Does an expression name the NPU (`is_npu_available()`, `args.device == 'npu'`, `torch.npu...`)?"""
    for sub in ast.walk(node):  # a bounded look at one `if` test
        word = None
        if isinstance(sub, ast.Name):
            word = sub.id
        elif isinstance(sub, ast.Attribute):
            word = sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            word = sub.value
        if word is not None and ("npu" in word.lower() or "ascend" in word.lower() or "hccl" in word.lower()):
            return True
    return False


def in_backend_switch(ctx: FileContext) -> bool:
    """Inside an `if`/conditional expression that chooses between the NPU and another backend."""
    for if_node, _ in ctx.ifs:
        if mentions_npu(if_node.test):
            return True
    for node in ctx.stack:
        if isinstance(node, ast.IfExp) and mentions_npu(node):
            return True
        if isinstance(node, ast.BoolOp) and mentions_npu(node):
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
