"""The profile-only patterns, found on the per-line tallies (patterns.py holds their messages and docs)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .assemble import StackCost, StepIndex, Tally, per_step_threshold
from .lines import LineAggregate, LineKey, bits
from .patterns import PATTERNS
from .records import Cost, Observation
from .signatures import aicpu_alternative, op_type_of

GENERIC_AICPU_ADVICE = ("the Ascend advisor asks to change the code so the operator runs on the AI Core (an input "
                        "dtype the AI Core takes, or an equivalent operator)")


def detect(lines: Dict[LineKey, LineAggregate], steps: StepIndex) -> List[Observation]:
    """Observations for every line, ordered by path, line and code."""
    found: List[Observation] = []
    for (path, line), agg in sorted(lines.items()):
        for check in (_aicpu, _sync, _read, _h2d, _recompile):
            observation = check(path, line, agg, steps)
            if observation is not None:
                found.append(observation)
    return found


def _seen(tally: Tally, steps: StepIndex, mask: Optional[int] = None) -> int:
    return bits(tally.steps if mask is None else tally.steps & mask)


def _observation(code: str, path: str, line: int, agg: LineAggregate, steps: StepIndex, mask: int,
                 cost: Cost, **facts: object) -> Observation:
    pattern = PATTERNS[code]
    facts = {"steps": steps.count, "steps_seen": bits(mask), "line_is_def": agg.line_is_def, **facts}
    return Observation(code, pattern.name, path, line, agg.function, pattern.message.format(**facts), facts, cost,
                       steps.numbers(mask))


def _per_step(tally: Tally, steps: StepIndex) -> bool:
    return tally.n > 0 and _seen(tally, steps) >= per_step_threshold(steps.count)


def _us(ns: int, steps: StepIndex) -> float:
    return ns / steps.count / 1000.0


def _aicpu(path: str, line: int, agg: LineAggregate, steps: StepIndex) -> Optional[Observation]:
    cost: StackCost = agg.own
    if not _per_step(cost.aicpu, steps):
        return None
    kernels = sorted(cost.kernels.items(), key=lambda kv: -kv[1][1])
    names, advice = [], None
    for (name, op_type, dtypes), _ in kernels:
        op_type = op_type or op_type_of(name)
        if op_type not in names:
            names.append(op_type)
        advice = advice or aicpu_alternative(op_type, dtypes)
    shown = ", ".join(f"`{n}`" for n in names[:3]) or "operators"
    device_us = _us(cost.aicpu.ns, steps)
    return _observation("ASC801", path, line, agg, steps, cost.aicpu.steps, Cost(device_us, 0.0, 0.0),
                        kernels=shown, op_types=tuple(names), count=cost.aicpu.n / steps.count, device_us=device_us,
                        advice=advice or GENERIC_AICPU_ADVICE, alternative=advice)


def _sync(path: str, line: int, agg: LineAggregate, steps: StepIndex) -> Optional[Observation]:
    tally = agg.own.sync
    if not _per_step(tally, steps):
        return None
    wait_us = _us(tally.ns, steps)
    return _observation("ASC802", path, line, agg, steps, tally.steps, Cost(0.0, 0.0, wait_us),
                        count=tally.n / steps.count, wait_us=wait_us)


def _read(path: str, line: int, agg: LineAggregate, steps: StepIndex) -> Optional[Observation]:
    reads, copies = agg.own.read, agg.own.d2h
    merged = Tally()
    merged.merge(reads)
    merged.merge(copies)
    if not _per_step(merged, steps):
        return None
    wait_us, device_us = _us(reads.ns, steps), _us(copies.ns, steps)
    return _observation("ASC803", path, line, agg, steps, merged.steps, Cost(device_us, 0.0, wait_us),
                        count=max(reads.n, copies.n) / steps.count, wait_us=wait_us, device_us=device_us,
                        reads=reads.n, copies=copies.n)


def _h2d(path: str, line: int, agg: LineAggregate, steps: StepIndex) -> Optional[Observation]:
    tally = agg.own.h2d
    if not _per_step(tally, steps):
        return None
    device_us = _us(tally.ns, steps)
    return _observation("ASC804", path, line, agg, steps, tally.steps, Cost(device_us, 0.0, 0.0),
                        count=tally.n / steps.count, device_us=device_us)


def _recompile(path: str, line: int, agg: LineAggregate, steps: StepIndex) -> Optional[Observation]:
    """Compilations in later steps: the first profiled step may compile legitimately (warm-up)."""
    tally = agg.own.compile
    if not tally.n:
        return None
    later_mask = ~1 if len(steps.steps) > 1 else -1
    later = max(1, len(steps.steps) - 1)
    seen = bits(tally.steps & later_mask) if len(steps.steps) > 1 else bits(tally.steps)
    if seen < max(2, (later + 1) // 2):
        return None
    shapes = len(agg.own.compile_shapes)
    compile_us = _us(tally.ns, steps)
    return _observation("ASC805", path, line, agg, steps, tally.steps & later_mask if len(steps.steps) > 1
                        else tally.steps, Cost(0.0, compile_us, 0.0), count=tally.n / steps.count,
                        compile_us=compile_us, later=later, input_shapes=shapes,
                        shapes=f", {shapes} input shapes" if shapes > 1 else "")


__all__: Tuple[str, ...] = ("detect",)
