"""The run's profile step (`check --profile DIR`): read the Ascend profile once, give every finding its
measured cost per step, add the profile-only rules' findings at their lines, and list the functions the
profile saw in every step that the project model does not run per step (`--profile-report`).

The profile-only rules are plugins like any other (`Rule.profile_only`): this step knows none by code; it
reports an observation of the profile (ascend_lint.profile) as the finding of the rule with that code,
where the file's configuration selects that rule and no `# noqa` hides it. docs/profile.md describes it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from ..analysis.records import PER_FORWARD, PER_STEP, Role, Summary
from ..analysis.resolver import module_id
from ..config import ConfigError
from ..engine import noqa
from ..engine.linter import FileResult, Linter
from ..fileio import SourceError, read_source, split_lines
from ..profile import FunctionSteps, LineCost, Observation, Profile, read_profile
from ..profile.layout import find_layout
from ..rule import Finding, MeasuredCost, Rule
from .index import ProjectIndex

RUNS_PER_STEP = (PER_STEP, PER_FORWARD)  # the roles that say "runs every step"


class ProfileError(ConfigError):
    """A `--profile` that cannot be read at all (exit code 2)."""


@dataclass(frozen=True)
class Unexpected:
    """A project function the profile saw in every profiled step that the model does not run per step."""

    path: str  # as the run names the file
    function: str  # as the profile names it
    qualname: Optional[str]  # the model's name for it (None: the model knows no such function)
    observed: FunctionSteps
    role: Optional[Role]  # the model's answer (None: no role)

    def describe_role(self) -> str:
        if self.qualname is None:
            return "not a top-level function or method the project model knows"
        if self.role is None:
            return "no role: the model does not see it run"
        why = self.role.reason.describe() if self.role.reason is not None else ""
        return f"{self.role.kind}" + (f": {why}" if why else "")


@dataclass
class ProfiledRun:
    """What the profile step gives the faces: the profile read, and the report of `--profile-report`."""

    profile: Profile
    root: str  # the directory the profile's paths are relative to
    unexpected: List[Unexpected] = field(default_factory=list)
    every_step: int = 0  # functions observed in every profiled step (but module code and step-loop owners)

    @property
    def warnings(self) -> List[str]:
        return [f"profile: {d.source}: {d.message}" for d in self.profile.diagnostics if d.severity == "warning"]


def check_profile_path(path: str) -> None:
    """Fail before linting when `path` holds no profile export at all."""
    layout = find_layout(path)
    if layout.output is None:
        raise ProfileError(f"--profile {path}: {_errors(layout.diagnostics) or 'no Ascend profile found'}")


def profile_results(path: str, results: Sequence[FileResult], indices: Sequence[ProjectIndex],
                    linter_for: Callable[[str], Linter], report: bool = False) -> ProfiledRun:
    """Read the profile at `path` against the projects of `indices`, then attach its costs and observations
    to `results` (in place). `report`: also ask the model the role of every function seen in every step."""
    root, files = _project_files(results, indices)
    profile = read_profile(path, project_root=root, project_files=files)
    if not profile.ok:
        raise ProfileError(f"--profile {path}: {_errors(profile.diagnostics)}")
    run = ProfiledRun(profile, root)
    by_rel = {_rel(r.path, root): r for r in results}
    step_us = _mean_step_us(profile)
    stalls = _stalls(profile.observations)
    for rel, result in by_rel.items():
        for finding in result.findings:
            finding.cost = measured(profile, rel, finding.line, finding.end_line, step_us, stalls)
    for observation in profile.observations:
        result = by_rel.get(observation.path)
        if result is not None:
            _report_observation(result, observation, linter_for(result.path), measured(
                profile, observation.path, observation.line, observation.line, step_us, stalls))
    for result in results:
        result.findings.sort(key=Finding.sort_key)
    if report:
        run.every_step, run.unexpected = _unexpected(profile, root, indices)
    return run


Stalls = Dict[Tuple[str, int], float]


def measured(profile: Profile, rel: Optional[str], line: int, end_line: int, step_us: float,
             stalls: Optional[Stalls] = None) -> MeasuredCost:
    """What lines `line`..`end_line` of the file cost per profiled step: the device time of the operators they
    issued, and the host time the NPU waited for there (synchronisations and reads, and the host time of what
    the profile's observations found there, such as online compilations: `stalls`)."""
    costs: List[LineCost] = []
    if rel is not None:
        for number in range(line, max(line, end_line) + 1):
            cost = profile.cost_of(rel, number)
            if cost is not None:
                costs.append(cost)
    stalls = stalls or {}
    waits = [c.self_cost.wait_us + stalls.get((c.path, c.line), 0.0) for c in costs]
    steps = sorted({s for c in costs for s in c.steps})
    return MeasuredCost(
        device_us=sum(c.self_cost.device_us for c in costs), wait_us=sum(waits),
        host_us=sum(c.self_cost.host_us for c in costs), steps=len(steps), step_us=step_us,
        lines=tuple((c.line, c.self_cost.device_us, wait) for c, wait in zip(costs, waits)))


def _stalls(observations: Iterable[Observation]) -> Stalls:
    """Per line, the host time per step that the profile's observations count as the pattern's cost (an
    online compilation keeps the host from launching work: the NPU waits)."""
    stalls: Stalls = {}
    for observation in observations:
        if observation.cost.host_us:
            key = (observation.path, observation.line)
            stalls[key] = stalls.get(key, 0.0) + observation.cost.host_us
    return stalls


def rank_by_cost(findings: Iterable[Finding]) -> List[Finding]:
    """Most measured cost per step first (device time plus host wait); findings without a cost last."""
    return sorted(findings, key=lambda f: (-(f.cost.total_us if f.cost is not None else -1.0), f.sort_key()))


# ----------------------------------------------------------------------------- the steps' parts
def _project_files(results: Sequence[FileResult], indices: Sequence[ProjectIndex]) -> Tuple[str, List[str]]:
    """The directory holding every project (and linted file), and every project file relative to it: the
    files a recorded frame may map to."""
    absolute = [p for index in indices for p in index.paths()] + [os.path.abspath(r.path) for r in results]
    dirs = [index.root for index in indices] + [os.path.dirname(p) for p in absolute]
    root = os.path.commonpath(dirs) if dirs else os.getcwd()
    return root, sorted({_rel(p, root) or p for p in absolute if p.endswith((".py", ".pyi"))})


def _rel(path: str, root: str) -> Optional[str]:
    rel = os.path.relpath(os.path.abspath(path), root)
    return None if rel.startswith("..") else rel.replace(os.sep, "/")


def _mean_step_us(profile: Profile) -> float:
    steps = profile.steps
    return sum(s.end_ns - s.start_ns for s in steps) / len(steps) / 1000.0 if steps else 0.0


def _errors(diagnostics: Iterable) -> str:
    return "; ".join(f"{d.source}: {d.message}" for d in diagnostics if d.severity == "error")


def _profile_rule(linter: Linter, path: str, code: str) -> Optional[Type[Rule]]:
    """The profile-only rule with this code that the file's configuration selects (None: none)."""
    return next((r for r in linter.rules_for(path) if r.profile_only and r.code == code), None)


def _report_observation(result: FileResult, observation: Observation, linter: Linter, cost: MeasuredCost) -> None:
    rule = _profile_rule(linter, result.path, observation.code)
    if rule is None:
        return
    text = _text_of(result)
    lines = split_lines(text) if text is not None else []
    line_text = lines[observation.line - 1] if 0 < observation.line <= len(lines) else ""
    start = len(line_text) - len(line_text.lstrip())
    end = max(len(line_text.rstrip()), start + 1)
    finding = Finding(result.path, observation.line, start + 1, observation.line, end + 1, rule.code, rule.name,
                      observation.message, rule.severity, cost=cost)
    if not linter.settings.ignore_noqa and text is not None:
        if not noqa.filter_findings([finding], lines, text):
            return
    result.findings.append(finding)


def _text_of(result: FileResult) -> Optional[str]:
    if result.source is not None:
        return result.source.text
    try:
        return read_source(result.path).text
    except SourceError:
        return None


def _unexpected(profile: Profile, root: str, indices: Sequence[ProjectIndex]) -> Tuple[int, List[Unexpected]]:
    """Functions seen in every profiled step whose role, asked of the project model, is not a per-step one.
    Module-level code and the functions holding a step loop (the model's StepLoop owners: they run once,
    their loop every step) are outer frames of every step, not misses, and are left out."""
    lines_of: Dict[Tuple[str, str], List[int]] = {}
    for cost in profile.line_costs.values():
        lines_of.setdefault((cost.path, cost.function), []).append(cost.line)
    every = [f for f in profile.functions_per_step.values() if f.every_step and f.function != "<module>"]
    found, counted = [], 0
    for observed in sorted(every, key=lambda f: (f.path, f.function)):
        absolute = os.path.join(root, observed.path)
        index = next((i for i in indices if i.relpath(absolute) is not None), None)
        rel = index.relpath(absolute) if index is not None else None
        summary = index.summary_of(rel) if index is not None and rel is not None else None
        local = _local_name(summary, observed.function, lines_of.get((observed.path, observed.function), []))
        if summary is not None and local is not None and any(loop.owner == local for loop in summary.steps):
            continue
        counted += 1
        module = module_id(rel) if rel is not None else ""
        qualname = (f"{module}.{local}" if module else local) if local is not None else None
        role = index.view_for(absolute).role(qualname) if index is not None and qualname is not None else None
        if role is None or role.kind not in RUNS_PER_STEP:
            found.append(Unexpected(os.path.relpath(absolute), observed.function, qualname, observed, role))
    return counted, found


def _local_name(summary: Optional[Summary], function: str, lines: List[int]) -> Optional[str]:
    """The file's name (`func`, `Class.method`) of the function the profile names `function` (a frame names
    the bare function; MindSpore's `nn.Cell.Net.construct` its class too): the file's one def of that name,
    else the one holding the profiled lines."""
    if summary is None:
        return None
    name = function.rpartition(".")[2]
    defs = [(local, d) for local, d in summary.defs.items() if local.rpartition(".")[2] == name]
    if len(defs) > 1:
        defs = [(local, d) for local, d in defs if any(d.line <= n <= d.end for n in lines)]
    return defs[0][0] if len(defs) == 1 else None


__all__ = ["ProfileError", "ProfiledRun", "Unexpected", "check_profile_path", "measured", "profile_results",
           "rank_by_cost"]
