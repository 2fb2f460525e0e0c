"""Score the linter against the execution-model fixtures (tests/fixtures/execution, issue #29).

    python bench/execution_fixtures.py [--list]

Lints every fixture project with the real CLI from its root (`--isolated --preview --select ASC --no-cache`) and
compares the findings with the `# expect: KIND` and `# clean: KIND` markers, through the rules each kind
maps to today (KIND_RULES, as in the fixtures' README). Prints how many expected findings are reported
(hit) or not (miss) and how many clean lines are reported anyway (false), per kind; `--list` prints every
miss and false line. A figure to track while the execution model is built, never a test assertion.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from typing import Dict, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import test_execution_fixtures as fixtures  # noqa: E402

KIND_RULES: Dict[str, Set[str]] = {
    "host-sync": {"ASC203", "ASC205", "ASC201"}, "device-sync": {"ASC202"}, "h2d-copy": {"ASC201"},
    "cuda-api": {"ASC603"}, "cuda-device": {"ASC601"}, "sync-save": {"ASC501"}, "dynamic-shape": {"ASC404"},
    "fusion-attention": {"ASC704"}, "fusion-softmax": set(), "fusion-rmsnorm": {"ASC701"},
    "fusion-channel-shuffle": {"ASC101", "ASC102"},
}


def lint(project: str) -> Dict[Tuple[str, int], Set[str]]:
    """(absolute path, line) -> codes reported there."""
    cli = [sys.executable, "-m", "ascend_lint", "check", "--isolated", "--preview", "--select", "ASC", "--no-cache",
           "--output-format", "json", "."]
    out = subprocess.run(cli, cwd=project, capture_output=True, text=True).stdout
    found: Dict[Tuple[str, int], Set[str]] = defaultdict(set)
    for item in json.loads(out or "[]"):
        path = os.path.normpath(os.path.join(project, item["filename"]))
        found[(path, item["location"]["row"])].add(item["code"])
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every missed and falsely reported line")
    args = parser.parse_args(argv)
    counts: Dict[str, Counter] = defaultdict(Counter)
    lines = []
    for name, paths in sorted(fixtures.FIXTURES.items()):
        found = lint(str(fixtures.ROOT / name))
        for path in paths:
            for marker in fixtures.read_markers(path):
                codes = found.get((os.path.normpath(str(path)), marker.line), set())
                where = f"{path.relative_to(fixtures.ROOT)}:{marker.line}"
                if marker.kind == "expect":
                    for kind in (k.strip() for k in marker.value.split(",")):
                        hit = bool(codes & KIND_RULES[kind])
                        counts[kind]["hit" if hit else "miss"] += 1
                        if not hit:
                            lines.append(f"MISS  {kind:24} {where}")
                elif marker.kind == "clean":
                    false = bool(codes & KIND_RULES[marker.value])
                    counts[marker.value]["false" if false else "clean"] += 1
                    if false:
                        lines.append(f"FALSE {marker.value:24} {where} {sorted(codes)}")
    print(f"{'kind':24} {'hit':>4} {'miss':>5} {'false':>6} {'clean':>6}")
    total: Counter = Counter()
    for kind in sorted(counts):
        c = counts[kind]
        total.update(c)
        print(f"{kind:24} {c['hit']:4} {c['miss']:5} {c['false']:6} {c['clean']:6}")
    print(f"{'all':24} {total['hit']:4} {total['miss']:5} {total['false']:6} {total['clean']:6}")
    if args.list:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
