"""Benchmark the project model (issue 12): what it costs on top of the linter, as a user runs it.

    python bench/project.py [--tree DIR ...] [--big DIR] [--before PYTHON [--now PYTHON] [--only-before]] [--repeat N]

Prints, for `--tree` (default: this repository; the figures in docs/performance.md name the tree used):
  cold    one process, -j 1, no cache: the project model (index of every file, provisional model, lint,
          final model, re-lint of changed answers) vs the same run without it (rules see only their file);
          target <= 1.15x;
  changed a run with a warm cache where one file changed (a comment appended to the largest file) vs the
          cold run with the model; target <= 0.1x;
  reshaped a run with a warm cache where one file's shape changed (a function appended to the largest file):
          the stored model no longer serves, so every summary is read from the project store and the model
          is built again (what the store's summaries cost to load);
and for `--big` (a ~20,000-file tree): the pre-commit case, 5 named files with a warm index, target < 1 s
(the 5 files unchanged since the last run, and the same 5 files just edited).
With `--before PYTHON` (an interpreter where the release the issue was filed against is installed, the
project before its model: `git worktree add DIR e45bda1` and `pip install DIR` into a fresh venv), the
cold run as a user runs it (`ascend-lint check --isolated --no-cache -j 1`) of that release and of this
one (`--now PYTHON`: best a fresh venv with `pip install .`, so that both start the same way), on every
`--tree`, with the same rules passed to both: today's default set, and the release's default set (the
rules of "today" when the issue was filed); a Markdown table; target <= 1.15x.
Each figure is the median of `--repeat` runs, configurations interleaved, each run a fresh process with its
bytecode cached (PYTHONDONTWRITEBYTECODE is dropped for the measured processes, as after an install); wall
and CPU (user+sys of the child) are both shown. Another workload on the machine makes wall times noisy:
compare the CPU column, and read the spread. This is a script, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
mode, root, cache_dir = sys.argv[1], sys.argv[2], sys.argv[3]
paths = sys.argv[4:] or [root]
from ascend_lint.config import load_settings
from ascend_lint.pipeline.discovery import discover
from ascend_lint.engine.linter import Linter, NoProject
from ascend_lint.registry import load_registry, select_rules
from ascend_lint.pipeline.runner import lint_targets
os.chdir(root)
settings = load_settings(None, True, root)
if cache_dir != "-":
    settings = settings.override(cache_dir=cache_dir)
registry = load_registry()
rules, _ = select_rules(registry, settings)
targets, _ = discover(paths, settings)
cache = index = None
if mode == "baseline":
    linter = Linter(rules, settings, project=NoProject())
    if cache_dir != "-":
        from ascend_lint.pipeline.cache import ResultCache
        cache = ResultCache.open(settings, rules, registry.fingerprint())
else:
    from ascend_lint.pipeline.index import ProjectIndex
    linter = Linter(rules, settings)
    from ascend_lint.rule import wants_precision
    index = ProjectIndex.open(paths, settings, cache=cache_dir != "-", listed=[t.path for t in targets],
                              precision=wants_precision(rules))
    if cache_dir != "-":
        from ascend_lint.pipeline.cache import ResultCache
        cache = ResultCache.open(settings, rules, registry.fingerprint(), project=True)
results = lint_targets(linter, targets, 1, cache=cache, keep_sources=False, index=index)
print(json.dumps({"wall": time.perf_counter() - t0, "files": len(targets),
                  "findings": sum(len(r.findings) for r in results)}))
"""


def child_env() -> Dict[str, str]:
    """The measured processes' environment: bytecode written and read (a user's install has it)."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(tempfile.gettempdir(), "ascend-bench-pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(mode: str, root: str, cache_dir: str, paths: Sequence[str] = ()) -> Dict[str, float]:
    """One fresh process; wall from inside it (imports included), CPU of the child from the OS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, root, cache_dir, *paths], capture_output=True,
                          text=True, cwd=HERE, env=child_env())
    outer = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["outer"] = outer
    data["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return data


def median(rows: List[Dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def spread(rows: List[Dict[str, float]], key: str) -> str:
    values = [r[key] for r in rows]
    return f"{min(values):.2f}-{max(values):.2f}"


def largest_file(root: str) -> str:
    best, size = "", -1
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                if os.path.getsize(path) > size:
                    best, size = path, os.path.getsize(path)
    return best


def bench_tree(tree: str, repeat: int) -> None:
    work = tempfile.mkdtemp(prefix="ascend-bench-")
    try:
        copy = os.path.join(work, "tree")
        shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns(".git", ".ascend_lint_cache"))
        rows: Dict[str, List[Dict[str, float]]] = {"baseline": [], "model": [], "changed": [], "changed0": [],
                                                   "reshaped": []}
        target = largest_file(copy)
        for i in range(repeat):
            rows["baseline"].append(run("baseline", copy, "-"))
            rows["model"].append(run("model", copy, "-"))
            cache = os.path.join(work, f"cache{i}")
            run("model", copy, cache)  # fills the cache
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(f"# bench edit {i}\n")
            rows["changed"].append(run("model", copy, cache))
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(f"\n\ndef _bench_added_{i}():\n    pass\n")
            rows["reshaped"].append(run("model", copy, cache))
            plain = os.path.join(work, f"plain{i}")
            run("baseline", copy, plain)
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(f"# bench edit {i} again\n")
            rows["changed0"].append(run("baseline", copy, plain))
        base, model, changed = (median(rows[k], "cpu") for k in ("baseline", "model", "changed"))
        wall_base, wall_model, wall_changed = (median(rows[k], "wall") for k in ("baseline", "model", "changed"))
        files = rows["model"][0]["files"]
        print(f"tree: {tree} ({files} files), {repeat} interleaved runs, medians (spread min-max)")
        print(f"  cold -j1, no model    cpu {base:7.2f} s ({spread(rows['baseline'], 'cpu')})   wall {wall_base:7.2f} s")
        print(f"  cold -j1, with model  cpu {model:7.2f} s ({spread(rows['model'], 'cpu')})   wall {wall_model:7.2f} s"
              f"   ratio cpu {model / base:.3f}x, wall {wall_model / wall_base:.3f}x  (target <= 1.15x)")
        print(f"  one file changed      cpu {changed:7.2f} s ({spread(rows['changed'], 'cpu')})   wall {wall_changed:7.2f} s"
              f"   vs cold with model: cpu {changed / model:.3f}x, wall {wall_changed / wall_model:.3f}x  (target <= 0.1x)")
        reshaped = median(rows["reshaped"], "cpu")
        print(f"  one file reshaped     cpu {reshaped:7.2f} s ({spread(rows['reshaped'], 'cpu')})"
              f"   (every stored summary loaded, the model built again)")
        changed0 = median(rows["changed0"], "cpu")
        print(f"  one file changed, no model: cpu {changed0:7.2f} s ({spread(rows['changed0'], 'cpu')})"
              f"   ({changed0 / base:.3f}x the cold run without the model: start-up, discovery and that file)")
        same = {r["findings"] for r in rows["baseline"]}, {r["findings"] for r in rows["model"]}
        print(f"  findings: without model {sorted(same[0])}, with model {sorted(same[1])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_precommit(source: str, repeat: int) -> None:
    work = tempfile.mkdtemp(prefix="ascend-bench-")
    try:
        big = os.path.join(work, "tree")
        shutil.copytree(source, big, symlinks=True, ignore=shutil.ignore_patterns(".git", ".ascend_lint_cache"))
        cache = os.path.join(work, "cache")
        files = []
        for directory, dirs, names in os.walk(big):
            dirs.sort()
            files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
        picks = [files[(i * len(files)) // 5] for i in range(5)]
        start = time.perf_counter()
        warm = run("model", big, cache)  # the first run indexes the tree
        print(f"pre-commit: {source} ({warm['files']} files); indexing run {time.perf_counter() - start:.1f} s")
        rows = {"unchanged": [], "edited": []}
        for _ in range(repeat):
            rows["unchanged"].append(run("model", big, cache, picks))
            for path in picks:
                with open(path, "ab") as handle:
                    handle.write(f"\n# bench edit {time.time_ns()}\n".encode())
            rows["edited"].append(run("model", big, cache, picks))
        for key, label in (("unchanged", "5 files, unchanged"), ("edited", "5 files, just edited")):
            print(f"  {label:20s} wall {median(rows[key], 'outer'):.2f} s ({spread(rows[key], 'outer')}) "
                  f"cpu {median(rows[key], 'cpu'):.2f} s   (target < 1 s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


BEFORE = "e45bda1"  # the commit issue 12 measured "today's cold run" on: the linter before its project model


def default_codes(python: str) -> List[str]:
    """The codes of the default rule set of the ascend-lint installed for `python` (core rules left out)."""
    proc = subprocess.run([python, "-m", "ascend_lint", "rules", "--output-format", "json"], capture_output=True,
                          text=True, check=True)
    return sorted(r["code"] for r in json.loads(proc.stdout) if r["status"] == "default" and r["pack"] != "core")


def cold_cli_run(python: str, tree: str, codes: Sequence[str], env: Dict[str, str]) -> Dict[str, float]:
    """One cold CLI run as a user runs it (`-j 1`, no cache, `codes` selected), wall and CPU from the OS."""
    argv = [python, "-m", "ascend_lint", "check", "--isolated", "--no-cache", "-j", "1", "--exit-zero", "-q",
            "--preview", "--select", ",".join(codes), "."]
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=tree, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return {"wall": wall, "cpu": (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)}


def bench_before(trees: Sequence[str], before: str, now: str, repeat: int) -> None:
    """The cold CLI run of this version (project model on) against the release before the project model, on
    each tree, with two rule sets passed to both: today's default set and the release's default set (the
    rules that were "today's" when the issue was filed). Both interpreters run with their bytecode cached
    (as after any install; PYTHONDONTWRITEBYTECODE is dropped) after one unmeasured warm-up run each; give
    both a fresh venv with a plain `pip install` so that neither pays for a heavier `site`."""
    env = child_env()
    readings = {"today's default rules": default_codes(now), f"{BEFORE}'s default rules": default_codes(before)}
    print(f"cold -j 1 CLI runs, this version ({now}) vs the release before the project model ({BEFORE}, {before}); "
          f"{repeat} interleaved runs, medians, CPU s (user+sys); target <= 1.15x")
    for label, codes in readings.items():
        print(f"- {label}: {','.join(codes)}")
    print()
    print("| tree | files | rules | release CPU s | this version CPU s | ratio (CPU) | ratio (wall) |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for tree in trees:
        files = sum(1 for _d, _s, names in os.walk(tree) for n in names if n.endswith(".py"))
        for label, codes in readings.items():
            rows: Dict[str, List[Dict[str, float]]] = {"before": [], "now": []}
            for python in (before, now):
                cold_cli_run(python, tree, codes, env)  # (warm-up: bytecode written, files in the page cache)
            for _ in range(repeat):
                for key, python in (("before", before), ("now", now)):
                    rows[key].append(cold_cli_run(python, tree, codes, env))
            cpu = {k: median(v, "cpu") for k, v in rows.items()}
            wall = {k: median(v, "wall") for k, v in rows.items()}
            print(f"| {os.path.basename(os.path.normpath(tree))} | {files:,} | {label} | "
                  f"{cpu['before']:.2f} ({spread(rows['before'], 'cpu')}) | {cpu['now']:.2f} "
                  f"({spread(rows['now'], 'cpu')}) | {cpu['now'] / cpu['before']:.2f}x | "
                  f"{wall['now'] / wall['before']:.2f}x |", flush=True)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", help="a tree to measure (repeatable; default: this repository)")
    parser.add_argument("--big", help="a ~20,000-file tree for the pre-commit case (copied; the copy is edited)")
    parser.add_argument("--before", help="an interpreter with the release before the project model installed")
    parser.add_argument("--now", default=sys.executable,
                        help="the interpreter of this version for --before (default: this one; best a fresh venv)")
    parser.add_argument("--only-before", action="store_true", help="with --before: only the comparison with it")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(list(argv) or None)
    trees = args.tree or [os.path.dirname(HERE)]
    if not args.only_before:
        for tree in trees:
            bench_tree(tree, args.repeat)
    if args.before:
        bench_before(trees, args.before, args.now, args.repeat)
    if args.big:
        bench_precommit(args.big, args.repeat)


if __name__ == "__main__":
    main(sys.argv[1:])
