"""The fix-safety check shared by the test suite (tests/test_fix_safety.py, the fuzz tests) and
bench/fix_safety.py (the same check over real code): apply every fix (safe and unsafe) of every rule to a
source, then require of the result what a reviewer and a flake8 CI would:

- it compiles;
- pyflakes reports nothing new of the kinds a fix can cause: undefined names (a use above its import
  included), unused imports and variables, redefinitions;
- no module-level code reads a name above the top-level import that binds it (use-before-import);
- fixing again changes nothing (idempotent).

pyflakes is compared before and after, so what the source already had is not held against the fixes.
"""
from __future__ import annotations

import ast
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Tuple

from pyflakes import checker as pyflakes_checker
from pyflakes import messages as pyflakes_messages

from ascend_lint.fix import fixer
from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.fileio import SourceError

# The pyflakes messages a fix could cause, with the flake8 code that `# noqa` silences them by.
WATCHED = {pyflakes_messages.UndefinedName: "F821", pyflakes_messages.UndefinedLocal: "F823",
           pyflakes_messages.UnusedImport: "F401", pyflakes_messages.UnusedVariable: "F841",
           pyflakes_messages.RedefinedWhileUnused: "F811", pyflakes_messages.ImportShadowedByLoopVar: "F402"}


def pyflakes_counts(text: str, path: str = "m.py") -> Counter:
    """(message kind, its arguments) -> count, for the kinds a fix could cause (positions left out), minus
    those a `# noqa` on their line silences as flake8 would."""
    from ascend_lint.fileio import split_lines
    from ascend_lint.engine.noqa import line_codes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(text, filename=path)
    lines = split_lines(text)
    counts: Counter = Counter()
    for message in pyflakes_checker.Checker(tree, filename=path).messages:
        code = WATCHED.get(type(message))
        if code is None:
            continue
        noqa = line_codes(lines[message.lineno - 1]) if 0 < message.lineno <= len(lines) else None
        if noqa is not None and (not noqa or code in noqa):
            continue
        args = tuple(a for a in message.message_args if not isinstance(a, int))  # line numbers move
        if isinstance(message, pyflakes_messages.UnusedImport):  # by the name bound: a fix may rewrite the module
            args = tuple(a.split(" as ")[-1].rsplit(".", 1)[-1] for a in args)
        counts[(type(message).__name__, args)] += 1
    return counts


def _import_time_nodes(tree: ast.Module) -> Iterator[Tuple[ast.stmt, ast.AST]]:
    """(top-level statement, node) for code that runs when the module is imported: function bodies are
    skipped (they run later), their decorators and defaults are not."""
    for stmt in tree.body:
        stack: List[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            yield stmt, node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.extend(node.decorator_list)
                stack.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
            elif isinstance(node, ast.Lambda):
                stack.extend(node.args.defaults)
            else:
                stack.extend(ast.iter_child_nodes(node))


def uses_before_import(text: str) -> List[str]:
    """Names that module-level code reads above the first top-level import binding them."""
    tree = ast.parse(text)
    first_import = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                first_import.setdefault(name, stmt.lineno)
    bound_before: set = set()
    problems = []
    for stmt, node in _import_time_nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound_before.add(node.id)
        elif (isinstance(node, ast.Name) and node.id in first_import and node.id not in bound_before
              and node.lineno < first_import[node.id]):
            problems.append(f"`{node.id}` read at line {node.lineno}, imported at line {first_import[node.id]}")
    return problems


@dataclass
class Outcome:
    applied: Counter = field(default_factory=Counter)  # rule code -> fixes applied
    problems: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    text: str = ""


def linter_for(registry, target: str = "auto") -> Tuple[Linter, Settings]:
    """Every registered rule (preview included) with unsafe fixes on."""
    settings = Settings(preview=True, target=target, unsafe_fixes=True)
    return Linter(registry.sorted_rules(), settings), settings


def check_fixes(text: str, path: str, linter: Linter, settings: Settings,
                findings: Optional[Sequence] = None) -> Outcome:
    """Apply every fix to `text` and check the result (see the module docstring)."""
    outcome = Outcome(text=text)
    try:
        findings = linter.check(text, path) if findings is None else findings
    except SourceError:
        return outcome  # not lintable: nothing to fix
    result = fixer.fix_text(text, path, findings, linter, settings)
    outcome.text, outcome.warnings = result.text, result.warnings
    outcome.applied.update(f.code for f in result.applied)
    for warning in result.warnings:
        if "internal error" in warning or "invalid Python" in warning:
            outcome.problems.append(f"fixer: {warning}")
    if not result.applied:
        return outcome
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(result.text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        outcome.problems.append(f"does not compile: {exc}")
        return outcome
    before, after = pyflakes_counts(text, path), pyflakes_counts(result.text, path)
    for key, count in (after - before).items():
        outcome.problems.append(f"new pyflakes {key[0]} {key[1]} (x{count}) from {sorted(outcome.applied)}")
    new_uses = set(uses_before_import(result.text)) - set(uses_before_import(text))
    outcome.problems.extend(f"use before import: {p}" for p in sorted(new_uses))
    again = fixer.fix_text(result.text, path, linter.check(result.text, path), linter, settings)
    if again.text != result.text:
        outcome.problems.append("not idempotent: a second --fix changes the file again")
    return outcome
