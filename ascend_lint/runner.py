"""Running the linter over many files (the place for parallelism and caching)."""
from __future__ import annotations

from typing import List, Sequence

from .discovery import Target
from .engine import FileResult, Linter


def lint_targets(linter: Linter, targets: Sequence[Target], jobs: int = 1) -> List[FileResult]:
    """Lint every target; results come back sorted by path whatever the worker count."""
    results = [linter.lint_path(t.path) for t in targets]
    results.sort(key=lambda r: r.path)
    return results
