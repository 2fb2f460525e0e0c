"""Every registered rule's inline examples: flagged ones report its code, clean ones do not."""
from __future__ import annotations

import ast
import textwrap

import pytest

from ascend_lint.config import Settings
from ascend_lint.core_rules import PARSE_ERROR_CODE
from ascend_lint.engine.linter import Linter
from ascend_lint.fileio import SourceError
from ascend_lint.fix.fixer import apply_alone
from conftest import REGISTRY, lint

RULES = REGISTRY.sorted_rules()
FLAGGED = [(r.code, i, src) for r in RULES for i, src in enumerate(r.flagged)]
CLEAN = [(r.code, i, src) for r in RULES for i, src in enumerate(r.clean)]
CASES = [(r.code, i, case) for r in RULES for i, case in enumerate(r.cases)]


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


@pytest.mark.parametrize("code,index,case", CASES, ids=[f"{c}-case-{i}" for c, i, _ in CASES])
def test_case_pins_line_message_and_fix(code, index, case):
    """Fixit's `Invalid` cases: the finding on `line`, its message, and its fix applied alone."""
    rules = RULES if code == PARSE_ERROR_CODE else [r for r in RULES if r.code.startswith(code)]  # (see _run)
    result = Linter(rules, Settings(preview=True)).lint_bytes(case.source.encode("utf-8"), "snippet.py")
    found = [f for f in result.findings if f.code == code]  # (ASC000 too: a file that does not parse)
    assert found, f"{code} case {index} gave no {code}:\n{case.source}"
    on_line = [f for f in found if f.line == case.line]
    assert on_line, f"{code} case {index}: expected a finding on line {case.line}, got lines {[f.line for f in found]}"
    finding = next((f for f in on_line if case.message_contains in f.message), None)
    assert finding is not None, (f"{code} case {index}: no message on line {case.line} holds "
                                 f"{case.message_contains!r}: {[f.message for f in on_line]}")
    if case.fixed is not None:
        assert finding.fix is not None, f"{code} case {index} pins a fixed text but the finding has no fix"
        assert apply_alone(case.source, finding) == case.fixed_source, f"{code} case {index}: fixed text differs"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_metadata_is_complete(rule):
    assert rule.name and rule.name == rule.name.lower() and " " not in rule.name
    assert rule.message and rule.docs.what and rule.docs.why
    if rule.profile_only:  # examples are what a profile measured: tests/test_profile_run.py checks them
        assert rule.docs.example and rule.docs.use_instead and rule.docs.source and not rule.handler_names()
        return
    assert rule.flagged_sources() and rule.clean, "every rule carries flagged and clean examples"
    assert rule.cases, "every rule pins at least one line and message with a Case"
    if rule.fix_applicability is not None:
        assert any(c.fixed is not None for c in rule.cases), "a rule with a fix pins one fixed text"
    assert rule.triggers, "every rule declares its trigger texts (the pre-filter depends on them)"
    for src in rule.flagged_sources() + rule.clean:
        if not (rule.code == PARSE_ERROR_CODE and src in rule.flagged_sources()):  # ASC000's do not parse
            ast.parse(textwrap.dedent(src))


def test_codes_are_unique_and_packs_known():
    assert len({r.code for r in RULES}) == len(RULES)
    assert {r.pack for r in RULES} <= {"core", "affinity", "migration", "fusion", "profile"}


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_keeps_per_file_state_in_start_file(rule):
    """A rule does not override __init__: the engine makes the instance, and `start_file` sets its state."""
    from ascend_lint.rule import Rule

    owners = [cls for cls in rule.__mro__ if "__init__" in cls.__dict__]
    assert owners[0] is Rule, f"{rule.code}: {owners[0].__qualname__} overrides __init__; use start_file()"
