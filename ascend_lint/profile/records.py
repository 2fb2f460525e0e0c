"""Typed records of a read profile. `PROFILE_SCHEMA` changes whenever one of their shapes does."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Optional, Tuple

PROFILE_SCHEMA = 1

TORCH_NPU = "torch_npu"
MINDSPORE = "mindspore"
UNKNOWN = "unknown"


class Frame(NamedTuple):
    """One frame of a recorded call stack, innermost first in a stack.

    `line` is the executing line for torch_npu's `Call stack` frames; for python-tracer frames
    (MindSpore's `python_function` events) it is the function's first line (`line_is_def`).
    """

    file: str  # as recorded (an absolute path of the profiled machine, or relative to its sys.path)
    line: int
    function: str
    line_is_def: bool = False


class Cost(NamedTuple):
    """Measured time per profiled step, in microseconds."""

    device_us: float = 0.0  # NPU kernel and copy time of the operators launched
    host_us: float = 0.0  # host time of the outermost operators
    wait_us: float = 0.0  # host time blocked in synchronisation (stream syncs, device-to-host reads)

    @property
    def total_us(self) -> float:
        return self.device_us + self.wait_us


@dataclass(frozen=True)
class LineCost:
    """What a source line of the linted project cost per step.

    `self_cost` counts the operators whose innermost project frame is this line (the line that issued
    them); `total_cost` counts every operator with this line anywhere in its stack (a call line pays
    for the whole callee).
    """

    path: str  # project-relative, '/'-separated
    line: int
    function: str
    self_cost: Cost
    total_cost: Cost
    calls_per_step: float  # operators issued from this line per step (self)
    steps: Tuple[int, ...]  # profiled steps in which the line issued an operator
    line_is_def: bool = False  # the function's first line stands for the whole function (python-tracer stacks)


@dataclass(frozen=True)
class FunctionSteps:
    """A project function and the profiled steps whose stacks contain it."""

    path: str
    function: str
    steps: Tuple[int, ...]
    every_step: bool  # seen in every profiled step

    def describe(self) -> str:
        """'observed in the profile, steps 3-12' (or the step list when it has gaps)."""
        return f"observed in the profile, {describe_steps(self.steps)}"


@dataclass(frozen=True)
class Observation:
    """A finding only a profile can show, at a project line."""

    code: str
    name: str
    path: str
    line: int
    function: str
    message: str
    facts: Mapping[str, object]
    cost: Cost  # per step
    steps: Tuple[int, ...]


class StepRange(NamedTuple):
    """A profiled step (`ProfilerStep#N`) on the host clock, in ns."""

    number: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class StepTime:
    """One row of step_trace_time.csv: the device's time split for a step, in microseconds."""

    step: Optional[int]
    values: Mapping[str, float]


@dataclass(frozen=True)
class OpStatistic:
    """One row of op_statistic.csv."""

    op_type: str
    core_type: str
    count: int
    total_us: float


@dataclass(frozen=True)
class ApiStatistic:
    """One row of api_statistic.csv."""

    level: str
    name: str
    count: int
    total_us: float


class Diagnostic(NamedTuple):
    """Something about the profile the user should know: a missing, odd or unreadable file."""

    severity: str  # "error" (nothing usable), "warning" (part skipped), "info"
    source: str  # the file or directory concerned
    message: str


@dataclass(frozen=True)
class MappingStats:
    """How many host events carried a call stack, and how many of those map to a project line."""

    events_with_stack: int = 0
    events_mapped: int = 0
    step_events_with_stack: int = 0  # the same, counting only events inside a profiled step
    step_events_mapped: int = 0

    @property
    def step_share(self) -> float:
        """Share of in-step events with a stack that map to a project line (0 when there are none)."""
        return self.step_events_mapped / self.step_events_with_stack if self.step_events_with_stack else 0.0


@dataclass(frozen=True)
class Profile:
    """A profile directory, read: per-line costs, per-step functions, profile-only observations."""

    root: str
    framework: str
    versions: Mapping[str, str]
    files: Tuple[str, ...]  # the exports read
    steps: Tuple[StepRange, ...]
    step_times: Tuple[StepTime, ...]
    line_costs: Mapping[Tuple[str, int], LineCost]
    functions_per_step: Mapping[Tuple[str, str], FunctionSteps]
    observations: Tuple[Observation, ...]
    mapping: MappingStats
    op_statistics: Tuple[OpStatistic, ...] = ()
    api_statistics: Tuple[ApiStatistic, ...] = ()
    diagnostics: Tuple[Diagnostic, ...] = ()
    schema: int = field(default=PROFILE_SCHEMA)

    @property
    def ok(self) -> bool:
        """False when nothing could be read (see `diagnostics`)."""
        return not any(d.severity == "error" for d in self.diagnostics)

    @property
    def step_numbers(self) -> Tuple[int, ...]:
        return tuple(s.number for s in self.steps)

    def cost_of(self, path: str, line: int) -> Optional[LineCost]:
        return self.line_costs.get((path, line))

    def ranked_lines(self) -> Tuple[LineCost, ...]:
        """Line costs, most expensive first (device time plus host wait per step, self)."""
        return tuple(sorted(self.line_costs.values(), key=lambda c: (-c.self_cost.total_us, c.path, c.line)))


def describe_steps(steps: Tuple[int, ...]) -> str:
    """'steps 3-12', 'step 4', 'steps 2, 4, 6' for sorted step numbers."""
    if not steps:
        return "no profiled step"
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps[-1] - steps[0] == len(steps) - 1:
        return f"steps {steps[0]}-{steps[-1]}"
    shown = ", ".join(str(s) for s in steps[:8])
    return f"steps {shown}{', ...' if len(steps) > 8 else ''}"

