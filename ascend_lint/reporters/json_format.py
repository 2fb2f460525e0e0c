"""`json`: a JSON array of findings with ruff's field names, fix edits included."""
from __future__ import annotations

import ast
import json
from typing import Any, Dict, Optional, TextIO, Tuple

from ..docs import rule_url
from ..fix.edits import fix_edits
from ..engine.linter import parse
from ..fileio import SourceError
from ..rule import Finding
from . import Report, json_needs_ascii
from ._util import text


class Texts:
    """The text and tree of the file being reported (findings come sorted by path: one at a time)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.path: Optional[str] = None
        self.text: Optional[str] = None
        self.tree: Optional[ast.Module] = None

    def get(self, path: str) -> Tuple[Optional[str], Optional[ast.Module]]:
        if path != self.path:
            self.path, self.text, self.tree = path, self.report.text_of(path), None
            if self.text is not None:
                try:
                    self.tree = parse(self.text, path)
                except SourceError:
                    self.text = None
        return self.text, self.tree


def record(finding: Finding, report: Report, texts: Optional[Texts] = None) -> Dict[str, Any]:
    """One finding as ruff's JSON object: `fix.edits` hold ranges and replacement text."""
    row = finding.to_dict()
    row["filename"] = text(finding.path)  # valid Unicode whatever the file name's bytes
    row["noqa_row"] = finding.line
    row["url"] = rule_url(finding.code, finding.name)
    if row["fix"] is not None:
        source, tree = (texts or Texts(report)).get(finding.path)
        edits = fix_edits(source, finding, tree) if source is not None else None
        row["fix"]["edits"] = [e.to_dict() for e in edits or ()]
    return row


def render(report: Report, out: TextIO) -> None:
    texts = Texts(report)
    rows = [record(f, report, texts) for f in report.findings]
    json.dump(rows, out, indent=2, ensure_ascii=json_needs_ascii(rows))
    out.write("\n")
