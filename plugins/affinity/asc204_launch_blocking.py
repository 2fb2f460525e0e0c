"""ASC204 launch-blocking."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.astutil import argument, constant

VARIABLE = "ASCEND_LAUNCH_BLOCKING"
ENV = "os.environ"


def _enables(value: Optional[ast.expr]) -> bool:
    """`1`, `"1"` or `True`: the values that switch synchronous launches on."""
    if not isinstance(value, ast.Constant):
        return False
    return value.value is True or value.value == 1 or value.value == "1"


class LaunchBlocking(Rule):
    silent_where_unreached = False  # about the environment or the port, not run-time cost: reported anywhere
    code = "ASC204"
    name = "launch-blocking"
    message = "`{form}` makes every NPU operator launch synchronous: remove it (set it only in a debugging shell)"
    npu_context = True
    fix_applicability = Applicability.UNSAFE
    file_triggers = (VARIABLE,)  # a plain `import os` script can set it too: no framework name needed
    triggers = (VARIABLE,)
    docs = Docs(
        summary="`ASCEND_LAUNCH_BLOCKING=1` makes every operator launch synchronous.",
        what=f"Flags code that sets `{VARIABLE}` to `1`, `\"1\"` or `True`: `os.environ[...] = ...`, "
             "`os.environ.setdefault(...)`, `os.environ.update(...)` and `os.putenv(...)`.",
        why="With launch blocking on, the host waits for every operator to finish before it launches the "
            "next one, so the host can no longer run ahead and queue work for the AI Cores: a training step "
            "becomes the sum of every launch latency. It is a debugging switch (it makes the failing operator "
            "show in the stack trace); Ascend's profiler advisor (msprof-analyze, synchronize rule) reports "
            "frequent stream synchronisation and asks to unset `ASCEND_LAUNCH_BLOCKING` for training.",
        known_problems="A debugging script that sets it on purpose is reported too; suppress it there with "
                       "`# noqa: ASC204`. Values read from variables are not evaluated.",
        example="""
            import os
            import torch_npu

            os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"
        """,
        use_instead="""
            # debug a failing operator from the shell instead:
            #   ASCEND_LAUNCH_BLOCKING=1 python train.py
            import torch_npu
        """,
        fix_safety="Unsafe: the fix deletes the statement (a block left empty gets `pass`; an `os` import it "
                   "was the last use of goes too); the setting may be there on purpose while an operator error "
                   "is being chased. No fix for an `os.environ.update(...)` that also sets other variables.",
        source="Ascend msprof-analyze advisor, synchronize rule "
               "(msprof_analyze/advisor/rules/en/synchronize.yaml in Ascend/msprof-analyze).",
    )
    cases = (
        Case("""
            import os
            import torch_npu
            os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"
            """, line=3, message_contains="makes every NPU operator launch synchronous",
             fixed="""
            import torch_npu
            """),
    )
    flagged = (
        "import os\nimport torch_npu\nos.environ['ASCEND_LAUNCH_BLOCKING'] = 1",
        "import torch_npu\nfrom os import environ\nenviron['ASCEND_LAUNCH_BLOCKING'] = True",
        "import os\nimport torch_npu\nos.environ.setdefault('ASCEND_LAUNCH_BLOCKING', '1')",
        "import os\nimport torch_npu\nos.putenv('ASCEND_LAUNCH_BLOCKING', '1')",
        "import os\nimport torch_npu\nos.environ.update({'ASCEND_LAUNCH_BLOCKING': '1'})",
        "import os\nimport torch_npu\ndef main():\n    if True:\n        os.environ['ASCEND_LAUNCH_BLOCKING'] = '1'\n",
    )
    clean = (
        # no NPU context: a CUDA-only file is not reported
        "import os\nos.environ['ASCEND_LAUNCH_BLOCKING'] = '1'",
        # switched off, removed or read: fine
        "import os\nimport torch_npu\nos.environ['ASCEND_LAUNCH_BLOCKING'] = '0'",
        "import os\nimport torch_npu\nos.environ.pop('ASCEND_LAUNCH_BLOCKING', None)",
        "import os\nimport torch_npu\nblocking = os.environ.get('ASCEND_LAUNCH_BLOCKING') == '1'",
        "import os\nimport torch_npu\nos.environ['ASCEND_LAUNCH_BLOCKING'] = args.blocking",
        # another variable, or a dict that is not os.environ
        "import os\nimport torch_npu\nos.environ['HCCL_BLOCKING'] = '1'",
        "import torch_npu\nenv = {}\nenv['ASCEND_LAUNCH_BLOCKING'] = '1'",
    )

    def visit_Assign(self, node: ast.Assign) -> None:
        if not _enables(node.value):
            return
        for target in node.targets:
            if (isinstance(target, ast.Subscript) and self.ctx.qualname(target.value) == ENV
                    and constant(target.slice) == VARIABLE):
                self._report(node, node, f'os.environ["{VARIABLE}"] = {ast.unparse(node.value)}')
                return

    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node)
        if qual in (ENV + ".setdefault", "os.putenv"):
            key, value = argument(node, None, 0), argument(node, None, 1)
            if constant(key) == VARIABLE and _enables(value):
                short = "os.putenv" if qual == "os.putenv" else "os.environ.setdefault"
                self._report(node, node, f'{short}("{VARIABLE}", {ast.unparse(value)})')
        elif qual == ENV + ".update":
            for value in self._update_values(node):
                if _enables(value):
                    self._report(node, node, f'os.environ.update({VARIABLE}={ast.unparse(value)})',
                                 removable=_sets_only_this(node))
                    return

    @staticmethod
    def _update_values(call: ast.Call):
        for kw in call.keywords:
            if kw.arg == VARIABLE:
                yield kw.value
        first = argument(call, None, 0)
        if isinstance(first, ast.Dict):
            for key, value in zip(first.keys, first.values):
                if constant(key) == VARIABLE:
                    yield value

    def _report(self, node: ast.AST, at: ast.AST, form: str, removable: bool = True) -> None:
        stmt = node if isinstance(node, ast.stmt) else self._statement_of(node)
        fix = None
        if stmt is not None and removable:
            fix = Fix(Applicability.UNSAFE, f"Remove the `{VARIABLE}` setting",
                      (Edit("remove_statement", self.ctx.span(stmt)),))
        self.report(at, form=form, fix=fix)

    def _statement_of(self, call: ast.Call) -> Optional[ast.stmt]:
        """The expression statement that is exactly `call`, if any."""
        parent = self.ctx.parent
        return parent if isinstance(parent, ast.Expr) and parent.value is call else None


def _sets_only_this(call: ast.Call) -> bool:
    """`os.environ.update(...)` that sets nothing but the variable (removing it removes nothing else)."""
    items = [kw.arg for kw in call.keywords]
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Dict):
        items += [constant(key) if key is not None else None for key in first.keys]
    elif first is not None:
        return False
    return items == [VARIABLE]
