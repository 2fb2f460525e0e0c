"""Command line: `ascend-lint check | rule | rules` with ruff's conventions. Exit 0/1/2."""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Dict, List, Optional, Sequence, TextIO

from . import __version__
from .config import ConfigError, Settings, load_settings
from .discovery import discover
from .docs import fix_label, rule_text, rules_markdown, status
from .engine import FileResult, Linter, error_finding, sorted_findings, summarize
from .fileio import split_lines
from .registry import Registry, RegistryError, load_registry, print_warnings, select_rules
from .reporters import FORMATS, Report, display_path, get_reporter
from .rule import Applicability, Finding

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage: exit code 2."""


def _codes(values: Optional[List[str]]) -> Optional[List[str]]:
    if values is None:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ascend-lint",
        description="Find Ascend NPU performance anti-patterns in PyTorch (torch_npu) and MindSpore code.",
    )
    parser.add_argument("--version", action="version", version=f"ascend-lint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="lint files or directories (default: .)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or directories; '-' reads stdin")
    sel = check.add_argument_group("rule selection")
    sel.add_argument("--select", action="append", metavar="CODES", help="comma-separated codes or prefixes (ASC, ASC4, ASC401)")
    sel.add_argument("--ignore", action="append", metavar="CODES", help="codes or prefixes to disable")
    sel.add_argument("--extend-select", action="append", metavar="CODES", help="codes or prefixes to enable in addition")
    sel.add_argument("--preview", action="store_true", default=None, help="enable preview rules")
    sel.add_argument("--no-preview", dest="preview", action="store_false", help="disable preview rules")
    sel.add_argument("--target", choices=("auto", "npu"), help="'npu' treats every file as NPU code")
    out = check.add_argument_group("output")
    out.add_argument("--output-format", choices=sorted(FORMATS), help="report format (default: full)")
    out.add_argument("--output-file", "-o", metavar="FILE", help="write the report to FILE")
    out.add_argument("--statistics", action="store_true", help="count findings per rule instead of listing them")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    files = check.add_argument_group("files and configuration")
    files.add_argument("--config", metavar="FILE", help="a pyproject.toml or .ascend-lint.yaml to use")
    files.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    files.add_argument("--exclude", action="append", metavar="GLOB", help="replace the default excludes")
    files.add_argument("--extend-exclude", action="append", metavar="GLOB", help="exclude more paths")
    files.add_argument("--force-exclude", action="store_true", default=None, help="apply excludes to files named on the command line too")
    files.add_argument("--stdin-filename", metavar="PATH", help="the path of the source read from stdin")
    files.add_argument("--add-noqa", action="store_true", help="append '# noqa: CODE' to every reported line")
    fixes = check.add_argument_group("fixes")
    fixes.add_argument("--fix", action="store_true", default=None, help="apply safe fixes")
    fixes.add_argument("--no-fix", dest="fix", action="store_false", help="do not apply fixes")
    fixes.add_argument("--unsafe-fixes", action="store_true", default=None, help="also apply unsafe fixes (with --fix)")
    fixes.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")
    fixes.add_argument("--diff", action="store_true", help="print the diff --fix would apply; write nothing")
    fixes.add_argument("--show-fixes", action="store_true", help="list the fixes applied")
    perf = check.add_argument_group("performance")
    perf.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: all cores)")
    perf.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    perf.add_argument("--cache-dir", metavar="DIR", help="where the result cache lives")

    rule = sub.add_parser("rule", help="explain a rule")
    rule.add_argument("code", metavar="CODE", help="a rule code (ASC101) or name")

    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--output-format", choices=("text", "markdown", "json"), default="text")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")  # an odd terminal encoding must not crash a report
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return run_check(args)
        if args.command == "rule":
            return run_rule(args)
        if args.command == "rules":
            return run_rules(args)
        parser.print_help()
        return EXIT_ERROR
    except (ConfigError, RegistryError, UsageError) as exc:
        print(f"ascend-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("ascend-lint: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception:  # never a bare traceback: say what happened and how to report it
        print("ascend-lint: internal error (please report it with this output):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_ERROR


# ----------------------------------------------------------------------------- rules
def _registry() -> Registry:
    registry = load_registry()
    print_warnings(registry.warnings)
    return registry


def run_rule(args: argparse.Namespace) -> int:
    rule = _registry().get(args.code)
    if rule is None:
        raise UsageError(f"unknown rule {args.code!r} (see 'ascend-lint rules')")
    sys.stdout.write(rule_text(rule))
    return EXIT_OK


def run_rules(args: argparse.Namespace) -> int:
    rules = _registry().sorted_rules()
    if args.output_format == "markdown":
        sys.stdout.write(rules_markdown(rules))
    elif args.output_format == "json":
        import json

        rows = [{"code": r.code, "name": r.name, "pack": r.pack, "status": status(r), "fix": fix_label(r),
                 "severity": r.severity.value, "npu_context": r.npu_context, "message": r.message} for r in rules]
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        width = max([len(r.name) for r in rules] + [4])
        sys.stdout.write(f"{'CODE':<7} {'NAME':<{width}} {'PACK':<10} {'STATUS':<8} FIX\n")
        for r in rules:
            sys.stdout.write(f"{r.code:<7} {r.name:<{width}} {r.pack:<10} {status(r):<8} {fix_label(r)}\n")
    return EXIT_OK


# ----------------------------------------------------------------------------- check
def resolve_settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config, args.isolated, os.getcwd())
    return settings.override(
        select=_codes(args.select),
        ignore=(settings.ignore + _codes(args.ignore)) if args.ignore else None,
        extend_select=(settings.extend_select + _codes(args.extend_select)) if args.extend_select else None,
        preview=args.preview,
        target=args.target,
        exclude=args.exclude,
        extend_exclude=(settings.extend_exclude + args.extend_exclude) if args.extend_exclude else None,
        force_exclude=args.force_exclude,
        fix=args.fix,
        unsafe_fixes=args.unsafe_fixes,
        cache_dir=os.path.abspath(args.cache_dir) if args.cache_dir else None,  # relative to the cwd
        output_format=args.output_format,
    )


def _use_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def run_check(args: argparse.Namespace) -> int:
    settings = resolve_settings(args)
    registry = _registry()
    rules, warnings = select_rules(registry, settings)
    print_warnings(warnings)
    linter = Linter(rules, settings)
    paths = args.paths or ["."]
    if "-" in paths:
        if len(paths) > 1:
            raise UsageError("'-' (stdin) cannot be combined with other paths")
        return check_stdin(args, settings, linter, registry)
    targets, missing = discover(paths, settings)
    results: List[FileResult] = [FileResult(p, [error_finding(p, "no such file or directory")]) for p in missing]
    if not targets and not missing:
        return EXIT_OK  # nothing to lint (pre-commit passed no files, or all excluded): quietly fine
    from .runner import lint_targets

    index = open_project(paths, settings, args, [t.path for t in targets])
    cache = None
    if not args.no_cache:
        from .cache import ResultCache

        cache = ResultCache.open(settings, linter.rules, registry.fingerprint(), project=True)
    keep_sources = bool(settings.fix or args.diff or args.add_noqa)  # else reports read lines lazily
    results += lint_targets(linter, targets, _jobs(args), cache=cache, keep_sources=keep_sources, index=index)
    if args.add_noqa:
        return add_noqa(results)
    fixed = 0
    if settings.fix or args.diff:
        from .fixer import fix_results  # libcst is imported only on this path

        outcome = fix_results(results, linter, settings, diff=args.diff, show=args.show_fixes)
        if args.diff:
            return EXIT_FINDINGS if outcome.changed else EXIT_OK
        fixed = outcome.fixed
    return emit(args, settings, registry, results, fixed)


def open_project(paths: Sequence[str], settings: Settings, args: argparse.Namespace,
                 listed: Optional[Sequence[str]] = None):
    """The project index of the linted paths (the project model's one entry point)."""
    from .project.index import ProjectIndex

    return ProjectIndex.open(paths, settings, cache=not args.no_cache, listed=listed)


def _jobs(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    return args.jobs or (os.cpu_count() or 1)


def check_stdin(args, settings: Settings, linter: Linter, registry: Registry) -> int:
    raw = sys.stdin.buffer.read()
    path = args.stdin_filename or "-"
    if args.stdin_filename:  # the buffer stands for that file of its project: the others give their facts
        linter.project = open_project([path], settings, args)
        _refresh_from_buffer(linter.project, path, raw)
        linter.project.save()
    result = linter.lint_bytes(raw, path)
    fixed = 0
    if settings.fix or args.diff:
        from .fixer import fix_stdin

        output, fixed, result = fix_stdin(raw, result, linter, settings, diff=args.diff)
        if isinstance(output, bytes):  # the fixed source, in the input's own encoding and newlines
            sys.stdout.flush()
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(output)
        if args.diff:
            return EXIT_FINDINGS if fixed else EXIT_OK
        return EXIT_FINDINGS if result.findings and not args.exit_zero else EXIT_OK
    return emit(args, settings, registry, [result], fixed)


def _refresh_from_buffer(index, path: str, raw: bytes) -> None:
    from .fileio import SourceError, decode_source

    try:
        text = decode_source(raw)[0]
    except SourceError:
        text = ""
    index.refresh(path, text)
    index.complete()


def emit(args, settings: Settings, registry: Registry, results: Sequence[FileResult], fixed: int) -> int:
    findings = sorted_findings(results)
    if settings.extend_safe_fixes or settings.extend_unsafe_fixes:
        from .fixer import apply_fix_settings  # cheap: libcst is imported only to apply a fix

        apply_fix_settings(findings, settings)
    from .runner import SourceLines

    sources = SourceLines(results)  # read one file at a time, only where a snippet is shown
    fmt = settings.output_format or "full"
    if fmt not in FORMATS:
        raise UsageError(f"unknown output format {fmt!r} (choose from {', '.join(sorted(FORMATS))})")
    human = fmt in ("full", "concise")
    report = Report(findings, registry.rules, sources, fixed=fixed, unsafe_fixes=settings.unsafe_fixes,
                    files=len(results))
    if args.statistics:
        write_statistics(findings, sys.stdout)
    elif args.output_file:
        with open(args.output_file, "w", encoding="utf-8", newline="") as handle:
            get_reporter(fmt)(report, handle)
    else:
        report.color = human and _use_color(sys.stdout)
        get_reporter(fmt)(report, sys.stdout)
    if not args.quiet and (human or args.output_file or args.statistics):
        write_summary(findings, fixed, settings, sys.stdout)
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def write_statistics(findings: Sequence[Finding], out: TextIO) -> None:
    for code, name, count, fixable in summarize(findings):
        out.write(f"{count:>5}\t{code}\t{'[*] ' if fixable else ''}{name}\n")


def write_summary(findings: Sequence[Finding], fixed: int, settings: Settings, out: TextIO) -> None:
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    if not findings:
        out.write(f"Fixed {fixed} finding{'s' if fixed != 1 else ''}; all checks passed!\n" if fixed else "All checks passed!\n")
        return
    n = len(findings)
    head = f"Found {n + fixed} finding{'s' if n + fixed != 1 else ''}"
    head += f" ({fixed} fixed, {n} remaining)." if fixed else "."
    out.write(head + "\n")
    fixable = safe + (unsafe if settings.unsafe_fixes else 0)
    if fixable:
        out.write(f"[*] {fixable} fixable with the `--fix` option")
        if unsafe and not settings.unsafe_fixes:
            out.write(f" ({unsafe} more with `--unsafe-fixes`)")
        out.write(".\n")
    elif unsafe and not settings.unsafe_fixes:
        out.write(f"No fixes available ({unsafe} hidden fixes can be enabled with the `--unsafe-fixes` option).\n")


def add_noqa(results: Sequence[FileResult]) -> int:
    from .engine import parse
    from .fileio import SourceError, write_atomic
    from .noqa import add_noqa_to_lines

    total = 0
    for result in results:
        source = result.source
        if source is None or not result.findings:
            continue
        lines = split_lines(source.text, keepends=True)
        changed = add_noqa_to_lines(lines, result.findings)
        if not changed:
            continue
        for index, text in changed.items():
            lines[index] = text
        new_text = "".join(lines)
        try:
            parse(new_text, source.path)
        except SourceError:
            print(f"warning: {display_path(source.path)}: adding noqa comments would break the file; skipped",
                  file=sys.stderr)
            continue
        write_atomic(source.path, source.encode(new_text))
        total += sum(1 for f in result.findings if f.line - 1 in changed)
    print(f"Added {total} noqa directive{'s' if total != 1 else ''}.", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
