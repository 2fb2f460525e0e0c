"""Benchmark ascend-lint as a user runs it, against the parse floor and against peer linters.

    python bench/run.py [--corpora diffusers,stdlib,modelzoo] [--modelzoo DIR] [--repeat N]
                        [--preview] [--no-peers] [--write-docs docs/performance.md]

Corpora (copied once into a cache directory, `~/.cache/ascend-lint-bench` or $ASCEND_LINT_BENCH_CACHE,
so the bench may edit files without touching the originals):
- diffusers: the sources of the pinned diffusers wheel (`pip download diffusers==PIN --no-deps`);
- stdlib: the running interpreter's standard library (code that names no framework);
- modelzoo: an NPU training tree the user fetched (`--modelzoo`: ModelZoo-PyTorch's `PyTorch/built-in`
  at a pinned commit), as deterministic subsets of 1,000 / 5,000 / 20,000 files (the files with the
  smallest SHA-1 of their relative path), nested, for the scaling and 20,000-file figures.

Every measurement is a fresh process run from the corpus root as a user would run it
(`ascend-lint check .`, default rules unless --preview); wall time, CPU time (user + sys of the process
and its children) and peak RSS come from wait4(). The floor (read + `ast.parse` of every file the linter
lints, one process, cyclic GC on) and the linter runs are interleaved, repetition by repetition, and
the tables show medians with the spread (min-max). Peers (flake8 + flake8-bugbear, TorchFix, ruff)
run where installed, once each, as ratios to the same floor. This is a script, not a test.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
import zipfile
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

DIFFUSERS = "0.42.1"
MODELZOO_COMMIT = "6a2804a358a5"  # the ModelZoo-PyTorch commit docs/precision.md pins
SIZES = (1000, 5000, 20000)
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGETS = {
    "j1": 1.5,  # cold -j 1 wall <= 1.5x the floor's wall
    "jN": 1.7,  # -j 2 at least 1.7x faster than -j 1 (>= 1,000 files)
    "warm": 0.07,  # warm, nothing changed: <= 0.07x the cold -j 1 wall
    "warm1": 0.1,  # warm, one file changed: <= 0.1x
    "precommit": 1.0,  # 5 named files in a 20,000-file tree, warm: < 1 s wall
    "rss": 150.0,  # MiB at -j 1 on 20,000 files
    "linear": 1.15,  # ratio to the floor at 20k files <= 1.15x the ratio at 1k
}
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

drop = set(sys.argv[1].split(","))
original = finder.find_plugins

def without(cfg, opts):  # flake8 runs every installed plugin: leave out the ones not under test
    return [p for p in original(cfg, opts) if p.entry_point.group != "flake8.extension"
            or p.entry_point.name not in drop]

finder.find_plugins = without
main(sys.argv[2:])
"""


@dataclass
class Corpus:
    name: str
    root: str
    title: str
    files: List[str] = field(default_factory=list)  # relative to root
    lines: int = 0
    size: int = 0


@dataclass
class Row:
    corpus: Corpus
    key: str  # floor, j1, jN, warm, warm1, precommit, flake8, torchfix, ruff
    label: str
    argv: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    before: Optional[Callable[[int], None]] = None  # called with the repetition number before a run
    once: bool = False  # peers: one run is enough to place them
    walls: List[float] = field(default_factory=list)
    cpus: List[float] = field(default_factory=list)
    rss: List[float] = field(default_factory=list)  # MiB

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


# ----------------------------------------------------------------------------- corpora
def cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("ASCEND_LINT_BENCH_CACHE") or os.path.join(base, "ascend-lint-bench")


def lintable(root: str) -> List[str]:
    """The files ascend-lint lints under `root` (its own discovery, default excludes), relative."""
    from ascend_lint.config import Settings
    from ascend_lint.pipeline.discovery import discover

    targets, _ = discover([root], Settings(project_root=root, respect_gitignore=False))
    return [os.path.relpath(t.path, root) for t in targets]


def copy_tree(src: str, files: Sequence[str], dst: str) -> None:
    """Copy `files` (relative to src) to dst once; a finished copy is marked, an unfinished one redone."""
    mark = os.path.join(dst, ".bench-complete")
    if os.path.exists(mark):
        return
    shutil.rmtree(dst, ignore_errors=True)
    for rel in files:
        target = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(src, rel), target)
    with open(mark, "w", encoding="utf-8") as handle:
        handle.write(f"{len(files)} files\n")


def diffusers_corpus() -> Corpus:
    root = os.path.join(cache_root(), f"diffusers-{DIFFUSERS}")
    package = os.path.join(root, "src", "diffusers")
    if not os.path.isdir(package):
        wheels = os.path.join(root, "wheel")
        os.makedirs(wheels, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", f"diffusers=={DIFFUSERS}", "--no-deps",
                        "--only-binary", ":all:", "-d", wheels, "-q"], check=True)
        wheel = next(os.path.join(wheels, n) for n in os.listdir(wheels) if n.endswith(".whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(os.path.join(root, "src"))
    return Corpus("diffusers", package, f"diffusers {DIFFUSERS} wheel (PyTorch library code)")


def stdlib_corpus() -> Corpus:
    version = sys.version.split()[0]
    src = sysconfig.get_paths()["stdlib"]
    dst = os.path.join(cache_root(), f"stdlib-{version}")
    copy_tree(src, lintable(src), dst)
    return Corpus("stdlib", dst, f"Python {version} standard library (names no framework)")


def modelzoo_corpora(src: str) -> List[Corpus]:
    files = sorted(lintable(src), key=lambda rel: hashlib.sha1(rel.encode()).hexdigest())
    out = []
    for size in SIZES:
        if size > len(files):
            continue
        dst = os.path.join(cache_root(), f"modelzoo-{MODELZOO_COMMIT}-{size}")
        copy_tree(src, files[:size], dst)
        out.append(Corpus(f"modelzoo-{size // 1000}k", dst,
                          f"ModelZoo-PyTorch@{MODELZOO_COMMIT} PyTorch/built-in, {size:,} of {len(files):,} files "
                          "(NPU training code)"))
    return out


def measure_corpus(corpus: Corpus) -> None:
    corpus.files = lintable(corpus.root)
    for rel in corpus.files:
        with open(os.path.join(corpus.root, rel), "rb") as handle:
            raw = handle.read()
        corpus.size += len(raw)
        corpus.lines += raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)


# ----------------------------------------------------------------------------- running
def child_env(workdir: str, extra: Dict[str, str]) -> Dict[str, str]:
    """Bytecode cached (in the bench's own directory) as after a normal install, even where
    PYTHONDONTWRITEBYTECODE is set."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(workdir, "pycache"), **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: Sequence[str], cwd: str, env: Dict[str, str], workdir: str) -> Tuple[float, float, float]:
    """Wall s, CPU s (user + sys, children included) and peak RSS MiB of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=child_env(workdir, env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"bench: {' '.join(argv[:8])} ... failed ({code}):\n{err[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _changer(path: str) -> Callable[[int], None]:
    """Before each repetition, give one file new content (a trailing comment that names the run)."""
    with open(path, "rb") as handle:
        original = handle.read()

    def write(data: bytes) -> None:
        with open(path, "wb") as handle:
            handle.write(data)

    def change(rep: int) -> None:
        write(original + f"\n# bench edit {rep} {time.time()}\n".encode())
    change.restore = lambda: write(original)  # type: ignore[attr-defined]
    return change


def plan(corpora: Sequence[Corpus], workdir: str, jobs: int, preview: bool, peers: bool) -> List[Row]:
    py = sys.executable
    lint = [py, "-m", "ascend_lint", "check", "--isolated", "--exit-zero"] + (["--preview"] if preview else [])
    rows: List[Row] = []
    for corpus in corpora:
        listing = os.path.join(workdir, f"{corpus.name}.files")
        with open(listing, "w", encoding="utf-8") as handle:
            handle.write("\n".join(os.path.join(corpus.root, f) for f in corpus.files) + "\n")
        cache = os.path.join(workdir, f"cache-{corpus.name}")
        scaling_only = corpus.name in ("modelzoo-1k", "modelzoo-5k")
        rows.append(Row(corpus, "floor", "parse floor (read + ast.parse, 1 process)", [py, "-c", FLOOR, listing]))
        rows.append(Row(corpus, "j1", "ascend-lint check --no-cache -j 1", lint + ["--no-cache", "-j", "1", "."]))
        if scaling_only:
            continue
        rows.append(Row(corpus, "jN", f"ascend-lint check --no-cache -j {jobs}",
                        lint + ["--no-cache", "-j", str(jobs), "."]))
        rows.append(Row(corpus, "warm", "warm cache, nothing changed", lint + ["--cache-dir", cache, "."]))
        changed = sorted(corpus.files)[len(corpus.files) // 2]
        rows.append(Row(corpus, "warm1", "warm cache, one file changed", lint + ["--cache-dir", cache, "."],
                        before=_changer(os.path.join(corpus.root, changed))))
        if corpus.name == "modelzoo-20k":
            named = sorted(corpus.files, key=lambda rel: hashlib.sha1(rel.encode()).hexdigest())[:5]
            rows.append(Row(corpus, "precommit", "pre-commit: 5 named files, warm cache",
                            lint + ["--cache-dir", cache] + named))
        if peers and corpus.name != "modelzoo-20k":
            rows.extend(peer_rows(corpus, py))
    return rows


def peer_rows(corpus: Corpus, py: str) -> List[Row]:
    rows = []
    if _installed("flake8") and _installed("flake8-bugbear"):
        rows.append(Row(corpus, "flake8", "flake8 + flake8-bugbear --jobs 1 (peer)",
                        [py, "-c", FLAKE8, "ASC,TOR", "--isolated", "--jobs", "1", "--exit-zero", "."], once=True))
    torchfix = _tool("torchfix", py)
    if torchfix:
        rows.append(Row(corpus, "torchfix", "TorchFix -j 1 (peer)", [torchfix, "-j", "1", "."], once=True))
    ruff = _tool("ruff", py)
    if ruff:
        rows.append(Row(corpus, "ruff", "ruff check, 1 thread (peer)",
                        [ruff, "check", "--isolated", "--no-cache", "--exit-zero", "."],
                        env={"RAYON_NUM_THREADS": "1"}, once=True))
    return rows


def _tool(name: str, py: str) -> Optional[str]:
    """A peer's executable: beside this interpreter (its venv) or on PATH."""
    beside = os.path.join(os.path.dirname(py), name)
    return beside if os.path.exists(beside) else shutil.which(name)


def _installed(dist: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(dist)
        return True
    except metadata.PackageNotFoundError:
        return False


def run(rows: Sequence[Row], workdir: str, repeat: int, progress: Callable[[str], None]) -> None:
    empty = os.path.join(workdir, "empty")
    os.makedirs(empty, exist_ok=True)
    py = sys.executable
    timed([py, "-m", "ascend_lint", "check", "--isolated", "--no-cache", "."], empty, {}, workdir)  # compile once
    for row in rows:  # prime caches (result cache, OS page cache) and compile every tool once
        if row.key in ("floor", "warm") or row.once:
            progress(f"priming: {row.corpus.name} {row.key}")
            timed(row.argv, row.corpus.root, row.env, workdir)
    time.sleep(2.5)  # files copied or changed < 2 s before a run are re-hashed ("racy"): let them age
    for row in rows:
        if row.key == "warm":
            timed(row.argv, row.corpus.root, row.env, workdir)
    try:
        for rep in range(repeat):
            for row in rows:
                if row.once and rep:
                    continue
                progress(f"rep {rep + 1}/{repeat}: {row.corpus.name} {row.key}")
                if row.before is not None:
                    row.before(rep)
                wall, cpu, rss = timed(row.argv, row.corpus.root, row.env, workdir)
                row.walls.append(wall)
                row.cpus.append(cpu)
                row.rss.append(rss)
    finally:
        for row in rows:
            restore = getattr(row.before, "restore", None)
            if restore is not None:
                restore()


# ----------------------------------------------------------------------------- verdicts and tables
def _spread(values: Sequence[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else "1 run"


def _verdict(ok: bool, what: str) -> str:
    return f"{what} {'PASS' if ok else 'FAIL'}"


# Below this cold -j 1 wall time, start-up (~0.2 s of interpreter and imports) dominates a run: the -j
# and warm ratios then measure start-up, not the linter (the stdlib, where 23 of 1,789 files are parsed).
MIN_WORK_S = 3.0


def judge(row: Row, by: Dict[Tuple[str, str], Row], jobs: int) -> Tuple[str, str]:
    """(ratio text, target text with PASS/FAIL) of one row."""
    floor = by.get((row.corpus.name, "floor"))
    j1 = by.get((row.corpus.name, "j1"))
    key = row.key
    if key in ("jN", "warm", "warm1") and j1 and j1.wall < MIN_WORK_S:
        ratio = j1.wall / row.wall if key == "jN" else row.wall / j1.wall
        text = f"{ratio:.2f}x faster than -j 1" if key == "jN" else f"{ratio:.3f}x cold -j 1"
        return text, f"(not judged: cold -j 1 takes {j1.wall:.2f} s < {MIN_WORK_S:.0f} s, mostly start-up)"
    if key == "j1" and floor:
        ratio = row.wall / floor.wall
        text = f"{ratio:.2f}x floor wall ({row.cpu / floor.cpu:.2f}x CPU)"
        target = _verdict(ratio <= TARGETS["j1"], f"<= {TARGETS['j1']}x")
        if len(row.corpus.files) >= 20000 * 0.99:
            target += "; " + _verdict(statistics.median(row.rss) <= TARGETS["rss"], f"RSS <= {TARGETS['rss']:.0f} MiB")
        return text, target
    if key == "jN" and j1:
        ratio = j1.wall / row.wall
        judged = jobs >= 2 and len(row.corpus.files) >= 1000 and (os.cpu_count() or 1) >= 2
        return (f"{ratio:.2f}x faster than -j 1",
                _verdict(ratio >= TARGETS["jN"], f">= {TARGETS['jN']}x") if judged else "(not judged: < 1,000 files)")
    if key in ("warm", "warm1") and j1:
        ratio = row.wall / j1.wall
        return f"{ratio:.3f}x cold -j 1", _verdict(ratio <= TARGETS[key], f"<= {TARGETS[key]}x")
    if key == "precommit":
        return f"{row.wall:.2f} s", _verdict(row.wall < TARGETS["precommit"], f"< {TARGETS['precommit']:.0f} s")
    if key in ("flake8", "torchfix", "ruff") and floor:
        return f"{row.wall / floor.wall:.2f}x floor wall ({row.cpu / floor.cpu:.2f}x CPU)", ""
    return "", ""


def scaling(rows: Sequence[Row]) -> List[str]:
    """The 1k / 5k / 20k lines: ratio to the floor should not grow with the tree."""
    by = {(r.corpus.name, r.key): r for r in rows}
    points = []
    for size in SIZES:
        name = f"modelzoo-{size // 1000}k"
        if (name, "j1") in by and (name, "floor") in by:
            j1, floor = by[(name, "j1")], by[(name, "floor")]
            points.append((size, j1, floor))
    if len(points) < 2:
        return []
    out = ["| files | MB | floor wall s | -j 1 wall s | -j 1 CPU s | ms per file (-j 1 wall) | ratio to floor (wall) |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for size, j1, floor in points:
        out.append(f"| {size:,} | {j1.corpus.size / 1e6:.1f} | {floor.wall:.2f} | {j1.wall:.2f} | {j1.cpu:.2f} | "
                   f"{1000 * j1.wall / len(j1.corpus.files):.2f} | {j1.wall / floor.wall:.2f}x |")
    first, last = points[0], points[-1]
    grow = (last[1].wall / last[2].wall) / (first[1].wall / first[2].wall)
    out.append("")
    limit = TARGETS["linear"]
    out.append(f"Linear growth: the ratio to the floor at {last[0]:,} files is {grow:.2f}x the ratio at "
               f"{first[0]:,} files: {_verdict(grow <= limit, f'<= {limit}x')}.")
    return out


def tables(rows: Sequence[Row], jobs: int) -> List[str]:
    by = {(r.corpus.name, r.key): r for r in rows}
    out = ["| corpus | measurement | wall s (median, min-max) | CPU s (median, min-max) | ratio | target | "
           "peak RSS MiB |",
           "|---|---|---:|---:|---|---|---:|"]
    for row in rows:
        ratio, target = judge(row, by, jobs)
        out.append(f"| {row.corpus.name} | {row.label} | {row.wall:.2f} ({_spread(row.walls)}) | "
                   f"{row.cpu:.2f} ({_spread(row.cpus)}) | {ratio} | {target} | {statistics.median(row.rss):.0f} |")
    return out


def report(corpora: Sequence[Corpus], rows: Sequence[Row], args: argparse.Namespace, took: float) -> str:
    import ascend_lint
    from ascend_lint.config import Settings
    from ascend_lint.registry import load_registry, select_rules

    rules, _ = select_rules(load_registry(), Settings(preview=args.preview))
    rule_set = "preview included" if args.preview else "default set"
    lines = [f"ascend-lint {ascend_lint.__version__}, {len(rules)} rules ({rule_set}); "
             f"Python {sys.version.split()[0]} ({sys.implementation.name}); {os.cpu_count()} CPUs; "
             f"{args.repeat} interleaved repetitions, medians; peers run once; bench took {took:.0f} s; "
             f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}.", ""]
    for corpus in corpora:
        lines.append(f"- {corpus.name}: {corpus.title}: {len(corpus.files):,} files, {corpus.lines:,} lines, "
                     f"{corpus.size / 1e6:.1f} MB")
    lines.append("")
    lines += tables(rows, args.jobs)
    grow = scaling(rows)
    if grow:
        lines += ["", "Scaling on the NPU training tree (cold, -j 1):", ""] + grow
    verdicts = [judge(r, {(x.corpus.name, x.key): x for x in rows}, args.jobs)[1] for r in rows]
    verdicts += [g for g in grow if "PASS" in g or "FAIL" in g]
    fails = sum(v.count("FAIL") for v in verdicts)
    passes = sum(v.count("PASS") for v in verdicts)
    lines += ["", f"Targets: {passes} PASS, {fails} FAIL."]
    return "\n".join(lines)


BEGIN, END = "<!-- bench/run.py output: begin -->", "<!-- bench/run.py output: end -->"


def write_docs(path: str, text: str) -> None:
    """Replace the marked section of `path` with the bench output."""
    with open(path, encoding="utf-8") as handle:
        doc = handle.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"bench: {path} has no '{BEGIN}' ... '{END}' section to replace")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default="diffusers,stdlib,modelzoo",
                        help="which corpora (diffusers, stdlib, modelzoo; comma-separated)")
    parser.add_argument("--modelzoo", help="ModelZoo-PyTorch's PyTorch/built-in directory (fetched by you)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions (medians shown)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="the parallel row's -j")
    parser.add_argument("--preview", action="store_true", help="run every rule, preview included")
    parser.add_argument("--no-peers", action="store_true", help="skip flake8 + bugbear, TorchFix and ruff")
    parser.add_argument("--write-docs", metavar="MD", help="also write the tables into MD's marked section")
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO)
    wanted = [c for c in args.corpora.split(",") if c]
    corpora: List[Corpus] = []
    if "diffusers" in wanted:
        corpora.append(diffusers_corpus())
    if "stdlib" in wanted:
        corpora.append(stdlib_corpus())
    if "modelzoo" in wanted:
        if not args.modelzoo:
            print("bench: modelzoo skipped (name its PyTorch/built-in directory with --modelzoo)", file=sys.stderr)
        else:
            corpora += modelzoo_corpora(os.path.abspath(args.modelzoo))
    if not corpora:
        parser.error("no corpus")
    for corpus in corpora:
        measure_corpus(corpus)
    import tempfile

    tty = sys.stderr.isatty()
    progress = (lambda msg: print(f"\r\033[K{msg}", end="", file=sys.stderr, flush=True)) if tty else (lambda msg: None)
    with tempfile.TemporaryDirectory(prefix="ascend-lint-bench-") as workdir:
        rows = plan(corpora, workdir, args.jobs, args.preview, not args.no_peers)
        started = time.perf_counter()
        run(rows, workdir, args.repeat, progress)
        if tty:
            print("\r\033[K", end="", file=sys.stderr)
        text = report(corpora, rows, args, time.perf_counter() - started)
    print(text)
    if args.write_docs:
        write_docs(args.write_docs, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
