"""`github`: GitHub Actions workflow commands (`::warning file=...::message`) that become annotations.

Data is escaped as the runner expects (`%`, CR, LF) and properties also escape `:` and `,`, so no
file name or message can end the command or start another. Errors come first, then warnings, then
notices. GitHub shows at most 10 annotations of each level per step: beyond that, one `::notice` says
how many were not shown and, when $GITHUB_STEP_SUMMARY is set, a Markdown table of the findings is
appended to the job summary, cut below GitHub's 1 MiB limit with a line saying how many rows are left
out (they are all in the log).
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Sequence, TextIO

from ..rule import Finding, Severity
from . import Report
from ._util import clean, one_line, relative_path
from .cost import cost_label

LIMIT = 10  # annotations GitHub displays per level and step
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
SUMMARY_LIMIT = 1024 * 1024  # GitHub's limit for one step's job summary
SUMMARY_BUDGET = SUMMARY_LIMIT - 16 * 1024  # room for what other commands of the step append
MD_PUNCT_RE = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def escape_data(value: str) -> str:
    """Workflow-command message escaping (the runner's own rules), then no control characters."""
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return clean(value)


def escape_property(value: str) -> str:
    """Property escaping: data escaping plus `:` and `,`."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def level(finding: Finding) -> str:
    return LEVELS.get(finding.severity, "warning")


def command(finding: Finding) -> str:
    props = {
        "file": relative_path(finding.path),
        "line": str(finding.line),
        "col": str(finding.col),
        "endLine": str(finding.end_line),
        "endColumn": str(finding.end_col),
        "title": f"{finding.code} {finding.name}" + (f" ({cost_label(finding.cost)})" if finding.cost else ""),
    }
    joined = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
    return f"::{level(finding)} {joined}::{escape_data(finding.message)}"


def per_level(findings: Sequence[Finding]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for f in findings:
        counts[level(f)] = counts.get(level(f), 0) + 1
    return counts


def not_annotated(findings: Sequence[Finding]) -> int:
    """How many findings GitHub will not show as annotations (our own notice takes a slot too)."""
    counts = per_level(findings)
    counts["notice"] = counts.get("notice", 0) + 1
    return sum(max(n - LIMIT, 0) for n in counts.values())


def by_severity(findings: Sequence[Finding]) -> List[Finding]:
    """The most severe first (stable: path order within a level)."""
    return sorted(findings, key=lambda f: RANK.get(f.severity, 1))


def render(report: Report, out: TextIO) -> None:
    findings = by_severity(report.findings)
    if any(n > LIMIT for n in per_level(findings).values()):
        hidden = not_annotated(findings)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        where = "the job summary" if summary else "the log below"
        note = (f"ascend-lint: {len(findings)} findings; GitHub annotates at most {LIMIT} per level, "
                f"so {hidden} are not annotated: see {where}")
        out.write(f"::notice title=ascend-lint::{escape_data(note)}\n")
        if summary:
            write_summary(findings, summary)
    for finding in findings:
        out.write(command(finding) + "\n")


def markdown_table(findings: Sequence[Finding], budget: int = SUMMARY_BUDGET) -> str:
    """The findings as a GitHub-flavoured Markdown table (cells escaped, one line each), at most
    `budget` UTF-8 bytes: rows that do not fit are counted in a closing line instead."""
    head = [
        f"### ascend-lint: {len(findings)} finding{'s' if len(findings) != 1 else ''}",
        "",
        "| File | Line | Col | Code | Message |",
        "| --- | ---: | ---: | --- | --- |",
    ]
    costs = any(f.cost is not None for f in findings)
    if costs:  # measured in a profile (`--profile`): a cost column
        head[2:] = ["| File | Line | Col | Code | Cost per step | Message |", "| --- | ---: | ---: | --- | ---: | --- |"]
    rows: List[str] = []
    used = sum(len(line.encode("utf-8")) + 1 for line in head) + 200  # + the closing line
    for f in findings:
        path = MD_PUNCT_RE.sub(r"\\\1", one_line(relative_path(f.path)))
        rule = _cell(f"{f.code} {f.name}")
        cost = f" {cost_label(f.cost) if f.cost is not None else ''} |" if costs else ""
        row = f"| {path} | {f.line} | {f.col} | {rule} |{cost} {_cell(f.message)} |"
        used += len(row.encode("utf-8")) + 1
        if used > budget:
            break
        rows.append(row)
    tail = []
    if len(rows) < len(findings):
        more = len(findings) - len(rows)
        tail = ["", f"{more} more finding{'s' if more != 1 else ''}: see the job log or the SARIF report "
                    "(the job summary is limited to 1 MiB)."]
    return "\n".join(head + rows + tail) + "\n\n"


def _cell(value: str) -> str:
    """One table cell: one line, pipes escaped (GFM splits cells before inline parsing)."""
    return one_line(value).replace("|", "\\|")


def write_summary(findings: Sequence[Finding], path: str) -> None:
    try:
        try:
            present = os.path.getsize(path)  # what earlier commands of this step wrote counts too
        except OSError:
            present = 0
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(markdown_table(findings, max(SUMMARY_BUDGET - present, 4096)))
    except OSError:  # the summary is a bonus: never fail the run over it
        pass
