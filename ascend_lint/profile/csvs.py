"""The CSV exports of ASCEND_PROFILER_OUTPUT, read row by row with the csv module.

Columns are found by their header names (the Ascend tools add columns between versions, such as
`Device_id`, and older exports say `Block Dim` where newer ones say `Block Num`); a file without a
column the reader needs is reported, never guessed at.
"""
from __future__ import annotations

import csv
import sys
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .records import ApiStatistic, Diagnostic, OpStatistic, StepTime
from .trace import Interner, StackTable, to_ns

csv.field_size_limit(min(sys.maxsize, 1 << 30))  # call stacks make long cells

STEP_TIME_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
                     "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing")


class CsvReport:
    """Diagnostics and counts gathered while reading the CSV files."""

    def __init__(self) -> None:
        self.diagnostics: List[Diagnostic] = []

    def warn(self, source: str, message: str) -> None:
        self.diagnostics.append(Diagnostic("warning", source, message))


def _rows(path: str, name: str, required: Sequence[str], optional: Sequence[str],
          report: CsvReport) -> Iterator[Tuple[Optional[str], ...]]:
    """Cells of the `required` + `optional` columns (None where an optional column is absent)."""
    try:
        handle = open(path, encoding="utf-8-sig", errors="replace", newline="")
    except OSError as error:
        report.warn(name, f"cannot be read ({error.strerror or error})")
        return
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                report.warn(name, "is empty")
                return
            index = {h.strip(): i for i, h in enumerate(header)}
            missing = [c for c in required if c not in index]
            if missing:
                report.warn(name, "has no column " + ", ".join(repr(c) for c in missing) + "; the file is skipped")
                return
            columns = [index.get(c) for c in (*required, *optional)]
            width = len(header)
            bad = 0
            for row in reader:
                if not row:
                    continue
                if len(row) < width and len(row) <= max(i for i in columns if i is not None):
                    bad += 1
                    continue
                yield tuple(row[i] if i is not None and i < len(row) else None for i in columns)
            if bad:
                report.warn(name, f"{bad} short row(s) skipped")
        except csv.Error as error:
            report.warn(name, f"is not valid CSV after line {reader.line_num} ({error}); the rest is skipped")


def _number(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    try:
        value = float(text.strip().rstrip("\t"))
    except ValueError:
        return None
    return value if value == value else None  # NaN


def _int(text: Optional[str]) -> Optional[int]:
    value = _number(text)
    return int(value) if value is not None and abs(value) < 1 << 62 else None


def read_step_trace_time(path: str, report: CsvReport) -> List[StepTime]:
    name = "step_trace_time.csv"
    steps = []
    for row in _rows(path, name, ("Step",), STEP_TIME_COLUMNS, report):
        numbers = (_number(cell) for cell in row[1:])
        values = {col: v for col, v in zip(STEP_TIME_COLUMNS, numbers) if v is not None}  # noqa: B905
        steps.append(StepTime(_int(row[0]), values))
        if len(steps) > 1_000_000:
            report.warn(name, "has more than a million rows; the rest is skipped")
            break
    return steps


def read_op_statistic(path: str, report: CsvReport) -> List[OpStatistic]:
    out = []
    for row in _rows(path, "op_statistic.csv", ("OP Type", "Core Type", "Count", "Total Time(us)"), (), report):
        count, total = _int(row[2]), _number(row[3])
        if count is not None and total is not None:
            out.append(OpStatistic(row[0] or "", row[1] or "", count, total))
    return out


def read_api_statistic(path: str, report: CsvReport) -> List[ApiStatistic]:
    out = []
    for row in _rows(path, "api_statistic.csv", ("Level", "API Name", "Time(us)", "Count"), (), report):
        total, count = _number(row[2]), _int(row[3])
        if count is not None and total is not None:
            out.append(ApiStatistic(row[0] or "", row[1] or "", count, total))
    return out


def scan_kernel_details(path: str, report: CsvReport, add_kernel_info: Callable[[tuple], None],
                        names: Interner) -> int:
    """AI CPU kernels' OP type and input dtypes, keyed by (start ns, kernel name), to `add_kernel_info`.

    The accelerator column is `Accelerator Core` (torch_npu's name for op_summary's `Task Type`). Only
    lines mentioning `AI_CPU` are parsed: the file has one row per kernel launch and can be large.
    Returns the number of AI CPU rows.
    """
    name = "kernel_details.csv"
    wanted = ("Name", "Start Time(us)", "Accelerator Core", "Task Type", "Type", "Input Data Types")
    found = 0
    try:
        handle = open(path, encoding="utf-8-sig", errors="replace", newline="")
    except OSError as error:
        report.warn(name, f"cannot be read ({error.strerror or error})")
        return 0
    with handle:
        try:
            header = next(csv.reader([handle.readline()]), [])
            index = {h.strip(): i for i, h in enumerate(header)}
            if "Name" not in index or "Start Time(us)" not in index or not (
                    "Accelerator Core" in index or "Task Type" in index):
                report.warn(name, "has no 'Name', 'Start Time(us)' and 'Accelerator Core' columns; AI CPU kernels "
                                  "get no OP type or dtypes")
                return 0
            columns = [index.get(c) for c in wanted]
            for line in handle:
                if "AI_CPU" not in line:
                    continue
                row = next(csv.reader([line]), [])
                cells = [row[i] if i is not None and i < len(row) else "" for i in columns]
                kernel, start, core, task_type, op_type, dtypes = cells
                if (core or task_type) != "AI_CPU" or not start:
                    continue
                try:
                    add_kernel_info((to_ns(start.strip()), names.id(kernel), op_type, dtypes))
                except ValueError:
                    continue
                found += 1
        except csv.Error as error:
            report.warn(name, f"is not valid CSV ({error}); the rest is skipped")
    return found


class OperatorStacks:
    """operator_details.csv summed per distinct call stack: the device time source when the trace has no
    operator-to-task flows."""

    def __init__(self) -> None:
        self.rows = 0
        self.per_stack: Dict[int, List[float]] = {}  # stack id -> [calls, host self us, device self us]


def read_operator_details(path: str, report: CsvReport, stacks: StackTable) -> OperatorStacks:
    result = OperatorStacks()
    for row in _rows(path, "operator_details.csv", ("Name", "Call Stack"),
                     ("Host Self Duration(us)", "Device Self Duration(us)"), report):
        text = row[1]
        if not text:
            continue
        stack = stacks.from_text(text)
        acc = result.per_stack.setdefault(stack, [0.0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += _number(row[2]) or 0.0
        acc[2] += _number(row[3]) or 0.0
        result.rows += 1
    return result

