"""The torch.cuda -> torch.npu twin table used by ASC603 (one data structure, checked against torch_npu).

Every entry was checked against torch_npu's source (Ascend/pytorch master, 2026-08: the `__all__` of
torch_npu/npu/__init__.py, torch_npu/npu/{utils,memory,random,streams,graphs}.py, torch_npu/npu/amp/__init__.py)
and, where noted, the Ascend Extension for PyTorch API support list ("torch.cuda.*** -> torch_npu.npu.***").
After `import torch_npu`, `torch.npu` IS `torch_npu.npu` (torch._register_device_module("npu", torch_npu.npu)).

Keys are the dotted name after `torch.cuda.`. `exact` twins have the same name, signature and meaning
under `torch.npu` and get the rename fix (safe only where the CUDA call fails on an Ascend host, see
`fails_without_cuda`); the others are reported with their note and no fix.
APIs absent from the table are not reported (nothing verified to say about them).
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional


class Twin(NamedTuple):
    npu: Optional[str]  # the torch.npu counterpart ("torch.npu.X"), None when there is none
    exact: bool  # same name, signature and meaning: `torch.cuda.X` -> `torch.npu.X` is a rename
    note: str = ""
    # On an Ascend host (torch without CUDA) the CUDA API raises: the program stopped there, so the rename
    # cannot change a result it computed (a safe fix). The others answer quietly (`is_available()` is False,
    # `device_count()` 0, `manual_seed` and `empty_cache` do nothing, `amp.autocast`/`GradScaler` disable
    # themselves): the program ran another path there, and the rename changes what it computes (unsafe).
    fails_without_cuda: bool = False


def _same(*names: str, note: str = "", fails: bool = False) -> Dict[str, Twin]:
    return {name: Twin(f"torch.npu.{name}", True, note, fails) for name in names}


TWINS: Dict[str, Twin] = {
    # devices and initialisation (torch_npu/npu/__init__.py, utils.py; API list: supported)
    **_same("is_initialized", "device_count", "device", "device_of", "is_bf16_supported"),
    **_same("is_available", note="it is False on an Ascend host, so what it turns on (autocast, pinned memory, "
                                 "a fused optimizer) stays off there"),
    **_same("init", "set_device", "current_device", "get_device_name", "get_device_properties", "synchronize",
            "can_device_access_peer", "ipc_collect", "utilization", "current_blas_handle", fails=True),
    # streams and events (torch_npu/npu/streams.py, utils.py)
    **_same("StreamContext", "stream"),
    **_same("Stream", "Event", "ExternalStream", "set_stream", "current_stream", "default_stream",
            "set_sync_debug_mode", "get_sync_debug_mode", fails=True),
    # random number generators (torch_npu/npu/random.py, default_generators in __init__.py)
    **_same("manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state", "set_rng_state_all",
            "default_generators"),
    **_same("initial_seed", "get_rng_state", "get_rng_state_all", fails=True),
    # caching allocator (torch_npu/npu/memory.py __all__)
    **_same("mem_get_info", "set_per_process_memory_fraction", fails=True),
    **_same("empty_cache", "memory_stats", "memory_stats_as_nested_dict", "memory_allocated",
            "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_cached",
            "max_memory_cached", "reset_peak_memory_stats", "reset_max_memory_allocated",
            "reset_max_memory_cached", "reset_accumulated_memory_stats", "memory_snapshot", "memory_summary",
            "get_per_process_memory_fraction",
            "caching_allocator_alloc", "caching_allocator_delete", "get_allocator_backend", "MemPool",
            "use_mem_pool", "change_current_allocator", "memory._record_memory_history", "memory._snapshot",
            "memory._dump_snapshot", "memory.memory_allocated", "memory.max_memory_allocated",
            "memory.memory_reserved", "memory.memory_stats", "memory.empty_cache"),
    # graphs with the same names (torch_npu/npu/graphs.py)
    **_same("graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"),
    # mixed precision (torch_npu/npu/amp/__init__.py; API list torch.cuda.amp: all supported)
    **_same("amp.autocast", "amp.GradScaler"),
    **_same("amp.custom_fwd", "amp.custom_bwd",
            note="deprecated in torch_npu as in torch: prefer `torch.amp.custom_fwd(device_type='npu')`"),
    # legacy tensor types (torch_npu/npu/__init__.py __all__)
    **_same("FloatTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
            "CharTensor", "ByteTensor", "BoolTensor", fails=True),
    # twins that differ
    "DoubleTensor": Twin("torch.npu.FloatTensor", False,
                         "float64 is not supported on Ascend (transfer_to_npu maps it to FloatTensor)"),
    "CUDAGraph": Twin("torch.npu.NPUGraph", False, "renamed; capture semantics follow torch_npu's graph mode"),
    "get_device_capability": Twin(None, False,
                                  "torch.npu.get_device_capability exists only for compatibility and does not "
                                  "describe the NPU; gate features on torch_npu/SoC checks instead"),
    "nvtx": Twin(None, False, "use torch_npu.npu.mstx (mark/range_start/range_end) for profiler ranges"),
    "get_arch_list": Twin(None, False, "CUDA architectures have no NPU meaning"),
    "get_gencode_flags": Twin(None, False, "CUDA code generation flags have no NPU meaning"),
    "cudart": Twin(None, False, "the CUDA runtime is not available on Ascend"),
    "jiterator": Twin(None, False, "CUDA JIT kernels do not run on Ascend"),
    "nccl": Twin(None, False, "use the HCCL backend through torch.distributed ('hccl')"),
    "comm": Twin(None, False, "use torch.distributed collectives with the 'hccl' backend"),
    "tunable": Twin(None, False, "TunableOp is CUDA/ROCm only"),
    "is_tf32_supported": Twin(None, False, "the NPU's reduced fp32 mode is HF32: torch.npu.matmul.allow_hf32"),
    "temperature": Twin(None, False, "NVML queries have no torch_npu twin"),
    "power_draw": Twin(None, False, "NVML queries have no torch_npu twin"),
    "clock_rate": Twin(None, False, "NVML queries have no torch_npu twin"),
    "list_gpu_processes": Twin(None, False, "NVML queries have no torch_npu twin"),
}


def lookup(path: str) -> Optional[Twin]:
    """The twin of `torch.cuda.<path>`: the longest table key that is `path` or a prefix of it."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        twin = TWINS.get(".".join(parts[:end]))
        if twin is not None:
            return twin
    return None
