"""Apply every fix (safe and unsafe) to real code and check each result as the test suite does.

    python bench/fix_safety.py PATH [PATH ...] [--target auto|npu] [--jobs N] [--show N]

For every Python file under the paths: lint with every rule (preview on), apply all fixes in memory
(nothing is written), and require what tests/fixsafety.py requires: the result compiles, pyflakes reports
nothing new (undefined names, unused imports/variables, redefinitions), no module-level use before an
import, a second fix changes nothing, no buffer a fix registered is written in place, and the safe fixes
alone (a plain `--fix`) keep the behaviour signature (autocast/scaling, quiet device queries, dtype, disk,
aliasing). Prints the counts docs/reliability.md records, and the first
problems found. The checkouts are the user's (the tuning corpora listed in docs/precision.md): this script
never fetches anything.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from ascend_lint.pipeline.discovery import discover  # noqa: E402
from ascend_lint.config import Settings  # noqa: E402
from ascend_lint.fileio import SourceError, read_source  # noqa: E402
from ascend_lint.fix.fixer import is_applicable  # noqa: E402
from ascend_lint.registry import load_registry  # noqa: E402

_STATE: dict = {}


def _init(target: str) -> None:
    from fixsafety import linter_for

    _STATE["linter"], _STATE["settings"] = linter_for(load_registry(), target)


def _one(path: str) -> Tuple[str, str, Counter, List[str]]:
    """(path, status, fixes applied per rule, problems); status: unreadable | clean | fixed."""
    from fixsafety import check_fixes

    linter, settings = _STATE["linter"], _STATE["settings"]
    try:
        source = read_source(path)
        findings = linter.check(source.text, path)
    except SourceError:
        return path, "unreadable", Counter(), []
    if not any(is_applicable(f, settings) for f in findings):
        return path, "clean", Counter(), []
    outcome = check_fixes(source.text, path, linter, settings, findings)
    return path, "fixed" if outcome.applied else "clean", outcome.applied, outcome.problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--target", choices=("auto", "npu"), default="auto")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--show", type=int, default=20, help="problems to print")
    args = parser.parse_args()
    targets, _ = discover(args.paths, Settings(project_root=os.getcwd()))
    paths = [t.path for t in targets]
    start = time.time()
    statuses: Counter = Counter()
    applied: Counter = Counter()
    problems: List[Tuple[str, str]] = []
    with ProcessPoolExecutor(max(args.jobs, 1), initializer=_init, initargs=(args.target,)) as pool:
        for path, status, fixes, found in pool.map(_one, paths, chunksize=16):
            statuses[status] += 1
            applied.update(fixes)
            problems.extend((path, p) for p in found)
    print(f"files: {len(paths)} ({statuses['unreadable']} not lintable), fixed: {statuses['fixed']}, "
          f"fixes applied: {sum(applied.values())}, target {args.target}, {time.time() - start:.0f} s")
    for code, count in sorted(applied.items()):
        print(f"  {code}: {count}")
    print(f"problems: {len(problems)} in {len({p for p, _ in problems})} files")
    for path, problem in problems[: args.show]:
        print(f"  {path}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
