"""`gitlab`: GitLab Code Quality report (a JSON array; `artifacts: reports: codequality`).

The fingerprint hashes the repository-relative path, the code and the source line's text (not its
number), plus an occurrence counter: stable across runs and when code moves, unique within a report
(GitLab shows only the first issue of each fingerprint).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, TextIO

from ..rule import Severity
from . import Report, json_needs_ascii
from ._util import clean, fingerprints, relative_path
from .cost import cost_note

# GitLab levels: info, minor, major, critical, blocker
SEVERITIES = {Severity.ERROR: "critical", Severity.WARNING: "major", Severity.INFO: "minor"}


def build(report: Report, base: Optional[str] = None) -> List[Dict[str, Any]]:
    issues = []
    for f, (digest, n) in zip(report.findings, fingerprints(report.findings, report.sources, base)):
        issues.append({
            "type": "issue",
            "description": clean(f"{f.code} {f.message}" + (f" ({cost_note(f.cost)})" if f.cost is not None else "")),
            "check_name": f.code,
            "categories": ["Bug Risk" if f.code == "ASC000" else "Performance"],
            "fingerprint": f"{digest[:32]}-{n}" if n else digest[:32],
            "severity": SEVERITIES.get(f.severity, "major"),
            "location": {
                "path": clean(relative_path(f.path, base)),
                "lines": {"begin": max(f.line, 1), "end": max(f.end_line, f.line, 1)},
            },
        })
    return issues


def render(report: Report, out: TextIO) -> None:
    data = build(report)
    json.dump(data, out, indent=2, ensure_ascii=json_needs_ascii(data))
    out.write("\n")
