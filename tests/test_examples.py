"""The bundled examples: every `# expect: CODE` comment is reported on its line, nothing else is,
and every default rule fires at least once (the README's first command shows them all)."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import REGISTRY, lint

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))
EXPECT_RE = re.compile(r"#\s*expect:\s*([A-Z0-9,\s]+)$")
REGISTERED = set(REGISTRY.rules)


def expected(path: Path) -> Counter:
    found: Counter = Counter()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = EXPECT_RE.search(line)
        if match:
            for code in re.split(r"[,\s]+", match.group(1).strip()):
                if code in REGISTERED:
                    found[(number, code)] += 1
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_findings_match_expect_comments(path):
    actual = Counter((f.line, f.code) for f in lint(path.read_text(encoding="utf-8"), path=str(path)))
    assert actual == expected(path)


def test_every_default_rule_fires_on_the_examples():
    fired = {f.code for p in EXAMPLES for f in lint(p.read_text(encoding="utf-8"), path=str(p), preview=False)}
    defaults = {code for code, rule in REGISTRY.rules.items()
                if not rule.preview and rule.pack != "core" and not rule.profile_only}  # (those: test_profile_run)
    assert defaults <= fired, f"default rules that never fire on examples/: {sorted(defaults - fired)}"
