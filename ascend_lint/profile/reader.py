"""`read_profile`: a profile directory in, a `Profile` out. Bad input gives diagnostics, never exceptions."""
from __future__ import annotations

import sqlite3
from typing import Iterable, List, Optional

from .assemble import StackCost, StepIndex, Sweep
from .csvs import (CsvReport, read_api_statistic, read_op_statistic, read_operator_details, read_step_trace_time,
                   scan_kernel_details)
from .detectors import detect
from .layout import Layout, find_layout
from .lines import aggregate_lines, functions_per_step, line_costs
from .records import MINDSPORE, TORCH_NPU, UNKNOWN, Diagnostic, MappingStats, Profile, StepRange
from .stacks import AnyPath, ProjectPaths
from .store import EventStore
from .trace import Interner, StackTable, TraceScan, TraceScanner


MAX_STEPS = 1024  # profiled steps kept (a schedule records a few; per-step bit sets grow with this)


def read_profile(path: str, project_root: Optional[str] = None,
                 project_files: Optional[Iterable[str]] = None) -> Profile:
    """Read the Ascend profile at `path` and map its costs to the project's lines.

    `project_files` (paths relative to `project_root`) are the files a frame may map to; by default every
    `.py` file under `project_root`. Without a project, frames keep their recorded paths.
    """
    if project_files is not None:
        paths: ProjectPaths = ProjectPaths(project_files, project_root)
    elif project_root is not None:
        paths = ProjectPaths.scan(project_root)
    else:
        paths = AnyPath()
    layout = find_layout(path)
    if layout.output is None:
        return _empty(layout)
    try:
        return _Reader(layout, paths).read()
    except (OSError, sqlite3.Error, MemoryError, RecursionError) as error:  # a full disk, a vanished file
        layout.diagnostics.append(Diagnostic("error", layout.output, f"could not be read: {error}"))
    except Exception as error:  # noqa: BLE001  a reader bug must not take the lint run down
        layout.diagnostics.append(Diagnostic(
            "error", layout.output, f"could not be read (an ascend-lint bug, please report it: "
                                    f"{type(error).__name__}: {error})"))
    return _empty(layout)


def _empty(layout: Layout) -> Profile:
    return Profile(layout.root, layout.framework, dict(layout.versions), (), (), (), {}, {}, (), MappingStats(),
                   diagnostics=tuple(layout.diagnostics))


class _Reader:
    def __init__(self, layout: Layout, paths: ProjectPaths) -> None:
        self.layout = layout
        self.paths = paths
        self.report = CsvReport()
        self.diagnostics: List[Diagnostic] = list(layout.diagnostics)
        self.names = Interner()
        self.stacks = StackTable()

    def read(self) -> Profile:
        layout = self.layout
        step_file = layout.export("step_trace_time.csv")
        csv_step_times = read_step_trace_time(step_file, self.report) if step_file else []
        with EventStore() as store:
            trace = self._scan_trace(store)
            kernel_file = layout.export("kernel_details.csv")
            if kernel_file and trace is not None and trace.aicpu_tasks:
                scan_kernel_details(kernel_file, self.report, lambda row: store.add("kernel_info", row), self.names)
            steps = StepIndex(_distinct_steps(trace.steps if trace else []),
                              fallback_count=len({t.step for t in csv_step_times if t.step is not None}))
            store.link()
            if trace is not None:
                self._trace_diagnostics(trace, store)
            sweep = Sweep(store, self.names, self.stacks, self.paths, steps)
            sweep.run()
        costs = sweep.costs
        operator_file = layout.export("operator_details.csv")
        if operator_file and not any(c.device_ns for c in costs.values()):
            self._add_operator_details(operator_file, costs)
        op_stats = read_op_statistic(layout.export("op_statistic.csv"), self.report) \
            if layout.export("op_statistic.csv") else []
        api_stats = read_api_statistic(layout.export("api_statistic.csv"), self.report) \
            if layout.export("api_statistic.csv") else []
        lines, functions, _ = aggregate_lines(costs, self.stacks, self.paths)
        counts = sweep.counts
        if counts.with_stack and not counts.with_stack_mapped:
            self.diagnostics.append(Diagnostic(
                "warning", layout.root, f"none of the {counts.with_stack} call stacks has a frame in the linted "
                                        "project: is it the project that was profiled?"))
        if counts.unattributed_syncs:
            self.diagnostics.append(Diagnostic(
                "info", "trace_view.json", f"{counts.unattributed_syncs} stream synchronisation(s) outside every "
                                           "operator with a call stack (e.g. torch.npu.synchronize()) are not mapped "
                                           "to a line"))
        return Profile(
            root=layout.root, framework=self._framework(trace), versions=dict(layout.versions),
            files=layout.exports, steps=tuple(steps.steps), step_times=tuple(csv_step_times),
            line_costs=line_costs(lines, steps), functions_per_step=functions_per_step(functions, steps),
            observations=tuple(detect(lines, steps)),
            mapping=MappingStats(counts.with_stack, counts.with_stack_mapped, counts.step_with_stack,
                                 counts.step_with_stack_mapped),
            op_statistics=tuple(op_stats), api_statistics=tuple(api_stats),
            diagnostics=tuple(self.diagnostics + self.report.diagnostics))

    def _scan_trace(self, store: EventStore) -> Optional[TraceScan]:
        path = self.layout.export("trace_view.json")
        if path is None:
            return None
        try:
            handle = open(path, "rb")
        except OSError as error:
            self.diagnostics.append(Diagnostic("warning", path, f"cannot be read ({error.strerror or error})"))
            return None
        with handle:
            return TraceScanner(store, self.names, self.stacks).read(handle)

    def _trace_diagnostics(self, trace: TraceScan, store: EventStore) -> None:
        name = "trace_view.json"
        if trace.error is not None:
            self.diagnostics.append(Diagnostic(
                "warning", name, f"{trace.error} at character {trace.error.offset}; the {trace.events} events before "
                                 "it were read"))
        if trace.skipped or store.rejected:
            self.diagnostics.append(Diagnostic(
                "warning", name, f"{trace.skipped + store.rejected} malformed event(s) skipped"))
        if len({s.number for s in trace.steps}) > MAX_STEPS:
            self.diagnostics.append(Diagnostic(
                "warning", name, f"more than {MAX_STEPS} ProfilerStep#N events: the first {MAX_STEPS} steps are read"))
        if not trace.steps:
            self.diagnostics.append(Diagnostic(
                "info", name, "no ProfilerStep#N events: the whole profile counts as one step (profile with a "
                              "schedule and call prof.step() every step to get per-step costs)"))
        if trace.events and not trace.ops_with_call_stack and not trace.python_frames:
            hint = " (profiler_info.json says with_stack=False)" if self.layout.with_stack is False else ""
            self.diagnostics.append(Diagnostic(
                "warning", name, f"no call stacks{hint}: profile with with_stack=True to map costs to lines"))
        tasks, linked, device_ns, linked_ns = store.task_totals()
        if tasks and not linked:
            self.diagnostics.append(Diagnostic(
                "warning", name, f"none of the {tasks} device tasks is linked to a framework operator (no "
                                 "torch_to_npu / mindspore_to_npu flows): device time is not mapped to lines"))
        elif tasks and device_ns and linked_ns < 0.5 * device_ns:
            self.diagnostics.append(Diagnostic(
                "info", name, f"{100.0 * linked_ns / device_ns:.0f} % of the device time is linked to a framework "
                              "operator"))

    def _add_operator_details(self, path: str, costs: dict) -> None:
        """operator_details.csv's per-operator device time, when the trace gave none (no trace, no flows)."""
        details = read_operator_details(path, self.report, self.stacks)
        for stack_id, (calls, host_us, device_us) in details.per_stack.items():
            cost = costs.get(stack_id)
            if cost is None:
                cost = costs[stack_id] = StackCost()
            cost.device_ns += int(device_us * 1000)
            if not cost.calls:
                cost.calls = int(calls)
                cost.host_ns += int(host_us * 1000)
        if details.rows:
            self.diagnostics.append(Diagnostic(
                "info", "operator_details.csv", "device time per line taken from operator_details.csv (no step "
                                                "split: the totals are divided by the number of steps)"))

    def _framework(self, trace: Optional[TraceScan]) -> str:
        if self.layout.framework != UNKNOWN or trace is None:
            return self.layout.framework
        names = set(trace.process_names.values())
        if "MindSpore" in names:
            return MINDSPORE
        if "Python" in names:
            return TORCH_NPU
        return UNKNOWN


def _distinct_steps(steps: List[StepRange]) -> List[StepRange]:
    """One range per step number (the first seen), in time order; at most MAX_STEPS."""
    seen = {}
    for step in steps:
        seen.setdefault(step.number, step)
    return sorted(seen.values(), key=lambda s: s.start_ns)[:MAX_STEPS]

