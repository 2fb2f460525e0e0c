"""Engine and semantic model: ASC000 for unreadable input, positions, the semantic queries rules rely on."""
from __future__ import annotations

import ast
import textwrap

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.rule import Docs, Rule
from ascend_lint.analysis.semantic import FileContext
from conftest import REGISTRY, lint


def linter(*rules):
    return Linter(list(rules) or REGISTRY.sorted_rules(), Settings(preview=True))


@pytest.mark.parametrize("raw,needle,line", [
    (b"x.npu().contiguous()\ndef f(:\n    pass\n", "syntax error", 2),
    (b'x.npu().contiguous()\nprint "hello"\n', "Python 2 code", 2),
    (b"x = 1\x00\n", "binary file", 1),
    (b"\xff\xfex\x00=\x001\x00", "UTF-16", 1),
    (b"x = 1\ny = '\xff'\n", "not valid utf-8", 2),
    (b"# -*- coding: klingon -*-\nx = 1\n", "encoding", 1),
    (b"x = " + b"(" * 300 + b"1" + b")" * 300 + b"\n", "", 1),
])
def test_unreadable_sources_give_one_asc000(raw, needle, line):
    result = linter().lint_bytes(raw, "bad.py")
    errors = [f for f in result.findings if f.code == "ASC000"]
    if not needle:  # deep nesting: either parses (newer Pythons) or gives ASC000, never raises
        return
    assert len(errors) == 1 and needle in errors[0].message and errors[0].line == line


def test_latin1_with_cookie_and_bom_are_decoded():
    src = "# -*- coding: latin-1 -*-\nimport torch_npu\ns = 'caf\xe9'; y = x.t().contiguous() @ w\n"
    result = linter().lint_bytes(src.encode("latin-1"), "l1.py")
    assert [f.code for f in result.findings] == ["ASC101"]
    assert result.findings[0].col == 17  # characters, not bytes
    result = linter().lint_bytes(b"\xef\xbb\xbfimport torch_npu\ny = x.t().contiguous() @ w\n", "bom.py")
    assert [(f.code, f.line, f.col) for f in result.findings] == [("ASC101", 2, 5)]


def test_columns_count_characters_on_non_ascii_lines():
    (finding,) = lint("s = 'αβγ'; y = x.t().contiguous() @ w.npu()\n", select=["ASC101"])
    assert (finding.col, finding.end_col) == (16, 34)


def test_files_without_trigger_text_are_not_parsed(monkeypatch):
    import ascend_lint.engine.linter as engine

    calls = []
    real = engine.parse
    monkeypatch.setattr(engine, "parse", lambda text, path: calls.append(path) or real(text, path))
    assert linter().check("import os\nprint(os.getcwd())\n", "plain.py") == []
    assert calls == []
    linter().check("import torch_npu\ny = x.t().contiguous()\n", "npu.py")
    assert calls == ["npu.py"]


class _Probe(Rule):
    """A test-only rule recording what the semantic model says at each call."""

    code = "TST001"
    name = "probe"
    message = "{what}"
    file_triggers = ()
    triggers = ("probe",)
    docs = Docs(what="test", why="test")
    seen: list = []

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == "probe":
            ctx = self.ctx
            arg = node.args[0] if node.args else None
            _Probe.seen.append({
                "qual": ctx.qualname(arg) if arg is not None else None,
                "hot": ctx.in_hot_method(),
                "step": ctx.in_step_loop(),
                "guarded": ctx.guarded(),
                "int": ctx.int_value(arg) if arg is not None else None,
                "npu": ctx.npu,
            })


def probe(src, **kw):
    _Probe.seen = []
    Linter([_Probe], Settings(**kw)).check(textwrap.dedent(src), "p.py")
    return _Probe.seen


def test_qualified_names_through_aliases():
    seen = probe("""
        import torch.nn.functional as F
        from torch import optim as o
        from mindspore.ops import operations as P
        import torch_npu
        probe(F.silu); probe(o.SGD); probe(P.MatMul); probe(torch_npu.npu.synchronize); probe(unknown.x)
    """)
    assert [s["qual"] for s in seen] == ["torch.nn.functional.silu", "torch.optim.SGD", "mindspore.ops.MatMul",
                                         "torch.npu.synchronize", None]


def test_local_names_shadow_imports():
    seen = probe("""
        from torch.optim import SGD
        class SGD: pass
        probe(SGD)
        def f(F):
            probe(F)
    """)
    assert [s["qual"] for s in seen] == [None, None]


def test_hot_scopes():
    seen = probe("""
        import torch
        from torch import nn
        import mindspore.nn as msnn
        class Base(nn.Module): pass
        class Net(Base):
            def __init__(self): probe(1)
            def forward(self, x):
                probe(2)
                def inner(): probe(3)
        class Cell(msnn.Cell):
            def construct(self, x): probe(4)
        class Fn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, g): probe(5)
        class Plain:
            def forward(self): probe(6)
    """)
    assert [s["hot"] for s in seen] == [False, True, True, True, True, False]


def test_step_loops_innermost_and_guards():
    seen = probe("""
        def train_step(model, batch, optimizer):
            loss = model(batch)
            loss.backward()
            optimizer.step()
            probe(1)
        for epoch in range(3):
            probe(2)
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                probe(3)
                if step % 100 == 0:
                    probe(4)
            for batch in loader:
                train_step(model, batch, opt)
                probe(5)
            for x in range(3):
                scheduler.step()
                probe(6)
    """)
    assert [s["step"] for s in seen] == [True, False, True, True, True, False]
    assert [s["guarded"] for s in seen] == [False, False, False, True, False, False]


def test_int_values_from_literals_constants_defaults_and_locals():
    seen = probe("""
        NUM_CLASSES = 1000
        TWICE = 1
        TWICE = 2
        probe(NUM_CLASSES); probe(TWICE); probe(7); probe(True)
        def f(n=24, m=None):
            k = 40
            probe(n); probe(m); probe(k)
    """)
    assert [s["int"] for s in seen] == [1000, None, 7, None, 24, None, 40]


@pytest.mark.parametrize("src,expected", [
    ("import torch\nprobe(1)\n", False),
    ("import torch_npu\nprobe(1)\n", True),
    ("from torch_npu.contrib import transfer_to_npu\nprobe(1)\n", True),
    ("import mindspore as ms\nprobe(1)\n", True),
    ("import torch\nx = torch.zeros(1).to('npu:0')\nprobe(1)\n", True),
    ("import torch\ndist.init_process_group(backend='hccl')\nprobe(1)\n", True),
    ("import torch\ninput = 1\nprobe(1)\n", False),
])
def test_npu_context(src, expected):
    assert probe(src)[0]["npu"] is expected
    assert probe(src, target="npu")[0]["npu"] is True


def test_statement_pruning_still_records_bindings():
    (finding,) = lint("""
        import torch_npu
        def f(x):
            y = x.transpose(1, 2)
            z = 3
            return y.contiguous()
    """, select=["ASC102"])
    assert finding.line == 6


def test_a_crashing_rule_does_not_crash_the_run():
    class Boom(_Probe):
        code = "TST002"

        def visit_Call(self, node):
            raise RuntimeError("kaboom")

    result = Linter([Boom], Settings()).lint_bytes(b"probe(1)\n", "x.py")
    assert [f.code for f in result.findings] == ["ASC000"]
    assert "TST002" in result.findings[0].message and "kaboom" in result.findings[0].message


def test_lone_cr_and_crlf_newlines_keep_line_numbers():
    for newline in ("\r", "\r\n"):
        src = newline.join(["import torch_npu", "a = 1", "y = x.t().contiguous() @ w", ""])
        assert [(f.code, f.line) for f in lint(src, select=["ASC101"])] == [("ASC101", 3)]


@pytest.mark.parametrize("src", [
    "import torch\ny = torch.tensor([1, 2],\n    device='npu')  # c\n",
    "s = 'αβγ'; y = f(x, k='δ')\nz = (a +\n     b)\n",
    "x = 1\r\ny = g(\r\n  2)\r\n",
    "x = 'é'\ry = g(\r  'ü',\r\n  2)\nz = [\r1]",  # lone CR, CRLF and LF mixed, no final newline
    "def f(a, *, b=3):\n    return [i for i in a\n            if i]\n",
])
def test_segment_matches_get_source_segment(src):
    """FileContext.segment cuts from lines split once; it must give what ast.get_source_segment gives."""
    tree = ast.parse(src)
    ctx = FileContext("s.py", src, tree)
    for node in ast.walk(tree):
        assert ctx.segment(node) == ast.get_source_segment(src, node), ast.dump(node)


class _Names(Rule):
    """A test-only rule whose name handler looks for one name: it is called only in files that hold it."""

    code = "TST002"
    name = "names"
    message = "{what}"
    file_triggers = ()
    triggers = ("x",)
    handler_triggers = {"visit_Name": ("wanted",)}
    docs = Docs(what="test", why="test")
    seen: list = []

    def visit_Name(self, node):
        _Names.seen.append(node.id)

    def visit_Call(self, node):
        _Names.seen.append("call")


def test_handlers_with_triggers_are_called_only_where_the_file_holds_one():
    for src, seen in (("x = f(wanted)\n", ["x", "call", "f", "wanted"]), ("x = f(y)\n", ["call"]),
                      ("x = f(y)  # é\n", ["x", "call", "f", "y"])):  # (not ASCII: names may be spelled otherwise)
        _Names.seen = []
        Linter([_Names], Settings()).check(src, "p.py")
        assert _Names.seen == seen


class _Counting(Rule):
    """A test-only rule with per-file state set in start_file."""

    code = "TST003"
    name = "counting"
    message = "{count} names before this call"
    file_triggers = ()
    triggers = ("x",)
    docs = Docs(what="test", why="test")

    def start_file(self) -> None:
        self.names = 0

    def visit_Name(self, node):
        self.names += 1

    def visit_Call(self, node):
        self.report(node, count=self.names)


def test_start_file_sets_per_file_state_before_the_walk():
    linter = Linter([_Counting], Settings())
    for _ in range(2):  # a second file starts from zero again
        assert [f.message for f in linter.check("x = f(y)\nx = g(y)\n", "p.py")] == [
            "1 names before this call", "4 names before this call"]


def test_a_rule_that_overrides_init_is_told_to_use_start_file():
    with pytest.warns(DeprecationWarning, match="start_file"):
        class _Old(Rule):  # noqa: F841
            def __init__(self, ctx, options=None):
                super().__init__(ctx, options)
