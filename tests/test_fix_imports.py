"""Where fixes put the imports they need, and what they do with the imports they leave unused."""
from __future__ import annotations

import ast

import pytest

from ascend_lint.fix.imports import anchor_line, import_facts, import_statement, plan
from ascend_lint.fix.unused import clean_unused_imports, import_usage, newly_unused


@pytest.mark.parametrize("src, line", [
    ("import os\nimport torch\nimport numpy as np\n\nx = 1\n", 3),  # the run holding `import torch`
    ('"""Doc."""\nfrom __future__ import annotations\n\nimport os\nx = 1\nimport torch\ny = 2\n', 6),
    ('"""Doc."""\nfrom __future__ import annotations\n\nimport os\nx = 1\n', 4),  # the leading imports
    ('"""Doc."""\nfrom __future__ import annotations\n\nx = 1\n', 2),  # after __future__
    ('"""Doc."""\nx = 1\n', 1),  # after the docstring
    ("x = 1\n", 0), ("", 0),  # at the top
    ("@decorator\ndef f():\n    pass\n", 0),
])
def test_anchor_line(src, line):
    assert anchor_line(ast.parse(src), ["torch_npu"]) == line


@pytest.mark.parametrize("src, texts, result", [
    ("import torch_npu\n", ["torch_npu.optim.X"], ([], {}, "")),
    ("import torch_npu as tnpu\n", ["torch_npu.optim.X"], ([], {"torch_npu": "tnpu"}, "")),
    ("from torch_npu.contrib import transfer_to_npu\n", [".npu"], ([], {}, "")),  # loaded: enough for `.npu()`
    ("from torch_npu.contrib import transfer_to_npu\n", ["torch_npu.optim.X"], (["torch_npu"], {}, "")),
    ("import torch\n", [".npu"], (["torch_npu"], {}, "")),
])
def test_plan(src, texts, result):
    assert plan(import_facts(ast.parse(src)), ["torch_npu"], texts) == result


@pytest.mark.parametrize("src", [
    "try:\n    import torch_npu\nexcept ImportError:\n    pass\n",
    "if npu:\n    from torch_npu.contrib import transfer_to_npu\n",
    "def f():\n    import torch_npu\n",
    "class C:\n    import torch_npu\n",
])
def test_plan_refuses_a_guarded_module(src):
    needed, renames, problem = plan(import_facts(ast.parse(src)), ["torch_npu"], [".npu"])
    assert problem.startswith("needs `torch_npu`, which this file imports only conditionally")


def test_import_statement_marks_side_effect_imports():
    assert import_statement("torch_npu", [".npu"]) == "import torch_npu  # noqa: F401"
    assert import_statement("torch_npu", ["torch_npu.optim.NpuFusedSGD"]) == "import torch_npu"


def test_usage_follows_pyflakes_bindings():
    tree = ast.parse("import torch\nimport torch\ndef f():\n    return torch.x\n")
    first, second = tree.body[0].names[0], tree.body[1].names[0]
    used = import_usage(tree)
    assert used[id(first)] is False and used[id(second)] is True  # functions read the last binding
    tree = ast.parse("import os\nx: 'os.PathLike'\n__all__ = ['sys']\nimport sys\n")
    assert all(import_usage(tree).values())  # string annotations and __all__ count


def _clean(before: str, after: str) -> tuple:
    return clean_unused_imports(after, ast.parse(before), ast.parse(after))


@pytest.mark.parametrize("before, after, cleaned", [
    # the last use went: removed (torch still imported / a stdlib module)
    ("import torch\nimport torch.optim as optim\nx = optim.SGD\n", "import torch\nimport torch.optim as optim\nx = 1\n",
     "import torch\nx = 1\n"),
    ("import os\nos.environ['A'] = '1'\n", "import os\n", ""),
    # only the name that went is dropped from the statement; comments after it stay
    ("import torch\nfrom torch.optim import SGD, lr_scheduler  # optimizers\nx = SGD\ny = lr_scheduler\n",
     "import torch\nfrom torch.optim import SGD, lr_scheduler  # optimizers\nx = 1\ny = lr_scheduler\n",
     "import torch\nfrom torch.optim import lr_scheduler  # optimizers\nx = 1\ny = lr_scheduler\n"),
    # removing it could change what runs: kept, marked for flake8/ruff
    ("import torch_npu\ntorch_npu.npu.synchronize()\n", "import torch_npu\n", "import torch_npu  # noqa: F401\n"),
    ("import apex  # noqa: E402\nx = apex.amp\n", "import apex  # noqa: E402\nx = 1\n",
     "import apex  # noqa: E402, F401\nx = 1\n"),
    # torch_npu (which imports torch) stays: `import torch` can go
    ("import torch\nimport torch_npu\ntorch.npu.synchronize()\n", "import torch\nimport torch_npu\n",
     "import torch_npu\n"),
    # was unused before the fix: not the fix's business
    ("import os\nx = 1\n", "import os\nx = 2\n", "import os\nx = 2\n"),
])
def test_clean_unused_imports(before, after, cleaned):
    assert _clean(before, after) == (cleaned, [])


def test_an_import_sharing_its_line_is_a_problem():
    text, problems = _clean("import apex; x = apex.amp\n", "import apex; x = 1\n")
    assert text == "import apex; x = 1\n" and problems and "`apex`" in problems[0]


def test_newly_unused_includes_shadowing_duplicates():
    before = ast.parse("import torch\nimport torch\ny = torch.x\n")
    after = ast.parse("import torch\nimport torch\ny = 1\n")
    assert [b.stmt.lineno for b in newly_unused(before, after)] == [2, 1]


@pytest.mark.parametrize("before, after, cleaned", [
    # an import inside a function or block that the fixes left unused: removed, its block kept non-empty
    ("import torch\ndef f():\n    from torch.optim import SGD\n    return SGD\n",
     "import torch\ndef f():\n    from torch.optim import SGD\n    return 1\n", "import torch\ndef f():\n    return 1\n"),
    ("import torch\nif main:\n    from torch.optim import SGD\nelse:\n    from torch.optim import Adam\nx = SGD, Adam\n",
     "import torch\nif main:\n    from torch.optim import SGD\nelse:\n    from torch.optim import Adam\nx = 1\n",
     "import torch\nif main:\n    from torch.optim import SGD  # noqa: F401\nelse:\n"
     "    from torch.optim import Adam  # noqa: F401\nx = 1\n"),
    ("import torch\nif mup:\n    from mup import A\n    from mup import B\nx = A, B\n",
     "import torch\nif mup:\n    from mup import A\n    from mup import B\nx = 1\n",
     "import torch\nif mup:\n    from mup import A  # noqa: F401\n    from mup import B  # noqa: F401\nx = 1\n"),
])
def test_clean_nested_unused_imports(before, after, cleaned):
    text, problems = _clean(before, after)
    assert (text, problems) == (cleaned, [])
    ast.parse(text)
