"""Tests of the device that accept only CUDA (`'cuda' in device`, `x.device.type == 'cuda'`,
`device.startswith('cuda')`, `x.is_cuda`): what ASC605 reports, and what the other migration rules stop
taking for a deliberate backend switch once every file is declared NPU code (`--target npu`)."""
from __future__ import annotations

import ast
import re
from typing import NamedTuple, Optional

CUDA = "cuda"
# Words that make a name hold a device (`device`, `args.device_type`, `self.dev`, `accelerator`) ...
DEVICE_WORDS = frozenset({"device", "devices", "dev", "accelerator"})
# ... unless it holds a list of devices for CUDA itself (`CUDA_VISIBLE_DEVICES`).
NOT_DEVICE_WORDS = frozenset({"cuda", "visible", "gpu", "gpus"})
STRING_METHODS = frozenset({"lower", "strip", "casefold"})  # `args.device.lower() == 'cuda'`
_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


class DeviceTest(NamedTuple):
    node: ast.expr  # the test: a comparison, a `.startswith(...)` call or an `.is_cuda` attribute
    subject: ast.expr  # the device it tests (`device`, `x.device.type`, `str(device)`, `x` of `x.is_cuda`)
    kind: str  # "eq" (`== 'cuda'`), "contains" (`'cuda' in d`), "member" (`d in ('cuda', ...)`),
    #           "prefix" (`d.startswith('cuda')`), "is_cuda"
    holds_on_cuda: bool  # the test is true on CUDA (`==`, `in`, startswith, is_cuda), not `!=` / `not in`
    literal: Optional[ast.expr]  # the 'cuda' string (or the tuple/list/set of prefixes or names holding it)


def _words(name: str) -> frozenset:
    return frozenset(w.lower() for w in _WORD_RE.findall(name))


def names_device(name: str) -> bool:
    """`device`, `device_type`, `deviceType`, `dev`, `accelerator`; not `CUDA_VISIBLE_DEVICES`."""
    words = _words(name)
    if words & NOT_DEVICE_WORDS:
        return False
    return bool(words & DEVICE_WORDS) or "device" in name.lower()


def plain(node: ast.expr) -> bool:
    """A name, attribute chain or constant subscript: reading it twice reads the same thing."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def device_subject(node: ast.expr) -> bool:
    """Does `node` hold a device, as a string or a `torch.device` (`device`, `args.device`, `x.device.type`,
    `str(device)`, `cfg['device']`, `os.environ.get('DEVICE')`)?"""
    if isinstance(node, ast.Attribute):
        return node.attr == "type" or names_device(node.attr)
    if isinstance(node, ast.Name):
        return names_device(node.id)
    if isinstance(node, ast.Subscript):
        return _device_key(node.slice)
    if isinstance(node, ast.Call) and not node.keywords:
        return _device_call(node)
    return False


def _device_key(key: ast.AST) -> bool:
    """A string constant that names a device (`'device'` of `cfg['device']`, `'DEVICE'` of `environ.get(...)`)."""
    return isinstance(key, ast.Constant) and isinstance(key.value, str) and names_device(key.value)


def _device_call(node: ast.Call) -> bool:
    """A call without keywords that returns a device: `str(device)`, `device.lower()`, `os.environ.get('DEVICE')`."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "str" and len(node.args) == 1:
        return device_subject(node.args[0])
    if isinstance(func, ast.Attribute) and func.attr in STRING_METHODS and not node.args:
        return device_subject(func.value)
    if isinstance(func, ast.Attribute) and func.attr == "get" and node.args and plain(func.value):
        return _device_key(node.args[0]) and all(isinstance(a, ast.Constant) for a in node.args)
    return False


def _is_cuda(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == CUDA


def _names_npu(value: object) -> bool:
    return isinstance(value, str) and value.lower().startswith("npu")


def _strings(node: ast.AST) -> Optional[list]:
    """The values of a tuple/list/set of string constants (None for anything else)."""
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return None
    values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return values if len(values) == len(node.elts) else None


def device_test(node: ast.AST) -> Optional[DeviceTest]:
    """`node` as a test of the device that accepts CUDA and not the NPU, or None."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _comparison_test(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
        return _prefix_test(node)
    if isinstance(node, ast.Attribute) and node.attr == "is_cuda" and isinstance(node.ctx, ast.Load):
        return DeviceTest(node, node.value, "is_cuda", True, None)
    return None


def _comparison_test(node: ast.Compare) -> Optional[DeviceTest]:
    """`device == 'cuda'` (either side), `'cuda' in device`, `device in ('cuda', 'gpu')`, and their negations."""
    op, left, right = node.ops[0], node.left, node.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)):
        for literal, subject in ((right, left), (left, right)):
            if _is_cuda(literal) and device_subject(subject):
                return DeviceTest(node, subject, "eq", isinstance(op, ast.Eq), literal)
    elif isinstance(op, (ast.In, ast.NotIn)):
        if _is_cuda(left) and device_subject(right):
            return DeviceTest(node, right, "contains", isinstance(op, ast.In), left)
        names = _strings(right)
        if names is not None and CUDA in names and not any(map(_names_npu, names)) and device_subject(left):
            return DeviceTest(node, left, "member", isinstance(op, ast.In), right)
    return None


def _prefix_test(node: ast.Call) -> Optional[DeviceTest]:
    """`device.startswith('cuda')` (or a tuple of prefixes holding one that starts with `cuda`, none `npu`)."""
    if len(node.args) != 1 or node.keywords or not device_subject(node.func.value):
        return None
    prefix = node.args[0]
    names = _strings(prefix) if not isinstance(prefix, ast.Constant) else [prefix.value]
    if names and all(isinstance(n, str) for n in names) and any(n.startswith(CUDA) for n in names) \
            and not any(map(_names_npu, names)):
        return DeviceTest(node, node.func.value, "prefix", True, prefix)
    return None


def readable_twice(node: ast.expr) -> bool:
    """Can a fix repeat `node` (`'cuda' in d or 'npu' in d`) without doing anything twice?"""
    if isinstance(node, ast.Call) and len(node.args) <= 1 and not node.keywords:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "str":
            return readable_twice(node.args[0])
        if isinstance(func, ast.Attribute) and func.attr in STRING_METHODS and not node.args:
            return readable_twice(func.value)
        return False
    return plain(node)
