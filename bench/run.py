"""Benchmark ascend-lint against the parse floor and against flake8's own parse, on a real corpus.

    python bench/run.py [DIR ...] [--repeat N] [--parts diffusers,stdlib] [--diffusers-dir DIR]

Default corpus: the sources of the pinned diffusers wheel (`pip download diffusers==0.31.0 --no-deps`
into a cache dir, unzipped; ~500 files of real PyTorch model code) and the running interpreter's
standard library (non-torch code); each DIR named is added as its own part. Every measurement is a
fresh process timed on the wall clock; repetitions are interleaved and the table shows medians from
this one run. Peak RSS comes from wait4() of each process. This is a script, not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

DIFFUSERS = "0.31.0"
HERE = os.path.dirname(os.path.abspath(__file__))
FLOOR = r"""
import ast, sys
with open(sys.argv[1], encoding="utf-8") as handle:
    paths = handle.read().splitlines()
for path in paths:
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        ast.parse(raw, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
"""
FLAKE8 = r"""
import sys
from flake8.main.cli import main
from flake8.plugins import finder

keep = set(filter(None, sys.argv[1].split(",")))
original = finder.find_plugins

def only(cfg, opts):  # flake8 runs every installed plugin whatever --select says: load just ours
    return [p for p in original(cfg, opts)
            if p.entry_point.group != "flake8.extension" or p.entry_point.name in keep]

finder.find_plugins = only
with open(sys.argv[2], encoding="utf-8") as handle:
    paths = handle.read().splitlines()
main(sys.argv[3:] + paths)
"""


@dataclass
class Part:
    name: str
    root: str
    files: List[str] = field(default_factory=list)
    lines: int = 0
    size: int = 0


@dataclass
class Row:
    part: Part
    label: str
    argv: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    walls: List[float] = field(default_factory=list)
    cpus: List[float] = field(default_factory=list)  # user + sys of the process and its workers
    rss: List[int] = field(default_factory=list)  # KiB

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)

    @property
    def median(self) -> float:
        """The time the row is judged by: CPU for one process (robust on a shared machine), wall
        for the parallel row (its point is the wall-clock gain)."""
        return self.wall if self.label == "jN" else self.cpu


# ----------------------------------------------------------------------------- corpus
def cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("ASCEND_LINT_BENCH_CACHE") or os.path.join(base, "ascend-lint-bench")


def diffusers_dir(given: Optional[str]) -> str:
    """The unpacked diffusers package: `given`, or the pinned wheel downloaded once into the cache."""
    if given:
        return os.path.abspath(given)
    root = os.path.join(cache_root(), f"diffusers-{DIFFUSERS}")
    package = os.path.join(root, "src", "diffusers")
    if os.path.isdir(package):
        return package
    wheels = os.path.join(root, "wheel")
    os.makedirs(wheels, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", f"diffusers=={DIFFUSERS}", "--no-deps",
                    "--only-binary", ":all:", "-d", wheels, "-q"], check=True)
    wheel = next(os.path.join(wheels, n) for n in os.listdir(wheels) if n.endswith(".whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(os.path.join(root, "src"))
    return package


def stdlib_dir() -> str:
    return sysconfig.get_paths()["stdlib"]


def collect(part: Part, workdir: str) -> None:
    """The files ascend-lint itself would lint there (same discovery, same excludes)."""
    from ascend_lint.config import Settings
    from ascend_lint.discovery import discover

    settings = Settings(project_root=workdir, respect_gitignore=False)
    targets, _ = discover([part.root], settings)
    part.files = [t.path for t in targets]
    for path in part.files:
        with open(path, "rb") as handle:
            raw = handle.read()
        part.size += len(raw)
        part.lines += raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)


# ----------------------------------------------------------------------------- measuring
def child_env(workdir: str, extra: Dict[str, str]) -> Dict[str, str]:
    """The environment of every measured process: bytecode cached (in the bench's own directory)
    as after a normal install, even where PYTHONDONTWRITEBYTECODE is set."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(workdir, "pycache"), **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: Sequence[str], cwd: str, env: Dict[str, str]) -> Tuple[float, float, int]:
    """Wall time, CPU time and peak RSS (KiB, the largest process of the run) of one command."""
    full_env = child_env(cwd, env)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench: {' '.join(argv[:6])} ... failed ({proc.returncode}):\n{err[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def flake8_plugin_registered() -> bool:
    from importlib import metadata

    return any(ep.name == "ASC" for ep in metadata.entry_points(group="flake8.extension"))


def plan(parts: Sequence[Part], workdir: str, jobs: int, flake8: bool) -> Tuple[List[Row], List[str]]:
    py = sys.executable
    rows: List[Row] = []
    notes: List[str] = []
    config = os.path.join(workdir, ".ascend-lint.yaml")
    with open(config, "w", encoding="utf-8") as handle:  # a pyenv or venv .gitignore may hide the stdlib
        handle.write("preview: true\nrespect-gitignore: false\n")
    lint = [py, "-m", "ascend_lint", "check", "--config", config, "--exit-zero", "-q"]
    have_flake8 = flake8 and flake8_plugin_registered()
    if flake8 and not have_flake8:
        notes.append("flake8 rows skipped: the ascend-lint flake8 plugin (entry point ASC) is not registered")
    for part in parts:
        listing = os.path.join(workdir, f"{part.name}.files")
        with open(listing, "w", encoding="utf-8") as handle:
            handle.write("\n".join(part.files) + "\n")
        cache = os.path.join(workdir, f"cache-{part.name}")
        rows.append(Row(part, "floor", [py, "-c", FLOOR, listing]))
        rows.append(Row(part, "j1", lint + ["--no-cache", "-j", "1", part.root]))
        rows.append(Row(part, "jN", lint + ["--no-cache", "-j", str(jobs), part.root]))
        rows.append(Row(part, "warm", lint + ["--cache-dir", cache, part.root]))
        if have_flake8:
            base = ["--isolated", "--jobs", "1", "--exit-zero"]
            rows.append(Row(part, "f8parse", [py, "-c", FLAKE8, "", listing] + base + ["--select", "E999"]))
            rows.append(Row(part, "f8asc", [py, "-c", FLAKE8, "ASC", listing] + base
                            + ["--select", "ASC", "--ascend-preview"]))
    return rows, notes


def run(rows: Sequence[Row], workdir: str, repeat: int, progress: Callable[[str], None]) -> None:
    empty = os.path.join(workdir, "empty")
    os.makedirs(empty, exist_ok=True)
    py = sys.executable
    timed([py, "-m", "ascend_lint", "check", "--isolated", "--no-cache", empty], workdir, {})  # compile once
    one = os.path.join(workdir, "one.files")
    for row in rows:  # flake8 and its plugins compiled once, on a single file
        if row.label.startswith("f8"):
            with open(one, "w", encoding="utf-8") as handle:
                handle.write(row.part.files[0] + "\n")
            listing = row.argv[4]
            timed([one if a == listing else a for a in row.argv], workdir, row.env)
    for row in rows:  # prime the warm cache (and the OS page cache) once
        if row.label in ("warm", "floor"):
            timed(row.argv, workdir, row.env)
    for rep in range(repeat):
        for row in rows:
            progress(f"rep {rep + 1}/{repeat}: {row.part.name} {row.label}")
            wall, cpu, rss = timed(row.argv, workdir, row.env)
            row.walls.append(wall)
            row.cpus.append(cpu)
            row.rss.append(rss)


# ----------------------------------------------------------------------------- the table
LABELS = {
    "floor": "parse floor (read + ast.parse, 1 process)",
    "j1": "ascend-lint check --no-cache -j 1",
    "jN": "ascend-lint check --no-cache -j {jobs}",
    "warm": "ascend-lint check, warm cache",
    "f8parse": "flake8 --select E999 (parse only)",
    "f8asc": "flake8 --select ASC (our plugin only)",
}


# The -j and warm-cache targets are set on the torch corpus: on the stdlib part the pre-filter leaves
# so little work (a cold run is ~0.15x its parse floor) that start-up and file hashing dominate both.
NOT_JUDGED = "(judged on the torch corpus)"


def table(rows: Sequence[Row], jobs: int) -> str:
    by = {(r.part.name, r.label): r for r in rows}
    out = ["| corpus | measurement | time s | ratio | target | files/s | lines/s | wall s | CPU s | peak RSS MiB |",
           "|---|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        part = row.part
        t = row.median
        ratio, target = "", ""
        floor = by.get((part.name, "floor"))
        j1 = by.get((part.name, "j1"))
        if row.label == "j1" and floor:
            r = t / floor.median
            limit = 0.2 if part.name == "stdlib" else 1.8
            ratio, target = f"{r:.2f}x floor", _verdict(r <= limit, f"<= {limit}x")
        elif row.label == "jN" and j1:
            r = j1.median / t
            ratio = f"{r:.2f}x faster than -j 1"
            target = _verdict(r >= 1.7, ">= 1.7x") if jobs >= 2 and part.name != "stdlib" else NOT_JUDGED
        elif row.label == "warm" and j1:
            r = t / j1.median
            ratio = f"{r:.3f}x cold -j 1"
            target = _verdict(r <= 0.1, "<= 0.1x") if part.name != "stdlib" else NOT_JUDGED
        elif row.label == "f8asc" and by.get((part.name, "f8parse")):
            base = by[(part.name, "f8parse")].median
            r = (t - base) / base
            ratio, target = f"adds {r:.2f}x of the parse-only run", _verdict(r <= 1.0, "<= 1.0x")
        rss = statistics.median(row.rss) / 1024
        rss_cell = f"{rss:.0f}"
        if row.label == "j1":
            rss_cell += " " + _verdict(rss <= 150, "<= 150")
        out.append(f"| {part.name} | {LABELS[row.label].format(jobs=jobs)} | {t:.3f} | {ratio} | {target} | "
                   f"{len(part.files) / t:,.0f} | {part.lines / t:,.0f} | {row.wall:.3f} | {row.cpu:.3f} | "
                   f"{rss_cell} |")
    return "\n".join(out)


def _verdict(ok: bool, what: str) -> str:
    return f"{what} {'met' if ok else 'MISSED'}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", metavar="DIR", help="more corpus directories (each its own part)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per measurement (median shown)")
    parser.add_argument("--parts", default="diffusers,stdlib", help="default parts to include ('' for none)")
    parser.add_argument("--diffusers-dir", help=f"an unpacked diffusers {DIFFUSERS} package (skips the download)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="the parallel row's -j")
    parser.add_argument("--no-flake8", action="store_true", help="skip the flake8 rows")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(HERE))
    wanted = [p for p in args.parts.split(",") if p]
    parts: List[Part] = []
    if "diffusers" in wanted:
        parts.append(Part("diffusers", diffusers_dir(args.diffusers_dir)))
    if "stdlib" in wanted:
        parts.append(Part("stdlib", stdlib_dir()))
    for d in args.dirs:
        parts.append(Part(os.path.basename(os.path.normpath(d)) or d, os.path.abspath(d)))
    if not parts:
        parser.error("no corpus: name a DIR or keep a default part")
    with tempfile.TemporaryDirectory(prefix="ascend-lint-bench-") as workdir:
        for part in parts:
            collect(part, workdir)
        rows, notes = plan(parts, workdir, args.jobs, not args.no_flake8)
        started = time.perf_counter()
        run(rows, workdir, args.repeat,
            lambda msg: print(f"\r\033[K{msg}", end="", file=sys.stderr, flush=True) if sys.stderr.isatty() else None)
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)
        import ascend_lint
        from ascend_lint.registry import load_registry, select_rules
        from ascend_lint.config import Settings

        rules, _ = select_rules(load_registry(), Settings(preview=True))
        print(f"ascend-lint {ascend_lint.__version__} ({len(rules)} rules, preview included), "
              f"Python {sys.version.split()[0]} ({sys.implementation.name}), {os.cpu_count()} CPUs, "
              f"{args.repeat} repetitions, medians; bench took {time.perf_counter() - started:.0f} s")
        for part in parts:
            ident = f"diffusers {DIFFUSERS} wheel" if part.name == "diffusers" else (
                f"Python {sys.version.split()[0]} stdlib" if part.name == "stdlib" else part.root)
            print(f"- {part.name}: {ident}: {len(part.files):,} files, {part.lines:,} lines, "
                  f"{part.size / 1e6:.1f} MB")
        print()
        print(table(rows, args.jobs))
        print("\ntime s: median CPU time (user + sys) for one-process rows, median wall time for the "
              "parallel row; files/s and lines/s use it.")
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"(wall times are only meaningful on an otherwise idle machine)")
        for note in notes:
            print(f"\nnote: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
