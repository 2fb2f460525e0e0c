"""The fusion fixtures of issue #29 (tests/fixtures/execution/mech_fusion_*, see the README on the
execution-model branch): every `# expect: KIND` line is reported by the rule KIND maps to, no `# clean: KIND`
line is.

`fusion-softmax` maps to no rule, by design: a softmax whose scores come in as a parameter (`scores.float()`
cast around it, or masked in one branch of `if mask is not None`) may be a router's or a classifier's, and on
its own it has no fused replacement to recommend (`torch_npu.npu_scaled_masked_softmax` needs a bool mask and
last two dims of 32..4096 in steps of 32). In attention, where the `q @ k^T` is visible, ASC704 reports the
cast and the two branches as one hand-written attention (tests/test_fusion.py).
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from conftest import lint

FIXTURES = Path(__file__).parent / "fixtures" / "execution"
RULE_OF_KIND = {"fusion-attention": "ASC704", "fusion-rmsnorm": "ASC701", "fusion-channel-shuffle": "ASC101"}
NO_RULE = {"fusion-softmax"}
MARKER = re.compile(r"#\s*(expect|clean):\s*([\w, -]+?)(?:\s+--|$)")


def markers(source: str) -> Tuple[Dict[str, Set[int]], Dict[str, Set[int]]]:
    """(expected lines, clean lines) per kind, from the trailing `# expect:` / `# clean:` comments."""
    expect: Dict[str, Set[int]] = {}
    clean: Dict[str, Set[int]] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        match = MARKER.search(token.string)
        if match:
            for kind in (k.strip() for k in match.group(2).split(",")):
                (expect if match.group(1) == "expect" else clean).setdefault(kind, set()).add(token.start[0])
    return expect, clean


def fixture_files() -> List[Path]:
    return sorted(FIXTURES.glob("mech_fusion_*/*.py"))


def test_the_five_fixtures_are_here():
    assert len({p.parent.name for p in fixture_files()}) == 5


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fusion_fixture_markers(path):
    source = path.read_text()
    expect, clean = markers(source)
    assert set(expect) | set(clean) <= set(RULE_OF_KIND) | NO_RULE
    findings = lint(source, select=["ASC7", "ASC101"], path=path.name)
    reported: Dict[str, Set[int]] = {}
    for f in findings:
        reported.setdefault(f.code, set()).add(f.line)
    for kind, code in RULE_OF_KIND.items():
        assert reported.get(code, set()) >= expect.get(kind, set()), kind
        assert not reported.get(code, set()) & clean.get(kind, set()), kind
    for kind in NO_RULE:
        assert not {f.line for f in findings if f.code.startswith("ASC7")} & expect.get(kind, set()), kind
