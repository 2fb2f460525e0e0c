"""How `check`, `check --output-format json` and `check --fix` scale with the size of one file, rule by rule
(issue #30).

    python bench/scaling.py [--rules ASC101,ASC203] [--sizes 1000,2000,4000,8000,16000]
                            [--shapes module,function] [--commands check,json,fix] [--timeout 300]

For every rule, its trigger pattern (the code of its first case, else its first flagged example, less the
leading imports; and the shapes issues named, such as #30's `v = t.transpose(0, 1).contiguous()`) is
repeated N times in one generated file, at module level and inside one function, and
`ascend-lint check --preview --select CODE -j 1 --no-cache` is run on it in a fresh process; for a rule with
a fix, also with `--output-format json` (every finding's fix edits) and with `--fix --unsafe-fixes` (the
file written again before each run). Printed per rule, shape and command: CPU seconds (user + sys, from
wait4) at each size, time(largest)/time(smallest) raw and less the
cost of a run on the imports alone (start-up: a linear rule gives about the size ratio, 16 for 1k..16k; a
quadratic one about its square), peak RSS at the largest size, and the findings at the smallest. A run over
`--timeout` seconds of wall-clock time is killed and shown as `>T` (on a loaded machine, give it room).
This is a script, not a test: one run per cell, on a quiet machine if the figures are to be compared.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SIZES = (1000, 2000, 4000, 8000, 16000)
SHAPES = ("module", "function")
COMMANDS = {"check": ["--output-format", "concise"], "json": ["--output-format", "json"],
            "fix": ["--fix", "--unsafe-fixes", "--output-format", "concise"]}
# Shapes named in issues, measured with the rule that reads them: (label, code, imports, body).
EXTRA = (("ASC102 #30", "ASC102", "import torch\nimport torch_npu\n", "v = t.transpose(0, 1).contiguous()\n"),)


class Pattern:
    """A rule's code and its trigger pattern (or one of EXTRA's)."""

    def __init__(self, label: str, code: str, header: str, body: str, fixable: bool = False) -> None:
        self.label, self.code, self.header, self.body, self.fixable = label, code, header, body, fixable


def pattern(rule) -> Pattern:
    """The rule's trigger pattern: its first case (else its first flagged example), imports apart."""
    source = rule.cases[0].source if rule.cases else textwrap.dedent(rule.flagged_sources()[0])
    lines = source.rstrip("\n").splitlines()
    split = 0
    while split < len(lines) and lines[split].startswith(("import ", "from ")):
        split += 1
    return Pattern(rule.code, rule.code, "\n".join(lines[:split]) + "\n", "\n".join(lines[split:]) + "\n",
                   rule.fix_applicability is not None)


def generate(found: Pattern, shape: str, n: int) -> str:
    if shape == "module":
        return found.header + found.body * n
    return found.header + "def scaled():\n" + textwrap.indent(found.body, "    ") * n


def run(directory: str, code: str, name: str, timeout: float,
        command: str = "check") -> Tuple[Optional[float], float, int]:
    """(CPU seconds or None on timeout, peak RSS MiB, findings reported) of one run."""
    args = [sys.executable, "-m", "ascend_lint", "check", "--isolated", "--no-cache", "--preview", "--select", code,
            "-j", "1", "--exit-zero", "-q", *COMMANDS[command], name]
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(args, cwd=directory, stdout=out, stderr=subprocess.DEVNULL)
        start = time.monotonic()
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                process.kill()
                os.wait4(process.pid, 0)
                return None, 0.0, 0
            time.sleep(0.02)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        findings = text.count(f'"code": "{code}"') if command == "json" else \
            sum(1 for line in text.splitlines() if f" {code} " in line)
    rss = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 2 ** 20
    return usage.ru_utime + usage.ru_stime, rss, findings


def measure(found: Pattern, shape: str, sizes: Sequence[int], timeout: float, directory: str,
            command: str = "check") -> Dict[str, object]:
    name = "model_scaled.py"
    with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
        handle.write(found.header)
    base, _, _ = run(directory, found.code, name, timeout, command)
    times: List[Optional[float]] = []
    rss = 0.0
    first_findings = 0
    for index, n in enumerate(sizes):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(generate(found, shape, n))
        spent, rss, findings = run(directory, found.code, name, timeout, command)
        times.append(spent)
        if index == 0:
            first_findings = findings
        if spent is None:
            times += [None] * (len(sizes) - index - 1)
            break
    return {"base": base or 0.0, "times": times, "rss": rss, "findings": first_findings}


def _ratio(times: List[Optional[float]], base: float) -> str:
    first, last = times[0], times[-1]
    if first is None or last is None or first <= 0:
        return "-"
    net = f"{(last - base) / (first - base):.1f}" if first - base > 0.01 else "-"
    return f"{last / first:.1f} ({net})"


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", default="", help="comma-separated codes (default: every rule)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--commands", default=",".join(COMMANDS), help="check, json, fix (the last two: rules "
                                                                         "with a fix)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(list(argv) or None)
    sys.path.insert(0, REPO)
    from ascend_lint.core_rules import CORE_PACK
    from ascend_lint.registry import load_registry

    wanted = {c.strip() for c in args.rules.split(",") if c.strip()}
    patterns = [pattern(r) for r in load_registry().sorted_rules()
                if r.pack != CORE_PACK and (not wanted or r.code in wanted)]
    patterns += [Pattern(*extra) for extra in EXTRA if not wanted or extra[1] in wanted]
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = [s for s in args.shapes.split(",") if s in SHAPES]
    commands = [c for c in args.commands.split(",") if c in COMMANDS]
    print(f"CPU seconds of `check --preview --select CODE -j 1` (json: `--output-format json`; fix: `--fix "
          f"--unsafe-fixes`) on one file of N repetitions; timeout {args.timeout:.0f} s")
    head = " | ".join(f"{n:,}" for n in sizes)
    print(f"| rule | shape | command | start-up | {head} | t({sizes[-1]:,})/t({sizes[0]:,}) (less start-up) "
          f"| peak RSS at {sizes[-1]:,} | findings at {sizes[0]:,} |")
    print("|---|---|---|---:|" + "---:|" * len(sizes) + "---:|---:|---:|")
    with tempfile.TemporaryDirectory() as directory:
        for found in patterns:
            for shape in shapes:
                for command in commands:
                    if command != "check" and not found.fixable:
                        continue
                    row = measure(found, shape, sizes, args.timeout, directory, command)
                    cells = " | ".join("-" if t is None and i and row["times"][i - 1] is None
                                       else f">{args.timeout:.0f}" if t is None else f"{t:.2f}"
                                       for i, t in enumerate(row["times"]))
                    print(f"| {found.label} | {shape} | {command} | {row['base']:.2f} | {cells} | "
                          f"{_ratio(row['times'], row['base'])} | {row['rss']:.0f} MiB | {row['findings']} |",
                          flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
