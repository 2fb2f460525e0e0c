"""The profile-only patterns: code, name, message template and documentation, like a rule's metadata.

They become findings of a `profile` pack once the CLI reads profiles (docs/profile.md); until then
`read_profile` returns them as `Observation`s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from ..rule import Docs

SYNC_SOURCE = ("Ascend msprof-analyze advisor (`synchronize_stream` checker, `AscendCL@aclrtSynchronizeStream` "
               "events mapped to aten operators by time window); CANN large-model training guide, \"减少同步接口调用\" "
               "(https://www.hiascend.com/document/detail/zh/canncommercial/700/foundmodeldev/foundmodeltrain/"
               "PT_LMTMOG_000080.html).")


@dataclass(frozen=True)
class Pattern:
    code: str
    name: str
    message: str  # str.format template over the observation's facts
    docs: Docs


PATTERNS: Dict[str, Pattern] = {p.code: p for p in (
    Pattern(
        code="ASC801",
        name="aicpu-kernel-per-step",
        message="{kernels} ran on the AI CPU in {steps_seen} of {steps} profiled steps ({count:g} per step, "
                "{device_us:.0f} us per step): {advice}",
        docs=Docs(
            summary="An operator issued from this line runs on the AI CPU in every profiled step.",
            what="Reports a project line whose operators launched device tasks of type `AI_CPU` (the `Task Type` "
                 "of the task in trace_view.json, `Accelerator Core` in kernel_details.csv) in at least half the "
                 "profiled steps. The advice names the AI Core way out where Ascend documents one: the "
                 "replacement for `Index`, `IndexPut(V2)`, `NonZero`, `ArgMin`, or a cast when the inputs are "
                 "float64 or of a type the AI Core kernel does not take.",
            why="An AI CPU kernel runs on the few general-purpose cores of the NPU instead of the AI Cores, is "
                "much slower for the same work and serialises the stream around it. Ascend's profiler advisor "
                "flags every AI CPU task over 20 us and asks to change the code to avoid it; its replacement "
                "guide measures `masked_input[input_mask] = 0` (IndexPut on the AI CPU) at 9.64 ms against "
                "0.175 ms for `masked_input *= ~input_mask`.",
            known_problems="Only the operators the profile links to a launching framework operator are mapped; "
                           "the OP type and dtypes come from kernel_details.csv when it has the kernel.",
            example="""
                scores[mask] = 0.0            # IndexPut on the AI CPU
            """,
            use_instead="""
                scores = scores * ~mask       # Mul on the AI Core
            """,
            fix_safety="No fix: the equivalent depends on the shapes and dtypes.",
            source="msprof-analyze advisor `aicpu_checker.py`, `rules/en/aicpu_rules.yaml` and "
                   "`docs/en/aicpu_operator_replacement_example.md` (https://gitcode.com/Ascend/msprof-analyze).",
        )),
    Pattern(
        code="ASC802",
        name="stream-sync-per-step",
        message="the host waited for the NPU here in {steps_seen} of {steps} profiled steps ({count:g} per step, "
                "{wait_us:.0f} us waited per step): drop the synchronisation or do it every N steps",
        docs=Docs(
            summary="The host blocks on an NPU stream synchronisation from this line in every profiled step.",
            what="Reports a project line inside whose operators the CANN API `aclrtSynchronizeStream` (or "
                 "`...WithTimeout`, `aclrtSynchronizeDevice`, `aclrtSynchronizeEvent`; MindSpore's `SyncStream` "
                 "stage) ran in at least half the profiled steps, outside a host read of a device value "
                 "(that is ASC803). A blocking host/device copy (`.to()`, `.cpu()` without `non_blocking`) "
                 "synchronises this way.",
            why="While the host waits, it launches nothing: the NPU drains its queue and then idles until the "
                "host resumes, which shows as device free time in the step. Ascend's training guide asks to "
                "remove unnecessary synchronisation calls.",
            known_problems="A synchronisation outside every framework operator (an explicit "
                           "`torch.npu.synchronize()`) has no call stack in torch_npu profiles and is counted but "
                           "not mapped to a line.",
            example="""
                for batch in loader:
                    loss = step(batch)
                    torch.npu.synchronize()
            """,
            use_instead="""
                for batch in loader:
                    loss = step(batch)
            """,
            fix_safety="No fix: whether the synchronisation is needed depends on the program.",
            source=SYNC_SOURCE,
        )),
    Pattern(
        code="ASC803",
        name="device-to-host-read-per-step",
        message="a device value is read on the host here in {steps_seen} of {steps} profiled steps "
                "({count:g} per step, {wait_us:.0f} us waited per step): keep it on the NPU and read it every "
                "N steps",
        docs=Docs(
            summary="A device-to-host read (`.item()`, `.cpu()`, `asnumpy()`) from this line runs in every "
                    "profiled step.",
            what="Reports a project line that runs `aten::_local_scalar_dense` / `aten::item` (what "
                 "`Tensor.item()` executes), MindSpore's `Asnumpy` stage, or launches `MEMCPY_ASYNC` tasks whose "
                 "`operation` is `device to host`, in at least half the profiled steps. The cost is the host "
                 "time spent waiting plus the copies' device time.",
            why="A device-to-host read must wait until every operator queued before it has run, so the host "
                "stops launching the next step's work and the NPU idles. It is the measured form of ASC203.",
            example="""
                total += loss.item()
            """,
            use_instead="""
                total += loss.detach()
                if step % 100 == 0:
                    print(total.item() / (step + 1))
            """,
            fix_safety="No fix: where the value is needed, and how often, depends on the script.",
            source=SYNC_SOURCE + " msprof `MEMCPY_ASYNC` task args (`operation`).",
        )),
    Pattern(
        code="ASC804",
        name="host-to-device-copy-per-step",
        message="host-to-device copies are launched here in {steps_seen} of {steps} profiled steps ({count:g} per "
                "step, {device_us:.0f} us per step): move constant data to the NPU once, and feed batches "
                "from pinned memory with `non_blocking=True`",
        docs=Docs(
            summary="Host-to-device copies launched from this line run in every profiled step.",
            what="Reports a project line whose operators launch `MEMCPY_ASYNC` device tasks with `operation` "
                 "`host to device` in at least half the profiled steps.",
            why="Each copy crosses PCIe and, from pageable memory or without `non_blocking=True`, makes the host "
                "wait for it. Data that does not change between steps (masks, position ids, constants) should "
                "be created on the NPU once; batches should come from a pinned-memory loader.",
            known_problems="Blocking copies through `aclrtMemcpy` have no direction in the trace; they show as "
                           "ASC802 (the synchronisation they start with).",
            example="""
                for batch in loader:
                    mask = torch.tril(torch.ones(n, n)).npu()
            """,
            use_instead="""
                mask = torch.tril(torch.ones(n, n, device="npu"))
                for batch in loader:
                    ...
            """,
            fix_safety="No fix.",
            source="msprof `ascend_hardware_assembler.cpp` (`MEMCPY_ASYNC` tasks, `operation`); torch_npu "
                   "`csrc/aten/common/CopyKernel.cpp`.",
        )),
    Pattern(
        code="ASC805",
        name="op-recompiled-per-step",
        message="operators are compiled here step after step ({steps_seen} of the {later} profiled steps after "
                "the first; {count:g} per step, {compile_us:.0f} us per step{shapes}): the input shapes "
                "change; pad to fixed shapes or call `torch_npu.npu.set_compile_mode(jit_compile=False)`",
        docs=Docs(
            summary="Operators issued from this line are compiled online again in later profiled steps.",
            what="Reports a project line inside whose operators `AscendCL@aclopCompileAndExecute(V2)` (an online "
                 "operator compilation; MindSpore: `PyNativeOpCompile`) ran in at least half the profiled steps "
                 "after the first (and in two of them). The facts give how many distinct input shapes the "
                 "operators had there when `record_shapes=True`.",
            why="With `jit_compile=True` each new input shape compiles the operator again, which takes "
                "milliseconds on the host while the NPU waits. Ascend's advisor counts these events as operator "
                "compilations and recommends fixed shapes or `torch_npu.npu.set_compile_mode(jit_compile=False)` "
                "with `torch_npu.npu.config.allow_internal_format = False`.",
            example="""
                tokens = batch["input_ids"][:, : batch["length"].max()]   # a new length every step
            """,
            use_instead="""
                tokens = batch["input_ids"]                                 # padded to a fixed length
            """,
            fix_safety="No fix.",
            source="msprof-analyze `prof_common/constant.py` (`OP_COMPILE_NAME`), `timeline_op_collector.py` "
                   "(`OpCompileCollector`), `display/prompt/en/op_dispatch_prompt.py`; torch_npu "
                   "`_constant.py` (`ACL_OP_EXE_NAME`), `npu/npu_config.py` (`set_compile_mode`).",
        )),
)}
