"""Deliberate multi-backend code is not a CUDA leftover (migration pack), and `torch.npu.*` usage makes a
file NPU code (issue 13). Each case is a minimised form of a class seen in real code."""
from __future__ import annotations

import ast

import pytest

from ascend_lint.analysis.semantic import FileContext
from conftest import lint

HEAD = "import torch\nimport torch_npu\n"


def codes(src: str):
    return [(f.code, f.line) for f in lint(HEAD + src, select=["ASC6"])]


def test_torch_npu_usage_makes_a_file_npu_code():
    src = "import torch\n\ndef sync():\n    torch.npu.synchronize()\n"
    assert FileContext("m.py", src, ast.parse(src)).npu
    plain = "import torch\n\ndef sync():\n    torch.cuda.synchronize()\n"
    assert not FileContext("m.py", plain, ast.parse(plain)).npu
    assert [f.code for f in lint("import torch\ntorch.npu.set_device(0)\ntorch.cuda.synchronize()\n",
                                 select=["ASC603"])] == ["ASC603"]


def test_module_level_availability_probe_and_its_guards_are_deliberate():
    src = ("IS_CUDA_AVAILABLE = torch.cuda.is_available()\n"
           "def seed(s):\n    if IS_CUDA_AVAILABLE:\n        torch.cuda.manual_seed(s)\n")
    assert codes(src) == []


def test_a_device_count_is_not_a_probe():
    assert codes("NGPUS = torch.cuda.device_count()\n") == [("ASC603", 3)]


def test_a_probe_in_a_function_is_reported_once_where_it_decides():
    src = ("def main(model):\n    use_cuda = torch.cuda.is_available()\n"
           "    if use_cuda:\n        model = model.cuda()\n        torch.cuda.manual_seed(0)\n    return model\n")
    assert codes(src) == [("ASC603", 4)]


@pytest.mark.parametrize("src", [
    # an optional import and its availability flag
    "try:\n    from apex.optimizers import FusedAdam\nexcept ImportError:\n    FusedAdam = None\n"
    "def build(p):\n    if FusedAdam is not None:\n        torch.cuda.synchronize()\n",
    "try:\n    import flash_attn\n    HAS_FLASH_ATTN = True\nexcept ModuleNotFoundError:\n    HAS_FLASH_ATTN = False\n"
    "def attn(q):\n    if HAS_FLASH_ATTN:\n        torch.cuda.synchronize()\n",
    # code inside the optional-import block
    "try:\n    import flash_attn\n    CAP = torch.cuda.get_device_capability()\nexcept ImportError:\n    CAP = None\n",
    # a fused-kernel feature test next to the probe
    "def build(args, fused_adam_cls):\n    use_fused_adam = fused_adam_cls is not None and torch.cuda.is_available()\n"
    "    return use_fused_adam\n",
])
def test_cuda_only_feature_branches_are_deliberate(src):
    assert codes(src) == []


@pytest.mark.parametrize("src,line", [
    # CUDA code in the NPU branch is a leftover for sure
    ("def setup(device):\n    if device.type == 'npu':\n        torch.cuda.set_device(device)\n", 5),
    # a guard that is not a probe or a feature
    ("def setup(args):\n    if args.local_rank is not None:\n        torch.cuda.set_device(args.local_rank)\n", 5),
    # device selection from a probe: the port runs on the CPU
    ("DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n", 3),
])
def test_leftovers_are_still_reported(src, line):
    assert line in [ln for _, ln in codes(src)]


@pytest.mark.parametrize("src", [
    # a branch that uses a package imported under `if is_<x>_available():`
    "def is_fp8_available():\n    return False\nif is_fp8_available():\n    import transformer_engine.common.recipe as te_recipe\n"
    "def prepare(mode):\n    if mode == 'fp8':\n        recipe = te_recipe.DelayedScaling()\n"
    "        cap = torch.cuda.get_device_capability()\n",
    # a function that detects a CUDA-only feature
    "def detect_flash_attention_support():\n    if not torch.cuda.is_available():\n        return False\n"
    "    return torch.cuda.get_device_capability()[0] >= 8\n",
])
def test_code_of_a_cuda_only_feature_is_deliberate(src):
    assert codes(src) == []


@pytest.mark.parametrize("src", [
    # the other branch of the switch goes to the NPU
    "def place(model, args):\n    if args.cuda:\n        model.cuda()\n    else:\n        model.npu()\n",
    # a GPU capability probe (TF32 needs Ampere) and a CUDA-only platform (SageMaker model parallel)
    "def setup(tf32):\n    if is_torch_tf32_available():\n        torch.backends.cuda.matmul.allow_tf32 = tf32\n",
    "def device(rank):\n    if is_sagemaker_mp_enabled():\n        return torch.device('cuda', rank)\n",
])
def test_other_backend_switches_are_deliberate(src):
    assert codes(src) == []


def test_the_else_of_a_feature_test_is_the_ordinary_path():
    src = ("import torch.distributed as dist\n"
           "def setup(rank):\n    if is_sagemaker_mp_enabled():\n        return None\n"
           "    elif rank >= 0:\n        dist.init_process_group(backend='nccl')\n")
    assert codes(src) == [("ASC602", 8)]


def test_optional_imports_of_npu_capable_packages_are_not_cuda_features():
    torch_guard = ("def is_torch_available():\n    return True\nif is_torch_available():\n    import torch\n"
                   "def seed(s):\n    if s:\n        torch.cuda.manual_seed(s)\n")
    assert codes(torch_guard) == [("ASC603", 9)]
    apex = ("try:\n    from apex import amp\n    mixed_precision = True\nexcept ImportError:\n    mixed_precision = False\n"
            "def build(model, opt):\n    if mixed_precision:\n        model, opt = amp.initialize(model, opt, opt_level='O1')\n")
    assert [f.code for f in lint(HEAD + apex, select=["ASC303"])] == ["ASC303"]


def test_a_user_flag_named_for_a_feature_is_not_a_probe():
    src = "def setup(self):\n    if self.tf32:\n        torch.backends.cuda.matmul.allow_tf32 = True\n"
    assert codes(src) == [("ASC604", 5)]
