"""The command line's fix paths: `--fix`, `--diff`, `--show-fixes` over a run's results, and stdin.

Every summary says what happened: the findings fixed (or that would be), the unsafe fixes held back
without `--unsafe-fixes` (in ruff's words), and the files that were left as they were, and why.
"""
from __future__ import annotations

import difflib
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from ..config import Settings
from ..engine.linter import FileResult, Linter
from ..fileio import SourceFile, split_lines, write_source
from ..sanitize import diff_name, sanitize
from .fixer import FileFix, fix_text
from .policy import apply_fix_settings, held_back, is_applicable, would_fix_message


@dataclass
class FixOutcome:
    changed: int = 0  # files changed (with --diff: that would change)
    fixed: int = 0  # findings fixed (with --diff: that would be fixed)
    per_file: Dict[str, Counter] = field(default_factory=dict)  # path -> Counter[(code, name)]
    held_back: int = 0  # unsafe fixes left alone without --unsafe-fixes (in the files as they end)
    refused: int = 0  # files with fixes to apply that were left as they were (a warning says why)
    unshown: int = 0  # --diff: files whose diff could not be shown (an error says why)


def _lines(text: str) -> List[str]:
    lines = split_lines(text, keepends=True)
    return lines[:-1] if lines and not lines[-1] else lines


class DiffNameError(ValueError):
    """A file name no unified diff can carry safely (see `sanitize.diff_name`)."""


def unified_diff(path: str, old: str, new: str, terminal: bool = False) -> str:
    """The unified diff `--diff` prints. The header names the file as `patch -p0` must read it (quoted
    when it has spaces; DiffNameError when it has a newline, control or bidi character). With
    `terminal`, the changed lines are sanitised too (a diff shown on a screen is read, not applied)."""
    name = diff_name(path)
    if name is None:
        raise DiffNameError(f"its name ({sanitize(path)}) has a character a unified diff cannot carry safely "
                            "(newline, control or bidi character, or bytes that are not UTF-8); "
                            "rename the file or apply the fix with --fix")
    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile=name, tofile=name)
    out = []
    for line in lines:
        if terminal:
            body = line.rstrip("\r\n")
            line = sanitize(body, keep="\t") + line[len(body):]
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _is_terminal(stream: TextIO) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def _encode(source: SourceFile, text: str) -> Optional[bytes]:
    try:
        return source.encode(text)
    except UnicodeEncodeError:
        return None


class _Run:
    """One `--fix` / `--diff` run over results: fixes each file, writes or shows it, keeps the counts."""

    def __init__(self, settings: Settings, diff: bool, out: TextIO, err: TextIO) -> None:
        self.settings, self.diff, self.out, self.err = settings, diff, out, err
        self.outcome = FixOutcome()

    def warn(self, source: SourceFile, message: str, kind: str = "warning") -> None:
        self.err.write(f"{kind}: {sanitize(source.path)}: {message}\n")

    def file(self, result: FileResult, linter: Linter) -> None:
        source = result.source
        if source is None or not result.findings:
            return
        own = linter.settings
        apply_fix_settings(result.findings, own)
        if not any(is_applicable(f, own) for f in result.findings):
            self.outcome.held_back += held_back(result.findings, own)
            return
        done = fix_text(source.text, source.path, result.findings, linter, own)
        for message in done.warnings:
            self.warn(source, sanitize(message))
        changed = bool(done.applied) and done.text != source.text
        self.outcome.held_back += held_back(done.findings if changed else result.findings, own)
        if not changed:
            self.outcome.refused += bool(done.warnings)
            return
        data = _encode(source, done.text)
        if data is None:
            self.warn(source, f"the fixed source cannot be encoded as {source.encoding}; file left as it was")
            self.outcome.refused += 1
        elif self._deliver(result, source, data, done):
            self.outcome.changed += 1
            self.outcome.fixed += len(done.applied)
            self.outcome.per_file[source.path] = Counter((f.code, f.name) for f in done.applied)

    def _deliver(self, result: FileResult, source: SourceFile, data: bytes, done: FileFix) -> bool:
        """Show the diff or write the file; False when neither could be done."""
        if self.diff:
            try:
                self.out.write(unified_diff(source.path, source.text, done.text, terminal=_is_terminal(self.out)))
            except DiffNameError as exc:
                self.warn(source, f"no diff shown: {exc}", "error")
                self.outcome.unshown += 1
                return False
            return True
        problem = write_source(source, data)
        if problem:
            self.warn(source, problem)
            self.outcome.refused += 1
            return False
        result.findings = done.findings
        result.source = SourceFile(source.path, data, done.text, source.encoding)
        return True


def fix_results(results: Sequence[FileResult], linter: Linter, settings: Settings, diff: bool = False,
                show: bool = False, out: Optional[TextIO] = None, err: Optional[TextIO] = None,
                linters: Optional[Callable[[str], Linter]] = None) -> FixOutcome:
    """Fix every file of `results` (results are updated to the fixed sources and their findings).

    With `diff`, print a unified diff per file instead of writing anything. `linters`: each file's own
    Linter (hierarchical configuration), whose settings then decide which fixes apply.
    """
    run = _Run(settings, diff, out or sys.stdout, err or sys.stderr)
    for result in results:
        if result.source is not None and result.findings:
            run.file(result, linters(result.source.path) if linters is not None else linter)
    outcome = run.outcome
    if diff:
        run.err.write(diff_summary(outcome))
    elif show:
        human = (settings.output_format or "full") in ("full", "concise")
        write_fixes(outcome, run.out if human else run.err)
    return outcome


def _files(count: int) -> str:
    return f"{count} file{'s' if count != 1 else ''}"


def diff_summary(outcome: FixOutcome) -> str:
    """What `--diff` says after the diffs: ruff's line, then the files it could not show or fix."""
    lines = [would_fix_message(outcome.fixed, outcome.held_back)]
    if outcome.unshown:
        lines.append(f"No diff shown for {_files(outcome.unshown)} with fixes (see the errors above).")
    if outcome.refused:
        lines.append(f"{_files(outcome.refused)} with fixes left as they were (see the warnings above).")
    return "\n".join(lines) + "\n"


def write_fixes(outcome: FixOutcome, stream: TextIO) -> None:
    """The `--show-fixes` listing."""
    if not outcome.fixed:
        stream.write("No findings fixed.\n")
        return
    stream.write(f"Fixed {outcome.fixed} finding{'s' if outcome.fixed != 1 else ''}:\n")
    for path in sorted(outcome.per_file):
        stream.write(f"- {sanitize(path)}:\n")
        for (code, name), count in sorted(outcome.per_file[path].items()):
            stream.write(f"    {count} \u00d7 {sanitize(code)} ({sanitize(name)})\n")
    stream.write("\n")


def fix_stdin(raw: bytes, result: FileResult, linter: Linter, settings: Settings, diff: bool = False,
              err: Optional[TextIO] = None) -> Tuple[Any, int, FileResult]:
    """(output, fixed count, result) for source read from stdin: the fixed bytes, or the diff text."""
    err = err or sys.stderr
    apply_fix_settings(result.findings, settings)
    source = result.source
    unchanged: Any = "" if diff else raw
    if source is None or not any(is_applicable(f, settings) for f in result.findings):
        return unchanged, 0, result
    done = fix_text(source.text, source.path, result.findings, linter, settings)
    name = sanitize(source.path)
    for message in done.warnings:
        err.write(f"warning: {name}: {sanitize(message)}\n")
    if not done.applied or done.text == source.text:
        return unchanged, 0, result
    data = _encode(source, done.text)
    if data is None:
        err.write(f"warning: {name}: the fixed source cannot be encoded as {source.encoding}; left as it was\n")
        return unchanged, 0, result
    if diff:
        try:
            return (unified_diff(source.path, source.text, done.text, terminal=_is_terminal(sys.stdout)),
                    len(done.applied), result)
        except DiffNameError as exc:
            err.write(f"error: {name}: no diff shown: {exc}\n")
            return unchanged, len(done.applied), result
    result.findings = done.findings
    result.source = SourceFile(source.path, data, done.text, source.encoding)
    return data, len(done.applied), result
