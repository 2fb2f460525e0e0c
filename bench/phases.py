"""Where a cold run's time goes, phase by phase, project model included (issue 16).

    python bench/phases.py DIR [DIR ...] [--repeat N]

For each tree: one process, `-j 1`, no cache, default rules, as `ascend-lint check --isolated .` runs
them; CPU seconds per phase (medians of `--repeat` runs, each phase timed around the functions that do
it), and the parse floor (read + `ast.parse` of every file linted, GC on) in the same process. Printed as
a Markdown table for docs/performance.md. In-process figures: interpreter start-up is not in them (see
bench/run.py for whole-process figures). This is a script, not a test.
"""
from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
import time
from typing import Dict, List, Sequence

PHASES = (
    ("discovery", "discovery and `.gitignore` files"),
    ("summaries", "project index: read, hash and text-summarise every file"),
    ("builds", "project model: builds and refreshes"),
    ("parse", "parse (GC paused; files some rule may match, and files read for tree facts)"),
    ("tree_facts", "tree facts of files that may hold them (step loops, precision)"),
    ("lint_rest", "lint pass besides parsing: read, gates, triggers, per-file model, walk, rules, noqa"),
    ("replay", "re-checking every result's project answers against the final model"),
)


def _timed(owner: object, name: str, key: str, spent: Dict[str, float], depth: List[int]) -> None:
    """Time calls of `owner.name` into spent[key] (outermost calls only, so recursion counts once)."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        if depth[0]:
            return original(*args, **kwargs)
        depth[0] += 1
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.process_time() - start
            depth[0] -= 1

    setattr(owner, name, wrapper)


def measure(tree: str) -> Dict[str, float]:
    """One cold run over `tree` in this process; CPU seconds per phase and the parse floor."""
    import ascend_lint.cli as cli
    from ascend_lint.analysis import model
    from ascend_lint.engine import linter as engine
    from ascend_lint.pipeline import index, run, runner

    spent: Dict[str, float] = {}
    targets = [(run, "discover", "discovery"), (index, "_summarise_files", "summaries"),
               (model.ProjectModel, "build", "builds"), (model.ProjectModel, "with_tree_facts", "builds"),
               (engine, "parse", "parse"), (engine, "summarize_tree", "tree_facts"),
               (runner, "_lint_one", "lint_all"), (runner, "replay", "replay")]
    originals = [(owner, name, owner.__dict__[name]) for owner, name, _key in targets]
    for owner, name, key in targets:
        _timed(owner, name, key, spent, [0])
    cwd = os.getcwd()
    os.chdir(tree)
    start = time.process_time()
    stdout = sys.stdout
    try:
        with open(os.devnull, "w") as sys.stdout:
            try:
                cli.main(["check", "--isolated", "--no-cache", "-j", "1", "--exit-zero", "."])
            except SystemExit:
                pass
        spent["total"] = time.process_time() - start
    finally:
        sys.stdout = stdout
        os.chdir(cwd)
        for owner, name, original in originals:
            setattr(owner, name, original)
    spent["lint_rest"] = spent.get("lint_all", 0.0) - spent.get("parse", 0.0) - spent.get("tree_facts", 0.0)
    start = time.process_time()
    for path in _lintable(tree):
        try:
            with open(path, "rb") as handle:
                ast.parse(handle.read(), path)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
            pass
    spent["floor"] = time.process_time() - start
    return spent


def _lintable(tree: str) -> List[str]:
    from ascend_lint.config import load_settings
    from ascend_lint.pipeline.discovery import discover

    targets, _ = discover([tree], load_settings(None, True, tree))
    return [t.path for t in targets]


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(list(argv) or None)
    columns = []
    for tree in args.trees:
        runs = [measure(tree) for _ in range(args.repeat)]
        columns.append({key: statistics.median(r.get(key, 0.0) for r in runs) for key in runs[0]})
    names = [os.path.basename(os.path.normpath(t)) for t in args.trees]
    print("| phase (CPU s, median of %d) | %s |" % (args.repeat, " | ".join(names)))
    print("|---|" + "---:|" * len(names))
    print("| **floor: read + `ast.parse` of every file, GC on** | %s |" % " | ".join(
        f"**{c['floor']:.2f}**" for c in columns))
    for key, label in PHASES:
        print(f"| {label} | " + " | ".join(f"{c.get(key, 0.0):.2f}" for c in columns) + " |")
    print("| **total (in-process, no start-up)** | %s |" % " | ".join(
        f"**{c['total']:.2f}** ({c['total'] / c['floor']:.2f}x floor)" for c in columns))


if __name__ == "__main__":
    main(sys.argv[1:])
