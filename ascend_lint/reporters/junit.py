"""`junit`: JUnit XML (GitLab/Jenkins/Azure test reports): one test suite per file with findings,
one failed test case per finding; a single passing case when there are none.

Characters XML 1.0 cannot carry (most controls, lone surrogates) are dropped; ElementTree escapes
the rest, and the characters a terminal would interpret (DEL, C1 controls, bidi and other format
characters, line separators) are written as character references, so the data stay exact.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Dict, List, TextIO

from ..rule import Finding
from ..sanitize import is_unsafe
from . import Report
from ._util import XML_INVALID_RE, relative_path, text
from .cost import cost_note


def _x(value: str) -> str:
    """Text XML 1.0 can carry, with CR/CRLF as LF (parsers would normalise a raw CR anyway)."""
    return XML_INVALID_RE.sub("", text(value)).replace("\r\n", "\n").replace("\r", "\n")


def build(report: Report) -> ET.Element:
    findings = report.findings
    root = ET.Element("testsuites", name="ascend-lint", tests=str(max(len(findings), 1)),
                      failures=str(len(findings)), errors="0")
    if not findings:
        suite = ET.SubElement(root, "testsuite", name="ascend-lint", tests="1", failures="0", errors="0",
                              skipped="0")
        ET.SubElement(suite, "testcase", name="ascend-lint", classname="ascend-lint")
        return root
    by_path: Dict[str, List[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    for path, items in by_path.items():
        name = _x(relative_path(path))
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(items)), failures=str(len(items)),
                              errors="0", skipped="0")
        for f in items:
            case = ET.SubElement(suite, "testcase", name=_x(f"{f.code} {f.name} ({f.line}:{f.col})"),
                                 classname=name, file=name, line=str(f.line))
            failure = ET.SubElement(case, "failure", message=_x(f.message), type=f.code)
            failure.text = _x(f"{name}:{f.line}:{f.col}: {f.code} {f.message}"
                              + (f" ({cost_note(f.cost)})" if f.cost is not None else ""))
    return root


def render(report: Report, out: TextIO) -> None:
    tree = build(report)
    ET.indent(tree)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(_references(ET.tostring(tree, encoding="unicode")))
    out.write("\n")


def _references(xml: str) -> str:
    """Terminal-unsafe characters (all allowed in XML 1.0) as `&#x...;` references."""
    return "".join(f"&#x{ord(c):X};" if ord(c) >= 0x20 and not c.isprintable() and is_unsafe(c) else c
                   for c in xml) if any(ord(c) >= 0x7F for c in xml) else xml
