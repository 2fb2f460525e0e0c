"""ASC302 mergeable-param-groups."""
from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional, Tuple

from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.astutil import argument, callee_name

# Callees that build optimizers: resolved modules, or an optimizer-like last name (local classes too).
OPTIMIZER_MODULES = ("torch.optim.", "torch_npu.optim.", "apex.optimizers.", "timm.optim.", "transformers.",
                     "bitsandbytes.optim.", "deepspeed.ops.")
OPTIMIZER_NAME_RE = re.compile(r"(?i)optim|sgd|adam|lamb|lars|adagrad|adadelta|rmsprop|lion|adafactor|muon|"
                               r"momentum|novograd|sophia|lookahead")
# `params` values that are certainly iterables of parameters, so `[*a, *b]` is correct.
ITERABLE_CALLS = ("parameters", "named_parameters", "trainable_params", "get_parameters", "list", "filter",
                  "chain", "values", "tuple", "sorted")


def group_options(node: ast.expr) -> Optional[Tuple[Tuple[str, str], ...]]:
    """The non-'params' items of a param-group dict literal as sorted (key, value source); None if not one."""
    if not isinstance(node, ast.Dict):
        return None
    has_params = False
    items = []
    for key, value in zip(node.keys, node.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None  # `**spread` or a computed key: not comparable
        if key.value == "params":
            has_params = True
        else:
            items.append((key.value, ast.dump(value, annotate_fields=False)))
    return tuple(sorted(items)) if has_params else None


class MergeableParamGroups(Rule):
    code = "ASC302"
    name = "mergeable-param-groups"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "param groups {groups} have identical options: merge them into one group ({merged}); each extra " \
              "group is another set of fused buffers and kernel launches"
    fix_applicability = Applicability.UNSAFE
    # the call may not spell `params` (`SGD(groups)`): also every optimizer-like name the callee test accepts
    triggers = ("params", "optim", "Optim", "SGD", "sgd", "Adam", "adam", "Lamb", "LAMB", "lamb", "LARS", "Lars", "lars",
                "Adagrad", "Adadelta", "RMSprop", "Lion", "Adafactor", "Muon", "Momentum", "NovoGrad", "Sophia",
                "Lookahead")
    docs = Docs(
        summary="Optimizer param groups with identical options that could be one group.",
        what="Flags an optimizer constructed with a literal list of param-group dicts in which two or more "
             "groups carry exactly the same options (same keys, same source for every value).",
        why="Ascend's apex guide asks to merge param groups whose options are equal: the fused optimizers "
            "(`torch_npu.optim.NpuFused*`, `apex.optimizers.NpuFused*`) combine parameters and gradients "
            "per group, so every extra group is another set of combined buffers and another round of kernel "
            "launches per step, and a `torch.optim` foreach implementation batches per group too. (Older "
            "apex wording says only the first group is fused; current torch_npu fuses each group "
            "separately, so the cost is the extra launches.)",
        known_problems="PyTorch optimizers only: MindSpore optimizers apply their update per parameter, so a group "
                       "there costs no extra launches. Values are compared by their source, so `lr` and `args.lr` are different even when "
                       "equal at run time. Lists built dynamically (comprehensions, `append`) are not checked.",
        example="""
            optimizer = torch_npu.optim.NpuFusedSGD([
                {'params': backbone.parameters(), 'lr': 0.1},
                {'params': neck.parameters(), 'lr': 0.1},
                {'params': head.parameters(), 'lr': 1.0},
            ], momentum=0.9)
        """,
        use_instead="""
            optimizer = torch_npu.optim.NpuFusedSGD([
                {'params': [*backbone.parameters(), *neck.parameters()], 'lr': 0.1},
                {'params': head.parameters(), 'lr': 1.0},
            ], momentum=0.9)
        """,
        fix_safety="Unsafe: the fix merges the identical groups into one `{'params': [*a, *b], <shared options>}` "
                   "at the position of the first, which changes the param-group indices that an LR scheduler, "
                   "`optimizer.param_groups[i]` code or a saved optimizer state may rely on; comments inside the "
                   "list are not kept. No fix is offered when a group's `params` may be a single tensor (an "
                   "attribute such as `model.bias`), which `[*t]` would split.",
        source="Ascend apex README (fused optimizers and param groups); torch_npu/optim/npu_fused_optim_base.py "
               "(combined buffers per group).",
    )
    cases = (
        Case("""
            opt = torch.optim.SGD([{'params': a.parameters(), 'lr': 0.1}, {'params': b.parameters(), 'lr': 0.1}])
            """, line=1, message_contains="param groups 1 and 2 have identical options",
             fixed="""
            opt = torch.optim.SGD([{'params': [*a.parameters(), *b.parameters()], 'lr': 0.1}])
            """),
    )
    flagged = (
        # keys in another order, three groups of which two match
        "opt = torch.optim.SGD([\n    {'params': a, 'lr': 0.1, 'weight_decay': 0},\n"
        "    {'params': b, 'lr': 1.0},\n    {'weight_decay': 0, 'params': c, 'lr': 0.1},\n], momentum=0.9)",
        # groups with no options at all share the defaults
        "from torch_npu.optim import NpuFusedAdam\nopt = NpuFusedAdam([{'params': enc}, {'params': dec}], lr=1e-3)",
        # through a local name, `params=` keyword
        "def build(model, lr):\n    groups = [{'params': model.a.parameters(), 'lr': lr},"
        " {'params': model.b.parameters(), 'lr': lr}]\n    return torch.optim.AdamW(params=groups)",
        # the list in a local name, the call spelling neither `params` nor `optim`
        "import torch\nfrom torch.optim import SGD\ndef f(self):\n    groups = [\n"
        "        {'params': self.a.parameters(), 'lr': 0.1},\n        {'params': self.b.parameters(), 'lr': 0.1},\n"
        "    ]\n    return SGD(groups)",
        # a custom optimizer class
        "import torch\nfrom mylib import LARS\nopt = LARS([{'params': w, 'weight_decay': 0.0}, {'params': b, 'weight_decay': 0.0}])",
    )
    clean = (
        # options differ
        "opt = torch.optim.SGD([{'params': a, 'lr': 0.1}, {'params': b, 'lr': 0.01}])",
        "opt = torch.optim.SGD([{'params': a, 'lr': 0.1}, {'params': b, 'lr': 0.1, 'weight_decay': 0}])",
        # same value, different source
        "opt = torch.optim.SGD([{'params': a, 'lr': lr}, {'params': b, 'lr': args.lr}])",
        # a single group
        "opt = torch.optim.SGD([{'params': model.parameters(), 'lr': 0.1}], momentum=0.9)",
        # built dynamically
        "opt = torch.optim.SGD([{'params': p, 'lr': 0.1} for p in parts])",
        "groups = []\nfor m in mods:\n    groups.append({'params': m.parameters(), 'lr': 0.1})\n"
        "opt = torch.optim.SGD(groups)",
        "opt = torch.optim.SGD([{'params': a, 'lr': 0.1}, {**extra, 'params': b, 'lr': 0.1}])",
        # MindSpore: groups cost nothing extra
        "from mindspore import nn\nopt = nn.SGD([{'params': a}, {'params': b}], learning_rate=0.1)",
        # not an optimizer call
        "rows = make_table([{'params': 1, 'lr': 0.1}, {'params': 2, 'lr': 0.1}])",
    )

    def visit_Call(self, node: ast.Call) -> None:
        if not self._is_optimizer(node):
            return
        arg = argument(node, "params", 0)
        if arg is None:
            return
        groups, stmt = self._literal(arg)
        if not isinstance(groups, ast.List) or len(groups.elts) < 2:
            return
        classes: Dict[Tuple[Tuple[str, str], ...], List[int]] = {}
        for index, element in enumerate(groups.elts):
            options = group_options(element)
            if options is not None:
                classes.setdefault(options, []).append(index)
        merges = [members for members in classes.values() if len(members) > 1]
        if not merges:
            return
        merges.sort()
        first = merges[0]
        label = ", ".join(str(i + 1) for i in first[:-1]) + f" and {first[-1] + 1}"
        if len(merges) > 1:
            label += " (and " + "; ".join(", ".join(str(i + 1) for i in m) for m in merges[1:]) + ")"
        sources = [" ".join(self._params_src(groups.elts[i]).split()) for i in first]
        merged = ("`{'params': [" + ", ".join(f"*{src}" for src in sources) + "], ...}`"
                  if all(len(src) <= 40 for src in sources) else "one `params` list holding all of their parameters")
        self.report(groups.elts[first[1]], groups=label, merged=merged, fix=self._fix(groups, merges, stmt))

    def _literal(self, node: ast.expr) -> Tuple[ast.expr, Optional[ast.AST]]:
        """Follow local names to the list they were bound to; also the statement holding that list."""
        stmt = next((n for n in reversed(self.ctx.stack) if isinstance(n, ast.stmt)), None)
        for _ in range(4):
            if not isinstance(node, ast.Name):
                break
            bound = self.ctx.binding(node.id)
            if bound is None or bound.value is None or bound.index is not None:
                break
            node, stmt = bound.value, bound.stmt
        return node, stmt

    def _is_optimizer(self, node: ast.Call) -> bool:
        qual = self.ctx.call_name(node)
        if qual is not None and qual.startswith("mindspore."):
            return False  # MindSpore applies its optimizers per parameter: groups cost no extra launches
        if qual is not None and qual.startswith(OPTIMIZER_MODULES) and qual.rsplit(".", 1)[-1][:1].isupper():
            return True
        last = callee_name(node)
        return bool(OPTIMIZER_NAME_RE.search(last)) and "sched" not in last.lower()

    def _params_src(self, group: ast.Dict) -> str:
        for key, value in zip(group.keys, group.values):
            if isinstance(key, ast.Constant) and key.value == "params":
                return self._src(value)
        return ""

    def _src(self, node: ast.AST) -> str:
        return self.ctx.segment(node) or ast.unparse(node)

    def _iterable(self, node: ast.expr) -> bool:
        """Is a group's `params` value certainly an iterable of parameters (not a lone tensor)?"""
        for _ in range(4):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.GeneratorExp, ast.SetComp)):
                return True
            if isinstance(node, ast.Call):
                last = callee_name(node)
                return last in ITERABLE_CALLS or "param" in last.lower()
            if not isinstance(node, ast.Name):
                return False
            bound = self.ctx.binding(node.id)
            if bound is None or bound.value is None:
                return False
            value = bound.value
            if bound.index is not None:
                if not isinstance(value, (ast.Tuple, ast.List)) or bound.index >= len(value.elts) \
                        or any(isinstance(e, ast.Starred) for e in value.elts):
                    return False
                value = value.elts[bound.index]
            node = value
        return False

    def _fix(self, groups: ast.List, merges: List[List[int]], stmt: Optional[ast.AST]) -> Optional[Fix]:
        dropped = {i for members in merges for i in members[1:]}
        merged_at = {members[0]: members for members in merges}
        for members in merges:
            for i in members:
                if not self._iterable(self._params_value(groups.elts[i])):
                    return None
        parts = []
        for index, element in enumerate(groups.elts):
            if index in dropped:
                continue
            if index in merged_at:
                parts.append(self._merged_text(groups, merged_at[index]))
            else:
                parts.append(self._src(element))
        if groups.lineno == groups.end_lineno:
            text = "[" + ", ".join(parts) + "]"
        else:
            lines = self.ctx.lines
            first = groups.elts[0]
            indent = lines[first.lineno - 1][: len(lines[first.lineno - 1]) - len(lines[first.lineno - 1].lstrip())]
            closing = lines[groups.end_lineno - 1]
            closing_indent = closing[: len(closing) - len(closing.lstrip())] if closing.strip().startswith("]") \
                else indent
            if first.lineno == groups.lineno:  # `[{...},\n {...}]`: keep the first group on the bracket line
                text = "[" + (",\n" + " " * first.col_offset).join(parts) + "]"
            else:
                text = "[\n" + "".join(f"{indent}{p},\n" for p in parts) + closing_indent + "]"
        if "\n" in text and stmt is not None:
            # continuation lines of a replaced expression are written relative to its statement's indentation
            line = self.ctx.lines[stmt.lineno - 1]
            base = line[: len(line) - len(line.lstrip())]
            first_line, *rest = text.split("\n")
            text = "\n".join([first_line] + [r[len(base):] if r.startswith(base) else r for r in rest])
        return Fix(Applicability.UNSAFE, "Merge the param groups with identical options",
                   (Edit("replace", self.ctx.span(groups), text),))

    @staticmethod
    def _params_value(group: ast.Dict) -> ast.expr:
        for key, value in zip(group.keys, group.values):
            if isinstance(key, ast.Constant) and key.value == "params":
                return value
        raise ValueError("not a param group")  # pragma: no cover (group_options checked it)

    def _merged_text(self, groups: ast.List, members: List[int]) -> str:
        first: ast.Dict = groups.elts[members[0]]
        stars = ", ".join(f"*{self._src(self._params_value(groups.elts[i]))}" for i in members)
        items = []
        for key, value in zip(first.keys, first.values):
            if key.value == "params":
                items.append(f"{self._src(key)}: [{stars}]")
            else:
                items.append(f"{self._src(key)}: {self._src(value)}")
        return "{" + ", ".join(items) + "}"
