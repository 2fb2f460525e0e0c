"""The fix engine, tested with a test-only rule pack (the real rules' fixes have snapshot tests).

Each TST rule below offers one kind of edit; the engine is driven directly (`fix_text`) and through the
CLI with the registry swapped for this pack.
"""
from __future__ import annotations

import ast
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from typing import List, Optional, Sequence, Type

import pytest

from ascend_lint import cli
from ascend_lint.fix import command, fixer
from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.fileio import split_lines
from ascend_lint.registry import Registry
from ascend_lint.rule import Applicability, Docs, Edit, Fix, Rule

SAFE, UNSAFE, DISPLAY = Applicability.SAFE, Applicability.UNSAFE, Applicability.DISPLAY
TESTS = os.path.dirname(os.path.abspath(__file__))
FIX_FUZZ = int(os.environ.get("ASCEND_LINT_FIX_FUZZ_EXAMPLES", "0"))  # longer runs: see docs/reliability.md


def _call_name(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


class _TestRule(Rule):
    message = "test finding"
    docs = Docs(what="test", why="test")
    file_triggers = ()  # test snippets do not mention a framework


class AddFused(_TestRule):
    """`make_opt(...)` without `fused=True` -> set_keyword (safe)."""

    code, name, triggers, fix_applicability = "TST001", "add-fused", ("make_opt",), SAFE

    def visit_Call(self, node: ast.Call) -> None:
        if _call_name(node) == "make_opt" and not any(
                k.arg == "fused" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords):
            edit = Edit("set_keyword", self.ctx.span(node), "True", "fused")
            self.report(node, fix=Fix(SAFE, "Add `fused=True`", (edit,)))


class CudaString(_TestRule):
    """`'cuda'` -> `'npu'` (safe replace)."""

    code, name, triggers, fix_applicability = "TST002", "cuda-string", ("cuda",), SAFE

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "cuda":
            self.report(node, fix=Fix(SAFE, "Use 'npu'", (Edit("replace", self.ctx.span(node), "'npu'"),)))


class RemoveSync(_TestRule):
    """`sync()` statements are deleted (unsafe)."""

    code, name, triggers, fix_applicability = "TST003", "remove-sync", ("sync",), UNSAFE

    def visit_Expr(self, node: ast.Expr) -> None:
        if _call_name(node.value) == "sync":
            self.report(node, fix=Fix(UNSAFE, "Remove it", (Edit("remove_statement", self.ctx.span(node)),)))


class FusedAdam(_TestRule):
    """`Adam(...)` -> `torch_npu.optim.NpuFusedAdam(...)` plus `import torch_npu` (unsafe)."""

    code, name, triggers, fix_applicability = "TST004", "fused-adam", ("Adam",), UNSAFE

    def visit_Call(self, node: ast.Call) -> None:
        if _call_name(node) == "Adam":
            self.report(node, fix=Fix(UNSAFE, "Use NpuFusedAdam", (
                Edit("replace", self.ctx.span(node.func), "torch_npu.optim.NpuFusedAdam"),), ("torch_npu",)))


class ConfigureAfter(_TestRule):
    """`x = setup()` not followed by `configure(x)` -> insert it after (safe)."""

    code, name, triggers, fix_applicability = "TST005", "configure-after", ("setup", "configure"), SAFE

    def visit_Assign(self, node: ast.Assign) -> None:
        if _call_name(node.value) != "setup":
            return
        parent = self.ctx.parent or self.ctx.tree
        body = next(b for b in (getattr(parent, f, None) for f in ("body", "orelse")) if b and node in b)
        i = body.index(node)
        following = body[i + 1] if i + 1 < len(body) else None
        if not (isinstance(following, ast.Expr) and _call_name(following.value) == "configure"):
            target = ast.unparse(node.targets[0])
            self.report(node, fix=Fix(SAFE, "Configure it", (
                Edit("insert_after", self.ctx.span(node), f"configure({target})"),)))


class CloseMethod(_TestRule):
    """A class `Res*` without `close` gets one at the end of its body (safe)."""

    code, name, triggers, fix_applicability = "TST006", "close-method", ("Res",), SAFE

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name.startswith("Res") and not any(
                isinstance(s, ast.FunctionDef) and s.name == "close" for s in node.body):
            self.report(node, fix=Fix(SAFE, "Add close()", (Edit(
                "insert_body_end", self.ctx.span(node), "\ndef close(self):\n    self.handle = None\n"),)))


class OldApi(_TestRule):
    """`old_api` -> `mid_api`; MidApi then rewrites `mid_api` -> `new_api` (needs a second round)."""

    code, name, triggers, fix_applicability = "TST007", "old-api", ("old_api",), SAFE

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "old_api":
            self.report(node, fix=Fix(SAFE, "mid", (Edit("replace", self.ctx.span(node), "mid_api"),)))


class MidApi(_TestRule):
    code, name, triggers, fix_applicability = "TST008", "mid-api", ("mid_api",), SAFE

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "mid_api":
            self.report(node, fix=Fix(SAFE, "new", (Edit("replace", self.ctx.span(node), "new_api"),)))


class BrokenFix(_TestRule):
    """Its fix turns an assignment target into a call: libcst prints it, `ast` rejects it."""

    code, name, triggers, fix_applicability = "TST009", "broken-fix", ("bad",), SAFE

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "bad" and isinstance(node.ctx, ast.Store):
            self.report(node, fix=Fix(SAFE, "break it", (Edit("replace", self.ctx.span(node), "bad()"),)))


class NoopFix(_TestRule):
    """Flags `keep(...)` and 'fixes' it by setting the keyword it already has."""

    code, name, triggers, fix_applicability = "TST010", "noop-fix", ("keep",), SAFE

    def visit_Call(self, node: ast.Call) -> None:
        if _call_name(node) == "keep":
            self.report(node, fix=Fix(SAFE, "same", (Edit("set_keyword", self.ctx.span(node), "1", "k"),)))


class Ping(_TestRule):
    code, name, triggers, fix_applicability = "TST011", "ping", ("ping",), SAFE

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "ping":
            self.report(node, fix=Fix(SAFE, "pong", (Edit("replace", self.ctx.span(node), "pong"),)))


class Pong(_TestRule):
    code, name, triggers, fix_applicability = "TST012", "pong", ("pong",), SAFE

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "pong":
            self.report(node, fix=Fix(SAFE, "ping", (Edit("replace", self.ctx.span(node), "ping"),)))


class Grow(_TestRule):
    """`grow(x)` -> `grow(grow(x))`: never converges."""

    code, name, triggers, fix_applicability = "TST013", "grow", ("grow",), SAFE

    def visit_Call(self, node: ast.Call) -> None:
        if _call_name(node) == "grow" and not (node.args and _call_name(node.args[0]) == "grow"):
            inner = ast.unparse(node)
            self.report(node, fix=Fix(SAFE, "grow", (Edit("replace", self.ctx.span(node), f"grow({inner})"),)))


class Lost(_TestRule):
    """Its edit points at a span that holds no node."""

    code, name, triggers, fix_applicability = "TST014", "lost", ("lost",), SAFE

    def visit_Call(self, node: ast.Call) -> None:
        if _call_name(node) == "lost":
            span = self.ctx.span(node)
            wrong = type(span)(span.line, span.col + 1, span.end_line, span.end_col)
            self.report(node, fix=Fix(SAFE, "lost", (Edit("replace", wrong, "found()"),)))


class XpuString(_TestRule):
    """A second fix on the very node TST002 rewrites (a conflict)."""

    code, name, triggers, fix_applicability = "TST015", "xpu-string", ("cuda",), SAFE

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "cuda":
            self.report(node, fix=Fix(SAFE, "Use 'xpu'", (Edit("replace", self.ctx.span(node), "'xpu'"),)))


class Shown(_TestRule):
    """A display-only fix."""

    code, name, triggers, fix_applicability = "TST016", "shown", ("shown",), DISPLAY

    def visit_Call(self, node: ast.Call) -> None:
        if _call_name(node) == "shown":
            self.report(node, fix=Fix(DISPLAY, "see docs", (Edit("replace", self.ctx.span(node), "other()"),)))


class WrapSum(_TestRule):
    """`total` -> `a + b`: a non-atomic replacement needs parentheses."""

    code, name, triggers, fix_applicability = "TST017", "wrap-sum", ("total",), SAFE

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "total":
            self.report(node, fix=Fix(SAFE, "sum", (Edit("replace", self.ctx.span(node), "a + b"),)))


class SwapStatement(_TestRule):
    """`old_stmt()` statement -> two statements (statement-level replace)."""

    code, name, triggers, fix_applicability = "TST018", "swap-statement", ("old_stmt",), SAFE

    def visit_Expr(self, node: ast.Expr) -> None:
        if _call_name(node.value) == "old_stmt":
            self.report(node, fix=Fix(SAFE, "split", (
                Edit("replace", self.ctx.span(node), "first = 1\nsecond(first)"),)))


PACK: List[Type[Rule]] = [AddFused, CudaString, RemoveSync, FusedAdam, ConfigureAfter, CloseMethod, OldApi, MidApi,
                          BrokenFix, NoopFix, Ping, Pong, Grow, Lost, XpuString, Shown, WrapSum, SwapStatement]
BY_CODE = {r.code: r for r in PACK}


def run_fix(src: str, codes: Sequence[str], unsafe: bool = True, **settings) -> fixer.FileFix:
    cfg = Settings(unsafe_fixes=unsafe, **settings)
    linter = Linter([BY_CODE[c] for c in codes], cfg)
    findings = linter.check(src, "t.py")
    fixer.apply_fix_settings(findings, cfg)
    return fixer.fix_text(src, "t.py", findings, linter, cfg)


def fixed(src: str, *codes: str, unsafe: bool = True) -> str:
    result = run_fix(textwrap.dedent(src), codes, unsafe)
    assert not result.warnings, result.warnings
    return result.text


# ----------------------------------------------------------------------------- set_keyword
@pytest.mark.parametrize("before,after", [
    ("o = make_opt(a, b)\n", "o = make_opt(a, b, fused=True)\n"),
    ("o = make_opt()\n", "o = make_opt(fused=True)\n"),
    ("o = make_opt(a, fused=False)\n", "o = make_opt(a, fused=True)\n"),
    ("o = make_opt(a, fused = 0, lr=1)\n", "o = make_opt(a, fused = True, lr=1)\n"),
    ("o = make_opt(*a, **kw)\n", "o = make_opt(*a, **kw, fused=True)\n"),
    ("o = make_opt(a,\n             b)\n", "o = make_opt(a,\n             b, fused=True)\n"),
    # one argument per line, trailing comma, comments inside the call: the new one gets its own line
    ("o = make_opt(\n    params,  # the params\n    lr=0.1,  # rate\n)\n",
     "o = make_opt(\n    params,  # the params\n    lr=0.1,  # rate\n    fused=True,\n)\n"),
    ("o = make_opt(\n    a,\n    b  # c\n)\n", "o = make_opt(\n    a,\n    b,  # c\n    fused=True\n)\n"),
    ("o = make_opt(\n    a\n)\n", "o = make_opt(\n    a,\n    fused=True\n)\n"),
    ("o = make_opt(a, b,\n)\n", "o = make_opt(a, b, fused=True,\n)\n"),
])
def test_set_keyword_follows_the_call_layout(before, after):
    assert fixed(before, "TST001") == after


# ----------------------------------------------------------------------------- replace
def test_replace_keeps_parentheses_and_wraps_non_atomic_text():
    assert fixed("d = ('cuda')\n", "TST002") == "d = ('npu')\n"
    assert fixed("y = total * 2\n", "TST017") == "y = (a + b) * 2\n"
    assert fixed("y = (total) * 2\n", "TST017") == "y = (a + b) * 2\n"


def test_replace_statement_with_statements_keeps_comments_and_indent():
    src = """\
    def f():
        # before
        old_stmt()  # trailing
        return 1
    """
    assert fixed(src, "TST018") == textwrap.dedent("""\
    def f():
        # before
        first = 1
        second(first)
        return 1
    """)
    shared = run_fix("x = 1; old_stmt(); y = 2\n", ["TST018"])
    assert shared.text == "x = 1; old_stmt(); y = 2\n"
    assert "TST018 fix at line 1 could not be applied (several statements cannot replace" in shared.warnings[0]


# ----------------------------------------------------------------------------- remove_statement
def test_remove_statement_variants():
    src = """\
    import os
    if x:
        sync()
    for i in y:
        # comment about the next line
        sync()
        z = 1
    sync(); a = 1
    b = 2; sync()
    if q: sync()
    def f():
        z = 1
        # why we sync
        sync()
    """
    assert fixed(src, "TST003") == textwrap.dedent("""\
    import os
    if x:
        pass
    for i in y:
        # comment about the next line
        z = 1
    a = 1
    b = 2
    if q: pass
    def f():
        z = 1
        # why we sync
    """)


def test_removing_the_only_statement_of_a_block_with_comments_gives_pass():
    src = "while True:\n    # keep this comment\n    sync()  # and this goes\nx = 1\n"
    assert fixed(src, "TST003") == "while True:\n    # keep this comment\n    pass\nx = 1\n"


# ----------------------------------------------------------------------------- inserts
def test_insert_after_and_body_end():
    src = """\
    m = setup()
    if c:
        n = setup()  # keep
        run(n)
    class Resource:
        def open(self):
            pass
    """
    assert fixed(src, "TST005", "TST006") == textwrap.dedent("""\
    m = setup()
    configure(m)
    if c:
        n = setup()  # keep
        configure(n)
        run(n)
    class Resource:
        def open(self):
            pass

        def close(self):
            self.handle = None
    """)


# ----------------------------------------------------------------------------- imports
def test_import_added_after_the_last_top_level_import_once():
    src = """\
    \"\"\"Doc.\"\"\"
    import os
    from x import y

    a = Adam(p)
    b = Adam(q)
    """
    assert fixed(src, "TST004") == textwrap.dedent("""\
    \"\"\"Doc.\"\"\"
    import os
    from x import y
    import torch_npu

    a = torch_npu.optim.NpuFusedAdam(p)
    b = torch_npu.optim.NpuFusedAdam(q)
    """)


def test_import_goes_with_the_framework_imports_even_when_a_fix_rewrites_one():
    src = ("import torch\nfrom torch.cuda.amp import autocast\nx = torch.zeros(3).cuda()\n"
           "dist.init_process_group(backend='nccl')\n")
    from conftest import REGISTRY

    cfg = Settings(preview=True, target="npu", unsafe_fixes=True)
    linter = Linter(REGISTRY.sorted_rules(), cfg)
    result = fixer.fix_text(src, "port.py", linter.check(src, "port.py"), linter, cfg)
    assert result.text.splitlines() == [
        "import torch", "import torch_npu  # noqa: F401", "from torch_npu.npu.amp import autocast",
        "x = torch.zeros(3).npu()", "dist.init_process_group(backend='hccl')",
    ]


@pytest.mark.parametrize("header,prefix", [
    ("import torch_npu as tnpu\n", "tnpu"),
    ("import torch_npu\n", "torch_npu"),
    ("import torch_npu.optim\n", "torch_npu"),
])
def test_existing_imports_and_aliases_are_honoured(header, prefix):
    out = fixed(header + "o = Adam(p)\n", "TST004")
    assert out == header + f"o = {prefix}.optim.NpuFusedAdam(p)\n"


@pytest.mark.parametrize("src", [
    "try:\n    import torch_npu\nexcept ImportError:\n    torch_npu = None\no = Adam(p)\n",
    "if HAS_NPU:\n    import torch_npu\no = Adam(p)\n",
    "def f():\n    import torch_npu\n    return Adam(p)\n",
])
def test_a_module_imported_only_behind_a_guard_blocks_the_fix(src):
    """The fix's code would run where the guarded import may have failed: not applied, and no
    unconditional import is added next to the guard."""
    result = run_fix(src, ["TST004"], unsafe=True)
    assert result.text == src and not result.applied
    assert any("imports only conditionally" in w for w in result.warnings), result.warnings


def test_import_lands_above_module_level_code_that_needs_it():
    src = '"""Doc."""\nfrom __future__ import annotations\nimport os\nimport torch\n\nOPT = Adam(p)\n' \
          "import numpy as np\n"
    assert fixed(src, "TST004") == ('"""Doc."""\nfrom __future__ import annotations\nimport os\nimport torch\n'
                                    "import torch_npu\n\nOPT = torch_npu.optim.NpuFusedAdam(p)\nimport numpy as np\n")


def test_side_effect_import_carries_noqa_f401_and_a_named_one_does_not():
    src = "import torch\nx = y.to('cuda')\n"
    from conftest import REGISTRY

    cfg = Settings(preview=True, target="npu", unsafe_fixes=True)
    linter = Linter([r for r in REGISTRY.sorted_rules() if r.code == "ASC601"], cfg)
    result = fixer.fix_text(src, "m.py", linter.check(src, "m.py"), linter, cfg)
    assert result.text == "import torch\nimport torch_npu  # noqa: F401\nx = y.to('npu')\n"
    assert fixed("import torch\no = Adam(p)\n", "TST004") == \
        "import torch\nimport torch_npu\no = torch_npu.optim.NpuFusedAdam(p)\n"  # named: no noqa


def test_import_goes_after_a_docstring_or_first_without_imports():
    """With the blank lines isort wants between the imports and the code (one; two above a def)."""
    assert fixed('"""doc"""\no = Adam(p)\n', "TST004") == \
        '"""doc"""\nimport torch_npu\n\no = torch_npu.optim.NpuFusedAdam(p)\n'
    assert fixed("#!/usr/bin/env python\n# a header\n\no = Adam(p)\n", "TST004") == \
        "#!/usr/bin/env python\n# a header\n\nimport torch_npu\n\no = torch_npu.optim.NpuFusedAdam(p)\n"
    assert fixed("def f():\n    return Adam(p)\n", "TST004") == \
        "import torch_npu\n\n\ndef f():\n    return torch_npu.optim.NpuFusedAdam(p)\n"


# ----------------------------------------------------------------------------- applicability
def test_unsafe_fixes_need_the_flag():
    src = "sync()\nd = 'cuda'\n"
    safe_only = run_fix(src, ["TST002", "TST003"], unsafe=False)
    assert safe_only.text == "sync()\nd = 'npu'\n"
    assert [f.code for f in safe_only.findings] == ["TST003"]
    both = run_fix(src, ["TST002", "TST003"], unsafe=True)
    assert both.text == "d = 'npu'\n" and not both.findings


def test_extend_safe_and_unsafe_fixes_by_prefix():
    src = "sync()\nd = 'cuda'\n"
    promoted = run_fix(src, ["TST002", "TST003"], unsafe=False, extend_safe_fixes=["TST003"])
    assert promoted.text == "d = 'npu'\n"
    demoted = run_fix(src, ["TST002", "TST003"], unsafe=False, extend_unsafe_fixes=["TST"])
    assert demoted.text == src and demoted.findings[0].fix.applicability is UNSAFE
    # the most specific selector wins
    mixed = run_fix(src, ["TST002", "TST003"], unsafe=False, extend_unsafe_fixes=["TST"],
                    extend_safe_fixes=["TST002"])
    assert mixed.text == "sync()\nd = 'npu'\n"


def test_effective_applicability_rules():
    fix = Fix(SAFE, "x", ())
    cfg = Settings(extend_safe_fixes=["ASC6"], extend_unsafe_fixes=["ASC601"])
    assert fixer.effective_applicability("ASC601", fix, cfg) is UNSAFE
    assert fixer.effective_applicability("ASC602", Fix(UNSAFE, "x", ()), cfg) is SAFE
    assert fixer.effective_applicability("ASC101", fix, cfg) is SAFE
    assert fixer.effective_applicability("ASC601", Fix(DISPLAY, "x", ()), cfg) is DISPLAY
    tie = Settings(extend_safe_fixes=["ASC6"], extend_unsafe_fixes=["ASC6"])
    assert fixer.effective_applicability("ASC601", fix, tie) is UNSAFE
    assert fixer.effective_applicability("ASC601", fix, Settings(extend_unsafe_fixes=["ALL"])) is UNSAFE


def test_display_fixes_are_never_applied():
    result = run_fix("shown()\n", ["TST016"], unsafe=True)
    assert result.text == "shown()\n" and not result.applied


# ----------------------------------------------------------------------------- conflicts and rounds
def test_overlapping_fixes_first_wins_the_rest_is_not_applied_in_that_pass():
    src = "d = 'cuda'\n"
    cfg = Settings()
    linter = Linter([CudaString, XpuString], cfg)
    findings = linter.check(src, "t.py")
    attempt = fixer._apply_once(src, findings)
    assert attempt.text == "d = 'npu'\n" and [f.code for f in attempt.applied] == ["TST002"]
    result = fixer.fix_text(src, "t.py", findings, linter, cfg)
    assert result.text == "d = 'npu'\n" and not result.findings  # TST015 no longer applies


def test_nested_edits_compose_in_one_pass():
    src = "o = make_opt(device='cuda')\n"
    linter = Linter([AddFused, CudaString], Settings())
    findings = linter.check(src, "t.py")
    attempt = fixer._apply_once(src, findings)
    assert attempt.text == "o = make_opt(device='npu', fused=True)\n" and len(attempt.applied) == 2


def test_fixes_revealed_by_a_fix_run_in_a_later_round():
    result = run_fix("f = old_api\n", ["TST007", "TST008"])
    assert result.text == "f = new_api\n" and [f.code for f in result.applied] == ["TST007", "TST008"]
    assert not result.warnings and not result.findings


# ----------------------------------------------------------------------------- broken fixes
def test_a_fix_producing_invalid_python_is_dropped_others_applied():
    result = run_fix("bad = 1\nd = 'cuda'\n", ["TST002", "TST009"])
    assert result.text == "bad = 1\nd = 'npu'\n"
    assert any("TST009" in w and "invalid Python" in w for w in result.warnings)
    assert [f.code for f in result.findings] == ["TST009"]


def test_a_fix_that_changes_nothing_is_dropped_as_not_idempotent():
    result = run_fix("keep(k=1)\n", ["TST010"])
    assert result.text == "keep(k=1)\n" and not result.applied
    assert any("TST010" in w and "not idempotent" in w for w in result.warnings)


def test_fixes_undoing_each_other_leave_the_file_as_it_was():
    result = run_fix("a = ping\n", ["TST011", "TST012"])
    assert result.text == "a = ping\n" and not result.applied
    assert any("TST011" in w and "TST012" in w and "left as it was" in w for w in result.warnings)


def test_a_fix_that_never_converges_leaves_the_file_as_it_was():
    result = run_fix("a = grow(x)\n", ["TST013"])
    assert result.text == "a = grow(x)\n" and not result.applied
    assert any("TST013" in w and "did not converge" in w for w in result.warnings)


def test_a_fix_whose_target_is_missing_is_reported():
    result = run_fix("lost()\nd = 'cuda'\n", ["TST002", "TST014"])
    assert result.text == "lost()\nd = 'npu'\n"
    assert any("TST014" in w and "not found" in w for w in result.warnings)


def test_a_statement_libcst_cannot_parse_blocks_only_its_own_fixes(monkeypatch):
    import libcst

    real = libcst.parse_module

    def picky(source, *args, **kwargs):
        if "skip_me" in source:
            raise libcst.ParserSyntaxError("unsupported", lines=[source], raw_line=1, raw_column=0)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", picky)
    gap = "\n" * (fixer.CHUNK_GAP + 1)  # statements far apart are parsed separately
    result = run_fix(f"skip_me = 'cuda'{gap}d = 'cuda'\n", ["TST002"])
    assert result.text == f"skip_me = 'cuda'{gap}d = 'npu'\n"
    assert "libcst could not parse the statement at line 1" in result.warnings[0]


# ----------------------------------------------------------------------------- bytes outside the edits
def test_newlines_tabs_and_unicode_outside_the_edit_are_kept():
    src = "# é ünïcode\r\nif x:\r\n\tsync()\r\n\ty = 'é' + 'cuda'  # ü\r\nz = make_opt(a,\r\n   b)\r\n"
    out = run_fix(src, ["TST001", "TST002", "TST003"]).text
    assert out == "# é ünïcode\r\nif x:\r\n\ty = 'é' + 'npu'  # ü\r\nz = make_opt(a,\r\n   b, fused=True)\r\n"
    wide = run_fix("s = '\U0001F600é'; d = 'cuda'  # \U0001F600\nx = make_opt(a='\U0001F600', b=1)\n",
                   ["TST001", "TST002"])
    assert wide.text == "s = '\U0001F600é'; d = 'npu'  # \U0001F600\nx = make_opt(a='\U0001F600', b=1, fused=True)\n"


def test_many_fixes_in_one_file_stay_fast():
    import time

    start = time.perf_counter()
    result = run_fix("import os\n" + "d = 'cuda'\n" * 1000, ["TST002"])
    assert len(result.applied) == 1000 and time.perf_counter() - start < 20


def test_inserted_code_uses_the_files_newline_and_indent():
    src = "class Resource:\r\n  def open(self):\r\n    pass\r\n"
    out = run_fix(src, ["TST006"]).text
    assert out == ("class Resource:\r\n  def open(self):\r\n    pass\r\n\r\n"
                   "  def close(self):\r\n    self.handle = None\r\n")


# ----------------------------------------------------------------------------- CLI
@pytest.fixture
def pack(monkeypatch, tmp_path):
    registry = Registry()
    registry.add_pack("testpack", PACK)
    monkeypatch.setattr(cli, "_registry", lambda: registry)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def run(capsys, *args):
    code = cli.main(["check", "--isolated", "--no-cache", "--select", "TST001,TST002,TST003,TST004", *args])
    out, err = capsys.readouterr()
    return code, out, err


SRC = "import os\nsync()\no = make_opt(a)\nd = 'cuda'\n"


def test_cli_fix_writes_and_reports_what_remains(pack, capsys):
    path = pack / "m.py"
    path.write_text(SRC)
    code, out, err = run(capsys, "--fix", "m.py")
    assert path.read_text() == "import os\nsync()\no = make_opt(a, fused=True)\nd = 'npu'\n"
    assert code == 1 and "m.py:2:1: TST003" in out
    assert "Found 3 findings (2 fixed, 1 remaining)." in out
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option" in out or "--unsafe-fixes" in out
    assert "Traceback" not in err
    code, out, _ = run(capsys, "--fix", "--unsafe-fixes", "m.py")
    assert code == 0 and path.read_text() == "import os\no = make_opt(a, fused=True)\nd = 'npu'\n"
    assert "Fixed 1 finding" in out
    code, out, _ = run(capsys, "--fix", "--unsafe-fixes", "m.py")  # a second run changes nothing
    assert code == 0 and "All checks passed!" in out


def test_cli_fix_after_a_cached_check_and_with_workers(pack, capsys):
    for name in ("a.py", "b.py", "c.py"):
        (pack / name).write_text(SRC)
    cache = ["--cache-dir", str(pack / ".cache")]
    cli.main(["check", "--isolated", "--select", "TST001,TST002", *cache, "a.py", "b.py", "c.py"])
    code = cli.main(["check", "--isolated", "--select", "TST001,TST002", "-j", "2", *cache, "--fix",
                     "a.py", "b.py", "c.py"])
    out, _ = capsys.readouterr()
    assert code == 0 and "Fixed 6 findings" in out
    for name in ("a.py", "b.py", "c.py"):
        assert (pack / name).read_text() == "import os\nsync()\no = make_opt(a, fused=True)\nd = 'npu'\n"


def test_cli_config_fix_and_extend_safe_fixes(pack, capsys):
    (pack / "pyproject.toml").write_text('[tool.ascend-lint]\nfix = true\nextend-safe-fixes = ["TST003"]\n')
    (pack / "m.py").write_text(SRC)
    code = cli.main(["check", "--no-cache", "--select", "TST001,TST002,TST003", "m.py"])
    capsys.readouterr()
    assert code == 0 and (pack / "m.py").read_text() == "import os\no = make_opt(a, fused=True)\nd = 'npu'\n"


def test_cli_diff_writes_nothing(pack, capsys):
    path = pack / "m.py"
    path.write_text(SRC)
    before = os.stat(path).st_mtime_ns
    code, out, err = run(capsys, "--diff", "m.py")
    assert code == 1 and path.read_text() == SRC and os.stat(path).st_mtime_ns == before
    assert "--- m.py\n+++ m.py\n" in out
    assert "-o = make_opt(a)\n-d = 'cuda'\n+o = make_opt(a, fused=True)\n+d = 'npu'\n" in out
    assert "-sync()" not in out and "Would fix 2 findings (1 additional fix available with `--unsafe-fixes`).\n" in err
    (pack / "clean.py").write_text("x = 1\n")
    code, out, _ = run(capsys, "--diff", "clean.py")
    assert code == 0 and out == ""


def test_cli_show_fixes(pack, capsys):
    (pack / "m.py").write_text(SRC)
    (pack / "n.py").write_text("a = 'cuda'\nb = 'cuda'\n")
    code, out, _ = run(capsys, "--fix", "--show-fixes", "m.py", "n.py")
    assert "Fixed 4 findings:\n- m.py:\n    1 \u00d7 TST001 (add-fused)\n    1 \u00d7 TST002 (cuda-string)\n" \
           "- n.py:\n    2 \u00d7 TST002 (cuda-string)\n" in out


def test_cli_keeps_mode_crlf_bom_and_latin1(pack, capsys):
    crlf, bom, latin = pack / "crlf.py", pack / "bom.py", pack / "latin.py"
    crlf.write_bytes(b"d = 'cuda'\r\nx = 1\r\n")
    bom.write_bytes(b"\xef\xbb\xbfs = '\xc3\xa9'\nd = 'cuda'\n")
    latin.write_bytes(b"# -*- coding: latin-1 -*-\ns = '\xe9'  # caf\xe9\nd = 'cuda'\n")
    os.chmod(crlf, 0o751)
    code, _, err = run(capsys, "--fix", "crlf.py", "bom.py", "latin.py")
    assert code == 0, err
    assert crlf.read_bytes() == b"d = 'npu'\r\nx = 1\r\n"
    assert stat.S_IMODE(os.stat(crlf).st_mode) == 0o751
    assert bom.read_bytes() == b"\xef\xbb\xbfs = '\xc3\xa9'\nd = 'npu'\n"
    assert latin.read_bytes() == b"# -*- coding: latin-1 -*-\ns = '\xe9'  # caf\xe9\nd = 'npu'\n"
    assert sorted(os.listdir(pack)) == ["bom.py", "crlf.py", "latin.py"]  # no temp files left


def test_cli_fix_that_cannot_be_encoded_is_not_written(pack, capsys, monkeypatch):
    latin = pack / "latin.py"
    raw = b"# -*- coding: latin-1 -*-\nd = 'cuda'\n"
    latin.write_bytes(raw)
    monkeypatch.setattr(CudaString, "visit_Constant", lambda self, node: self.report(node, fix=Fix(
        SAFE, "x", (Edit("replace", self.ctx.span(node), "'\u4e2d'"),))) if node.value == "cuda" else None)
    code, _, err = run(capsys, "--fix", "latin.py")
    assert latin.read_bytes() == raw and "cannot be encoded as iso-8859-1" in err and code == 1


def test_cli_symlink_is_followed_not_replaced(pack, capsys):
    real = pack / "real.py"
    real.write_text("d = 'cuda'\n")
    (pack / "link.py").symlink_to(real)
    run(capsys, "--fix", "link.py")
    assert os.path.islink(pack / "link.py") and real.read_text() == "d = 'npu'\n"


def test_cli_read_only_file_warns_without_traceback(pack, capsys):
    path = pack / "ro.py"
    path.write_text("d = 'cuda'\n")
    os.chmod(path, 0o444)
    code, out, err = run(capsys, "--fix", "ro.py")
    assert path.read_text() == "d = 'cuda'\n" and code == 1
    assert "ro.py: the file is read-only; fixes not written" in err and "Traceback" not in err
    assert "ro.py:1:5: TST002" in out


def test_file_changed_on_disk_is_not_written(pack, capsys):
    path = pack / "m.py"
    path.write_text("d = 'cuda'\n")
    cfg = Settings()
    linter = Linter([CudaString], cfg)
    results = [linter.lint_path(str(path))]
    path.write_text("d = 'cuda'  # edited meanwhile\n")
    outcome = command.fix_results(results, linter, cfg)
    _, err = capsys.readouterr()
    assert outcome.fixed == 0 and path.read_text() == "d = 'cuda'  # edited meanwhile\n"
    assert "changed on disk since it was read" in err


def test_stdin_fix_writes_the_fixed_bytes_to_stdout(pack, capfdbinary, monkeypatch):
    import io

    raw = b"# -*- coding: latin-1 -*-\r\ns = '\xe9'\r\nd = 'cuda'\r\n"

    class Stdin:
        buffer = io.BytesIO(raw)

    monkeypatch.setattr(sys, "stdin", Stdin)
    code = cli.main(["check", "--isolated", "--select", "TST002", "--fix", "-"])
    out, _ = capfdbinary.readouterr()
    assert out == b"# -*- coding: latin-1 -*-\r\ns = '\xe9'\r\nd = 'npu'\r\n" and code == 0
    Stdin.buffer = io.BytesIO(raw)
    code = cli.main(["check", "--isolated", "--select", "TST002", "--diff", "-"])
    out, _ = capfdbinary.readouterr()
    assert code == 1 and b"-d = 'cuda'\r\n+d = 'npu'\r\n" in out
    Stdin.buffer = io.BytesIO(b"x = (\n")  # does not parse: echoed unchanged
    code = cli.main(["check", "--isolated", "--select", "TST002", "--fix", "-"])
    out, _ = capfdbinary.readouterr()
    assert out == b"x = (\n"


# ----------------------------------------------------------------------------- libcst stays unloaded
def _modules_after(args: List[str], cwd: str) -> str:
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {TESTS!r})
        import test_fixer
        from ascend_lint import cli
        from ascend_lint.registry import Registry
        registry = Registry()
        registry.add_pack("testpack", test_fixer.PACK)
        cli._registry = lambda: registry
        code = cli.main({args!r})
        sys.stdout.flush()
        print("LIBCST" if "libcst" in sys.modules else "NO-LIBCST")
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_libcst_is_imported_only_when_a_fix_is_applied(tmp_path):
    (tmp_path / "m.py").write_text("d = 'cuda'\nsync()\n")
    base = ["check", "--isolated", "--no-cache", "--exit-zero", "--select", "TST002,TST003", "m.py"]
    assert _modules_after(base, str(tmp_path)) == "NO-LIBCST"
    (tmp_path / "n.py").write_text("sync()\n")  # only an unsafe fix: nothing to apply
    assert _modules_after(base[:-1] + ["--fix", "n.py"], str(tmp_path)) == "NO-LIBCST"
    assert _modules_after(base + ["--fix"], str(tmp_path)) == "LIBCST"


def test_plain_check_with_the_real_rules_never_imports_libcst(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nimport torch_npu\nx = torch.randn(3).cuda()\n"
                                   "torch.npu.synchronize()\n")
    script = ("import sys\nfrom ascend_lint.cli import main\nmain(['check', '--isolated', '--no-cache', 'm.py'])\n"
              "sys.stdout.flush()\nprint('LIBCST' if 'libcst' in sys.modules else 'NO-LIBCST')\n")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "NO-LIBCST"
    assert "libcst" not in proc.stderr  # -X importtime lists every module imported


# ----------------------------------------------------------------------------- interrupted runs
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupted_fix_leaves_each_file_untouched_or_fully_fixed(tmp_path, sig):
    before = "import os\n" + "d = 'cuda'\no = make_opt(a)\n" * 40
    after = "import os\n" + "d = 'npu'\no = make_opt(a, fused=True)\n" * 40
    for i in range(80):
        (tmp_path / f"f{i:03}.py").write_text(before)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {TESTS!r})
        import test_fixer
        from ascend_lint import cli
        from ascend_lint.registry import Registry
        registry = Registry()
        registry.add_pack("testpack", test_fixer.PACK)
        cli._registry = lambda: registry
        print("ready", flush=True)
        cli.main(["check", "--isolated", "--no-cache", "-j", "1", "--select", "TST001,TST002", "--fix", "."])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    deadline = time.time() + 30
    while time.time() < deadline and (tmp_path / "f000.py").read_text() != after:
        time.sleep(0.002)  # wait until fixing has started (files are fixed in path order)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    states = [(tmp_path / f"f{i:03}.py").read_text() for i in range(80)]
    assert all(s in (before, after) for s in states)
    assert after in states
    if sig != signal.SIGKILL:  # a catchable signal waits for the write window: no temporary file is left
        assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# ----------------------------------------------------------------------------- property: random programs
PIECES = [
    "d = 'cuda'\n",
    "o = make_opt(a, b)\n",
    "o = make_opt(\n    a,  # first\n    b,\n)\n",
    "sync()\n",
    "if c:\n    sync()\n",
    "if c:\n    # why\n    sync()  # now\nelse:\n    e = ('cuda')\n",
    "def f(x):\n    sync(); return make_opt(x, device='cuda')\n",
    "o = Adam(p, lr=1)\n",
    "x = old_api(1)\n",
    "m = setup()\n",
    "class Resource:\n    n = 1\n",
    "# a comment ü\n",
    "\n",
    "for i in range(3):\n    t = [make_opt(i) for _ in 'cuda']\n",
]


def test_fixes_on_random_programs_parse_converge_and_keep_other_lines():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
    @hypothesis.given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=10), st.booleans(),
                      st.sampled_from(["", "import os\n", "import torch_npu as tnpu\n", '"""doc"""\n']))
    def check(pieces, crlf, head):
        src = head + "".join(pieces)
        if crlf:
            src = src.replace("\n", "\r\n")
        codes = ["TST001", "TST002", "TST003", "TST004", "TST005", "TST006", "TST007", "TST008"]
        first = run_fix(src, codes)
        assert not first.warnings
        ast.parse(first.text)
        assert not [f for f in first.findings if f.fix is not None]
        second = run_fix(first.text, codes)
        assert second.text == first.text and not second.applied
        if crlf:
            assert "\n" not in first.text.replace("\r\n", "")
        # every original line is either kept or inside a fixed finding's lines
        touched = set()
        for finding in first.applied:
            touched.update(range(finding.line, finding.end_line + 1))
            for edit in finding.fix.edits:
                touched.update(range(edit.span.line, edit.span.end_line + 1))
        import difflib

        old, new = split_lines(src, keepends=True), split_lines(first.text, keepends=True)
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag in ("replace", "delete"):
                assert set(range(i1 + 1, i2 + 1)) <= touched, (src, first.text)

    check()


# ----------------------------------------------------------------------------- property: the real rules
def _real_rule_fix_is_sound(src: str) -> None:
    """Fixing with every real rule: never raises, parses, is stable, and keeps lines it did not touch."""
    from conftest import REGISTRY

    cfg = Settings(preview=True, target="npu", unsafe_fixes=True)
    linter = Linter(REGISTRY.sorted_rules(), cfg)
    try:
        findings = linter.check(src, "p.py")
    except Exception as exc:  # noqa: BLE001 - only SourceError is expected
        from ascend_lint.fileio import SourceError

        assert isinstance(exc, SourceError)
        return
    result = fixer.fix_text(src, "p.py", findings, linter, cfg)
    assert not any("internal error" in w or "invalid Python" in w for w in result.warnings), result.warnings
    if not result.applied:
        assert result.text == src
        return
    ast.parse(result.text)
    again = fixer.fix_text(result.text, "p.py", linter.check(result.text, "p.py"), linter, cfg)
    assert again.text == result.text and not again.applied
    # the fix-safety harness's checks (tests/fixsafety.py): nothing new for pyflakes, no use before import
    from fixsafety import pyflakes_counts, uses_before_import

    new = pyflakes_counts(result.text) - pyflakes_counts(src)
    assert not new, (dict(new), src, result.text)
    assert set(uses_before_import(result.text)) <= set(uses_before_import(src)), (src, result.text)
    import difflib

    first_round = {(f.code, f.line, f.col) for f in findings}
    if any((f.code, f.line, f.col) not in first_round for f in result.applied):
        return  # a cascade (a fix enabled by an earlier one): its lines are numbered in an intermediate text
    touched = set()
    for finding in result.applied:
        touched.update(range(finding.line, finding.end_line + 1))
        for edit in finding.fix.edits:
            touched.update(range(edit.span.line, edit.span.end_line + 1))
    for stmt in ast.parse(src).body:  # imports a fix leaves unused are removed or marked `# noqa: F401`
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            touched.update(range(stmt.lineno, stmt.end_lineno + 1))
    old, new = split_lines(src, keepends=True), split_lines(result.text, keepends=True)
    touched.update(i for i, line in enumerate(old, 1) if not line.strip())  # blank lines next to removals
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            assert set(range(i1 + 1, i2 + 1)) <= touched, (src, result.text)


FIXABLE = [
    "x = x.cuda()\n", "torch.npu.synchronize()\n", "opt = torch.optim.SGD(p, lr=0.1)\n",
    "os.environ['ASCEND_LAUNCH_BLOCKING'] = '1'\n", "if a: torch.npu.synchronize()\n",
    "a = 1; torch.npu.synchronize()\n", "dist.init_process_group('nccl')\n",
    "optimizer.zero_grad(set_to_none=True)\n", "model, opt = amp.initialize(model, opt)\n",
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "    def forward(self, x):\n        torch.cuda.synchronize()\n        return x * torch.tensor([1.0]).npu()\n",
    "torch.backends.cuda.matmul.allow_tf32 = True\n", "n = torch.cuda.device_count()\n",
]


def test_real_rule_fixes_on_mutated_sources():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    root = os.path.dirname(TESTS)
    corpus = [open(os.path.join(root, "examples", n), encoding="utf-8").read()
              for n in sorted(os.listdir(os.path.join(root, "examples"))) if n.endswith(".py")]
    fixtures = os.path.join(TESTS, "fixtures", "fixes")
    corpus += [open(os.path.join(fixtures, n), "rb").read().decode("latin-1")
               for n in sorted(os.listdir(fixtures)) if n.endswith(".in.py")]
    programs = os.path.join(TESTS, "fixtures", "programs")  # the fix-safety harness's realistic programs
    corpus += [open(os.path.join(programs, n), encoding="utf-8").read() for n in sorted(os.listdir(programs))]

    @st.composite
    def mutated(draw):
        lines = draw(st.sampled_from(corpus)).splitlines(True)
        for _ in range(draw(st.integers(0, 4))):
            if not lines:
                break
            i = draw(st.integers(0, len(lines) - 1))
            op = draw(st.sampled_from(["dup", "del", "insert", "indent", "dedent"]))
            if op == "dup":
                lines.insert(i, lines[i])
            elif op == "del":
                del lines[i]
            elif op == "insert":
                lines.insert(i, draw(st.sampled_from(FIXABLE)))
            elif op == "indent":
                lines[i] = "    " + lines[i]
            else:
                lines[i] = lines[i].lstrip()
        src = "import torch\nimport torch_npu\n" + "".join(lines)
        return src.replace("\n", "\r\n") if draw(st.booleans()) else src

    @hypothesis.settings(max_examples=FIX_FUZZ or 40, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(mutated())
    def check(src):
        _real_rule_fix_is_sound(src)

    check()


def test_real_rule_fixes_on_generated_programs():
    hypothesis = pytest.importorskip("hypothesis")
    hypothesmith = pytest.importorskip("hypothesmith")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=FIX_FUZZ or 10, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(hypothesmith.from_grammar(), st.lists(st.sampled_from(FIXABLE), max_size=4))
    def check(program, tail):
        if program and not program.endswith("\n"):
            program += "\n"
        _real_rule_fix_is_sound("import torch\nimport torch_npu\n" + program + "".join(tail))

    check()
