"""Per-stack costs -> per-line costs, per-line pattern tallies and per-function step sets."""
from __future__ import annotations

from typing import Dict, List, Tuple

from .assemble import StackCost, StepIndex
from .records import Cost, Frame, FunctionSteps, LineCost
from .stacks import ProjectPaths, mindspore_function
from .trace import StackTable

LineKey = Tuple[str, int]


class LineAggregate:
    """Everything known about one project line: its self costs (merged StackCost) and total costs."""

    __slots__ = ("function", "line_is_def", "own", "total")

    def __init__(self, function: str, line_is_def: bool) -> None:
        self.function = function
        self.line_is_def = line_is_def
        self.own = StackCost()
        self.total = StackCost()


def project_frames(stack: Tuple[Frame, ...], paths: ProjectPaths) -> List[Tuple[str, int, str, bool]]:
    """(project path, line, function, line_is_def) for the stack's project frames, innermost first."""
    out = []
    for frame in stack:
        rel = paths.resolve(frame.file)
        if rel is not None:
            out.append((rel, frame.line, mindspore_function(frame.function), frame.line_is_def))
    return out


def aggregate_lines(costs: Dict[int, StackCost], stacks: StackTable, paths: ProjectPaths
                    ) -> Tuple[Dict[LineKey, LineAggregate], Dict[Tuple[str, str], int], int]:
    """Line aggregates, function -> step mask, and the device ns of stacks without a project frame."""
    lines: Dict[LineKey, LineAggregate] = {}
    functions: Dict[Tuple[str, str], int] = {}
    unmapped_device = 0
    for stack_id, cost in costs.items():
        frames = project_frames(stacks.stacks[stack_id], paths)
        if not frames:
            unmapped_device += cost.device_ns
            continue
        path, line, function, is_def = frames[0]
        _line(lines, path, line, function, is_def).own.merge(cost)
        seen = set()
        for path, line, function, is_def in frames:
            if (path, line) not in seen:
                seen.add((path, line))
                _line(lines, path, line, function, is_def).total.merge(cost)
            key = (path, function)
            functions[key] = functions.get(key, 0) | cost.steps
    return lines, functions, unmapped_device


def _line(lines: Dict[LineKey, LineAggregate], path: str, line: int, function: str, is_def: bool) -> LineAggregate:
    found = lines.get((path, line))
    if found is None:
        found = lines[(path, line)] = LineAggregate(function, is_def)
    return found


def per_step_cost(cost: StackCost, steps: int) -> Cost:
    return Cost(cost.device_ns / steps / 1000.0, cost.host_ns / steps / 1000.0, cost.wait_ns / steps / 1000.0)


def line_costs(lines: Dict[LineKey, LineAggregate], steps: StepIndex) -> Dict[LineKey, LineCost]:
    n = steps.count
    out = {}
    for (path, line), agg in sorted(lines.items()):
        out[(path, line)] = LineCost(path, line, agg.function, per_step_cost(agg.own, n), per_step_cost(agg.total, n),
                                     agg.own.calls / n, steps.numbers(agg.own.steps), agg.line_is_def)
    return out


def functions_per_step(functions: Dict[Tuple[str, str], int], steps: StepIndex
                       ) -> Dict[Tuple[str, str], FunctionSteps]:
    full = (1 << len(steps.steps)) - 1
    out = {}
    for (path, function), mask in sorted(functions.items()):
        numbers = steps.numbers(mask)
        out[(path, function)] = FunctionSteps(path, function, numbers, bool(steps.steps) and mask & full == full)
    return out


def bits(mask: int) -> int:
    return bin(mask).count("1")

