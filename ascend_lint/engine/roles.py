"""The engine's one policy on the execution model's roles (issue #29): code that never runs in training.

In the default rule set, a finding inside a function whose role (ctx.facts(), the project model's execution
roles) is `unreached` (no entry point reaches it) is dropped, and one inside an `offline` function (tests,
benchmarks, tools) too for the rules that speak about training code only. With `--preview` they are kept and
their message says why the code does not run in training. A rule not about run-time cost opts out with
`Rule.silent_where_unreached = False`. A file with no project model (one buffer, stdin) has no roles: nothing
is silenced.
"""
from __future__ import annotations

import ast
import bisect
from typing import Dict, List, Sequence, Tuple

from ..analysis.records import OFFLINE, UNREACHED, Role
from ..rule import Finding, Rule

_NOTES = {UNREACHED: "reached from nothing", OFFLINE: "offline code"}


def silent_spans(tree: ast.Module, roles: Dict[str, Role]) -> List[Tuple[int, int, Role]]:
    """(first line, last line, role) of the top-level functions and methods whose role is silent, by line."""
    spans = []
    for node in tree.body:
        inner = node.body if isinstance(node, ast.ClassDef) else [node]
        prefix = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for func in inner:
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                role = roles.get(prefix + func.name)
                if role is not None and role.kind in _NOTES:
                    first = min([func.lineno] + [d.lineno for d in func.decorator_list])
                    spans.append((first, func.end_lineno or func.lineno, role))
    spans.sort(key=lambda span: span[0])
    return spans


def apply_role_policy(findings: List[Finding], tree: ast.Module, roles: Dict[str, Role],
                      rules: Sequence[Rule], preview: bool) -> List[Finding]:
    """`findings` without those in unreached/offline code (default set), or with a note saying so (preview)."""
    if not findings or not roles:
        return findings
    spans = silent_spans(tree, roles)
    if not spans:
        return findings
    policy = {r.code: (r.silent_where_unreached, r.training_code_only) for r in rules}
    starts = [span[0] for span in spans]
    kept = []
    for finding in findings:
        index = bisect.bisect_right(starts, finding.line) - 1
        role = spans[index][2] if index >= 0 and finding.line <= spans[index][1] else None
        applies, training_only = policy.get(finding.code, (False, False))
        if role is None or not applies or (role.kind == OFFLINE and not training_only):
            kept.append(finding)
        elif preview:
            why = role.reason.describe() if role.reason is not None else role.kind
            finding.message = f"{finding.message} ({_NOTES[role.kind]}: {why})"
            kept.append(finding)
    return kept
