"""Shared test helpers: lint a snippet through the real engine and registry."""
from __future__ import annotations

import textwrap
from typing import List, Optional, Sequence

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine import Linter
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
