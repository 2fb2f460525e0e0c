"""docs/rules.md is generated from the rule classes and must not go stale."""
from __future__ import annotations

from pathlib import Path

from ascend_lint.docs import rules_markdown
from conftest import REGISTRY

DOCS = Path(__file__).parent.parent / "docs" / "rules.md"


def test_rules_md_is_up_to_date():
    expected = rules_markdown(REGISTRY.sorted_rules())
    assert DOCS.read_text(encoding="utf-8") == expected, (
        "docs/rules.md is stale: run `ascend-lint rules --output-format markdown > docs/rules.md`"
    )


def test_every_rule_has_a_section():
    text = DOCS.read_text(encoding="utf-8")
    for rule in REGISTRY.sorted_rules():
        assert f"## {rule.code} `{rule.name}`" in text
