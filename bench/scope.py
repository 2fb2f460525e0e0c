"""Linting one script beside a large tree without a project marker costs about what the script alone costs
(issue 30): the project index holds the script and what it imports, never the tree around it.

    python bench/scope.py [--tree DIR] [--files 3000] [--repeat 5]

Builds, in a temporary directory, `alone/script.py` and `beside/script.py` next to a tree of `--files` Python
files (copied from `--tree`, e.g. ModelZoo-PyTorch's `PyTorch/built-in`; else this repository's sources
and examples, repeated) with no project marker anywhere above, then runs `ascend-lint check script.py` in
each, interleaved, cold (`--no-cache`) and warm (a result cache, second run on), and prints the CPU time
(user + sys, medians) and the ratio beside / alone. Target: ratio <= 2. This is a script, not a test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = "import os\n\nimport torch\nimport torch_npu\n\nx = torch.randn(4, 4).npu()\ny = x.t().contiguous() @ x\n"
MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def sources(tree: str) -> List[str]:
    found = []
    for directory, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(directory, f) for f in sorted(files) if f.endswith(".py")]
    return found


def build(workdir: str, tree: str, count: int) -> None:
    os.makedirs(os.path.join(workdir, "alone"))
    beside = os.path.join(workdir, "beside")
    os.makedirs(beside)
    for place in ("alone", "beside"):
        with open(os.path.join(workdir, place, "script.py"), "w", encoding="utf-8") as handle:
            handle.write(SCRIPT)
    pool = sources(tree)
    if not pool:
        raise SystemExit(f"bench: no Python files under {tree}")
    for number in range(count):
        src = pool[number % len(pool)]
        dst = os.path.join(beside, "tree", f"d{number // 100:03d}", f"m{number:05d}_{os.path.basename(src)}")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
    marked = [os.path.join(d, m) for d in [workdir, *parents(workdir)] for m in MARKERS
              if os.path.exists(os.path.join(d, m))]
    if marked:
        raise SystemExit(f"bench: a project marker above the bench directory ({marked[0]}): choose another TMPDIR")


def parents(path: str) -> List[str]:
    out = []
    while os.path.dirname(path) != path:
        path = os.path.dirname(path)
        out.append(path)
    return out


def cpu(argv: Sequence[str], cwd: str) -> float:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"bench: {' '.join(argv)} failed in {cwd}:\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=REPO, help="where the tree's files are copied from")
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(list(argv) or None)
    lint = [sys.executable, "-m", "ascend_lint", "check", "--exit-zero"]
    with tempfile.TemporaryDirectory(prefix="ascend-lint-scope-") as workdir:
        build(workdir, os.path.abspath(args.tree), args.files)
        runs: Dict[str, Dict[str, List[float]]] = {"cold": {}, "warm": {}}
        for place in ("alone", "beside"):  # (bytecode compiled, the warm cache filled)
            cpu(lint + ["--cache-dir", os.path.join(workdir, f"cache-{place}"), "script.py"],
                os.path.join(workdir, place))
        for _ in range(args.repeat):
            for place in ("alone", "beside"):
                cwd = os.path.join(workdir, place)
                runs["cold"].setdefault(place, []).append(cpu(lint + ["--no-cache", "script.py"], cwd))
                runs["warm"].setdefault(place, []).append(
                    cpu(lint + ["--cache-dir", os.path.join(workdir, f"cache-{place}"), "script.py"], cwd))
    print(f"One script beside a {args.files:,}-file tree without a project marker (CPU s, user + sys, median of "
          f"{args.repeat} interleaved runs):\n")
    print("| run | script alone | script beside the tree | ratio | target |")
    print("|---|---:|---:|---:|---|")
    worst = 0.0
    for kind, by_place in runs.items():
        alone, beside = statistics.median(by_place["alone"]), statistics.median(by_place["beside"])
        ratio = beside / alone
        worst = max(worst, ratio)
        print(f"| {kind} | {alone:.3f} | {beside:.3f} | {ratio:.2f}x | <= 2x {'PASS' if ratio <= 2 else 'FAIL'} |")
    return 0 if worst <= 2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
