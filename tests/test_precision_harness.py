"""The precision harness (bench/precision.py): sampling, volume-weighted shares, the triage file, the
generated docs section. Synthetic findings only: the harness itself never fetches anything."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("precision", os.path.join(HERE, "..", "bench", "precision.py"))
precision = importlib.util.module_from_spec(_spec)
sys.modules["precision"] = precision  # (dataclasses look their module up)
_spec.loader.exec_module(precision)
Hit, Row = precision.Hit, precision.Row


def hits(rule: str, n: int, message: str = "`x.t()` is slow: use `y`", repo: str = "o/r@1") -> list:
    return [Hit(rule, repo, f"pkg/m{i % 7}.py", i + 1, message) for i in range(n)]


def test_shape_blanks_code_strings_and_numbers():
    assert precision.shape("`a.t()` after `t` in 'x' costs 12 ms") == "`…` after `…` in '…' costs N ms"


def test_rare_rules_are_judged_whole_and_big_ones_sampled_per_shape():
    found = hits("ASC900", 10) + hits("ASC901", 200) + hits("ASC901", 5, message="other advice 3")[:5]
    found[-5:] = [Hit("ASC901", "o/r@1", "other.py", i, "other advice 3") for i in range(5)]
    lines = precision.group_lines(found)
    chosen = precision.sample(lines)
    assert {k for k in lines if k[0] == "ASC900"} <= chosen
    big = [k for k in chosen if k[0] == "ASC901"]
    assert precision.SAMPLE_SIZE <= len(big) <= precision.SAMPLE_SIZE + 2 * precision.MIN_PER_SHAPE
    assert sum(k[2].startswith("other.py") for k in big) >= precision.MIN_PER_SHAPE
    assert precision.sample(lines) == chosen  # deterministic
    fewer = dict(list(lines.items())[:-50])  # findings go: the lines still there stay in the sample
    assert chosen & set(fewer) <= precision.sample(fewer)


def test_shares_are_weighted_by_the_volume_of_each_shape():
    common = hits("ASC900", 90, "common `a`")
    rare = [Hit("ASC900", "o/r@1", "rare.py", i, "rare advice") for i in range(1, 11)]
    triage = {h.key: Row(*h.key, "TRUE", "") for h in common[:3]}
    triage.update({h.key: Row(*h.key, "FALSE", "") for h in rare[:2]})
    fig = precision.measure(common + rare, triage, {"ASC900": "default"}, set())["ASC900"]
    assert fig.findings == 100 and fig.judged == 5 and fig.counts == {"TRUE": 3, "FALSE": 2, "DEBATABLE": 0}
    assert fig.shares["TRUE"] == pytest.approx(0.9) and fig.shares["FALSE"] == pytest.approx(0.1)
    assert fig.coverage == 1.0 and precision.meets_bar(fig)
    half = precision.measure(common + rare, {k: v for k, v in triage.items() if v.verdict == "TRUE"},
                             {"ASC900": "default"}, set())["ASC900"]
    assert half.coverage == pytest.approx(0.9) and half.shares["TRUE"] == 1.0


def test_default_totals_weight_rules_by_findings_and_skip_preview():
    figs = {
        "ASC900": precision.RuleFigures("default", findings=300, coverage=1.0,
                                        shares={"TRUE": 0.1, "FALSE": 0.6, "DEBATABLE": 0.3}),
        "ASC901": precision.RuleFigures("default", findings=100, coverage=1.0,
                                        shares={"TRUE": 0.9, "FALSE": 0.1, "DEBATABLE": 0.0}),
        "ASC902": precision.RuleFigures("preview", findings=1000, coverage=1.0,
                                        shares={"TRUE": 0.0, "FALSE": 1.0, "DEBATABLE": 0.0}),
    }
    total = precision.default_totals(figs)
    assert total.findings == 400
    assert total.shares["TRUE"] == pytest.approx(0.3) and total.shares["FALSE"] == pytest.approx(0.475)
    assert precision.meets_bar(total) is False


def test_triage_file_round_trip_sorted_by_rule_repo_path_line(tmp_path):
    path = str(tmp_path / "triage.tsv")
    rows = [Row("ASC2", "a/b@1", "x.py:10", "TRUE", "per step\tsync"), Row("ASC1", "a/b@1", "x.py:9", "", ""),
            Row("ASC1", "a/b@1", "x.py:10", "FALSE", "weight init")]
    precision.write_triage(rows, path)
    text = open(path, encoding="utf-8").read().splitlines()
    assert text[0] == "rule\trepo@commit\tpath:line\tverdict\treason"
    assert [line.split("\t")[2] for line in text[1:]] == ["x.py:9", "x.py:10", "x.py:10"]
    assert text[3].endswith("TRUE\tper step sync")
    again = precision.read_triage(path)
    assert again[("ASC1", "a/b@1", "x.py:10")].verdict == "FALSE" and len(again) == 3


def test_bad_verdict_is_refused(tmp_path):
    path = tmp_path / "triage.tsv"
    path.write_text("rule\trepo@commit\tpath:line\tverdict\treason\nASC1\ta/b@1\tx.py:1\tMAYBE\t\n")
    with pytest.raises(SystemExit, match="verdict"):
        precision.read_triage(str(path))


def test_generated_section_replaces_only_itself(tmp_path):
    doc = tmp_path / "precision.md"
    doc.write_text("# Precision\n\nhand-written intro\n")
    repos = [precision.Repo("o/r", "1", "tuning", (".",))]
    fig = precision.measure(hits("ASC900", 5), {}, {"ASC900": "default"}, set())
    data = {"roles": {"tuning": {"repos": ["o/r@1"], "version": "0",
                                 "rules": {k: v.as_json() for k, v in fig.items()}}}}
    precision.update_doc(precision.render_section(data, repos), str(doc))
    first = doc.read_text()
    assert "hand-written intro" in first and "| ASC900 | default | 5 |" in first and "Not measured yet." in first
    precision.update_doc(precision.render_section(data, repos), str(doc))
    assert doc.read_text() == first


def test_the_corpus_list_names_tuning_and_held_out_repositories():
    repos = precision.read_corpus()
    assert {r.role for r in repos} == {"tuning", "held-out"}
    assert all(r.commit != "-" for r in repos if r.role == "tuning")


def test_rules_show_held_out_precision_only(tmp_path, monkeypatch):
    from ascend_lint import docs
    from conftest import REGISTRY

    rule = REGISTRY.get("ASC101")
    figures = {"findings": 120, "judged": 40, "shares": {"TRUE": 0.6, "FALSE": 0.05, "DEBATABLE": 0.35}}
    data = tmp_path / "precision.json"
    data.write_text('{"roles": {"tuning": {"rules": {"ASC101": %s}}}}' % json.dumps(figures))
    monkeypatch.setattr(docs, "PRECISION_DATA", str(data))
    docs._measurements.cache_clear()
    try:
        assert docs.precision_label(rule) == "not measured"  # tuning figures are never shown
        data.write_text('{"roles": {"held-out": {"rules": {"ASC101": %s}}}}' % json.dumps(figures))
        docs._measurements.cache_clear()
        assert docs.precision_label(rule) == "60 % TRUE, 95 % TRUE or DEBATABLE (40 judged of 120)"
        assert "precision: 60 % TRUE" in docs.rule_text(rule)
        assert docs.precision_label(REGISTRY.get("ASC201")) == "not measured"
    finally:
        docs._measurements.cache_clear()


def test_recall_table_counts_misses_per_rule_and_group_and_by_the_default_set(tmp_path):
    path = tmp_path / "recall.tsv"
    path.write_text("rule\trepo@commit\tpath:line\treal\treported\treason\n"
                    "ASC501\ta/b@1\tx.py:1\tyes\tyes (ASC501)\tsaves every step\n"
                    "ASC203\ta/b@1\tx.py:2\tyes\tyes (ASC203)\treported by a preview rule\n"
                    "ASC203\ta/b@1\tx.py:3\tno\tno\ta test\n"
                    "ASC702\ta/b@1\tx.py:4\tyes\tno\ta reshape split\n")
    rows = {line.split(" | ")[0].strip("| "): line for line in precision.recall_table(str(path))[2:]}
    assert rows["ASC203"] == "| ASC203 | 2 | 1 | 1 | 0 | 0 % | 100 % |"
    assert rows["**ASC5xx**"] == "| **ASC5xx** | 1 | 1 | 1 | 0 | 0 % | 0 % |"
    assert rows["**ASC7xx**"] == "| **ASC7xx** | 1 | 1 | 0 | 1 | 100 % | 100 % |"
    assert precision.recall_table(str(tmp_path / "missing.tsv")) == ["Not measured yet."]


def test_every_default_rule_measured_on_held_out_code_meets_the_bar():
    """Tiering (issue 13): a rule in the default set whose held-out figures miss the bar is a preview rule."""
    from ascend_lint.docs import measured
    from ascend_lint.registry import load_registry

    for rule in load_registry().sorted_rules():
        figures = measured(rule)
        if rule.preview or figures is None or figures["judged"] < precision.MIN_TIER_LINES:
            continue  # (too few held-out lines to decide a tier: the rule keeps its status)
        shares = figures["shares"]
        assert shares["TRUE"] >= precision.BAR_TRUE, rule.code
        assert shares["TRUE"] + (shares.get("DEBATABLE") or 0.0) >= precision.BAR_KEEP, rule.code
