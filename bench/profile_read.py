"""Read speed and peak memory of the profile reader on a generated trace_view.json.

    python bench/profile_read.py [--size-mb 500] [--layers 400] [--padding 16] [--with-csv] [--keep DIR]
                                 [--repeat N]

Writes a torch_npu profile of the test training script (tests/profile_fixtures.py) whose trace_view.json
grows to about --size-mb (steps of --layers forward blocks each), then runs `read_profile` on it in a
fresh child process and prints the trace size, wall time, MB/s and the child's peak RSS
(resource.getrusage(RUSAGE_CHILDREN).ru_maxrss; the interpreter and imports alone are also printed).
A script, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

import profile_fixtures as fixtures  # noqa: E402

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from ascend_lint.profile import read_profile
imported = time.perf_counter()
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
profile = read_profile(sys.argv[1], project_root=sys.argv[2])
done = time.perf_counter()
print(json.dumps({"seconds": done - imported, "import_seconds": imported - start, "base_rss_kib": base_rss,
                  "steps": len(profile.steps), "lines": len(profile.line_costs),
                  "observations": sorted({o.code for o in profile.observations}),
                  "share": profile.mapping.step_share,
                  "diagnostics": [d.message for d in profile.diagnostics if d.severity != "info"]}))
"""


def generate(base: str, size_mb: float, layers: int, padding: int, with_csv: bool) -> str:
    """A profile whose trace_view.json is about `size_mb` MB: as many steps as that takes."""
    target = int(size_mb * 1e6)
    bytes_per_step = _bytes_per_step(base, layers, padding)
    steps = max(2, round(target / bytes_per_step))
    return fixtures.write_torch_profile(base, steps=range(1, steps + 1), layers=layers, padding=padding,
                                        trace_only=not with_csv)


def _bytes_per_step(base: str, layers: int, padding: int) -> float:
    probe = os.path.join(base, "probe")
    root = fixtures.write_torch_profile(probe, steps=range(1, 3), layers=layers, padding=padding, trace_only=True)
    size = os.path.getsize(os.path.join(root, "ASCEND_PROFILER_OUTPUT", "trace_view.json"))
    shutil.rmtree(probe)
    return size / 2


def measure(root: str, project: str) -> dict:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    wall = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, root, project], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    wall = time.perf_counter() - wall
    result = json.loads(out.stdout)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["peak_rss_mb"] = max(usage.ru_maxrss, before) / 1024.0
    result["child_cpu_seconds"] = usage.ru_utime + usage.ru_stime - cpu_before
    result["wall_seconds"] = wall
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=500.0)
    parser.add_argument("--layers", type=int, default=400, help="forward blocks per step (operators per step / 10)")
    parser.add_argument("--padding", type=int, default=16,
                        help="library frames added to every call stack (real model/trainer stacks are 20-30 deep)")
    parser.add_argument("--with-csv", action="store_true", help="also write and read kernel_details.csv etc.")
    parser.add_argument("--keep", help="generate into this directory and keep it")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="ascend-lint-profile-bench-")
    try:
        project = fixtures.write_project(os.path.join(base, "project"), fixtures.TORCH_PROJECT)
        started = time.perf_counter()
        root = generate(base, args.size_mb, args.layers, args.padding, args.with_csv)
        trace = os.path.join(root, "ASCEND_PROFILER_OUTPUT", "trace_view.json")
        size_mb = os.path.getsize(trace) / 1e6
        print(f"generated {size_mb:.1f} MB trace_view.json in {time.perf_counter() - started:.1f} s ({trace})")
        for run in range(args.repeat):
            result = measure(root, project)
            load = os.getloadavg()[0]
            print(f"run {run + 1}: {size_mb:.1f} MB read in {result['seconds']:.2f} s wall = "
                  f"{size_mb / result['seconds']:.1f} MB/s; child CPU {result['child_cpu_seconds']:.2f} s = "
                  f"{size_mb / result['child_cpu_seconds']:.1f} MB per CPU-second (load average {load:.1f} on "
                  f"{os.cpu_count()} CPUs; imports {result['import_seconds']:.2f} s); "
                  f"peak RSS {result['peak_rss_mb']:.1f} MB (after imports {result['base_rss_kib'] / 1024:.1f} MB); "
                  f"{result['steps']} steps, {result['lines']} lines, "
                  f"observations {', '.join(result['observations'])}, "
                  f"in-step stacks mapped {100 * result['share']:.1f} %")
            for message in result["diagnostics"]:
                print("  diagnostic:", message)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
