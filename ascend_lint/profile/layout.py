"""Find the exports in a profile directory and tell which profiler wrote them.

Accepted: a torch_npu `*_ascend_pt` directory, a MindSpore `*_ascend_ms` directory, their
`ASCEND_PROFILER_OUTPUT` directory, a `trace_view.json` file, or a directory holding several
`*_ascend_*` directories (one per rank: the first is read and the others are named in a diagnostic).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .records import MINDSPORE, TORCH_NPU, UNKNOWN, Diagnostic

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
EXPORTS = ("trace_view.json", "kernel_details.csv", "operator_details.csv", "step_trace_time.csv",
           "op_statistic.csv", "api_statistic.csv")
INFO_FILE = re.compile(r"^profiler_info(_\d+)?\.json$")
MAX_INFO_BYTES = 1 << 20


@dataclass
class Layout:
    """Where the exports are, and what is known about the run that wrote them."""

    root: str  # the *_ascend_pt / *_ascend_ms directory (or the directory given)
    output: Optional[str]  # the directory holding the exports
    framework: str = UNKNOWN
    versions: Dict[str, str] = field(default_factory=dict)
    with_stack: Optional[bool] = None  # as recorded in profiler_info*.json
    diagnostics: List[Diagnostic] = field(default_factory=list)

    def export(self, name: str) -> Optional[str]:
        if self.output is None:
            return None
        path = os.path.join(self.output, name)
        return path if os.path.isfile(path) else None

    @property
    def exports(self) -> Tuple[str, ...]:
        return tuple(name for name in EXPORTS if self.export(name))


def _framework_of(name: str) -> str:
    if name.endswith("_ascend_pt"):
        return TORCH_NPU
    if name.endswith("_ascend_ms"):
        return MINDSPORE
    return UNKNOWN


def find_layout(path: str) -> Layout:
    """The layout for a user-given path; problems become diagnostics, never exceptions."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        layout = Layout(os.path.dirname(path), os.path.dirname(path))
        if os.path.basename(path) != "trace_view.json":
            layout.diagnostics.append(Diagnostic("warning", path, "is not named trace_view.json; read as one"))
        return _describe(layout)
    if not os.path.isdir(path):
        return Layout(path, None, diagnostics=[Diagnostic("error", path, "no such profile directory")])
    base = os.path.basename(path)
    if base == OUTPUT_DIR:
        return _describe(Layout(os.path.dirname(path), path))
    if os.path.isdir(os.path.join(path, OUTPUT_DIR)):
        return _describe(Layout(path, os.path.join(path, OUTPUT_DIR)))
    if any(os.path.isfile(os.path.join(path, name)) for name in EXPORTS):
        return _describe(Layout(path, path))
    runs = sorted(d for d in _listdir(path) if _framework_of(d) != UNKNOWN
                  and os.path.isdir(os.path.join(path, d, OUTPUT_DIR)))
    if runs:
        layout = _describe(Layout(os.path.join(path, runs[0]), os.path.join(path, runs[0], OUTPUT_DIR)))
        if len(runs) > 1:
            layout.diagnostics.append(Diagnostic(
                "warning", path, f"holds {len(runs)} profile directories; read {runs[0]} (pass another one to "
                                 f"read it: {', '.join(runs[1:4])}{', ...' if len(runs) > 4 else ''})"))
        return layout
    return Layout(path, None, diagnostics=[Diagnostic(
        "error", path, f"holds no {OUTPUT_DIR} directory and none of {', '.join(EXPORTS)}: is it the *_ascend_pt "
                       "/ *_ascend_ms directory, and was the profile analysed (export_type text)?")])


def _listdir(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _describe(layout: Layout) -> Layout:
    """Framework, versions and `with_stack` from the directory name and profiler_info*.json."""
    layout.framework = _framework_of(os.path.basename(layout.root))
    for name in sorted(_listdir(layout.root)):
        if INFO_FILE.match(name):
            _read_info(layout, os.path.join(layout.root, name))
            break
    if not layout.exports:
        layout.diagnostics.append(Diagnostic(
            "error", layout.output or layout.root,
            f"none of {', '.join(EXPORTS)} is there (profiles exported as a database only, "
            "export_type=db, are not read)"))
    elif not layout.export("trace_view.json"):
        layout.diagnostics.append(Diagnostic(
            "warning", layout.output or layout.root,
            "has no trace_view.json: without it no cost maps to a line except through operator_details.csv"))
    return layout


def _read_info(layout: Layout, path: str) -> None:
    """torch_npu's profiler_info.json: torch_npu_version, cann_version, config.common_config.with_stack."""
    try:
        if os.path.getsize(path) > MAX_INFO_BYTES:
            raise ValueError("too large")
        with open(path, encoding="utf-8", errors="replace") as handle:
            info = json.load(handle)
    except (OSError, ValueError) as error:
        layout.diagnostics.append(Diagnostic("warning", path, f"unreadable ({error}); versions unknown"))
        return
    if not isinstance(info, dict):
        return
    for key in ("torch_npu_version", "cann_version", "mindspore_version", "ms_version"):
        if isinstance(info.get(key), (str, int, float)):
            layout.versions[key] = str(info[key])
    config = info.get("config")
    common = config.get("common_config") if isinstance(config, dict) else None
    if isinstance(common, dict) and isinstance(common.get("with_stack"), bool):
        layout.with_stack = common["with_stack"]
    if layout.framework == UNKNOWN and "torch_npu_version" in layout.versions:
        layout.framework = TORCH_NPU
