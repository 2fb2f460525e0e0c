"""Catalogue knowledge the project model uses, kept as data: framework base classes, third-party model
bases, modules that apply run-time migration when imported, monkey-patch registration functions."""
from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

# Hot methods per class kind: what runs on every step of a model of that kind.
HOT_METHODS: Dict[str, Tuple[str, ...]] = {
    "module": ("forward",),
    "cell": ("construct",),
    "function": ("forward", "backward"),
    "model": ("forward", "construct"),  # bases used by torch-style and MindSpore-style code alike
}

# Well-known third-party bases (not defined in the project) and their kind. A trailing `*` matches any
# name that ends the dotted path with the rest (`transformers.*PreTrainedModel`: every model family's base).
THIRD_PARTY_BASES: Dict[str, str] = {
    "transformers.PreTrainedModel": "module",
    "transformers.modeling_utils.PreTrainedModel": "module",
    "transformers.GradientCheckpointingLayer": "module",
    "transformers.modeling_layers.GradientCheckpointingLayer": "module",
    "transformers.*PreTrainedModel": "module",
    "diffusers.ModelMixin": "module",
    "diffusers.models.modeling_utils.ModelMixin": "module",
    "mmcv.runner.BaseModule": "module",
    "mmcv.runner.base_module.BaseModule": "module",
    "mmcv.runner.ModuleList": "module",
    "mmcv.runner.Sequential": "module",
    "mmengine.model.BaseModule": "module",
    "mmengine.model.BaseModel": "module",
    "mmengine.model.base_module.BaseModule": "module",
    "mmengine.model.base_model.BaseModel": "module",
    "megatron.core.transformer.module.MegatronModule": "module",
    "megatron.core.transformer.MegatronModule": "module",
    "megatron.core.transformer.transformer_layer.TransformerLayer": "module",
    "megatron.core.models.common.language_module.language_module.LanguageModule": "module",
    "megatron.core.models.gpt.GPTModel": "module",
    "megatron.core.models.gpt.gpt_model.GPTModel": "module",
    "megatron.model.module.MegatronModule": "module",
    "megatron.legacy.model.module.MegatronModule": "module",
    "megatron.legacy.model.MegatronModule": "module",
    "mindformers.models.PreTrainedModel": "cell",
    "mindformers.models.modeling_utils.PreTrainedModel": "cell",
    "mindformers.models.base_model.BaseModel": "cell",
    "mindformers.*PreTrainedModel": "cell",
    "mindnlp.transformers.PreTrainedModel": "model",
    "mindnlp.transformers.modeling_utils.PreTrainedModel": "model",
    "mindnlp.*PreTrainedModel": "model",
    "mindnlp.core.nn.Module": "module",
    "mindtorch.nn.Module": "module",
}
_PATTERNS = tuple((k[: k.index("*")], k[k.index("*") + 1:], v) for k, v in THIRD_PARTY_BASES.items() if "*" in k)

# Importing one of these applies torch_npu's run-time migration (CUDA names patched to NPU) at import time:
# transfer_to_npu itself, and the adaptors known to import it.
MIGRATING_MODULES: Tuple[str, ...] = (
    "torch_npu.contrib.transfer_to_npu", "mindspeed.megatron_adaptor", "mindspeed_llm",
    # torch emulations on MindSpore whose 'cuda' device and Tensor.cuda() map to Ascend
    "mindnlp", "mindtorch", "mindtorch_v2",
)
# Packages whose own modules only ever run migrated (their entry points apply it), even when the package
# itself is linted without the entry that applies it.
MIGRATED_PACKAGES = frozenset({"mindspeed_llm", "mindspeed", "mindtorch", "mindtorch_v2"})

# `register_patch("pkg.mod.Class.forward", fn)`: string-addressed monkey-patch registries (MindSpeed's
# patch manager and look-alikes). The call's last name, its target-string position and value position.
PATCH_REGISTRARS: Dict[str, Tuple[int, int]] = {"register_patch": (0, 1)}

# NPU context of a file on its own: it imports one of these packages, names an Apex `Npu*` class, or its text
# uses an `npu` device, the `hccl` backend or a `torch.npu.*` API (NPU_TEXT_RE needs one of NPU_TEXT_NEEDLES).
NPU_PACKAGES = frozenset({"torch_npu", "mindspore", "mindformers", "mindspeed", "mindspeed_llm"})
NPU_TEXT_RE = re.compile(r"""(['"])npu(?::\d+)?\1|\.npu\(|['"]hccl['"]|['"]npu:|\btorch\.npu\.\w""")
NPU_TEXT_NEEDLES = ("'npu", '"npu', ".npu(", "'hccl", '"hccl', "torch.npu.")
NPU_TEXT_REACH = len("torch.")  # a match starts at most this far before its `npu`/`hccl`
# A script that uses a CUDA device or the NCCL backend (an entry script with this and no NPU context is a
# GPU script: the modules it imports are shared with GPU code).
GPU_TEXT_RE = re.compile(r"""\.cuda\(|\btorch\.cuda\.\w|(['"])(?:cuda(?::\d+)?|nccl)\1|['"]cuda:""")
GPU_TEXT_NEEDLES = ("cuda", "nccl")
GPU_TEXT_REACH = len("torch.")  # a match starts at most this far before its `cuda`/`nccl`

# Training steps (semantic.is_step_call and FileContext's MindSpore step test; summary.might_step and
# step_call_lines find a superset of them in text): `x.step()` on a receiver named with one of STEP_RECEIVER_HINTS and without
# "sched"; calls named like a step (lower case, underscores dropped: STEP_NAME_RE, or one of STEP_CALL_NAMES).
STEP_RECEIVER_HINTS = ("optim", "scaler", "opt")
STEP_NAME_RE = re.compile(r"train(?:one)?(?:step|batch|iter)")
STEP_CALL_NAMES = ("train_one_step", "train_net", "train_network", "train_step_cell")
# Calls that return the device a program runs on (`torch.npu.current_device()`, DeepSpeed's
# `get_accelerator().current_device_name()`): `.to(<one of them>)` moves a tensor to the device.
DEVICE_QUERY_METHODS = frozenset({"current_device", "current_device_name", "device_name", "get_device"})
# Text that makes a file worth a full look for precision decisions about the models it trains.
PRECISION_WORDS = ("amp.initialize", "amp_level", ".half()", ".bfloat16()", "to_float", "float16)", " Model(",
                   "=Model(", "TrainOneStep", "MixedPrecision", "param_dtype", "autocast", "build_train_network",
                   "auto_mixed_precision", "add_flags_recursive")
# Any of these in a body: it may set a reduced precision somewhere, so "trained in fp32" is not concluded.
FP_WORDS = ("float16", "bfloat16", "fp16", "bf16", "amp_level", "to_float", "mixed_precision", "half",
            "autocast", "amp.initialize", "auto_mixed_precision", "MixedPrecision", "param_dtype", "add_flags")


def framework_kind(qualname: str) -> Optional[str]:
    """The kind of a base class named by its qualified name: 'module' (torch.nn), 'cell' (MindSpore),
    'function' (autograd) or a well-known third-party base's kind; None when unknown."""
    if qualname.startswith("torch.nn."):
        last = qualname.rsplit(".", 1)[-1]
        if last[:1].isupper() and not qualname.startswith("torch.nn.functional"):
            return "module"
        return None
    if qualname.startswith("mindspore.nn."):
        return "cell" if qualname.rsplit(".", 1)[-1][:1].isupper() else None
    if qualname == "torch.autograd.Function" or qualname.startswith("torch.autograd.function."):
        return "function"
    kind = THIRD_PARTY_BASES.get(qualname)
    if kind is not None:
        return kind
    for head, tail, pattern_kind in _PATTERNS:
        if qualname.startswith(head) and qualname.endswith(tail):
            return pattern_kind
    return None


def migrating_module(name: str, extra: Tuple[str, ...] = ()) -> Optional[str]:
    """The known (or configured) migrating module that importing `name` applies, if any."""
    for known in MIGRATING_MODULES + tuple(extra):
        if name == known or name.startswith(known + "."):
            return known
    return None
