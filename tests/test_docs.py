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


def test_generated_counts_and_tables_are_up_to_date():
    """Every rule count in README/docs and the examples table are generated (`python -m ascend_lint.docs`)."""
    from ascend_lint.docs import generated

    root = Path(__file__).parent.parent
    stale = [str(Path(path).relative_to(root)) for path, text in generated(str(root), REGISTRY.sorted_rules()).items()
             if Path(path).read_text(encoding="utf-8") != text]
    assert not stale, f"stale generated docs: {stale}: run `python -m ascend_lint.docs`"


def test_no_rule_count_is_written_by_hand():
    """A number of rules in README.md, CONTRIBUTING.md or examples/README.md stands in a generated count."""
    import re

    root = Path(__file__).parent.parent
    count_re = re.compile(r"(?<![-<!:\w])(\d+) (?:(?:default|preview|built-in) )?rules\b")
    for name in ("README.md", "CONTRIBUTING.md", "examples/README.md", "docs/rule-api.md"):
        text = re.sub(r"<!-- count:\w+ -->\d+<!-- /count -->", "N", (root / name).read_text(encoding="utf-8"))
        assert not count_re.findall(text), f"{name}: a rule count written by hand"


def test_counts_follow_the_registry():
    from ascend_lint.docs import fill_counts, rule_counts

    counts = rule_counts(REGISTRY.sorted_rules())
    assert counts["rules"] == counts["default"] + counts["preview"] == sum(
        counts[p] for p in ("affinity", "migration", "fusion"))
    assert fill_counts("<!-- count:rules -->0<!-- /count -->", REGISTRY.sorted_rules()) == (
        f"<!-- count:rules -->{counts['rules']}<!-- /count -->")


def test_every_rule_has_a_section():
    text = DOCS.read_text(encoding="utf-8")
    for rule in REGISTRY.sorted_rules():
        assert f"## {rule.code} `{rule.name}`" in text


RULE_API = Path(__file__).parent.parent / "docs" / "rule-api.md"
# FileContext members the engine and the project model use, not rules.
ENGINE_ONLY = {"attach", "record_import", "enter_function", "bind_target", "bind_name", "is_step_loop_unwalked",
               "facts"}
# Instance attributes a rule may read (the others are the engine's and the model's).
CONTEXT_ATTRIBUTES = ("path", "text", "tree", "aliases", "constants", "local_functions", "local_classes", "scopes",
                      "loops", "ifs", "withs", "stack", "npu", "auto_migrated")


def _documented(text: str, name: str) -> bool:
    return f"`{name}`" in text or f"`{name}(" in text


def test_rule_api_page_names_every_question_helper_and_attribute():
    import ast as _ast
    import inspect

    from ascend_lint import astutil
    from ascend_lint.analysis.semantic import FileContext
    from ascend_lint.rule import Rule

    text = RULE_API.read_text(encoding="utf-8")
    questions = [n for n, v in vars(FileContext).items()
                 if not n.startswith("_") and (callable(v) or isinstance(v, property)) and n not in ENGINE_ONLY]
    helpers = [n for n, v in vars(astutil).items() if inspect.isfunction(v) and v.__module__ == astutil.__name__
               and not n.startswith("_")]
    rule_members = [n for n in vars(Rule) if not n.startswith("_")]
    missing = [n for n in questions + list(CONTEXT_ATTRIBUTES) + helpers + rule_members if not _documented(text, n)]
    assert not missing, f"docs/rule-api.md does not name: {missing}"
    ctx = FileContext("p.py", "import torch\n", _ast.parse("import torch\n"))
    assert all(hasattr(ctx, n) for n in CONTEXT_ATTRIBUTES)
