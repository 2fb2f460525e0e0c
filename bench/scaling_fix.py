"""How the fix work of one file grows with its findings: `check --output-format json` and `check --fix`.

    python bench/scaling_fix.py [--sizes 1000,2000,4000,8000,16000] [--repeats 1] [--shapes module,function]

Generates files with a fixable trigger (`x = torch.zeros(i).cuda()`, ASC601 under `--target npu --preview`)
repeated N times, at module level or inside one function, and times each command in a fresh process:
CPU time (user + sys of the child, the machine being shared) and its peak memory (max RSS). Prints a
markdown table and, per shape and command, time(largest) / time(smallest) (near-linear: about the size
ratio; docs/performance.md records the run). The part of bench/scaling.py about fixes and the fix
reporters: `scale_fix_and_json(...)` returns the rows.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
from typing import Dict, List, Sequence, Tuple

BASE = ["check", "--isolated", "--no-cache", "--preview", "--target", "npu", "--select", "ASC601", "-j", "1"]
COMMANDS = {"json": ["--output-format", "json"], "fix": ["--fix", "--unsafe-fixes"]}


def source(n: int, shape: str) -> str:
    """A file with `n` findings of ASC601, each with a fix."""
    if shape == "module":
        return "import torch\n\n" + "".join(f"x{i} = torch.zeros({i}).cuda()\n" for i in range(n))
    body = "".join(f"    x{i} = torch.zeros({i}).cuda()\n" for i in range(n))
    return "import torch\n\n\ndef f():\n" + body + "    return 0\n"


def _measure(args: Sequence[str], cwd: str) -> Tuple[float, int]:
    """(CPU seconds, peak RSS in MB) of one ascend-lint run in a child process."""
    pid = os.fork()
    if pid == 0:  # the child: run the command with output discarded
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.chdir(cwd)
        os.execv(sys.executable, [sys.executable, "-m", "ascend_lint", *args])
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def scale_fix_and_json(sizes: Sequence[int] = (1000, 2000, 4000, 8000, 16000), shapes: Sequence[str] = ("module",
                       "function"), repeats: int = 1) -> List[Dict[str, object]]:
    """Rows {shape, command, n, cpu_s, peak_mb} (the best of `repeats` runs, interleaved by size)."""
    rows: List[Dict[str, object]] = []
    work = tempfile.mkdtemp(prefix="ascend-lint-scaling-")
    try:
        for shape in shapes:
            for command, extra in COMMANDS.items():
                best: Dict[int, Tuple[float, int]] = {}
                for _ in range(repeats):
                    for n in sizes:
                        path = os.path.join(work, f"m{n}.py")
                        with open(path, "w", encoding="utf-8") as handle:
                            handle.write(source(n, shape))
                        cpu, peak = _measure(BASE + extra + [os.path.basename(path)], work)
                        old = best.get(n)
                        best[n] = (min(cpu, old[0]), max(peak, old[1])) if old else (cpu, peak)
                rows += [{"shape": shape, "command": command, "n": n, "cpu_s": best[n][0], "peak_mb": best[n][1]}
                         for n in sizes]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def table(rows: Sequence[Dict[str, object]]) -> str:
    out = ["| shape | command | findings | CPU s | peak MB |", "| --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['shape']} | {r['command']} | {r['n']:,} | {r['cpu_s']:.2f} | {r['peak_mb']} |")
    out.append("")
    out.append("| shape | command | time(largest) / time(smallest) |")
    out.append("| --- | --- | ---: |")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        for command in dict.fromkeys(r["command"] for r in rows):
            mine = [r for r in rows if r["shape"] == shape and r["command"] == command]
            if len(mine) > 1:
                ratio = float(mine[-1]["cpu_s"]) / max(float(mine[0]["cpu_s"]), 1e-9)
                out.append(f"| {shape} | {command} | {ratio:.1f} ({mine[-1]['n']:,} / {mine[0]['n']:,}) |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,4000,8000,16000")
    parser.add_argument("--shapes", default="module,function")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = scale_fix_and_json(sizes, args.shapes.split(","), args.repeats)
    print(table(rows))
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
