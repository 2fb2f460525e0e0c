"""`sarif`: SARIF 2.1.0 (GitHub code scanning, VS Code SARIF viewer, Azure DevOps).

One run; `tool.driver.rules` lists every registered rule (plus a descriptor for codes that are not
rules, such as ASC000 for unreadable files) with its documentation; results point at
repository-relative URIs under `%SRCROOT%` and carry `primaryLocationLineHash` fingerprints so
re-uploads update alerts instead of duplicating them.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, TextIO, Type

from .. import __version__
from ..core_rules import PARSE_ERROR_CODE
from ..docs import measured, rule_markdown, rule_text, rule_url, summary
from ..rule import Finding, Rule, Severity
from . import Report, json_needs_ascii
from ._util import clean, fingerprints, one_line, relative_path, uri_path
from .cost import cost_properties

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
HOME = "https://github.com/ascend-lint/ascend-lint"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SRCROOT = "%SRCROOT%"


def help_uri(code: str, name: str) -> str:
    return rule_url(code, name)


PROBLEM_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "recommendation"}


def precision(rule: Type[Rule]) -> str:
    """GitHub's precision level from the rule's share of true findings on the held-out repositories
    (`docs.measured`); `medium` while it is not measured. A file that could not be parsed is a fact."""
    if rule.code == PARSE_ERROR_CODE:
        return "very-high"
    figures = measured(rule)
    if figures is None:
        return "medium"
    true = figures["shares"]["TRUE"]
    level = "very-high" if true >= 0.95 else "high" if true >= 0.85 else "medium" if true >= 0.6 else "low"
    if level == "very-high" and figures["judged"] < 20:
        level = "high"  # too few judged findings to claim more
    return level


def rule_descriptor(rule: Type[Rule]) -> Dict[str, Any]:
    what = one_line(rule.docs.what) or rule.name
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": one_line(summary(rule))},
        "fullDescription": {"text": what},
        "help": {"text": clean(rule_text(rule)), "markdown": clean(rule_markdown(rule))},
        "helpUri": help_uri(rule.code, rule.name),
        "defaultConfiguration": {"level": LEVELS.get(rule.severity, "warning")},
        "properties": {
            "tags": [t for t in (rule.pack, "preview" if rule.preview else "") if t],
            "precision": precision(rule),
            "problem.severity": PROBLEM_SEVERITY.get(rule.severity, "warning"),
        },
    }


def other_descriptor(finding: Finding) -> Dict[str, Any]:
    """A descriptor for a code no installed rule has (a result read from elsewhere)."""
    name = one_line(finding.name) or finding.code
    text = f"{finding.code} {name}: no installed rule has this code."
    return {
        "id": finding.code,
        "name": name,
        "shortDescription": {"text": text},
        "fullDescription": {"text": text},
        "help": {"text": text},
        "helpUri": HOME,
        "defaultConfiguration": {"level": LEVELS.get(finding.severity, "warning")},
    }


def file_uri(path: str) -> str:
    """`file:///...` for an absolute path."""
    path = path.replace(os.sep, "/")
    return "file://" + uri_path(path if path.startswith("/") else "/" + path)


def location(finding: Finding, base: str) -> Dict[str, Any]:
    path = relative_path(finding.path, base)
    if os.path.isabs(path):
        artifact: Dict[str, Any] = {"uri": file_uri(path)}
    else:
        artifact = {"uri": uri_path(path), "uriBaseId": SRCROOT}
    region = {"startLine": max(finding.line, 1), "startColumn": max(finding.col, 1)}
    if (finding.end_line, finding.end_col) >= (finding.line, finding.col):
        region.update(endLine=max(finding.end_line, 1), endColumn=max(finding.end_col, 1))
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def build(report: Report, base: Optional[str] = None) -> Dict[str, Any]:
    """The SARIF log as a dict."""
    base = base or os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    rules: List[Dict[str, Any]] = [rule_descriptor(report.rules[c]) for c in sorted(report.rules)]
    index = {d["id"]: i for i, d in enumerate(rules)}
    for f in report.findings:
        if f.code not in index:
            index[f.code] = len(rules)
            rules.append(other_descriptor(f))
    results = []
    for f, (digest, n) in zip(report.findings, fingerprints(report.findings, report.sources, base)):
        result: Dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": LEVELS.get(f.severity, "warning"),
            "message": {"text": clean(f.message) or f.code},
            "locations": [location(f, base)],
            "partialFingerprints": {"primaryLocationLineHash": f"{digest[:16]}:{n + 1}"},
        }
        if f.cost is not None:  # measured in a profile (`--profile`)
            result["properties"] = cost_properties(f.cost)
        results.append(result)
    root = file_uri(os.path.abspath(base).rstrip(os.sep) + os.sep)
    run = {
        "tool": {"driver": {"name": "ascend-lint", "version": __version__, "semanticVersion": __version__,
                            "informationUri": HOME, "rules": rules}},
        "originalUriBaseIds": {SRCROOT: {"uri": root}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render(report: Report, out: TextIO) -> None:
    data = build(report)
    json.dump(data, out, indent=2, ensure_ascii=json_needs_ascii(data))
    out.write("\n")

