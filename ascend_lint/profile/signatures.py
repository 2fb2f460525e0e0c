"""What identifies each kind of event in the Ascend exports (data, with where each fact comes from).

Sources (read at the commits docs/profile.md names):
- torch_npu `profiler/analysis/prof_common_func/_trace_event_manager.py`: framework operators are `X`
  events of category `cpu_op`; a `torch_to_npu` flow (category `async_npu`, `s` at the operator, `f` at
  the device task) links an operator to each task it launched; `fwdbwd` flows link a forward operator to
  its backward operator; python-tracer events have category `python_function`.
- torch_npu `_constant.py`: the call stack is the `Call stack` argument, frames `file(line): function`
  joined by `;` (then `;\\r\\n`); `ProfilerStep#N` operators mark steps; `ACL_OP_EXE_NAME` =
  `AscendCL@aclopCompileAndExecute(V2)`.
- msprof (CANN) `analysis/csrc/application/timeline/ascend_hardware_assembler.cpp`: device tasks carry
  `Task Type` in their args (`AI_CORE`, `AI_CPU`, `AI_VECTOR_CORE`, `MIX_AIC`, ...); `MEMCPY_ASYNC`
  tasks add `operation` (`host to device`, `device to host`, ...), `size(B)`; `cann_assembler.cpp`:
  CANN API events are named `<level>@<api>` with level `AscendCL`, `Runtime`, `Model`, `Node`,
  `Communication`.
- msprof-analyze advisor `prof_common/constant.py` and `timeline_op_collector.py`: an operator compile is
  an `AscendCL@aclopCompileAndExecute` event; a stream sync an `AscendCL@aclrtSynchronizeStream` event
  (mapped to the enclosing aten operator by time window); `AI_CPU` is the AI CPU task type.
- torch_npu `csrc/aten/common/CopyKernel.cpp`: a blocking host/device copy runs
  `aclrtSynchronizeStreamWithTimeout` then `aclrtMemcpy`.
- MindSpore `profiler/common/constant.py` / `analysis/parser/timeline_event/fwk_event.py` /
  `ccsrc/common/debug/profiler/profiling_python.cc`: framework events on the `MindSpore` process, python
  stack events of category `python_function` named `file(first line):[nn.Cell.Class.]function`, flows
  `mindspore_to_npu` (`async_npu`) and `mindspore_to_self` (`async_mindspore`), stage/event names
  `SyncStream`, `StreamSync`, `Asnumpy`, `PyNativeOpCompile`.
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Optional, Tuple

# -- trace categories and names ------------------------------------------------------------------------
CAT_CPU_OP = "cpu_op"
CAT_PYTHON = "python_function"
CAT_DEVICE_FLOW = "async_npu"  # torch_to_npu, mindspore_to_npu
HOST_FLOW_CATS = frozenset({"fwdbwd", "async_mindspore"})  # host op -> host op (forward->backward, frontend->launch)
STEP_PREFIX = "ProfilerStep#"
CALL_STACK_ARG = "Call stack"
INPUT_DIMS_ARG = "Input Dims"
TASK_TYPE_ARG = "Task Type"
MEMCPY_OPERATION_ARG = "operation"
API_LEVELS = ("AscendCL@", "Runtime@", "Model@", "Node@", "Communication@", "Api@")

# -- device task kinds ---------------------------------------------------------------------------------
TASK_AI_CPU = "AI_CPU"
D2H_OPERATIONS = frozenset({"device to host", "device to host ex"})
H2D_OPERATIONS = frozenset({"host to device", "host to device ex"})

# -- host events -------------------------------------------------------------------------------------
# CANN APIs during which the host blocks until the device stream drains
SYNC_APIS = ("AscendCL@aclrtSynchronizeStream", "AscendCL@aclrtSynchronizeDevice",
             "AscendCL@aclrtSynchronizeEvent")
# CANN APIs that compile an operator online (single-operator mode, jit_compile=True)
COMPILE_APIS = ("AscendCL@aclopCompileAndExecute",)  # prefix: also ...V2
# framework operators that read a device scalar on the host: `Tensor.item()` runs
# `aten::_local_scalar_dense`; MindSpore's `Tensor.asnumpy()` is the `Asnumpy` stage
D2H_READ_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})
MINDSPORE_SYNC_WORDS = ("SyncStream", "StreamSync")
MINDSPORE_D2H_WORDS = ("Asnumpy",)
MINDSPORE_COMPILE_WORDS = ("PyNativeOpCompile",)
MINDSPORE_LAUNCH_WORDS = ("KernelLaunch", "LaunchTask")

# host event kinds stored by the reader
KIND_OP = 1  # framework operator
KIND_STEP = 2
KIND_PYFUNC = 3
KIND_SYNC = 4  # a blocking sync API or framework sync stage
KIND_COMPILE = 5
KIND_D2H_READ = 6  # framework operator that reads a device value on the host

# device task kinds
TASK_OTHER = 0
TASK_KIND_AI_CPU = 1
TASK_KIND_D2H = 2
TASK_KIND_H2D = 3


def api_kind(name: str) -> int:
    """The host kind of a CANN API event name, 0 when it is of no interest."""
    if name.startswith(SYNC_APIS):
        return KIND_SYNC
    if name.startswith(COMPILE_APIS):
        return KIND_COMPILE
    return 0


def framework_kind(name: str) -> int:
    """The host kind of a MindSpore framework event (`Module::Event::name` or a stage name)."""
    if any(word in name for word in MINDSPORE_COMPILE_WORDS):
        return KIND_COMPILE
    if any(word in name for word in MINDSPORE_D2H_WORDS):
        return KIND_D2H_READ
    if any(word in name for word in MINDSPORE_SYNC_WORDS):
        return KIND_SYNC
    return KIND_OP


# -- AI CPU operators with an AI Core way out --------------------------------------------------------
# From Ascend's "AICPU Operator Replacement Examples" (msprof-analyze docs/en/
# aicpu_operator_replacement_example.md) and the advisor's aicpu_rules.yaml: the operator types it
# gives an equivalent for, keyed by lower-case OP type.
AICPU_REPLACEMENTS: Dict[str, str] = {
    "index": "index with `index_select` (AI Core `GatherV2`) instead of a tensor index",
    "indexput": "write through a mask with `torch.where(mask, value, x)` or `x *= ~mask` instead of `x[mask] = v`",
    "indexputv2": "write through a mask with `torch.where(mask, value, x)` or `x *= ~mask` instead of `x[mask] = v`",
    "nonzero": "avoid boolean-mask indexing (`nonzero`): reduce with the mask instead, e.g. `(a * mask).sum()`",
    "argmin": "upgrade CANN to 7.0.RC1 or later, where `ArgMin` runs on the AI Core",
}
# Data types the AI Core kernels take, per operator type, where the guide lists them (lower case); an
# AI CPU kernel fed another type may move to the AI Core after a cast.
AI_CORE_DTYPES: Dict[str, FrozenSet[str]] = {
    "mul": frozenset({"float", "float32", "float16", "dt_bf16", "bf16", "int32", "int64", "int8", "uint8",
                      "complex64"}),
    "equal": frozenset({"float", "float32", "float16", "dt_bf16", "bf16", "bool", "int32", "int64", "int8",
                        "uint8"}),
    "tensorequal": frozenset({"float", "float32", "float16", "dt_bf16", "bf16", "float64", "bool", "int32",
                              "int8", "uint8"}),
}
DOUBLE_DTYPES = frozenset({"double", "float64", "dt_double"})


def aicpu_alternative(op_type: str, input_dtypes: str) -> Optional[str]:
    """The documented AI Core way out for an AI CPU operator, or None when the guide has none."""
    key = op_type.lower()
    replacement = AICPU_REPLACEMENTS.get(key)
    if replacement:
        return replacement
    dtypes = _dtypes(input_dtypes)
    if dtypes & DOUBLE_DTYPES:
        return "cast the float64 inputs to float32: the Ascend advisor asks to convert double operators to float"
    accepted = AI_CORE_DTYPES.get(key)
    if accepted and dtypes and not dtypes <= accepted:
        odd = ", ".join(sorted(dtypes - accepted))
        return f"cast the {odd} inputs to a type the AI Core `{op_type}` takes (such as int32 or float16)"
    return None


def op_type_of(kernel_name: str) -> str:
    """A best guess at the OP type from a kernel name such as `aclnnIndexPut_IndexPutV2_IndexPutV2`."""
    parts = [p for p in kernel_name.split("_") if p]
    for part in reversed(parts):
        if part.lower() in AICPU_REPLACEMENTS or part.lower() in AI_CORE_DTYPES:
            return part
    return parts[-1] if parts else kernel_name


def _dtypes(text: str) -> FrozenSet[str]:
    """'DOUBLE;INT64' (op_summary's `;`-separated list) -> {'double', 'int64'}."""
    words = text.replace(",", ";").split(";")
    return frozenset(w.strip().lower() for w in words if w.strip() and w.strip().upper() != "N/A")


def is_library_path(parts: Tuple[str, ...]) -> bool:
    """A frame in an installed package or the standard library never maps to the linted project."""
    for part in parts:
        if part in ("site-packages", "dist-packages"):
            return True
        if part.startswith("python") and part[6:7].isdigit() and "lib" in parts:
            return True
    return False
