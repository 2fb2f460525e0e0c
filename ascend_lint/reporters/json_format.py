"""`json`: a JSON array of findings (ruff-like field names)."""
from __future__ import annotations

import json
from typing import TextIO

from . import Report, display_path, json_needs_ascii


def render(report: Report, out: TextIO) -> None:
    rows = [dict(f.to_dict(), filename=display_path(f.path)) for f in report.findings]
    json.dump(rows, out, indent=2, ensure_ascii=json_needs_ascii(rows))
    out.write("\n")
