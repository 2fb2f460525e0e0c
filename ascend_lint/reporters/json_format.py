"""`json`: a JSON array of findings (ruff-like field names)."""
from __future__ import annotations

import json
from typing import TextIO

from . import Report


def render(report: Report, out: TextIO) -> None:
    json.dump([f.to_dict() for f in report.findings], out, indent=2, ensure_ascii=False)
    out.write("\n")
