"""Count host syncs inside functions found by name or base class in checked-out repositories (research aid
for docs/execution-model-research.md, issue #29).

    python bench/hook_scan.py CHECKOUT [CHECKOUT ...] [--names compute_loss,step_end] [--bases Callback]
                              [--pattern REGEX] [--examples N]

Parses every .py file (files that do not parse are skipped and counted) and reports, per checkout, the functions
whose name is in --names (or methods of classes whose base's last name is in --bases, any method then), how
many of them contain a line matching --pattern (default: a host sync `.item()`, `.cpu()`, `.tolist()`,
`.numpy()`, `.asnumpy()` or `synchronize()`, in code before a `#`), and the first N such lines.
Prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from typing import Iterator, List, Optional, Set, Tuple

HOST_SYNC = r"\.(item|cpu|tolist|numpy|asnumpy)\(\)|synchronize\(\)"


def _base_names(cls: ast.ClassDef) -> Set[str]:
    names = set()
    for base in cls.bases:
        node = base
        while isinstance(node, ast.Attribute):
            names.add(node.attr)
            break
        if isinstance(node, ast.Name):
            names.add(node.id)
    return names


def functions(tree: ast.AST, names: Set[str], bases: Set[str]) -> Iterator[Tuple[str, ast.AST]]:
    """(qualified-ish name, def node) of the functions asked for."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and bases and _base_names(node) & bases:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (not names or item.name in names):
                    yield f"{node.name}.{item.name}", item
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not bases and node.name in names:
            yield node.name, node


def scan(root: str, names: Set[str], bases: Set[str], pattern: re.Pattern, examples: int) -> None:
    found = with_sync = unparsed = 0
    shown: List[str] = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            try:
                text = open(path, encoding="utf-8", errors="replace").read()
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                unparsed += 1
                continue
            lines = text.splitlines()
            for qual, node in functions(tree, names, bases):
                found += 1
                end: Optional[int] = getattr(node, "end_lineno", None) or node.lineno
                hits = [n for n in range(node.lineno, end + 1) if pattern.search(lines[n - 1].split("#")[0])]
                if hits:
                    with_sync += 1
                    if len(shown) < examples:
                        shown.append(f"  {os.path.relpath(path, root)}:{hits[0]}  {qual}")
    print(f"{os.path.basename(root.rstrip('/'))}: {found} functions, {with_sync} with a match"
          f" ({unparsed} files did not parse)")
    print("\n".join(shown))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--names", default="", help="comma-separated function names")
    parser.add_argument("--bases", default="", help="comma-separated base-class last names")
    parser.add_argument("--pattern", default=HOST_SYNC)
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args(argv)
    names = {n for n in args.names.split(",") if n}
    bases = {b for b in args.bases.split(",") if b}
    pattern = re.compile(args.pattern)
    for root in args.checkouts:
        scan(root, names, bases, pattern, args.examples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
