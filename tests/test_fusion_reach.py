"""plugins/fusion/_reach.py: which assignments of a local name may reach a use of it."""
from __future__ import annotations

import ast
import textwrap

from ascend_lint_plugins.fusion._reach import FunctionDefs, following


def reaching(source: str, line: int, name: str = "s"):
    """Source lines of the assignments of `name` reaching its last load on `line`."""
    func = ast.parse(textwrap.dedent(source)).body[0]
    use = [n for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == name and n.lineno == line][-1]
    return [d.stmt.lineno for d in FunctionDefs(func).reaching(use)]


def test_straight_line_code_the_last_assignment():
    assert reaching("def f(s):\n    s = a(s)\n    s = b(s)\n    return s\n", 4) == [3]


def test_an_optional_branch_and_the_value_before_it_both_reach():
    assert reaching("def f(x):\n    s = a(x)\n    if m:\n        s = b(s)\n    return s\n", 5) == [4, 2]


def test_the_other_branch_of_an_if_else_never_reaches():
    src = "def f(x):\n    s = a(x)\n    if m:\n        s = b(s)\n    else:\n        return s\n    return s\n"
    assert reaching(src, 6) == [2]
    assert reaching(src, 7) == [4, 2]


def test_a_later_assignment_on_every_path_through_the_branch_hides_the_earlier_one():
    src = "def f(x):\n    s = a(x)\n    if m:\n        s = b(s)\n        s = c(s)\n    return s\n"
    assert reaching(src, 6) == [5, 2]


def test_elif_and_loop_and_handler():
    src = ("def f(x):\n    s = a(x)\n    if m:\n        s = b(s)\n    elif n:\n        s = c(s)\n    else:\n"
           "        s = d(s)\n    return s\n")
    assert reaching(src, 9) == [8, 6, 4, 2]
    assert reaching("def f(x):\n    s = a(x)\n    for i in x:\n        s = b(s)\n    return s\n", 5) == [4, 2]
    assert reaching("def f(x):\n    try:\n        s = a(x)\n    except E:\n        s = b(x)\n    return s\n", 6) == [5, 3]


def test_augmented_assignment_holds_the_operation_on_the_earlier_value():
    func = ast.parse("def f(q, k, bias):\n    s = q @ k\n    s += bias\n    return s\n").body[0]
    use = func.body[-1].value
    (definition,) = FunctionDefs(func).reaching(use)
    assert isinstance(definition.value, ast.BinOp) and isinstance(definition.value.op, ast.Add)
    assert [d.stmt.lineno for d in FunctionDefs(func).reaching(definition.value.left)] == [2]


def test_parameters_and_nonlocal_names():
    defs = FunctionDefs(ast.parse("def f(p):\n    global g\n    g = 1\n    return p\n").body[0])
    assert defs.is_local("p") and not defs.is_local("g") and not defs.is_local("other")


def test_following_runs_on_past_the_enclosing_block():
    func = ast.parse("def f(x):\n    if m:\n        y = a(x)\n        z = 1\n    return y\n").body[0]
    assign = func.body[0].body[0]
    assert [s.lineno for s in following(func, assign)] == [4, 5]
