"""One time-ordered sweep over the host events: give each a call stack and a step, sum costs per stack.

An operator's stack is its own `Call stack`; failing that, the stack of the operator its host flow
comes from (the forward operator of a backward one, `fwdbwd`; MindSpore's frontend operator of a
launch, `mindspore_to_self`), then the enclosing operator's on the same thread, then the chain of
enclosing python-tracer frames. A CANN sync or compile API belongs to the innermost operator whose
interval contains it (same thread first, then any thread: with torch_npu's task queue the API may run
on the dequeue thread), as Ascend's advisor maps `aclrtSynchronizeStream` to aten operators by time
window. Memory: one entry per open interval per thread, one accumulator per distinct stack.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from typing import Dict, List, Optional, Sequence, Tuple

from . import signatures as sig
from .records import Frame, StepRange
from .stacks import ProjectPaths, parse_frame
from .store import EventStore
from .trace import NO_STACK, Interner, StackTable

MAX_SHAPES = 16  # distinct input shapes kept per stack for the recompilation facts
MAX_KERNELS = 8  # distinct AI CPU kernels kept per stack
MAX_OPEN_PARENTS = 200_000  # forward operators kept waiting for their backward operator


class Tally:
    """Occurrences of one kind of event: count, time (ns) and the steps (bit i = step index i)."""

    __slots__ = ("n", "ns", "steps")

    def __init__(self) -> None:
        self.n = 0
        self.ns = 0
        self.steps = 0

    def add(self, n: int, ns: int, step_bit: int) -> None:
        self.n += n
        self.ns += ns
        self.steps |= step_bit

    def merge(self, other: "Tally") -> None:
        self.add(other.n, other.ns, other.steps)


class StackCost:
    """Costs of the events that share one call stack, over the profiled steps."""

    __slots__ = ("calls", "host_ns", "device_ns", "wait_ns", "steps", "aicpu", "d2h", "read", "h2d", "sync",
                 "compile", "kernels", "compile_shapes")
    TALLIES = ("aicpu", "d2h", "read", "h2d", "sync", "compile")

    def __init__(self) -> None:
        self.calls = 0
        self.host_ns = 0
        self.device_ns = 0
        self.wait_ns = 0
        self.steps = 0
        self.aicpu = Tally()
        self.d2h = Tally()  # device-to-host copy tasks (device ns)
        self.read = Tally()  # host reads of a device value (`Tensor.item()`...; host ns waited)
        self.h2d = Tally()
        self.sync = Tally()
        self.compile = Tally()
        self.kernels: Dict[Tuple[str, str, str], List[int]] = {}  # (name, op type, dtypes) -> [n, ns]
        self.compile_shapes: set = set()

    def merge(self, other: "StackCost") -> None:
        self.calls += other.calls
        self.host_ns += other.host_ns
        self.device_ns += other.device_ns
        self.wait_ns += other.wait_ns
        self.steps |= other.steps
        for name in self.TALLIES:
            getattr(self, name).merge(getattr(other, name))
        for key, (n, ns) in other.kernels.items():
            if key in self.kernels or len(self.kernels) < MAX_KERNELS:
                tally = self.kernels.setdefault(key, [0, 0])
                tally[0] += n
                tally[1] += ns
        if len(self.compile_shapes) < MAX_SHAPES:
            self.compile_shapes |= set(list(other.compile_shapes)[:MAX_SHAPES - len(self.compile_shapes)])


class Counts:
    """What the sweep saw, for MappingStats and diagnostics."""

    def __init__(self) -> None:
        self.with_stack = 0
        self.with_stack_mapped = 0
        self.step_with_stack = 0
        self.step_with_stack_mapped = 0
        self.host_events = 0
        self.unattributed_device_ns = 0  # device time of operators with no stack
        self.unmapped_device_ns = 0  # device time of operators whose stack has no project frame
        self.unattributed_syncs = 0


class StepIndex:
    """Host timestamp -> index of the profiled step containing it (-1: outside every step)."""

    def __init__(self, steps: Sequence[StepRange], fallback_count: int = 0) -> None:
        self.steps = sorted(steps, key=lambda s: s.start_ns)
        self._fallback = fallback_count
        self._starts = [s.start_ns for s in self.steps]
        self._ends = [s.end_ns for s in self.steps]

    @property
    def count(self) -> int:
        """Steps to divide totals by: without step markers, the steps step_trace_time.csv lists, else 1."""
        return max(1, len(self.steps) or self._fallback)

    def of(self, ts: int) -> int:
        if not self.steps:
            return 0
        i = bisect_right(self._starts, ts) - 1
        return i if i >= 0 and ts <= self._ends[i] else -1

    def numbers(self, mask: int) -> Tuple[int, ...]:
        if not self.steps:
            return ()
        return tuple(s.number for i, s in enumerate(self.steps) if mask >> i & 1)


class _Open:
    """An operator whose interval is still open during the sweep."""

    __slots__ = ("start", "end", "stack", "reading", "shape")

    def __init__(self, start: int, end: int, stack: int, reading: bool, shape: int) -> None:
        self.start = start
        self.end = end
        self.stack = stack
        self.reading = reading
        self.shape = shape


class Sweep:
    """Runs the sweep; results in `costs` (stack id -> StackCost) and `counts`."""

    def __init__(self, store: EventStore, names: Interner, stacks: StackTable, paths: ProjectPaths,
                 steps: StepIndex) -> None:
        self.store = store
        self.names = names
        self.stacks = stacks
        self.paths = paths
        self.steps = steps
        self.costs: Dict[int, StackCost] = {}
        self.counts = Counts()
        self._mapped: Dict[int, bool] = {}
        self._pyframes: Dict[int, Optional[Frame]] = {}
        self._chains: Dict[Tuple[int, Frame], int] = {}

    def run(self) -> None:
        """One pass over the host events in time order: each gets a stack and a step, its costs go to its stack."""
        ops_by_tid: Dict[int, List[_Open]] = {}
        py_by_tid: Dict[int, List[Tuple[int, int]]] = {}
        parent_stacks: Dict[int, int] = {}
        steps = self.steps
        for row in self.store.host_rows():
            hid, tid, ts, dur, kind, stack, name, shape, dev = row[:9]
            end = ts + dur
            ops = _still_open(ops_by_tid, tid, ts)
            if kind == sig.KIND_PYFUNC:
                self._python_frame(py_by_tid, tid, ts, end, name)
                continue
            step = steps.of(ts)
            bit = 1 << step if step >= 0 else 0
            if kind == sig.KIND_SYNC or kind == sig.KIND_COMPILE:
                self._api(ops_by_tid, ops, kind, ts, end, bit, step)
                continue
            self.counts.host_events += 1
            own = stack >= 0
            chain = False
            if not own:
                # (row[18]: the operator's flow parent)
                stack, chain = self._borrowed_stack(row[18], ops, py_by_tid, tid, ts, parent_stacks)
            if row[19] and stack >= 0:  # a flow parent itself (a forward operator)
                _keep_parent(parent_stacks, hid, stack)
            reading = bool(ops) and ops[-1].reading
            if own or chain:
                self._count_stack(stack, step)
            if stack < 0:
                self.counts.unattributed_device_ns += dev or 0
            elif step >= 0:
                self._charge(stack, row, bit, not ops, reading)
            ops.append(_Open(ts, end, stack, reading or kind == sig.KIND_D2H_READ, shape))

    def _borrowed_stack(self, parent: Optional[int], ops: List[_Open], py_by_tid: Dict[int, List[Tuple[int, int]]],
                        tid: int, ts: int, parent_stacks: Dict[int, int]) -> Tuple[int, bool]:
        """(the stack of an operator without its own, whether it is a python chain): its flow parent's, else
        the innermost enclosing operator's on the thread, else the python chain open there."""
        stack = NO_STACK
        if parent is not None:
            stack = parent_stacks.pop(parent, NO_STACK)
        if stack < 0:
            for entry in reversed(ops):
                if entry.stack >= 0:
                    return entry.stack, False
            return self._chain_at(py_by_tid, tid, ts)
        return stack, False

    def _charge(self, stack: int, row: Sequence, bit: int, outermost: bool, reading: bool) -> None:
        """Add an in-step operator's costs (a host row, see EventStore.host_rows) to its stack's."""
        (_, _, _, dur, kind, _, _, _, dev, cpu_n, cpu_dur, cpu_name, cpu_type, cpu_dtypes, d2h_n, d2h_dur, h2d_n,
         h2d_dur, _, _) = row
        cost = self.costs.get(stack)
        if cost is None:
            cost = self.costs[stack] = StackCost()
        cost.calls += 1
        cost.steps |= bit
        if outermost:
            cost.host_ns += dur
        if dev:
            cost.device_ns += dev
        if cpu_n:
            cost.aicpu.add(cpu_n, cpu_dur, bit)
            key = (self.names.values[cpu_name] if cpu_name is not None else "", cpu_type or "", cpu_dtypes or "")
            if key in cost.kernels or len(cost.kernels) < MAX_KERNELS:
                tally = cost.kernels.setdefault(key, [0, 0])
                tally[0] += cpu_n
                tally[1] += cpu_dur
        if d2h_n:
            cost.d2h.add(d2h_n, d2h_dur, bit)
        if h2d_n:
            cost.h2d.add(h2d_n, h2d_dur, bit)
        if kind == sig.KIND_D2H_READ and not reading:
            cost.read.add(1, dur, bit)
            cost.wait_ns += dur

    def _api(self, ops_by_tid: Dict[int, List[_Open]], ops: List[_Open], kind: int, ts: int, end: int,
             bit: int, step: int) -> None:
        """A sync or compile API: charge it to the innermost operator containing it."""
        entry = ops[-1] if ops and ops[-1].end >= end else None
        if entry is None:
            best_start = -1
            for other in ops_by_tid.values():
                for candidate in reversed(other):
                    if candidate.start <= ts and candidate.end >= end:
                        if candidate.start > best_start:
                            entry, best_start = candidate, candidate.start
                        break
        if entry is None or entry.stack < 0:
            self.counts.unattributed_syncs += kind == sig.KIND_SYNC
            return
        if step < 0:
            return
        cost = self.costs.get(entry.stack)
        if cost is None:
            cost = self.costs[entry.stack] = StackCost()
        if kind == sig.KIND_COMPILE:
            cost.compile.add(1, end - ts, bit)
            if entry.shape and len(cost.compile_shapes) < MAX_SHAPES:
                cost.compile_shapes.add(entry.shape)
        elif not entry.reading:  # a read's sync is already counted as the read's wait
            cost.sync.add(1, end - ts, bit)
            cost.wait_ns += end - ts

    def _count_stack(self, stack: int, step: int) -> None:
        mapped = self.is_mapped(stack)
        counts = self.counts
        counts.with_stack += 1
        counts.with_stack_mapped += mapped
        if step >= 0:
            counts.step_with_stack += 1
            counts.step_with_stack_mapped += mapped

    def is_mapped(self, stack: int) -> bool:
        if stack < 0:
            return False
        found = self._mapped.get(stack)
        if found is None:
            found = self._mapped[stack] = any(self.paths.resolve(f.file) for f in self.stacks.stacks[stack])
        return found

    # -- python tracer frames --------------------------------------------------------------------------
    def _python_frame(self, py_by_tid: Dict[int, List[Tuple[int, int]]], tid: int, ts: int, end: int,
                      name: int) -> None:
        """Open a python-tracer frame; its chain keeps only project frames (library frames are skipped)."""
        py = py_by_tid.get(tid)
        if py is None:
            py = py_by_tid[tid] = []
        while py and py[-1][0] <= ts:
            py.pop()
        parent = py[-1][1] if py else NO_STACK
        frame = self._pyframe(name)
        chain = parent
        if frame is not None:
            key = (parent, frame)
            chain = self._chains.get(key, NO_STACK)
            if chain < 0:
                outer = self.stacks.stacks[parent] if parent >= 0 else ()
                chain = self._chains[key] = self.stacks.add((frame,) + outer)
        py.append((end, chain))

    def _pyframe(self, name: int) -> Optional[Frame]:
        if name < 0:
            return None
        if name in self._pyframes:
            return self._pyframes[name]
        frame = parse_frame(self.names.values[name], line_is_def=True)
        if frame is not None and self.paths.resolve(frame.file) is None:
            frame = None
        self._pyframes[name] = frame
        return frame

    def _chain_at(self, py_by_tid: Dict[int, List[Tuple[int, int]]], tid: int, ts: int) -> Tuple[int, bool]:
        """(the python chain open at `ts` on the thread, whether any python frame is open there)."""
        py = py_by_tid.get(tid)
        while py and py[-1][0] <= ts:
            py.pop()
        if not py:
            return NO_STACK, False
        return py[-1][1], True


def _still_open(ops_by_tid: Dict[int, List[_Open]], tid: int, ts: int) -> List[_Open]:
    """The thread's operators still open at `ts` (those that ended before are dropped)."""
    ops = ops_by_tid.get(tid)
    if ops is None:
        ops = ops_by_tid[tid] = []
    while ops and ops[-1].end <= ts:
        ops.pop()
    return ops


def _keep_parent(parent_stacks: Dict[int, int], hid: int, stack: int) -> None:
    """Keep a forward operator's stack for its backward operator (the oldest dropped past MAX_OPEN_PARENTS)."""
    if len(parent_stacks) >= MAX_OPEN_PARENTS:  # forward ops whose backward never came
        del parent_stacks[next(iter(parent_stacks))]
    parent_stacks[hid] = stack


def per_step_threshold(steps: int) -> int:
    """A pattern is per-step when seen in at least half the profiled steps, and in two when there are two."""
    if steps <= 1:
        return 1
    return max(2, math.ceil(steps / 2))
