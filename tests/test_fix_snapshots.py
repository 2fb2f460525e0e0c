"""Every rule's fix, end to end: `tests/fixtures/fixes/<CODE>_<case>.in.py` -> `.out.py`, byte for byte.

The fixtures run through the real CLI (`check --fix --unsafe-fixes --select CODE`) on a copy. Regenerate the
expected outputs with `ASCEND_LINT_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_fix_snapshots.py`, then
review the diff of the `.out.py` files before committing them.
"""
from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import List, Tuple

import pytest

from ascend_lint import cli
from ascend_lint.fix import command, fixer
from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.fileio import decode_source
from ascend_lint.rule import Applicability

from conftest import REGISTRY

FIXTURES = Path(__file__).parent / "fixtures" / "fixes"
UPDATE = os.environ.get("ASCEND_LINT_UPDATE_SNAPSHOTS") == "1"
CASES = sorted(p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py"))
FIX_RULES = [r for r in REGISTRY.sorted_rules() if r.fix_applicability is not None]


def _code(case: str) -> str:
    return case.split("_", 1)[0]


def _rule_or_skip(case: str):
    rule = REGISTRY.get(_code(case))
    if rule is None:
        pytest.skip(f"{_code(case)} is not registered")
    return rule


PORTING_CASES = {"ASC601_option_default", "ASC602_option_default"}  # reported only with --target npu


def _case_flags(case: str) -> Tuple[str, ...]:
    return ("--target", "npu") if case in PORTING_CASES else ()


def _cli(tmp_path: Path, capsys, case: str, *flags: str, data: bytes = b"") -> Tuple[int, bytes, str, str]:
    """Run `ascend-lint check` on a copy of the fixture; (exit code, file bytes after, stdout, stderr)."""
    target = tmp_path / f"{case}.py"
    target.write_bytes(data or (FIXTURES / f"{case}.in.py").read_bytes())
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = cli.main(["check", "--isolated", "--no-cache", "--preview", "--select", _code(case),
                         "--output-format", "concise", *_case_flags(case), *flags, target.name])
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    return code, target.read_bytes(), out, err


@pytest.fixture(autouse=True)
def _plain_output(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.mark.parametrize("case", CASES)
def test_fix_snapshot(case, tmp_path, capsys):
    _rule_or_skip(case)
    _, fixed, _, err = _cli(tmp_path, capsys, case, "--fix", "--unsafe-fixes")
    assert "warning:" not in err, err
    expected = FIXTURES / f"{case}.out.py"
    if UPDATE:
        expected.write_bytes(fixed)
    assert expected.exists(), f"no snapshot for {case}: run with ASCEND_LINT_UPDATE_SNAPSHOTS=1"
    assert fixed == expected.read_bytes()
    assert fixed != (FIXTURES / f"{case}.in.py").read_bytes(), f"{case}: the fix changed nothing"


@pytest.mark.parametrize("case", CASES)
def test_second_fix_changes_nothing(case, tmp_path, capsys):
    _rule_or_skip(case)
    expected = (FIXTURES / f"{case}.out.py").read_bytes()
    _, again, out, err = _cli(tmp_path, capsys, case, "--fix", "--unsafe-fixes", data=expected)
    assert again == expected and "warning:" not in err
    assert "Fixed" not in out and "fixed" not in out


@pytest.mark.parametrize("case", CASES)
def test_unsafe_fixes_need_the_flag(case, tmp_path, capsys):
    _rule_or_skip(case)
    raw = (FIXTURES / f"{case}.in.py").read_bytes()
    text, _ = decode_source(raw)
    settings = Settings(preview=True, target="npu" if case in PORTING_CASES else "auto")
    linter = Linter([REGISTRY.get(_code(case))], settings)
    findings = linter.check(text, "x.py")
    result = fixer.fix_text(text, "x.py", findings, linter, settings)
    assert all(f.fix.applicability is Applicability.SAFE for f in result.applied)
    unsafe = [f for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE]
    if not any(f.fix and f.fix.applicability is Applicability.SAFE for f in findings):
        _, after, out, _ = _cli(tmp_path, capsys, case, "--fix")
        assert after == raw
        if unsafe:
            assert "--unsafe-fixes" in _cli(tmp_path, capsys, case)[2] + out
    remaining = [f for f in result.findings if f.fix and f.fix.applicability is Applicability.UNSAFE]
    assert len(remaining) == len(unsafe)


@pytest.mark.parametrize("case", CASES)
def test_diff_writes_nothing_and_shows_the_fix(case, tmp_path, capsys):
    _rule_or_skip(case)
    raw = (FIXTURES / f"{case}.in.py").read_bytes()
    target = tmp_path / f"{case}.py"
    code, after, out, err = _cli(tmp_path, capsys, case, "--diff", "--unsafe-fixes")
    assert after == raw and code == 1
    assert sorted(os.listdir(tmp_path)) == [target.name]
    old, encoding = decode_source(raw)
    new = (FIXTURES / f"{case}.out.py").read_bytes().decode(encoding)
    assert out == command.unified_diff(target.name, old, new)
    assert re.search(r"Would fix \d+ findings?\.", err)


FIXED_CASES = [(r.code, i, case) for r in FIX_RULES for i, case in enumerate(r.cases) if case.fixed is not None]


@pytest.mark.parametrize("code,index,case", FIXED_CASES, ids=[f"{c}-case-{i}" for c, i, _ in FIXED_CASES])
def test_case_fixed_text_through_the_cli(code, index, case, tmp_path, capsys):
    """A rule's case with a fixed text is a snapshot too: `check --fix --unsafe-fixes --select CODE` on the case
    (one finding of the rule) writes exactly that text, and fixing again changes nothing."""
    name = f"{code}_case{index}"
    _, fixed, _, err = _cli(tmp_path, capsys, name, "--fix", "--unsafe-fixes", data=case.source.encode("utf-8"))
    assert "warning:" not in err, err
    assert fixed.decode("utf-8") == case.fixed_source
    _, again, _, _ = _cli(tmp_path, capsys, name, "--fix", "--unsafe-fixes", data=fixed)
    assert again == fixed


def test_fixture_set_covers_every_fix_and_the_hard_cases():
    codes = {_code(c) for c in CASES} | {code for code, _, _ in FIXED_CASES}
    missing = [r.code for r in FIX_RULES if r.code not in codes]
    assert not missing, f"rules with fixes but neither a fix snapshot nor a case with a fixed text: {missing}"
    raws = {c: (FIXTURES / f"{c}.in.py").read_bytes() for c in CASES}
    assert any(b"\r\n" in raw for raw in raws.values()), "a CRLF fixture"
    assert any(re.match(rb"#.*coding[:=]\s*latin-1", raw) and re.search(rb"[\x80-\xff]", raw)
               for raw in raws.values()), "a latin-1 fixture with a coding cookie"
    assert any(re.search(rb"\(\n(.*\n)*.*#.*\n(.*\n)*\)", raw) for raw in raws.values()), \
        "a fixture with comments inside the edited call"
    assert any(re.search(rb"^import \S+ as \w+", raw, re.M) for raw in raws.values()), "an aliased import"
    orphans = [p.name for p in FIXTURES.glob("*.out.py") if p.name[: -len(".out.py")] not in CASES]
    assert not orphans


# ----------------------------------------------------------------------------- docs and examples
SAFE_WORD = re.compile(r"(?<!un)\bsafe\b", re.I)
UNSAFE_WORD = re.compile(r"\bunsafe\b", re.I)
NO_FIX = re.compile(r"\bno fix\b", re.I)


@pytest.mark.parametrize("rule", REGISTRY.sorted_rules(), ids=[r.code for r in REGISTRY.sorted_rules()])
def test_fix_safety_docs_match_the_applicability(rule):
    text = " ".join(textwrap.dedent(rule.docs.fix_safety).split())
    app = rule.fix_applicability
    if app is None:
        assert NO_FIX.search(text) and not SAFE_WORD.search(text) and not UNSAFE_WORD.search(text), \
            f"{rule.code} offers no fix; its Fix safety should say 'No fix ...': {text!r}"
    elif app is Applicability.SAFE:
        assert SAFE_WORD.search(text) and not NO_FIX.search(text.split(".")[0]), \
            f"{rule.code} has a safe fix; its Fix safety should say when it is safe: {text!r}"
    elif app is Applicability.UNSAFE:
        assert UNSAFE_WORD.search(text) and not SAFE_WORD.search(text.split(".")[0]), \
            f"{rule.code} has an unsafe fix; its Fix safety should start by saying it is unsafe: {text!r}"
    else:
        assert re.search(r"\bdisplay", text, re.I), f"{rule.code}: a display-only fix should say so: {text!r}"


def _example_findings(rule) -> List[Tuple[str, list]]:
    out = []
    for src in rule.flagged_sources():
        src = textwrap.dedent(src)
        settings = Settings(preview=True, unsafe_fixes=True)
        linter = Linter([rule], settings)
        out.append((src, linter, settings, linter.check(src, "example.py")))
    return out


@pytest.mark.parametrize("rule", REGISTRY.sorted_rules(), ids=[r.code for r in REGISTRY.sorted_rules()])
def test_fixes_on_the_inline_examples_are_declared_valid_and_stable(rule):
    order = {Applicability.SAFE: 2, Applicability.UNSAFE: 1, Applicability.DISPLAY: 0}
    best = order[rule.fix_applicability] if rule.fix_applicability else -1
    for src, linter, settings, findings in _example_findings(rule):
        for f in findings:
            if f.fix is not None:
                assert order[f.fix.applicability] <= best, \
                    f"{rule.code} offers a {f.fix.applicability.value} fix but declares {rule.fix_applicability}"
        if not any(f.fix for f in findings):
            continue
        result = fixer.fix_text(src, "example.py", findings, linter, settings)
        assert not result.warnings, (rule.code, src, result.warnings)
        again = fixer.fix_text(result.text, "example.py", linter.check(result.text, "example.py"), linter, settings)
        assert again.text == result.text and not again.applied, (rule.code, src, result.text)


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES.parent.parent.parent / "examples").glob("*.py")))
def test_fixing_the_bundled_examples_with_every_rule(name):
    """Many fixes of many rules in one realistic file (some enabled by others: an optimizer made fused
    by ASC301 then has its `set_to_none=True` fixed by ASC307): no warning, valid and stable output."""
    import ast

    text = (FIXTURES.parent.parent.parent / "examples" / name).read_text(encoding="utf-8")
    settings = Settings(preview=True, unsafe_fixes=True)
    linter = Linter(REGISTRY.sorted_rules(), settings)
    result = fixer.fix_text(text, name, linter.check(text, name), linter, settings)
    assert not result.warnings
    ast.parse(result.text)
    assert not [f for f in result.findings if f.fix is not None and f.fix.applicability is not Applicability.DISPLAY]
    again = fixer.fix_text(result.text, name, linter.check(result.text, name), linter, settings)
    assert again.text == result.text and not again.applied
