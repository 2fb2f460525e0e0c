"""`--statistics`: findings counted per rule, as text or (with `--output-format json`) ruff's JSON."""
from __future__ import annotations

import json
from typing import Dict, List, Sequence, TextIO, Tuple

from ..rule import Finding
from ..sanitize import sanitize
from . import fix_applies

Row = Tuple[str, str, int, int]  # code, name, count, fixable count


def rows(findings: Sequence[Finding], unsafe_fixes: bool) -> List[Row]:
    """One row per rule, the most frequent first."""
    counts: Dict[Tuple[str, str], List[int]] = {}
    for f in findings:
        row = counts.setdefault((f.code, f.name), [0, 0])
        row[0] += 1
        row[1] += fix_applies(f, unsafe_fixes)
    out = [(code, name, n, fixes) for (code, name), (n, fixes) in counts.items()]
    out.sort(key=lambda r: (-r[2], r[0]))
    return out


def render_statistics(findings: Sequence[Finding], unsafe_fixes: bool, as_json: bool, out: TextIO) -> None:
    table = rows(findings, unsafe_fixes)
    if as_json:
        json.dump([{"code": code, "name": name, "count": n, "fixable": fixes > 0, "fixable_count": fixes}
                   for code, name, n, fixes in table], out, indent=2)
        out.write("\n")
        return
    for code, name, n, fixes in table:
        out.write(f"{n:>5}\t{sanitize(code)}\t{'[*] ' if fixes else ''}{sanitize(name)}\n")
