"""ascend_lint.astutil: the shared AST helpers rules use (one copy each; the old import paths still work)."""
from __future__ import annotations

import ast
import pathlib
import re

from ascend_lint import astutil
from ascend_lint.astutil import (argument, callee_name, constant, contains, dotted_name, has_star_args, keyword,
                                 method_name, parent_map, receiver_name)


def _call(src: str) -> ast.Call:
    node = ast.parse(src, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


def test_contains_by_position():
    tree = ast.parse("def f():\n    if a:\n        g(b)\n    h()\n")
    func = tree.body[0]
    if_node, h_call = func.body[0], func.body[1].value
    g_call = if_node.body[0].value
    assert contains(func, if_node) and contains(if_node, g_call) and contains(g_call, g_call)
    assert not contains(if_node, h_call) and not contains(g_call, if_node)


def test_names():
    assert dotted_name(_call("torch.nn.functional.silu(x)").func) == "torch.nn.functional.silu"
    assert dotted_name(_call("f()(x)").func) is None
    assert receiver_name(_call("self.optimizer.step()").func.value) == "optimizer"
    assert callee_name(_call("ms.load_checkpoint(p)")) == "load_checkpoint"
    assert callee_name(_call("load(p)")) == "load" and callee_name(_call("f()(p)")) == ""
    assert method_name(_call("x.cuda()")) == "cuda" and method_name(_call("cuda(x)")) is None


def test_arguments():
    call = _call("f(a, b, dim=1, **kw)")
    assert argument(call, "dim", 2).value == 1
    assert argument(call, None, 1).id == "b"
    assert argument(call, "missing", 5) is None
    assert argument(_call("f(*xs, y)"), None, 1) is None  # after a *args: unknown
    assert keyword(call, "dim").arg == "dim" and keyword(call, "other") is None
    assert has_star_args(call) and not has_star_args(_call("f(a, k=1)"))


def test_constant():
    assert constant(ast.parse("-3", mode="eval").body) == -3
    assert constant(ast.parse("'npu'", mode="eval").body) == "npu"
    assert constant(ast.parse("-True", mode="eval").body, "?") == "?"
    assert constant(ast.parse("x", mode="eval").body) is None


def test_parent_map():
    tree = ast.parse("y = f(x)")
    parents = parent_map(tree)
    call = tree.body[0].value
    assert parents[id(call)] is tree.body[0] and parents[id(call.args[0])] is call


def test_old_import_paths_still_work():
    from ascend_lint.analysis import nodes, semantic

    for name in ("argument", "constant", "keyword", "has_star_args", "method_name", "receiver_name"):
        assert getattr(semantic, name) is getattr(astutil, name)
    assert nodes.call_text is dotted_name


HELPER_DEF_RE = re.compile(r"^def (_?inside|_?contains|_?callee_name|_?called_name|_called|_?dotted)\(", re.M)


def test_no_rule_keeps_its_own_copy():
    """Containment and dotted/last-name helpers have one home: astutil."""
    root = pathlib.Path(__file__).parent.parent / "plugins"
    copies = [f"{p.relative_to(root)}: {m.group(0)}" for p in root.rglob("*.py")
              for m in HELPER_DEF_RE.finditer(p.read_text(encoding="utf-8"))]
    assert not copies, copies
