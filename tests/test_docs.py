"""Rule documentation: docs/rules.md is generated from the rule classes and must not go stale; the `rule CODE`
page explains its status and precision; the run summary's note on what `--preview` would add."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import re

import pytest

from ascend_lint import docs
from ascend_lint.config import Settings
from ascend_lint.docs import rules_markdown
from ascend_lint.registry import select_rules
from ascend_lint.rule import Docs, Rule
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
    """A number of rules in README.md, CONTRIBUTING.md or examples/README.md stands in a generated count or in
    the generated rule-set lists."""
    import re

    from ascend_lint.docs import README_BEGIN, README_END

    root = Path(__file__).parent.parent
    count_re = re.compile(r"(?<![-<!:\w])(\d+) (?:(?:default|preview|built-in) )?rules\b")
    for name in ("README.md", "CONTRIBUTING.md", "examples/README.md", "docs/rule-api.md"):
        text = re.sub(r"<!-- count:\w+ -->\d+<!-- /count -->", "N", (root / name).read_text(encoding="utf-8"))
        if README_BEGIN in text:
            text = text[:text.index(README_BEGIN)] + text[text.index(README_END):]
        assert not count_re.findall(text), f"{name}: a rule count written by hand"


def test_counts_follow_the_registry():
    from ascend_lint.docs import fill_counts, rule_counts

    counts = rule_counts(REGISTRY.sorted_rules())
    assert counts["rules"] == counts["default"] + counts["preview"] + counts["profiled"] == sum(
        counts[p] for p in ("affinity", "migration", "fusion", "profile"))
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
# ------------------------------------------------------------------------------ `rule CODE`: status and precision
FIGURES = {"ASC202": {"findings": 12, "judged": 10, "counts": {"TRUE": 1, "DEBATABLE": 2, "FALSE": 7},
                      "shares": {"TRUE": 0.1, "DEBATABLE": 0.2, "FALSE": 0.7},
                      "per_repo": {"b/two@2": 4, "a/one@1": 8}}}


@pytest.fixture
def held_out(monkeypatch):
    monkeypatch.setattr(docs, "_measurements", lambda: FIGURES)
    monkeypatch.setattr(docs, "held_out_repos", lambda: ("a/one", "b/two", "c/three"))


def test_a_preview_rule_page_says_what_preview_means_and_how_its_precision_was_measured(held_out):
    text = docs.rule_text(REGISTRY.get("ASC202"))
    first, section = text.split("\n## Status and precision\n", 1)
    assert "preview" in first.splitlines()[1] and "10 % TRUE, 30 % TRUE or DEBATABLE (10 judged of 12)" in first
    section = section.split("\n## ", 1)[0]
    assert "runs only with `--preview`" in section and "ascend-lint check --preview --select ASC202" in section
    assert docs.DEFAULT_BAR in section  # why it is preview: the bar it has to meet
    assert "3 public repositories that the rules were not tuned on (held-out: a/one, b/two, c/three)" in section
    assert "12 findings there (8 in a/one, 4 in b/two); 10 were read in context and judged: 1 TRUE" in section
    assert "2 DEBATABLE" in section and "7 FALSE" in section and docs.PRECISION_URL in section


def test_default_always_and_unmeasured_rules_say_so(held_out):
    assert "Default: runs unless deselected (`--ignore ASC101`)." in docs.rule_text(REGISTRY.get("ASC101"))
    assert "no finding of it on the 3 held-out repositories has been judged" in docs.rule_text(REGISTRY.get("ASC101"))
    assert "Always on" in docs.rule_text(REGISTRY.get("ASC000"))


class ThirdParty(Rule):
    code, name, message, preview = "XYZ001", "third-party", "m", True
    docs = Docs(what="Flags x.", why="It is slow.")


def test_a_third_party_rule_is_not_said_to_be_measured(held_out):
    text = docs.rule_text(ThirdParty)
    assert "Precision: not measured (ascend-lint's precision harness measures its built-in rules)." in text
    assert "--preview --select XYZ001" in text


def test_hover_and_sarif_markdown_explain_the_status_and_rules_md_explains_it_once(held_out):
    rule = REGISTRY.get("ASC201")
    assert "### Status and precision" in docs.rule_markdown(rule)
    assert "Status and precision" not in docs.rules_markdown([rule])
    assert "preview rules run only with `--preview`" in docs.HEADER


# ------------------------------------------------------------------------------ the run summary's preview note
def selection(**settings):
    """(enabled, enabled with preview on) for these settings: what cli.py passes to preview_note."""
    chosen = Settings(**settings)
    return (select_rules(REGISTRY, chosen)[0],
            select_rules(REGISTRY, dataclasses.replace(chosen, preview=True))[0])


def test_preview_note_counts_and_names_the_rules_preview_would_add():
    enabled, candidates = selection()
    left = [r for r in candidates if r.preview]
    note = docs.preview_note(enabled, candidates)
    first = [r.name for r in sorted(left, key=lambda r: (r.pack == "core", r.code))[:3]]
    assert note == f"{len(left)} preview rules not enabled ({', '.join(first)}, \u2026): `--preview` checks them."
    assert "unused-noqa" not in note  # the core's own check is named last


def test_preview_note_follows_the_selection():
    assert docs.preview_note(*selection(select=["ASC7"])) is None  # the fusion pack has no preview rule
    assert docs.preview_note(*selection(preview=True)) is None  # nothing left to add
    one = docs.preview_note(*selection(select=["ASC101", "ASC102"]))
    assert one == "1 preview rule not enabled (contiguous-layout-copy): `--preview` checks it."
    two = docs.preview_note(*selection(select=["ASC2"], ignore=["ASC205"]))
    assert two.startswith("2 preview rules not enabled (") and "\u2026" not in two


# ------------------------------------------------------------------------------ README: default set and preview
README = Path(__file__).parent.parent / "README.md"


def test_readme_rule_sets_are_current():
    text = README.read_text(encoding="utf-8")
    assert docs.with_rule_sets(text, REGISTRY.sorted_rules()) == text, (
        "README's rule lists are stale: run `python -m ascend_lint.docs README.md`")


def test_readme_rule_sets_leave_third_party_rules_out():
    block = docs.rule_sets_markdown(REGISTRY.sorted_rules() + [ThirdParty])
    assert "XYZ001" not in block and "ASC201" in block


def test_regenerating_the_readme_rewrites_only_its_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{docs.README_BEGIN}\nold\n{docs.README_END}\n\nafter\n", encoding="utf-8")
    assert docs.main([str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# x\n\n" + docs.README_BEGIN) and text.endswith(docs.README_END + "\n\nafter\n")
    assert "old" not in text and "**The default set** (" in text
    readme.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError):
        docs.main([str(readme)])
    assert readme.read_text(encoding="utf-8") == "no markers\n"  # left as it was


# What the README's introduction says each set checks: phrase -> the rules it stands for.
INTRO_DEFAULT = {"fused operator": ["ASC701", "ASC702", "ASC703", "ASC704", "ASC705"],
                 "host-to-device copies": ["ASC201"],
                 "`.contiguous()` after a transpose": ["ASC101"], "synchronous checkpoint saving": ["ASC501"],
                 "Ascend apex": ["ASC303"], "fused-optimizer options": ["ASC306", "ASC307"],
                 "`ASCEND_LAUNCH_BLOCKING=1`": ["ASC204"], "`nccl`": ["ASC602"], "TF32": ["ASC604"]}
INTRO_PREVIEW = {"host syncs in `forward`": ["ASC205"],
                 "in the step loop": ["ASC203"], "synchronizes in hot paths": ["ASC202"],
                 "NPU fused twin": ["ASC301"], "multiples of\n16": ["ASC401"], "fp32 MatMul": ["ASC402"],
                 "float64": ["ASC403"], "dynamic shapes": ["ASC404"],
                 "CUDA leftovers": ["ASC601", "ASC603", "ASC605"]}


def test_readme_introduction_puts_each_pattern_in_its_rules_set():
    text = README.read_text(encoding="utf-8")
    default = text[text.index("**By default**"):text.index("**`--preview` adds**")]
    preview = text[text.index("**`--preview` adds**"):text.index("## Set up")]
    for part, phrases, wanted in ((default, INTRO_DEFAULT, "default"), (preview, INTRO_PREVIEW, "preview")):
        for phrase, codes in phrases.items():
            assert phrase in part, phrase
            moved = [c for c in codes if docs.status(REGISTRY.get(c)) != wanted]
            assert not moved, f"README's introduction lists {phrase!r} under {wanted}; {moved} changed status"


def test_readme_counts_the_rules():
    packs = [r for r in REGISTRY.sorted_rules() if r.pack != "core"]
    default = sum(1 for r in packs if docs.status(r) == "default")
    text = re.sub(r"<!-- count:\w+ -->(\d+)<!-- /count -->", r"\1", README.read_text(encoding="utf-8"))
    assert f"| {len(packs)} rules ({default} in the default set) for torch_npu" in text


# ------------------------------------------------------------------------------ flake8: the `A` prefix collision
@pytest.mark.parametrize("options, reported", [
    (["--extend-ignore", "A"], False), (["--ignore", "AS"], False), (["--select", "E,A"], True),
    (["--select", "A"], True),
    (["--extend-ignore", "A001,A002"], True), (["--extend-ignore", "A", "--extend-select", "ASC"], True)])
def test_flake8_prefix_collision_is_as_documented(tmp_path, options, reported):
    """docs/ci.md's table of what `A...` selectors do to the ASC findings (flake8 matches codes by prefix)."""
    import subprocess
    import sys

    pytest.importorskip("flake8")
    (tmp_path / "m.py").write_text("import torch, torch_npu\n\n\ny = torch.transpose(x, -2, -1).contiguous() @ w\n",
                                   encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "flake8", "--isolated", *options, "m.py"], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert ("ASC101" in proc.stdout) is reported, proc.stdout + proc.stderr
    ci = (Path(__file__).parent.parent / "docs" / "ci.md").read_text(encoding="utf-8")
    row = next(line for line in ci.splitlines() if line.startswith("| `") and f"`{' '.join(options)}`" in line)
    assert ("all silenced" in row) is not reported, row


def test_flake8_prefix_collision_in_flake8s_configuration(tmp_path):
    """The table's `extend-ignore = A` spelling (flake8's configuration file) silences the findings too."""
    import subprocess
    import sys

    pytest.importorskip("flake8")
    (tmp_path / "m.py").write_text("import torch, torch_npu\n\n\ny = torch.transpose(x, -2, -1).contiguous() @ w\n",
                                   encoding="utf-8")
    (tmp_path / "setup.cfg").write_text("[flake8]\nextend-ignore = A\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "flake8", "m.py"], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert "ASC101" not in proc.stdout and "F401" in proc.stdout, proc.stdout + proc.stderr  # (flake8 ran)
    ci = (Path(__file__).parent.parent / "docs" / "ci.md").read_text(encoding="utf-8")
    assert "| `--extend-ignore A` / `extend-ignore = A` | all silenced |" in ci
