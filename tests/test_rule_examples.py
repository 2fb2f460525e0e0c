"""Every registered rule's inline examples: flagged ones report its code, clean ones do not."""
from __future__ import annotations

import ast
import textwrap

import pytest

from ascend_lint.core_rules import PARSE_ERROR_CODE
from ascend_lint.fileio import SourceError
from conftest import REGISTRY, lint

RULES = REGISTRY.sorted_rules()
FLAGGED = [(r.code, i, src) for r in RULES for i, src in enumerate(r.flagged)]
CLEAN = [(r.code, i, src) for r in RULES for i, src in enumerate(r.clean)]


def _run(code: str, src: str):
    if code == PARSE_ERROR_CODE:  # reported for a file the enabled rules apply to that does not parse
        try:
            lint(src, preview=True)
        except SourceError as exc:
            return [exc.reason]
        return []
    return [f for f in lint(src, select=[code], preview=True) if f.code == code]


@pytest.mark.parametrize("code,index,src", FLAGGED, ids=[f"{c}-flagged-{i}" for c, i, _ in FLAGGED])
def test_flagged_example_reports_the_rule(code, index, src):
    assert _run(code, src), f"{code} flagged example {index} gave no {code}:\n{src}"


@pytest.mark.parametrize("code,index,src", CLEAN, ids=[f"{c}-clean-{i}" for c, i, _ in CLEAN])
def test_clean_example_is_silent(code, index, src):
    found = _run(code, src)
    assert not found, f"{code} clean example {index} was flagged: {[f.message for f in found]}\n{src}"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_metadata_is_complete(rule):
    assert rule.name and rule.name == rule.name.lower() and " " not in rule.name
    assert rule.message and rule.docs.what and rule.docs.why
    assert rule.flagged and rule.clean, "every rule carries flagged and clean examples"
    assert rule.triggers, "every rule declares its trigger texts (the pre-filter depends on them)"
    for src in rule.flagged + rule.clean:
        if not (rule.code == PARSE_ERROR_CODE and src in rule.flagged):  # ASC000's examples do not parse
            ast.parse(textwrap.dedent(src))


def test_codes_are_unique_and_packs_known():
    assert len({r.code for r in RULES}) == len(RULES)
    assert {r.pack for r in RULES} <= {"core", "affinity", "migration", "fusion"}


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_keeps_per_file_state_in_start_file(rule):
    """A rule does not override __init__: the engine makes the instance, and `start_file` sets its state."""
    from ascend_lint.rule import Rule

    owners = [cls for cls in rule.__mro__ if "__init__" in cls.__dict__]
    assert owners[0] is Rule, f"{rule.code}: {owners[0].__qualname__} overrides __init__; use start_file()"
