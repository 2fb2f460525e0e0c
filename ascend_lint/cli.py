"""Command line: `ascend-lint check | rule | rules` with ruff's conventions. Exit 0/1/2."""
from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import traceback
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple, Type

from . import __version__
from .config import (ConfigError, ConfigResolver, Settings, load_settings, parse_override, rebase_pattern,
                     with_override)
from .docs import fix_label, measured, precision_label, preview_note, rule_text, rules_markdown, status
from .engine.linter import NPU_RULES_SKIPPED_FOR_CUDA, FileResult, Linter, parse, sorted_findings
from .engine.noqa import add_noqa_to_lines
from .fileio import SourceError, read_source, split_lines, write_source
from .fix.policy import apply_fix_settings, fixed_message, held_back
from .pipeline.discovery import Target
from .pipeline.progress import Progress
from .pipeline.run import FixRequest, Found, Request, find_files, lint_run, lint_stdin
from .pipeline.runner import SourceLines
from .pipeline.workspace import Workspace
from .registry import Registry, RegistryError, load_registry, print_warnings, select_rules
from .reporters import FORMATS, Report, display_path, get_reporter
from .rule import Applicability, Finding, Rule
from .sanitize import sanitize, sanitize_lines

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage: exit code 2."""


def _codes(values: Optional[List[str]], flag: str = "") -> Optional[List[str]]:
    """Comma-separated selectors; a value that holds none (`--select ''`) is a usage error."""
    if values is None:
        return None
    codes = []
    for value in values:
        found = [c.strip() for c in value.split(",") if c.strip()]
        if not found:
            raise UsageError(f"empty rule selector {value!r} in {flag or 'the selection'} "
                             "(give codes or prefixes such as ASC1, or ALL)")
        codes.extend(found)
    return codes


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its own usage error (`ascend-lint check: error:
    unrecognized arguments`, under `check`'s usage), not the top-level parser's."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


COLOR_CHOICES = ("auto", "always", "never")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ascend-lint",
        description="Find Ascend NPU performance anti-patterns in PyTorch (torch_npu) and MindSpore code.",
    )
    parser.add_argument("--version", action="version", version=f"ascend-lint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)

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
    out.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="exit 1 when fixes were applied, even if no finding is left")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    out.add_argument("--watch", action="store_true",
                     help="run again whenever a Python file or a configuration changes (Ctrl-C stops)")
    out.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                     help="colour the report: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), "
                          "always or never")
    files = check.add_argument_group("files and configuration")
    files.add_argument("--config", action="append", metavar="CONFIG_OPTION",
                       help="a pyproject.toml or .ascend-lint.yaml to use instead of the closest one, or a TOML "
                            "`KEY = VALUE` pair over every configuration (e.g. --config \"preview = true\"); "
                            "repeatable")
    files.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    files.add_argument("--exclude", action="append", metavar="GLOB", help="replace the default excludes")
    files.add_argument("--extend-exclude", action="append", metavar="GLOB", help="exclude more paths")
    files.add_argument("--respect-gitignore", action="store_true", default=None,
                       help="skip the files that .gitignore files exclude (default)")
    files.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false",
                       help="lint the files .gitignore files exclude, too")
    files.add_argument("--force-exclude", action="store_true", default=None, help="apply excludes to files named on the command line too")
    files.add_argument("--stdin-filename", metavar="PATH", help="the path of the source read from stdin")
    files.add_argument("--add-noqa", action="store_true", help="append '# noqa: CODE' to every reported line")
    files.add_argument("--ignore-noqa", action="store_true", default=None, help="ignore every '# noqa' comment")
    files.add_argument("--show-files", action="store_true", help="list the files that would be linted, then exit")
    files.add_argument("--show-settings", action="store_true",
                       help="print the settings used for the first file (or PATH), then exit")
    fixes = check.add_argument_group("fixes")
    fixes.add_argument("--fix", action="store_true", default=None, help="apply safe fixes")
    fixes.add_argument("--no-fix", dest="fix", action="store_false", help="do not apply fixes")
    fixes.add_argument("--fix-only", action="store_true",
                       help="apply fixes, do not report what is left, exit 0 (implies --fix)")
    fixes.add_argument("--unsafe-fixes", action="store_true", default=None, help="also apply unsafe fixes (with --fix)")
    fixes.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")
    fixes.add_argument("--diff", action="store_true", help="print the diff --fix would apply; write nothing")
    fixes.add_argument("--show-fixes", action="store_true", help="list the fixes applied")
    prof = check.add_argument_group("profile (docs/profile.md)")
    prof.add_argument("--profile", metavar="DIR", help="an Ascend profile (*_ascend_pt, *_ascend_ms or its "
                      "ASCEND_PROFILER_OUTPUT): each finding's measured cost per step, and the ASC8xx findings")
    prof.add_argument("--sort", choices=("path", "cost"), default="path",
                      help="order of the findings ('cost': most measured cost first; needs --profile)")
    prof.add_argument("--profile-report", action="store_true", help="list the functions the profile saw in every "
                      "step that the project model does not run per step, instead of the findings")
    perf = check.add_argument_group("performance")
    perf.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: all cores)")
    perf.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    perf.add_argument("--cache-dir", metavar="DIR", help="where the result cache lives")

    rule = sub.add_parser("rule", help="explain a rule")
    rule.add_argument("code", metavar="CODE", help="a rule code (ASC101) or name")

    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--output-format", choices=("text", "markdown", "json"), default="text")

    clean = sub.add_parser("clean", help="remove the result caches in the current directory and below, and the "
                                         "cache directory the configuration names")
    clean.add_argument("-q", "--quiet", action="store_true", help="do not list the caches removed")

    sub.add_parser("server", help="run the language server (LSP over stdio; needs the `server` extra, see docs/editors.md)")
    return parser


def entry() -> None:
    """The `ascend-lint` command and `python -m ascend_lint`: `main()`, then exit without tearing the heap
    down object by object (a project's summaries and model are hundreds of thousands of objects, ~1 s on
    20,000 files; the operating system frees them at once). Everything is written before: results,
    caches (saved atomically inside main), what `atexit` handlers do (a plugin's, logging's) and the
    flushed output streams."""
    code = main()
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is not None:
        run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        if stream is None or stream.closed:  # (the language server closes stdout when told to exit)
            continue
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):  # (a closed pipe: nothing more to say)
            code = code or EXIT_ERROR
    os._exit(code)


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
        if args.command == "server":
            return run_server()
        if args.command == "clean":
            return run_clean(args)
        parser.print_help()
        return EXIT_ERROR
    except (ConfigError, RegistryError, UsageError) as exc:
        print(f"ascend-lint: error: {sanitize(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("ascend-lint: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception:  # never a bare traceback: say what happened and how to report it
        print("ascend-lint: internal error (please report it with this output):", file=sys.stderr)
        sys.stderr.write(sanitize_lines(traceback.format_exc()))
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
    sys.stdout.write(sanitize_lines(rule_text(rule)))  # third-party packs' docs are untrusted text
    return EXIT_OK


def run_rules(args: argparse.Namespace) -> int:
    rules = _registry().sorted_rules()
    if args.output_format == "markdown":
        sys.stdout.write(rules_markdown(rules))
    elif args.output_format == "json":
        rows = [{"code": r.code, "name": r.name, "pack": r.pack, "status": status(r), "fix": fix_label(r),
                 "severity": r.severity.value, "npu_context": r.npu_context, "message": r.message,
                 "precision": measured(r)} for r in rules]
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        width = max([len(r.name) for r in rules] + [4])
        sys.stdout.write(f"{'CODE':<7} {'NAME':<{width}} {'PACK':<10} {'STATUS':<8} {'FIX':<7} PRECISION (held-out)\n")
        for r in rules:
            sys.stdout.write(f"{r.code:<7} {r.name:<{width}} {r.pack:<10} {status(r):<8} {fix_label(r):<7} "
                             f"{precision_label(r)}\n")
    return EXIT_OK


def run_server() -> int:
    try:
        from .server import main as serve  # (pygls is imported only for the server: start-up)
    except ImportError as exc:
        raise UsageError(f"the language server needs pygls ({exc.name or exc}): "
                         'pip install "ascend-lint[server] @ git+https://github.com/ascend-lint/ascend-lint"') from None
    return serve()


def run_clean(args: argparse.Namespace) -> int:
    """`clean`: the caches below the current directory and the one its configuration names (a broken
    configuration only costs that one)."""
    from .pipeline.cache import cache_dir_for
    from .pipeline.clean import clean

    cwd = os.getcwd()
    try:
        configured = [cache_dir_for(load_settings(None, False, cwd))]
    except ConfigError as exc:
        print(f"warning: {sanitize(str(exc))}; only the caches below the current directory are removed",
              file=sys.stderr)
        configured = []
    removed, problems = clean(cwd, configured)
    for path in removed if not args.quiet else ():
        shown = os.path.relpath(path, cwd) if path.startswith(os.path.join(cwd, "")) else path
        print(f"Removing cache at: {sanitize(shown)}", file=sys.stderr)
    for problem in problems:
        print(f"ascend-lint: error: cannot remove the cache {sanitize(problem)}", file=sys.stderr)
    return EXIT_ERROR if problems else EXIT_OK


# ----------------------------------------------------------------------------- check
CLI_ORIGIN = "command line"


def resolve_settings(args: argparse.Namespace) -> ConfigResolver:
    """The settings of every file: the closest configuration (or `--config FILE` / `--isolated` for all
    files), then the `--config KEY = VALUE` overrides, then the command line's flags, which override every
    file."""
    cwd = os.getcwd()
    config_file, overrides = config_arguments(args.config, args.isolated)

    def apply(settings: Settings) -> Settings:
        for table in overrides:
            settings = with_override(settings, table, cwd)
        return apply_cli(settings, args, cwd)

    run = apply(load_settings(config_file, args.isolated, cwd))
    return ConfigResolver(run, apply, hierarchical=not (config_file or args.isolated))


def config_arguments(values: Optional[List[str]], isolated: bool) -> Tuple[Optional[str], List[Dict[str, Any]]]:
    """`--config` values (ruff's): (the one configuration file, the inline TOML `KEY = VALUE` tables). A
    value that is an existing file names it; else one that parses as TOML is an override."""
    path: Optional[str] = None
    overrides: List[Dict[str, Any]] = []
    for value in values or ():
        table = None if os.path.isfile(value) else parse_override(value)
        if table is not None:
            overrides.append(table)
            continue
        if path is not None:
            raise UsageError(f"only one configuration file can be given: --config {path!r} and --config {value!r}")
        if not os.path.isfile(value):
            raise ConfigError(f"{value}: configuration file not found (--config takes a file, or a TOML "
                              "`KEY = VALUE` pair such as --config \"preview = true\")")
        path = value
    if path is not None and isolated:
        raise UsageError(f"--config {path!r} cannot be used with --isolated, which ignores every configuration file")
    return path, overrides


def apply_cli(settings: Settings, args: argparse.Namespace, cwd: str) -> Settings:
    """The command line's flags over one configuration's settings (exclude globs are relative to the
    current directory, as every path on the command line is)."""
    def here(patterns: Optional[List[str]]) -> Optional[List[str]]:
        return [rebase_pattern(p, cwd, os.path.abspath(settings.project_root)) for p in patterns] \
            if patterns else patterns

    extend_exclude = here(args.extend_exclude)
    resolved = settings.override(
        select=_codes(args.select, "--select"),
        ignore=(settings.ignore + _codes(args.ignore, "--ignore")) if args.ignore else None,
        extend_select=(settings.extend_select + _codes(args.extend_select, "--extend-select"))
        if args.extend_select else None,
        preview=args.preview,
        target=args.target,
        exclude=here(args.exclude),
        extend_exclude=(settings.extend_exclude + extend_exclude) if extend_exclude else None,
        force_exclude=args.force_exclude,
        respect_gitignore=args.respect_gitignore,
        fix=True if args.fix_only else args.fix,
        unsafe_fixes=args.unsafe_fixes,
        ignore_noqa=args.ignore_noqa,
        cache_dir=os.path.abspath(args.cache_dir) if args.cache_dir else None,  # relative to the cwd
        output_format=args.output_format,
    )
    origins = dict(settings.origins)
    for attr in cli_keys(args):
        added = attr in ("ignore", "extend_select", "extend_exclude") and origins.get(attr)
        origins[attr] = f"{origins[attr]} + {CLI_ORIGIN}" if added else CLI_ORIGIN
    resolved.origins = origins
    return resolved


def use_color(stream: TextIO, choice: str = "auto") -> bool:
    """`--color`: `always`/`never` as said; `auto` as ruff: NO_COLOR (non-empty) turns colour off, else
    FORCE_COLOR or CLICOLOR_FORCE (non-empty) turns it on, else CLICOLOR=0 turns it off, else a terminal."""
    if choice != "auto":
        return choice == "always"
    env = os.environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR") or env.get("CLICOLOR_FORCE"):
        return True
    if env.get("CLICOLOR") == "0":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def run_check(args: argparse.Namespace) -> int:
    """`check`: the run's settings and rules, then the pipeline (pipeline/run.py), then the report."""
    if args.watch:
        return watch_check(args)
    resolver = resolve_settings(args)
    settings = resolver.run  # the run-wide keys (fix, output format, cache) come from here
    registry = _registry()
    paths = stdin_paths(args) or args.paths or ["."]
    workspace = Workspace(resolver, registry, paths, cache=not args.no_cache)
    workspace.rules(settings)  # a bad selection is an error before anything is read
    if "-" in paths:
        return check_stdin(args, paths, workspace)
    request = run_request(args, paths, settings)
    if args.show_files or args.show_settings:
        return show(args, find_files(paths, workspace), workspace)
    run = lint_run(request, workspace)
    if args.profile_report and run.profiled is not None:
        from .reporters.cost import render_profile_report

        with report_stream(args.output_file) as out:
            render_profile_report(run.profiled, out, as_json=settings.output_format not in (None, "full", "concise"))
        return EXIT_OK
    for message in run.refused:  # broken configurations: named once; their files were not linted
        print(f"ascend-lint: error: {sanitize(message)}", file=sys.stderr)
    if run.refused and not run.results:
        return EXIT_ERROR  # (nothing was linted: no report)
    if not (run.found.targets or run.found.missing or run.found.report.unreadable or run.refused or args.quiet):
        # nothing to lint (pre-commit passed no files, or all excluded): say so, and still write the report
        print("warning: No Python files found under the given path(s)", file=sys.stderr)
    if args.add_noqa:
        return add_noqa(run.results)
    if args.diff:  # (a file whose diff cannot be shown would still change)
        return EXIT_FINDINGS if run.fixes.changed or run.fixes.unshown else EXIT_OK
    fixed = run.fixes.fixed if run.fixes is not None else 0
    if args.fix_only:
        return report_fix_only(args, fixed, sys.stdout, run.fixes.held_back if run.fixes is not None else 0)
    code = emit(args, settings, registry, run.results, fixed, workspace.linter_for)
    return EXIT_ERROR if run.refused else code


def watch_check(args: argparse.Namespace) -> int:
    """`check --watch`: the check, then again after each change (see watch.py); a run's error (a configuration
    being edited) is printed and the watch goes on."""
    for flag, given in (("standard input", "-" in args.paths or args.stdin_filename), ("--add-noqa", args.add_noqa),
                        ("--show-files", args.show_files), ("--show-settings", args.show_settings)):
        if given:
            raise UsageError(f"--watch cannot be used with {flag}")
    from .watch import watch

    once = argparse.Namespace(**{**vars(args), "watch": False})
    clear = sys.stdout.isatty()

    def run_once() -> int:
        if clear:
            sys.stdout.write("\x1b[2J\x1b[H")  # (ruff clears the screen before each run too)
        try:
            code = run_check(once)
        except (ConfigError, RegistryError, UsageError) as exc:
            print(f"ascend-lint: error: {sanitize(str(exc))}", file=sys.stderr)
            code = EXIT_ERROR
        sys.stdout.flush()
        return code

    return watch(run_once, args.paths or ["."])


def run_request(args: argparse.Namespace, paths: Sequence[str], settings: Settings) -> Request:
    """What the command line asks of the run."""
    fixing = bool(settings.fix or args.diff) and not args.add_noqa
    fmt = settings.output_format or "full"
    if (args.sort == "cost" or args.profile_report) and not args.profile:
        raise UsageError(f"{'--sort cost' if args.sort == 'cost' else '--profile-report'} needs --profile DIR")
    return Request(paths, jobs=_jobs(args), cache=not args.no_cache, profile=args.profile,
                   profile_report=args.profile_report,
                   keep_sources=bool(settings.fix or args.diff or args.add_noqa),  # else reports read lines lazily
                   fix=FixRequest(diff=args.diff, show=args.show_fixes) if fixing else None,
                   progress=Progress.for_terminal(sys.stderr, quiet=args.quiet, human=fmt in ("full", "concise")))


def show(args: argparse.Namespace, found: Found, workspace: Workspace) -> int:
    """`--show-files` or `--show-settings` (of the first file found, else of the first path)."""
    if args.show_files:
        return show_files(found.targets, found.missing)
    path = found.targets[0].path if found.targets else (args.paths or ["."])[0]
    file_settings = workspace.resolver.for_path(path)
    return show_settings(file_settings, workspace.linter(file_settings).rules, path)


def _jobs(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    return args.jobs or (os.cpu_count() or 1)


def check_stdin(args: argparse.Namespace, paths: Sequence[str], workspace: Workspace) -> int:
    """`check -` (or `--stdin-filename`): lint stdin, fix it to stdout with `--fix`."""
    if len(paths) > 1:
        raise UsageError("'-' (stdin) cannot be combined with other paths")
    resolver = workspace.resolver
    settings = resolver.for_path(args.stdin_filename) if args.stdin_filename else resolver.run
    if args.show_settings:
        return show_settings(settings, workspace.linter(settings).rules, args.stdin_filename or "-")
    if args.show_files:
        return EXIT_OK  # like ruff: stdin is no file to list
    raw = sys.stdin.buffer.read(settings.max_file_size + 1)  # more than the cap: `file too large`
    result, linter = lint_stdin(workspace, raw, args.stdin_filename)
    if not (settings.fix or args.diff):
        return emit(args, settings, workspace.registry, [result], 0)
    from .fix.command import fix_stdin  # (libcst is imported only when fixes are asked for: start-up)

    output, fixed, result = fix_stdin(raw, result, linter, settings, diff=args.diff)
    write_fixed_stdin(output, raw, settings.max_file_size)
    if args.diff:
        return EXIT_FINDINGS if fixed else EXIT_OK
    if args.fix_only:
        return report_fix_only(args, fixed, sys.stderr, held_back(result.findings, settings))  # stdout: source
    if args.exit_zero:
        return EXIT_OK
    return EXIT_FINDINGS if result.findings or (fixed and args.exit_non_zero_on_fix) else EXIT_OK


def write_fixed_stdin(output, raw: bytes, max_size: int) -> None:
    """The fixed source (in the input's own encoding and newlines), or the diff, on stdout."""
    if not isinstance(output, bytes):
        sys.stdout.write(output)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(output)
    if len(raw) > max_size:  # too large to lint: pass the rest through unchanged
        shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.buffer.flush()


def emit(args, settings: Settings, registry: Registry, results: Sequence[FileResult], fixed: int,
         linter_for: Optional[Callable[[str], Linter]] = None) -> int:
    """Write the report (its format, its file) and the summary; the exit code."""
    _apply_own_fix_settings(results, settings, linter_for)
    findings = sorted_findings(results)
    if getattr(args, "sort", "path") == "cost":
        from .pipeline.profiled import rank_by_cost  # (the profile reader is imported only with --profile)

        findings = rank_by_cost(findings)
    fmt = settings.output_format or "full"
    if fmt not in FORMATS:
        raise UsageError(f"unknown output format {fmt!r} (choose from {', '.join(sorted(FORMATS))})")
    human = fmt in ("full", "concise")
    report = Report(findings, registry.rules, SourceLines(results), fixed=fixed, unsafe_fixes=settings.unsafe_fixes,
                    files=len(results), text_of=_texts(results))  # (snippets read one file at a time)
    write_report(args, report, fmt, human)
    if not args.quiet and (human or args.output_file or args.statistics) and not (
            args.statistics and fmt == "json" and not args.output_file):
        write_summary(findings, fixed, settings, sys.stdout)
        write_cost_summary(findings, sys.stdout)
        if results:
            write_preview_note(registry, settings, sys.stdout)
        write_porting_hint(results, sys.stdout)
    if args.exit_zero:
        return EXIT_OK
    return EXIT_FINDINGS if findings or (fixed and args.exit_non_zero_on_fix) else EXIT_OK


def write_cost_summary(findings: Sequence[Finding], out: TextIO) -> None:
    """With a profile: what the reported lines cost per step."""
    if any(f.cost is not None for f in findings):
        from .reporters.cost import cost_summary

        out.write(f"{cost_summary(findings)}\n")


def write_preview_note(registry: Registry, settings: Settings, out: TextIO) -> None:
    """The summary's line on the preview rules the selection would enable with `--preview`."""
    if settings.preview:
        return
    off, on = (select_rules(registry, dataclasses.replace(settings, preview=p))[0] for p in (False, True))
    note = preview_note(off, on)
    if note:
        out.write(note + "\n")


def _apply_own_fix_settings(results: Sequence[FileResult], settings: Settings,
                            linter_for: Optional[Callable[[str], Linter]]) -> None:
    """Each file's own `extend-safe-fixes` / `extend-unsafe-fixes` decide how its fixes are shown."""
    for result in results:
        own = linter_for(result.path).settings if linter_for and result.findings else settings
        if own.extend_safe_fixes or own.extend_unsafe_fixes:
            apply_fix_settings(result.findings, own)


def write_report(args: argparse.Namespace, report: Report, fmt: str, human: bool) -> None:
    if args.statistics:
        from .reporters.statistics import render_statistics  # (only for --statistics: start-up)

        with report_stream(args.output_file) as out:
            render_statistics(report.findings, report.unsafe_fixes, fmt == "json", out)
    elif args.output_file:
        with report_stream(args.output_file) as handle:
            get_reporter(fmt)(report, handle)
    else:
        report.color = human and use_color(sys.stdout, args.color)
        get_reporter(fmt)(report, sys.stdout)


@contextlib.contextmanager
def report_stream(path: Optional[str]) -> Iterator[TextIO]:
    """stdout, or the `--output-file` (its missing parent directories are created, as ruff does)."""
    if path is None:
        yield sys.stdout
        return
    try:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        handle = open(path, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    with handle:
        yield handle


def _texts(results: Sequence[FileResult]) -> Callable[[str], Optional[str]]:
    """path -> full text, for reports that need more than lines (fix edits in `json`)."""
    held = {r.path: r.source for r in results if r.source is not None}

    def text_of(path: str) -> Optional[str]:
        source = held.get(path)
        if source is not None:
            return source.text
        try:
            return read_source(path).text
        except SourceError:
            return None

    return text_of


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


# ----------------------------------------------------------------------------- ruff-parity modes
def stdin_paths(args: argparse.Namespace) -> Optional[List[str]]:
    """`--stdin-filename` reads stdin whatever the paths say (ruff's rule); other paths are ignored."""
    if not args.stdin_filename:
        return None
    for path in args.paths:
        if path != "-":
            print(f"warning: Ignoring file {display_path(path)} in favor of standard input.", file=sys.stderr)
    return ["-"]


def report_fix_only(args: argparse.Namespace, fixed: int, out: TextIO, held_back: int = 0) -> int:
    """`--fix-only`: say how many findings were fixed (and how many unsafe fixes were held back), never
    what is left."""
    message = fixed_message(fixed, held_back)
    if message and not args.quiet:
        out.write(message + "\n")
    return EXIT_FINDINGS if fixed and args.exit_non_zero_on_fix and not args.exit_zero else EXIT_OK


def show_files(targets: Sequence[Target], missing: Sequence[str]) -> int:
    """`--show-files`: the files a run would lint, one per line."""
    for path in missing:
        print(f"warning: {display_path(path)}: no such file or directory", file=sys.stderr)
    if not targets:
        print("warning: No Python files found under the given path(s)", file=sys.stderr)
    for target in targets:
        sys.stdout.write(display_path(target.path) + "\n")
    return EXIT_OK


def show_settings(settings: Settings, rules: Sequence[Type[Rule]], path: str) -> int:
    """`--show-settings`: the resolved settings for `path`, each with where its value came from."""
    from .settings_view import settings_lines  # (only for --show-settings: start-up)

    sys.stdout.write(f'Resolved settings for: "{display_path(path)}"\n')
    for line in settings_lines(settings, rules, path):
        sys.stdout.write(sanitize(line) + "\n")
    return EXIT_OK


def cli_keys(args: argparse.Namespace) -> List[str]:
    """The Settings fields the command line set."""
    given = {
        "select": args.select, "ignore": args.ignore, "extend_select": args.extend_select,
        "preview": args.preview, "target": args.target, "exclude": args.exclude,
        "extend_exclude": args.extend_exclude, "force_exclude": args.force_exclude,
        "respect_gitignore": args.respect_gitignore,
        "fix": args.fix if not args.fix_only else True, "unsafe_fixes": args.unsafe_fixes,
        "ignore_noqa": args.ignore_noqa, "cache_dir": args.cache_dir, "output_format": args.output_format,
    }
    return [key for key, value in given.items() if value is not None]


def write_porting_hint(results: Sequence[FileResult], out: TextIO) -> None:
    """Porting mode, found: files that use CUDA and had NPU-context rules skipped (they are not NPU code yet)."""
    count = sum(1 for r in results if NPU_RULES_SKIPPED_FOR_CUDA in r.notes)
    if count:
        files = f"{count} file{'s' if count != 1 else ''} that use{'s' if count == 1 else ''} CUDA"
        out.write(f"Note: NPU-context rules were skipped in {files} and not torch_npu. Porting a GPU project "
                  "to Ascend? Run with `--target npu --preview` to check every file as NPU code with every rule.\n")


def add_noqa(results: Sequence[FileResult]) -> int:
    """Append `# noqa: CODES` to every reported line; written under the same policy as `--fix`."""
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
        name = sanitize(source.path)
        try:
            parse(new_text, source.path)
            data = source.encode(new_text)
        except (SourceError, UnicodeEncodeError):
            print(f"warning: {name}: adding noqa comments would break the file; skipped", file=sys.stderr)
            continue
        problem = write_source(source, data, what="noqa comments")
        if problem:
            print(f"warning: {name}: {problem}", file=sys.stderr)
            continue
        total += sum(1 for f in result.findings if f.line - 1 in changed)
    print(f"Added {total} noqa directive{'s' if total != 1 else ''}.", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
