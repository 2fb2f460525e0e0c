"""CI faces: the GitHub job summary cap, annotation order, SARIF rule descriptors (the Action: test_action.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_lint.reporters import Report, github, sarif
from ascend_lint.rule import Finding, Severity
from conftest import REGISTRY


# ------------------------------------------------------------------------------ GitHub annotations
def finding(i: int, severity: Severity = Severity.WARNING, message: str = "m") -> Finding:
    return Finding(f"pkg/f{i:05d}.py", 1, 1, 1, 2, "ASC101", "contiguous-after-view", message, severity)


def test_annotations_are_ordered_by_severity(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    findings = [finding(0, Severity.INFO), finding(1), finding(2, Severity.ERROR), finding(3)]
    out = __import__("io").StringIO()
    github.render(Report(findings, REGISTRY.rules), out)
    levels = [line.split(" ", 1)[0] for line in out.getvalue().splitlines()]
    assert levels == ["::error", "::warning", "::warning", "::notice"]


def test_job_summary_is_capped_below_one_mib(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier output of this step\n" * 1000, encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    findings = [finding(i, message="é" * 150) for i in range(6000)]  # ~2 MB as a table
    github.render(Report(findings, REGISTRY.rules), __import__("io").StringIO())
    data = summary.read_bytes()
    assert len(data) < 1024 * 1024
    last = data.decode("utf-8").strip().splitlines()[-1]
    shown = data.decode("utf-8").count("| pkg/f")
    assert last == f"{6000 - shown} more findings: see the job log or the SARIF report (the job summary is " \
                   "limited to 1 MiB)."
    assert 0 < shown < 6000


def test_small_summary_has_every_row(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    github.render(Report([finding(i) for i in range(30)], REGISTRY.rules), __import__("io").StringIO())
    text = summary.read_text(encoding="utf-8")
    assert text.count("| pkg/f") == 30 and "more finding" not in text


# ------------------------------------------------------------------------------ SARIF descriptors
PRECISIONS = {"very-high", "high", "medium", "low"}


@pytest.mark.parametrize("rule", REGISTRY.sorted_rules(), ids=lambda r: r.code)
def test_sarif_descriptor_is_complete(rule):
    d = sarif.rule_descriptor(rule)
    short = d["shortDescription"]["text"]
    assert len(short) <= 120 and short.endswith(".") and not re.search(r"[.!?] [A-Z]", short), short
    assert d["fullDescription"]["text"] and d["help"]["text"] and d["help"]["markdown"]
    assert d["properties"]["precision"] in PRECISIONS
    assert d["properties"]["problem.severity"] in {"error", "warning", "recommendation"}


def test_core_descriptors_through_the_cli(tmp_path):
    (tmp_path / "bad.py").write_text("import torch\ny = torch.transpose(x, 1, 2).contiguous(\n")
    (tmp_path / "n.py").write_text("import torch\ny = 1  # noqa: ASC990\n")
    proc = subprocess.run([str(Path(sys.executable).with_name("ascend-lint")), "check", "--isolated", "--no-cache",
                           "--preview", "--output-format", "sarif", "."], cwd=tmp_path, capture_output=True, text=True)
    driver = json.loads(proc.stdout)["runs"][0]["tool"]["driver"]
    rules = {r["id"]: r for r in driver["rules"]}
    for code in ("ASC000", "ASC001"):
        assert rules[code]["fullDescription"]["text"] and rules[code]["help"]["text"].startswith(code)
    assert rules["ASC000"]["properties"]["precision"] == "very-high"
    assert rules["ASC000"]["properties"]["problem.severity"] == "error"


def test_precision_follows_the_held_out_measurements(monkeypatch):
    """SARIF precision comes from docs.measured (held-out figures, precision.json): one answer, one place."""
    from ascend_lint import docs

    rule = REGISTRY.rules["ASC101"]
    monkeypatch.setattr(docs, "_measurements", lambda: {})
    assert sarif.precision(rule) == "medium"  # not measured
    for true, judged, level in [(1.0, 40, "very-high"), (1.0, 10, "high"), (0.9, 40, "high"),
                                (0.7, 40, "medium"), (0.3, 40, "low")]:
        figures = {"ASC101": {"judged": judged, "findings": 100, "shares": {"TRUE": true}}}
        monkeypatch.setattr(docs, "_measurements", lambda f=figures: f)
        assert sarif.precision(rule) == level
    assert sarif.precision(REGISTRY.rules["ASC000"]) == "very-high"


@pytest.mark.parametrize("fmt", ["json", "json-lines"])
def test_json_formats_take_any_file_name(fmt):
    """Lone surrogates (not from undecodable bytes) and surrogate escapes both become U+FFFD."""
    import io

    from ascend_lint.reporters import get_reporter

    findings = [Finding(name, 1, 1, 1, 2, "ASC101", "contiguous-after-view", "m") for name in ("\ud800", "a\udcffb.py")]
    out = io.StringIO()
    get_reporter(fmt)(Report(findings, REGISTRY.rules), out)
    text = out.getvalue()
    text.encode("utf-8")
    rows = json.loads(text) if fmt == "json" else [json.loads(line) for line in text.splitlines()]
    assert [r["filename"] for r in rows] == ["\ufffd", "a\ufffdb.py"]
