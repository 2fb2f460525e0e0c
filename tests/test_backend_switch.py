"""`in_backend_switch` and `in_backend_table` (migration pack), case by case: is the code at a node CUDA code
on purpose? Each case marks the node asked about with the name `HERE` (judged with everything around it) or
`TOP` (judged as the outermost expression of its statement, as ASC605 asks: `within`), and gives the
answers without and with `--target npu`."""
from __future__ import annotations

import ast
from typing import List

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.rule import Docs, Rule
from ascend_lint_plugins.migration._switches import in_backend_switch, in_backend_table


class _AsksSwitch(Rule):
    """Reports, at each marker, whether the code there is a backend's on purpose."""

    code = "TST020"
    name = "asks-switch"
    message = "{answer}"
    triggers = ("HERE", "TOP")
    training_code_only = False
    docs = Docs(what="test", why="test")

    def start_file(self) -> None:
        self._switches: dict = {}

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "HERE":
            self.report(node, answer=in_backend_switch(self.ctx, self._switches))
        elif node.id == "TOP":
            statement = max(i for i, n in enumerate(self.ctx.stack) if isinstance(n, ast.stmt))
            top = self.ctx.stack[statement + 1]
            self.report(node, answer=in_backend_switch(self.ctx, self._switches, within=top))


def _answers(src: str, target: str) -> List[bool]:
    findings = Linter([_AsksSwitch], Settings(target=target)).check("import torch\n" + src, "m.py")
    return [f.message == "True" for f in sorted(findings, key=lambda f: (f.line, f.col))]


@pytest.mark.parametrize("src,auto,npu", [
    # `if` statements
    ("if device.type == 'npu':\n    HERE\n", False, False),  # inside the NPU branch: a leftover
    ("if not is_npu:\n    pass\nelse:\n    HERE\n", False, False),  # the NPU branch, spelled negated
    ("if is_npu:\n    pass\nelse:\n    HERE\n", True, True),  # the other side of an NPU test
    ("if x.device.type == 'cuda':\n    HERE\n", True, False),  # a CUDA-only test: no switch when porting
    ("if is_nvidia:\n    HERE\n", True, True),  # a GPU vendor named
    ("USE_CUDA = torch.cuda.is_available()\nif USE_CUDA:\n    HERE\n", True, False),  # a held probe
    ("if HAS_FLASH_ATTN:\n    HERE\n", True, True),  # a CUDA-only feature
    ("if HAS_FLASH_ATTN:\n    pass\nelse:\n    HERE\n", False, False),  # ... whose `else:` is the ordinary path
    ("if args.fast:\n    HERE\nelif args.npu:\n    pass\n", True, True),  # an `elif` tests for the NPU
    ("if args.cuda:\n    HERE\nelse:\n    m.npu()\n", True, True),  # the other branch moves work to the NPU
    ("if use_gpu:\n    HERE.cuda()\nelse:\n    m.to(dev)\n", False, True),  # both sides move: porting, a switch
    ("if 'npu' in d:\n    pass\nif flag:\n    HERE\n", False, True),  # next to an NPU `if`: porting, a switch
    ("if flag:\n    HERE\n", False, False),
    # module-level probes and CUDA-only feature code
    ("IS_CUDA = torch.cuda.is_available(HERE)\n", True, False),
    ("NGPUS = torch.cuda.device_count(HERE)\n", False, False),  # a quantity, not a probe
    ("def use_flash_kernel():\n    HERE\n", True, True),
    ("try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n"
     "if mode == 'fp8':\n    flash_attn.setup()\n    HERE\n", True, True),
    # conditional expressions, boolean operations, optional imports
    ("x = HERE if is_npu else None\n", False, False),
    ("x = None if is_npu else HERE\n", True, True),
    ("x = HERE if x.is_cuda else None\n", True, False),
    ("USE = torch.cuda.is_available()\ny = HERE if USE else None\n", True, False),
    ("y = HERE.cuda() if flag else m.npu()\n", False, True),
    ("y = m.cuda() if flag else HERE.to(dev)\n", False, True),
    ("ok = is_nvidia and HERE\n", True, True),
    ("ok = fused_cls is not None and HERE\n", True, True),
    ("try:\n    import flash_attn\n    CAP = HERE\nexcept ImportError:\n    CAP = None\n", True, True),
    ("try:\n    import yaml\n    CAP = HERE\nexcept ImportError:\n    CAP = None\n", False, False),  # not CUDA-only
    ("def f():\n    try:\n        import flash_attn\n        CAP = HERE\n    except ImportError:\n        CAP = None\n",
     False, False),  # (inside a function the `try:` alone does not decide)
    # the GPU fallback of a device search
    ("def pick():\n    if torch.npu.is_available():\n        return 'npu'\n"
     "    if torch.cuda.is_available():\n        return HERE\n", True, True),
    ("def pick():\n    if torch.cuda.is_available():\n        return HERE\n", False, False),
    # per-backend tables
    ("SYNC = {'cuda': HERE, 'npu': torch.npu.synchronize}\n", True, True),
    ("DEV = {'gpu': HERE}\n", True, True),
    ("SYNC = dict(cuda=HERE, npu=torch.npu.synchronize)\n", True, True),
    ("SYNC = [('cuda', HERE), ('npu', torch.npu.synchronize)]\n", True, True),
    ("SYNC = {'main': HERE}\n", False, False),
    ("SYNC = {key: HERE}\n", False, False),
    # `within`: only what encloses the marked expression decides
    ("x = 0 if is_npu else TOP\n", False, False),
    ("x = 0 if is_npu else HERE\n", True, True),
    ("if is_npu:\n    pass\nelse:\n    y = TOP\n", True, True),
])
def test_in_backend_switch(src, auto, npu):
    assert _answers(src, "auto") == [auto]
    assert _answers(src, "npu") == [npu]


def _stack_to(src: str, name: str = "HERE") -> List[ast.AST]:
    """The nodes from the module down to the Name `name`."""
    def down(node: ast.AST, path: List[ast.AST]) -> List[ast.AST]:
        path = path + [node]
        if isinstance(node, ast.Name) and node.id == name:
            return path
        for child in ast.iter_child_nodes(node):
            found = down(child, path)
            if found:
                return found
        return []
    return down(ast.parse(src), [])


@pytest.mark.parametrize("src,answer", [
    ("t = {'cuda': HERE}", True),
    ("t = {'cpu': HERE, 'other': 1}", True),
    ("t = {'main': HERE, 'npu': 1}", True),  # the table names the NPU
    ("t = {'main': HERE}", False),
    ("t = {**base, 'main': HERE}", False),
    ("t = {HERE: 'cuda'}", False),  # a key, not an entry
    ("t = dict(rocm=HERE)", True),
    ("t = dict(main=HERE, **rest)", False),
    ("t = OrderedDict([('cuda', HERE), ('npu', 1)])", True),
    ("t = [('main', HERE), ('npu', 1)]", True),
    ("t = [('main', HERE), 1]", False),
    ("t = [HERE, 'cuda']", False),  # not a pair
    ("t = f(cuda=HERE)", False),  # a keyword of another call
])
def test_in_backend_table(src, answer):
    assert in_backend_table(_stack_to(src)) is answer
