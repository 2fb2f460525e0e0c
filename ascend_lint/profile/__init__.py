"""Read Ascend profiles (torch_npu `*_ascend_pt`, MindSpore `*_ascend_ms`) for profile-guided linting.

    profile = read_profile("run_ascend_pt", project_root=".")
    profile.line_costs[("train.py", 42)].self_cost.device_us   # per step
    profile.functions_per_step[("train.py", "train_step")].describe()
    profile.observations                                         # ASC801-ASC805, at project lines

docs/profile.md describes the formats read and where they come from.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover  (what type checkers see; at run time __getattr__ imports them)
    from .patterns import PATTERNS, Pattern
    from .reader import read_profile
    from .records import (PROFILE_SCHEMA, ApiStatistic, Cost, Diagnostic, Frame, FunctionSteps, LineCost,
                          MappingStats, Observation, OpStatistic, Profile, StepRange, StepTime, describe_steps)

# name -> submodule; imported on first use, so the `profile` rule pack (which reads only `patterns`) costs a
# plain `check` no reader imports (csv, sqlite3)
_WHERE = {"PATTERNS": "patterns", "Pattern": "patterns", "read_profile": "reader"}
_WHERE.update({name: "records" for name in (
    "PROFILE_SCHEMA", "ApiStatistic", "Cost", "Diagnostic", "Frame", "FunctionSteps", "LineCost", "MappingStats",
    "Observation", "OpStatistic", "Profile", "StepRange", "StepTime", "describe_steps")})

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
