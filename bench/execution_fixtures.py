"""Score the linter against the execution-model fixtures (tests/fixtures/execution, issue #29).

    python bench/execution_fixtures.py [--list]

Lints every fixture project with the real CLI from its root (`--isolated --preview --select ASC --no-cache`) and
compares the findings with the `# expect: KIND` and `# clean: KIND` markers, through the rules each kind
maps to today (KIND_RULES, as in the fixtures' README). Prints how many expected findings are reported
(hit) or not (miss) and how many clean lines are reported anyway (false), per kind; `--list` prints every
miss and false line. A finding `--preview` keeps only with the execution model's note (in code reached from
nothing, or offline) counts as not reported: the default set drops it. Then the `# expect-role:` markers
against the execution model's roles (right / wrong; `--list` prints the wrong ones). A figure to track while
the execution model is built, never a test assertion.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import sys
from collections import Counter, defaultdict
from typing import Dict, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import test_execution_fixtures as fixtures  # noqa: E402

SILENCED = ("(reached from nothing: ", "(offline code: ")  # the notes of engine/roles.py

KIND_RULES: Dict[str, Set[str]] = {
    "host-sync": {"ASC203", "ASC205", "ASC201"}, "device-sync": {"ASC202"}, "h2d-copy": {"ASC201"},
    "cuda-api": {"ASC603"}, "cuda-device": {"ASC601"}, "sync-save": {"ASC501"}, "dynamic-shape": {"ASC404"},
    "fusion-attention": {"ASC704"}, "fusion-softmax": set(), "fusion-rmsnorm": {"ASC701"},
    "fusion-channel-shuffle": {"ASC101", "ASC102"},
}


def lint(project: str) -> Dict[Tuple[str, int], Set[str]]:
    """(absolute path, line) -> codes reported there. The project is linted in a copy whose root is marked
    (an empty pyproject.toml): in place, the root would be this repository's, and `tests/` offline code."""
    cli = [sys.executable, "-m", "ascend_lint", "check", "--isolated", "--preview", "--select", "ASC", "--no-cache",
           "--output-format", "json", "."]
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "project")
        shutil.copytree(project, copy)
        with open(os.path.join(copy, "pyproject.toml"), "w", encoding="utf-8"):
            pass
        out = subprocess.run(cli, cwd=copy, capture_output=True, text=True).stdout
    found: Dict[Tuple[str, int], Set[str]] = defaultdict(set)
    for item in json.loads(out or "[]"):
        if any(note in item["message"] for note in SILENCED):
            continue  # (the default set drops it)
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
    right, wrong = score_roles()
    print(f"roles: {len(right)} right, {len(wrong)} wrong")
    if args.list:
        print("\n".join(lines + wrong))
    return 0


def _local_defs(path) -> Dict[int, str]:
    """def line -> 'function' / 'Class.method' of a file's top-level functions and methods."""
    import ast
    defs: Dict[int, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        inner = node.body if isinstance(node, ast.ClassDef) else [node]
        prefix = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for func in inner:
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs[func.lineno] = prefix + func.name
    return defs


def score_roles() -> Tuple[list, list]:
    """The `# expect-role:` markers the execution model gets right and wrong (a nested def counts wrong)."""
    import ast

    from ascend_lint.analysis.model import ProjectModel, module_id
    from ascend_lint.analysis.summary import summarize
    right, wrong = [], []
    for name, paths in sorted(fixtures.FIXTURES.items()):
        root = fixtures.ROOT / name
        texts = {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in root.rglob("*.py")}
        model = ProjectModel.build({rel: summarize(ast.parse(text), text) for rel, text in texts.items()})
        for path in paths:
            mid, defs = module_id(str(path.relative_to(root))), _local_defs(path)
            for marker in fixtures.read_markers(path):
                if marker.kind != "expect-role":
                    continue
                local = defs.get(marker.line)
                role = model.role(f"{mid}.{local}" if mid else local) if local else None
                got = role.kind if role is not None else None
                where = f"ROLE  {path.relative_to(fixtures.ROOT)}:{marker.line} want {marker.value}, got {got}"
                (right if got == marker.value else wrong).append(where)
    return right, wrong


if __name__ == "__main__":
    sys.exit(main())
