"""Scan `trace_view.json` once, streaming, and keep only what the per-line costs need.

Each event is classified by its own fields (category, `Task Type`, API name), since the metadata
events that name the processes may come anywhere in the file. Framework operators, CANN sync and
compile APIs and python-tracer frames go to the `host` table, device tasks to `task`, flow ends to
`flow_s` / `flow_f`; call stacks are parsed once per distinct stack and kept as small tuples.
"""
from __future__ import annotations

from typing import IO, Dict, List, Optional, Tuple

from . import signatures as sig
from .jsonstream import TraceFormatError, iter_trace_batches
from .records import Frame, StepRange
from .stacks import parse_call_stack
from .store import FLOW_DEVICE, FLOW_HOST, EventStore

NO_STACK = -1
NO_NAME = -1


class Interner:
    """Strings to small ids and back."""

    def __init__(self) -> None:
        self.ids: Dict[str, int] = {}
        self.values: List[str] = []

    def id(self, value: str) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
        return found


class StackTable:
    """Distinct call stacks (innermost frame first), keyed by the hash of their recorded text."""

    def __init__(self) -> None:
        self.stacks: List[Tuple[Frame, ...]] = []
        self._by_text: Dict[int, int] = {}
        self._frames: Dict[Frame, Frame] = {}

    def from_text(self, text: str) -> int:
        key = hash(text)
        found = self._by_text.get(key)
        if found is None:
            found = self._by_text[key] = self.add(parse_call_stack(text))
        return found

    def add(self, frames: Tuple[Frame, ...]) -> int:
        interned = tuple(self._frames.setdefault(f, f) for f in frames)
        self.stacks.append(interned)
        return len(self.stacks) - 1


def to_ns(value: object) -> int:
    """A trace timestamp or duration in microseconds (string like '1700000000123.456', or a number) -> ns."""
    if type(value) is str:
        if len(value) > 4 and value[-4] == "." and value[0] != "-":  # torch_npu's convert_ns2us_str
            return int(value[:-4] + value[-3:])
        text = value.strip()
        dot = text.find(".")
        if dot < 0:
            return int(text) * 1000
        frac = text[dot + 1:dot + 4]
        whole = int(text[:dot]) if dot and text[:dot] != "-" else 0
        sign = -1 if text.startswith("-") else 1
        return whole * 1000 + sign * (int(frac.ljust(3, "0")) if frac.isdigit() else 0)
    if type(value) is int:
        return value * 1000  # type: ignore[operator]
    if type(value) is float:
        return round(value * 1000)  # type: ignore[operator]
    raise ValueError(f"not a time: {value!r}")


class TraceScan:
    """The result of scanning one trace file."""

    def __init__(self) -> None:
        self.events = 0
        self.skipped = 0  # events with missing or malformed fields
        self.process_names: Dict[object, str] = {}
        self.steps: List[StepRange] = []
        self.ops_with_call_stack = 0
        self.python_frames = 0
        self.device_tasks = 0
        self.aicpu_tasks = 0
        self.flows = 0
        self.error: Optional[TraceFormatError] = None


class TraceScanner:
    """Feeds one trace file's events into an EventStore (one pass; the loop is flat for speed)."""

    def __init__(self, store: EventStore, names: Interner, stacks: StackTable) -> None:
        self.store = store
        self.names = names
        self.stacks = stacks
        self.scan = TraceScan()
        self._host: List[tuple] = []  # the store's pending rows (set by read)
        self._tasks: List[tuple] = []

    def read(self, raw: IO[bytes]) -> TraceScan:
        """Scan the trace. Framework operators and flow ends (most of the events) are handled in the loop
        itself, other complete events by _other_complete, process names by _process_name."""
        scan = self.scan
        store = self.store
        host, flow_s, flow_f = store.rows("host"), store.rows("flow_s"), store.rows("flow_f")
        self._host, self._tasks = host, store.rows("task")
        name_id = self.names.id
        stack_of = self.stacks.from_text
        steps = scan.steps
        cpu_op, call_stack_arg, dims_arg = sig.CAT_CPU_OP, sig.CALL_STACK_ARG, sig.INPUT_DIMS_ARG
        step_prefix, d2h_read_ops = sig.STEP_PREFIX, sig.D2H_READ_OPS
        kind_op, kind_read = sig.KIND_OP, sig.KIND_D2H_READ
        other_complete = self._other_complete
        place, duration = _place, _duration
        events = skipped = with_stack = flows = 0
        try:
            for batch in iter_trace_batches(raw, on_skip=self._skip):
                events += len(batch)
                for event in batch:
                    try:
                        ph = event.get("ph")
                        if ph == "X":
                            name = event["name"]
                            cat = event.get("cat")
                            args = event.get("args")
                            if type(args) is not dict:
                                args = {}
                            if cat != cpu_op:
                                other_complete(event, name, cat, args)
                            elif name.startswith(step_prefix):
                                steps.append(_step(event, name))
                            else:
                                text = args.get(call_stack_arg)
                                stack = NO_STACK
                                if type(text) is str and text:
                                    stack = stack_of(text)
                                    with_stack += 1
                                dims = args.get(dims_arg)
                                shape = 0 if dims is None else hash(dims if type(dims) is str else repr(dims))
                                host.append((*place(event), duration(event),
                                             kind_read if name in d2h_read_ops else kind_op, stack, name_id(name),
                                             shape))
                        elif ph == "s" or ph == "f":
                            kind = FLOW_KINDS.get(event.get("cat"))
                            if kind is not None:
                                flows += 1
                                fid = event.get("id")
                                (flow_s if ph == "s" else flow_f).append(
                                    (kind, fid if type(fid) is int else hash(str(fid)), *place(event)))
                        elif ph == "M":
                            self._process_name(event)
                    except (ValueError, TypeError, AttributeError, KeyError, OverflowError):
                        skipped += 1
                store.spill()
        except TraceFormatError as error:
            scan.error = error
        scan.events += events
        scan.skipped += skipped
        scan.ops_with_call_stack += with_stack
        scan.flows += flows
        store.flush()
        return scan

    def _other_complete(self, event: dict, name: str, cat: object, args: dict) -> None:
        """A complete (`X`) event that is not a framework operator: a device task, a python-tracer frame, a
        CANN API, or (no category) a step marker or a framework stage."""
        if sig.TASK_TYPE_ARG in args:
            self.scan.device_tasks += 1
            self._tasks.append(self._task_row(event, name, args))
        elif cat == sig.CAT_PYTHON:
            self.scan.python_frames += 1
            # C calls are named by repr() (`<built-in method ... at 0x7f...>`): not a frame, and too many distinct
            # names to keep
            self._host.append((*_place(event), _duration(event), sig.KIND_PYFUNC, NO_STACK,
                               NO_NAME if name.startswith("<") else self.names.id(name), 0))
        elif "@" in name:
            kind = sig.api_kind(name)
            if kind:
                self._host.append((*_place(event), _duration(event), kind, NO_STACK, self.names.id(name), 0))
        elif not cat:
            if name.startswith(sig.STEP_PREFIX):
                self.scan.steps.append(_step(event, name))
            elif "::" in name or name in MINDSPORE_STAGES:
                self._host.append((*_place(event), _duration(event), sig.framework_kind(name), NO_STACK,
                                   self.names.id(name), 0))

    def _process_name(self, event: dict) -> None:
        """A metadata (`M`) event naming a process."""
        if event.get("name") == "process_name":
            args = event.get("args")
            if type(args) is dict and type(args.get("name")) is str:
                self.scan.process_names[event.get("pid")] = args["name"]

    def _skip(self, _kind: str) -> None:
        self.scan.skipped += 1

    def _task_row(self, event: dict, name: str, args: dict) -> tuple:
        kind = sig.TASK_OTHER
        if args.get(sig.TASK_TYPE_ARG) == sig.TASK_AI_CPU:
            kind = sig.TASK_KIND_AI_CPU
            self.scan.aicpu_tasks += 1
        else:
            operation = args.get(sig.MEMCPY_OPERATION_ARG)
            if operation in sig.D2H_OPERATIONS:
                kind = sig.TASK_KIND_D2H
            elif operation in sig.H2D_OPERATIONS:
                kind = sig.TASK_KIND_H2D
        return (*_place(event), _duration(event), kind, self.names.id(name))


# Flow categories kept: launches (host -> device) and host -> host links (forward -> backward, frontend -> launch).
FLOW_KINDS = {sig.CAT_DEVICE_FLOW: FLOW_DEVICE, **{cat: FLOW_HOST for cat in sig.HOST_FLOW_CATS}}
MINDSPORE_STAGES = frozenset({"SyncStream", "Asnumpy", "RunOp", "RunGraph", "RunGrad", "WaitPipeline"})


def _step(event: dict, name: str) -> StepRange:
    number = int(name[len(sig.STEP_PREFIX):].strip())
    start = to_ns(event["ts"])
    return StepRange(number, start, start + to_ns(event.get("dur", 0)))


def _place(event: dict) -> Tuple[int, int, int]:
    """(pid, tid, start ns) of an event; the common forms (int ids, 'us.nnn' strings) without a call."""
    pid, tid, ts = event.get("pid"), event.get("tid"), event["ts"]
    if type(ts) is str and len(ts) > 4 and ts[-4] == "." and ts[0] != "-":
        ts = int(ts[:-4] + ts[-3:])
    else:
        ts = to_ns(ts)
    return (pid if type(pid) is int else _key(pid), tid if type(tid) is int else _key(tid), ts)


def _duration(event: dict) -> int:
    dur = event.get("dur", 0)
    return round(dur * 1000) if type(dur) is float else to_ns(dur)


def _key(value: object) -> int:
    """pids and tids are integers in torch_npu and msprof traces; strings are hashed to stay comparable."""
    if value is None:
        return 0
    text = str(value)
    return int(text) if text.lstrip("-").isdigit() else hash(text)
