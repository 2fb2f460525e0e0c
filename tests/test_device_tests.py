"""`device_test` and `device_subject` (migration pack), case by case: which tests of the device accept only
CUDA, and what they test."""
from __future__ import annotations

import ast

import pytest

from ascend_lint_plugins.migration.device_tests import device_subject, device_test


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


@pytest.mark.parametrize("src,kind,holds,subject", [
    ("device == 'cuda'", "eq", True, "device"),
    ("'cuda' != x.device.type", "eq", False, "x.device.type"),
    ("'cuda' in str(device)", "contains", True, "str(device)"),
    ("'cuda' not in args.device", "contains", False, "args.device"),
    ("device_type in ('cuda', 'gpu')", "member", True, "device_type"),
    ("dev not in ['cuda']", "member", False, "dev"),
    ("args.device.lower().startswith('cuda')", "prefix", True, "args.device.lower()"),
    ("device.startswith(('cuda', 'gpu'))", "prefix", True, "device"),
    ("x.is_cuda", "is_cuda", True, "x"),
])
def test_a_test_that_accepts_only_cuda(src, kind, holds, subject):
    found = device_test(_expr(src))
    assert found is not None and (found.kind, found.holds_on_cuda, ast.unparse(found.subject)) == (kind, holds, subject)


@pytest.mark.parametrize("src", [
    "device == 'npu'",
    "name == 'cuda'",  # not a device
    "device == 'cuda' == other",  # two comparisons
    "device < 'cuda'",
    "device in ('cuda', 'npu')",  # the NPU is accepted too
    "device in ('cuda', other)",  # not all strings
    "CUDA_VISIBLE_DEVICES == 'cuda'",
    "device.startswith('npu')",
    "device.startswith(('cuda', 'npu'))",
    "device.startswith('cuda', 1)",
    "device.startswith(prefix)",
    "name.startswith('cuda')",
])
def test_not_a_cuda_only_device_test(src):
    assert device_test(_expr(src)) is None


@pytest.mark.parametrize("src,answer", [
    ("device", True), ("self.dev", True), ("x.device.type", True), ("accelerator", True), ("deviceType", True),
    ("CUDA_VISIBLE_DEVICES", False), ("name", False),
    ("cfg['device']", True), ("cfg['name']", False), ("cfg[key]", False),
    ("str(device)", True), ("str(name)", False), ("str(device, 'utf-8')", False),
    ("device.lower()", True), ("device.lower(1)", False), ("str(device, errors='x')", False),
    ("os.environ.get('DEVICE')", True), ("os.environ.get('DEVICE', 'cuda')", True),
    ("os.environ.get('DEVICE', default)", False), ("get_env().get('DEVICE')", False), ("f(device)", False),
])
def test_device_subject(src, answer):
    assert device_subject(_expr(src)) is answer
