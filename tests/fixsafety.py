"""The fix-safety check shared by the test suite (tests/test_fix_safety.py, the fuzz tests) and
bench/fix_safety.py (the same check over real code): apply every fix (safe and unsafe) of every rule to a
source, then require of the result what a reviewer and a flake8 CI would:

- it compiles;
- pyflakes reports nothing new of the kinds a fix can cause: undefined names (a use above its import
  included), unused imports and variables, redefinitions;
- no module-level code reads a name above the top-level import that binds it (use-before-import);
- fixing again changes nothing (idempotent);
- the *safe* fixes alone leave the program's behaviour signature unchanged (`behaviour_signature`).

pyflakes is compared before and after, so what the source already had is not held against the fixes.
"""
from __future__ import annotations

import ast
import dataclasses
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
from ascend_lint.rule import Applicability

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


# ----------------------------------------------------------------------------- what a safe fix keeps
# A *safe* fix cannot change the program's dtype, its device or autocast/loss-scaling state where the original
# ran, what it reads from or writes to disk, or aliasing (README "Fixes"; docs/reliability.md). Rewrites the
# original could not run past on an Ascend host (a CUDA device given to `.to()` or `map_location=`, a
# `torch.cuda` API that raises there, `set_to_none=True` on a fused optimizer) are outside the signature:
# the rules decide those.
AMP_CALLS = frozenset({"autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_enabled",
                       "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype"})
QUIET_QUERIES = frozenset({"is_available", "device_count", "is_bf16_supported", "manual_seed", "manual_seed_all",
                           "seed", "seed_all", "empty_cache", "set_rng_state", "set_rng_state_all"})
DTYPE_METHODS = frozenset({"half", "float", "double", "bfloat16"})
DISK_CALL_WORDS = ("save", "load", "open", "remove", "copy", "move", "upload", "restore", "resume")
WATCHED_KEYWORDS = frozenset({"dtype", "device_type", "async_save", "inplace", "combine_grad", "out"})
PRECISION_FLAGS = ("allow_tf32", "allow_hf32", "allow_fp16_reduced_precision_reduction",
                   "allow_bf16_reduced_precision_reduction")


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    return ".".join(reversed(parts))


def behaviour_signature(text: str) -> Counter:
    """What a safe fix must keep, as a multiset of facts about the source: autocast/GradScaler calls and
    their arguments, quiet device queries and seeds (`is_available`, `device_count`, `manual_seed`, ...), dtype
    casts and precision flags, the watched keywords (`dtype=`, `device_type=`, `async_save=`, `inplace=`,
    `out=`, `combine_grad=`), calls that touch files with their arguments, optimizer
    constructors, and `register_buffer`/`nn.Parameter` (aliasing)."""
    facts: Counter = Counter()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            args = ", ".join(ast.unparse(a) for a in node.args)
            if last in AMP_CALLS:
                facts[("autocast/scaling", name, args)] += 1
            elif last in QUIET_QUERIES:
                facts[("quiet query", name)] += 1
            elif last in DTYPE_METHODS and not node.args:
                facts[("dtype cast", name)] += 1
            elif any(word in last.lower() for word in DISK_CALL_WORDS):
                facts[("disk", last, args)] += 1
            elif "optim" in name.lower() or last in ("register_buffer", "Parameter"):
                facts[("optimizer/aliasing", name)] += 1
            for kw in node.keywords:
                if kw.arg in WATCHED_KEYWORDS:
                    facts[("keyword", last, kw.arg, ast.unparse(kw.value))] += 1
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if _dotted(target).endswith(PRECISION_FLAGS):
                    facts[("precision flag", _dotted(target), ast.unparse(node.value))] += 1
    return facts


def _registered_buffers(tree: ast.AST) -> set:
    return {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and _dotted(node.func).endswith("register_buffer") and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


def buffers_written_in_place(before: str, after: str) -> List[str]:
    """Buffers a fix registered that the fixed code changes in place (a shared buffer then drifts on every
    call): `self.<buf>` or a local bound to it (or to a view of it) used as the receiver of a trailing-`_`
    method, the first argument of a trailing-`_` function (`torch.exp_`, `nn.init.uniform_`), an argument
    of a call with `inplace=True` or `out=`, or the target of an augmented or subscript assignment. (An
    independent check of the shapes ASC201 refuses; helpers and submodules are left to the rule.)"""
    tree = ast.parse(after)
    new = _registered_buffers(tree) - _registered_buffers(ast.parse(before))
    problems = []
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        held = {f"self.{name}" for name in new}
        for node in ast.walk(func):  # locals bound to a buffer or a view of it: `w = self._w_buf.view(-1)`
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if any(_dotted(sub) in held for sub in ast.walk(node.value)):
                    held.add(node.targets[0].id)

        def holds(expr: ast.AST) -> bool:
            while isinstance(expr, (ast.Subscript, ast.Attribute, ast.Call)):
                if _dotted(expr) in held:
                    return True
                expr = expr.value if not isinstance(expr, ast.Call) else expr.func
            return _dotted(expr) in held

        for node in ast.walk(func):
            written = None
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                if isinstance(node.func, ast.Attribute) and name.endswith("_") and holds(node.func.value):
                    written = node.func.value
                elif name.endswith("_") and node.args and holds(node.args[0]):
                    written = node.args[0]
                elif any(kw.arg == "inplace" and ast.unparse(kw.value) != "False" for kw in node.keywords):
                    written = next((a for a in node.args if holds(a)), None)
                for kw in node.keywords:
                    if kw.arg == "out" and holds(kw.value):
                        written = kw.value
            elif isinstance(node, ast.AugAssign) and not isinstance(node.target, ast.Name) and holds(node.target):
                written = node.target
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and holds(t)
                                                      for t in node.targets):
                written = node.targets[0]
            if written is not None:
                problems.append(f"buffer written in place at line {node.lineno}: {ast.unparse(node)[:80]}")
    return problems


def signature_changes(before: str, after: str) -> List[str]:
    """The facts of `behaviour_signature` that differ between two sources, as readable lines."""
    old, new = behaviour_signature(before), behaviour_signature(after)
    return [f"lost {fact}" for fact in sorted(old - new, key=repr)] + \
        [f"gained {fact}" for fact in sorted(new - old, key=repr)]


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
    outcome.problems.extend(buffers_written_in_place(text, result.text))
    outcome.problems.extend(safe_fix_problems(text, path, findings, linter, settings))
    return outcome


def safe_fix_problems(text: str, path: str, findings: Sequence, linter: Linter, settings: Settings) -> List[str]:
    """Apply only the safe fixes (a plain `--fix`) and report every change to the behaviour signature."""
    if not any(f.fix is not None and f.fix.applicability is Applicability.SAFE for f in findings):
        return []
    safe_only = dataclasses.replace(settings, unsafe_fixes=False)
    result = fixer.fix_text(text, path, findings, linter, safe_only)
    codes = sorted({f.code for f in result.applied})
    return [f"a safe fix of {codes} changed behaviour: {change}" for change in signature_changes(text, result.text)]
