"""Read Ascend profiles (torch_npu `*_ascend_pt`, MindSpore `*_ascend_ms`) for profile-guided linting.

    profile = read_profile("run_ascend_pt", project_root=".")
    profile.line_costs[("train.py", 42)].self_cost.device_us   # per step
    profile.functions_per_step[("train.py", "train_step")].describe()
    profile.observations                                         # ASC801-ASC805, at project lines

docs/profile.md describes the formats read and where they come from.
"""
from __future__ import annotations

from .patterns import PATTERNS, Pattern
from .reader import read_profile
from .records import (PROFILE_SCHEMA, ApiStatistic, Cost, Diagnostic, Frame, FunctionSteps, LineCost, MappingStats,
                      Observation, OpStatistic, Profile, StepRange, StepTime, describe_steps)

__all__ = [
    "PATTERNS", "PROFILE_SCHEMA", "ApiStatistic", "Cost", "Diagnostic", "Frame", "FunctionSteps", "LineCost",
    "MappingStats", "Observation", "OpStatistic", "Pattern", "Profile", "StepRange", "StepTime", "describe_steps",
    "read_profile",
]
