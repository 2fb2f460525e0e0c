"""Measured costs in reports (`check --profile DIR`): the per-finding label, the summary's line, and the
`--profile-report` listing. Nothing here is used when the run had no profile."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, TextIO

from ..rule import Finding, MeasuredCost
from ..sanitize import sanitize


def duration(us: float) -> str:
    """'450 us', '1.25 ms', '2.0 s'."""
    if us >= 1_000_000:
        return f"{us / 1_000_000:.1f} s"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} us"


def cost_label(cost: MeasuredCost) -> str:
    """'1.25 ms/step' (device time plus host wait per profiled step), or 'not measured' when the lines issued no
    operator in the profiled steps (their cost, if any, is their callees')."""
    if not cost.steps:
        return "not measured"
    return f"{duration(cost.total_us)}/step"


def cost_note(cost: MeasuredCost) -> str:
    """The cost in words, for formats with only a message to carry it (annotations, Code Quality)."""
    if not cost.steps:
        return "measured: no operator issued from these lines in the profiled steps"
    return (f"measured: {duration(cost.total_us)} per step, device {duration(cost.device_us)}, host wait "
            f"{duration(cost.wait_us)}, in {cost.steps} profiled step{'s' if cost.steps != 1 else ''}")


def cost_properties(cost: MeasuredCost) -> Dict[str, Any]:
    """SARIF result properties (camelCase, as SARIF's own)."""
    return {"costPerStepUs": round(cost.total_us, 3), "deviceUs": round(cost.device_us, 3),
            "hostWaitUs": round(cost.wait_us, 3), "hostUs": round(cost.host_us, 3), "profiledSteps": cost.steps}


def cost_summary(findings: Sequence[Finding]) -> Optional[str]:
    """The summary's line: what the reported lines cost per step (each line counted once), against the
    profiled step; None without a profile."""
    measured = [f for f in findings if f.cost is not None]
    if not measured:
        return None
    lines: Dict[tuple, tuple] = {}
    for f in measured:
        for line, device_us, wait_us in f.cost.lines:  # type: ignore[union-attr]
            lines[(f.path, line)] = max(lines.get((f.path, line), (0.0, 0.0)), (device_us, wait_us))
    device = sum(d for d, _ in lines.values())
    wait = sum(w for _, w in lines.values())
    ran = sum(1 for f in measured if f.cost.steps)  # type: ignore[union-attr]
    step_us = measured[0].cost.step_us  # type: ignore[union-attr]
    of_step = f" of a {duration(step_us)} profiled step ({100.0 * (device + wait) / step_us:.0f} %)" if step_us else ""
    return (f"Measured cost at the reported lines: {duration(device + wait)} per step{of_step}: device "
            f"{duration(device)}, host wait {duration(wait)}; {ran} of {len(measured)} findings are on lines that issued "
            f"operators in the profiled steps.")


def render_profile_report(profiled: Any, out: TextIO, as_json: bool = False) -> None:
    """`--profile-report`: the profile read, then every function seen in every profiled step that the project
    model does not run per step (its role, asked of the model)."""
    from ..profile import describe_steps  # (the profile reader is imported only with --profile)

    profile = profiled.profile
    rows = [{"path": u.path, "function": u.function, "qualname": u.qualname,
             "observed": u.observed.describe(), "steps": list(u.observed.steps),
             "role": u.role.kind if u.role is not None else None, "model": u.describe_role()}
            for u in profiled.unexpected]
    head = {"profile": profile.root, "framework": profile.framework, "versions": dict(profile.versions),
            "steps": list(profile.step_numbers), "mapped_share": round(profile.mapping.step_share, 4),
            "functions_every_step": profiled.every_step, "not_per_step_in_model": rows,
            "diagnostics": [{"severity": d.severity, "source": d.source, "message": d.message}
                            for d in profile.diagnostics]}
    if as_json:
        json.dump(head, out, indent=2)
        out.write("\n")
        return
    versions = ", ".join(f"{k} {v}" for k, v in sorted(profile.versions.items()))
    out.write(sanitize(f"Profile {profile.root} ({profile.framework}{'; ' + versions if versions else ''}): "
                       f"{describe_steps(profile.step_numbers)}; {100.0 * profile.mapping.step_share:.0f} % of the "
                       f"in-step events with a call stack map to a project line.") + "\n")
    for d in profile.diagnostics:
        out.write(sanitize(f"  {d.severity}: {d.source}: {d.message}") + "\n")
    out.write(f"{profiled.every_step} project function{'s' if profiled.every_step != 1 else ''} ran in every "
              f"profiled step; {len(rows)} of them the project model does not run per step:\n")
    for u in profiled.unexpected:
        name = u.qualname or u.function
        out.write(sanitize(f"  {u.path}: {name}: {u.observed.describe()}; the model: {u.describe_role()}") + "\n")
