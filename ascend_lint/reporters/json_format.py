"""`json`: a JSON array of findings with ruff's field names, fix edits included."""
from __future__ import annotations

import json
from typing import Any, Dict, TextIO

from ..docs import rule_url
from ..edits import fix_edits
from ..rule import Finding
from . import Report, display_path, json_needs_ascii


def record(finding: Finding, report: Report) -> Dict[str, Any]:
    """One finding as ruff's JSON object: `fix.edits` hold ranges and replacement text."""
    row = finding.to_dict()
    row["filename"] = display_path(finding.path)
    row["noqa_row"] = finding.line
    row["url"] = rule_url(finding.code, finding.name)
    if row["fix"] is not None:
        text = report.text_of(finding.path)
        edits = fix_edits(text, finding) if text is not None else None
        row["fix"]["edits"] = [e.to_dict() for e in edits or ()]
    return row


def render(report: Report, out: TextIO) -> None:
    rows = [record(f, report) for f in report.findings]
    json.dump(rows, out, indent=2, ensure_ascii=json_needs_ascii(rows))
    out.write("\n")
