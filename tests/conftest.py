"""Shared test helpers: lint a snippet through the real engine and registry."""
from __future__ import annotations

import textwrap
from typing import List, Optional, Sequence

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.registry import load_registry
from ascend_lint.rule import Finding

REGISTRY = load_registry()


def lint(source: str, select: Optional[Sequence[str]] = None, preview: bool = True, target: str = "auto",
         path: str = "snippet.py", **settings) -> List[Finding]:
    """Findings for `source` (dedented) with the given rules enabled (default: all, preview included)."""
    cfg = Settings(preview=preview, target=target, **settings)
    rules = [r for r in REGISTRY.sorted_rules()
             if (select is None or any(r.code.startswith(s) for s in select)) and (preview or not r.preview)]
    return Linter(rules, cfg).check(textwrap.dedent(source), path)


def codes(source: str, **kwargs) -> List[str]:
    return [f.code for f in lint(source, **kwargs)]


@pytest.fixture
def registry():
    return REGISTRY


# A two-file project: `log_metrics` synchronizes, and is per-step only while the step loop calls it
# (TRAIN.format(module=..., call=STEP_CALL or "")).
STEP_UTILS = """\
import torch
import torch_npu


def log_metrics(loss):
    torch.npu.synchronize()
    return loss.item()
"""
STEP_TRAIN = """\
import torch
import torch_npu
from {module} import log_metrics


def main(model, loader, optimizer):
    for batch in loader:
        loss = model(batch)
        loss.backward()
        optimizer.step()
{call}

if __name__ == "__main__":
    main(None, [], None)
"""
STEP_CALL = "        log_metrics(loss)\n"
