"""`json-lines`: one JSON object per finding per line (the `json` format's fields), ASCII only.

ASCII escaping keeps every record on one line for any consumer, even ones that also split on
Unicode line separators; file names that were not UTF-8 show U+FFFD for their odd bytes.
"""
from __future__ import annotations

import json
from typing import Any, TextIO

from . import Report
from ._util import text
from .json_format import Texts, record


def _valid(value: Any) -> Any:
    """Recursively make every string valid Unicode (no lone surrogates)."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {k: _valid(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid(v) for v in value]
    return value


def render(report: Report, out: TextIO) -> None:
    texts = Texts(report)
    for finding in report.findings:
        out.write(json.dumps(_valid(record(finding, report, texts)), ensure_ascii=True) + "\n")
