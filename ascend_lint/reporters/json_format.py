"""`json`: a JSON array of findings with ruff's field names, fix edits included."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, TextIO

from ..docs import rule_url
from ..fix.edits import TextEdit
from ..fix.preview import FileEdits
from ..engine.linter import parse
from ..fileio import SourceError
from ..rule import Finding
from . import Report, json_needs_ascii
from ._util import text


class Texts:
    """The fix edits of the file being reported (findings come sorted by path: one file at a time), all
    found from one parse of it (fix.edits.FileEdits)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.path: Optional[str] = None
        self.file: Optional[FileEdits] = None
        self.by_path: Optional[Dict[str, List[Finding]]] = None

    def _findings_of(self, path: str) -> List[Finding]:
        if self.by_path is None:
            self.by_path = {}
            for f in self.report.findings:
                self.by_path.setdefault(f.path, []).append(f)
        return self.by_path.get(path, [])

    def edits(self, finding: Finding) -> List[TextEdit]:
        if finding.path != self.path:
            self.path, self.file = finding.path, None
            text = self.report.text_of(finding.path)
            if text is not None:
                try:
                    tree = parse(text, finding.path)
                except SourceError:
                    tree = None
                if tree is not None:
                    self.file = FileEdits(text, tree, self._findings_of(finding.path))
        return (self.file.edits(finding) if self.file is not None else None) or []


def record(finding: Finding, report: Report, texts: Optional[Texts] = None) -> Dict[str, Any]:
    """One finding as ruff's JSON object: `fix.edits` hold ranges and replacement text."""
    row = finding.to_dict()
    row["filename"] = text(finding.path)  # valid Unicode whatever the file name's bytes
    row["noqa_row"] = finding.line
    row["url"] = rule_url(finding.code, finding.name)
    if row["fix"] is not None:
        row["fix"]["edits"] = [e.to_dict() for e in (texts or Texts(report)).edits(finding)]
    return row


def render(report: Report, out: TextIO) -> None:
    texts = Texts(report)
    rows = [record(f, report, texts) for f in report.findings]
    json.dump(rows, out, indent=2, ensure_ascii=json_needs_ascii(rows))
    out.write("\n")
