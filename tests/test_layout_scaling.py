"""Issue #30: ASC101/ASC102 index a scope once, so a module of N layout copies costs O(N), not O(N²).

The cost is asserted as work done (nodes `ast.walk` yields while the file is linted, indexes built), never as
wall time: a quadratic helper yields about N times the file's nodes."""
from __future__ import annotations

import ast

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint_plugins.affinity import _layout_flow
from conftest import REGISTRY

LINE = "v = t.transpose(0, 1).contiguous()\n"
SHAPES = {
    "module": lambda n: "import torch\nimport torch_npu\n" + LINE * n,
    "function": lambda n: "import torch\nimport torch_npu\ndef f(t):\n" + ("    " + LINE) * n + "    return v\n",
    "distinct names": lambda n: "import torch\nimport torch_npu\ndef f(t):\n" + "".join(
        f"    v{i} = t.transpose(0, 1).contiguous()\n    use(v{i})\n" for i in range(n)),
    "after a fused branch": lambda n: "import torch\nimport torch_npu\ndef f(t, fast):\n"
                                      "    if fast:\n        return torch_npu.npu_op(t)\n" + ("    " + LINE) * n,
}


def _lint_counting(source: str, monkeypatch) -> tuple:
    """(findings, nodes yielded by ast.walk while linting, scope indexes built)."""
    walked, built = [0], [0]
    real_walk, real_index = ast.walk, _layout_flow.ScopeIndex.__init__

    def counting_walk(node):
        for found in real_walk(node):
            walked[0] += 1
            yield found

    def counting_index(self, root):
        built[0] += 1
        real_index(self, root)

    monkeypatch.setattr(ast, "walk", counting_walk)
    monkeypatch.setattr(_layout_flow.ScopeIndex, "__init__", counting_index)
    rules = [REGISTRY.rules["ASC101"], REGISTRY.rules["ASC102"]]
    findings = Linter(rules, Settings(preview=True)).check(source, "model.py")
    monkeypatch.undo()
    return findings, walked[0], built[0]


@pytest.mark.parametrize("shape", SHAPES)
def test_layout_copies_cost_linear_work(shape, monkeypatch):
    source = SHAPES[shape](1500)
    nodes = sum(1 for _ in ast.walk(ast.parse(source)))
    findings, walked, built = _lint_counting(source, monkeypatch)
    expected = 0 if shape == "after a fused branch" else 1500  # (the eager code after `return fused(...)`)
    assert len(findings) == expected and all(f.code == "ASC102" for f in findings)
    assert built <= 2  # the one scope with findings, indexed once by each of the two rules
    assert walked <= 5 * nodes, f"{walked:,} nodes walked for a file of {nodes:,}: the scope is walked per finding"
