"""Training-step loops as the semantic model sees them while it walks a file: is this loop a step loop (it runs
`loss.backward()`, `optimizer.step()`, a MindSpore train step, or calls a local function that does), is the
current node inside one, under a periodic guard (`if step % 100 == 0:`). A facet of FileContext (semantic.py),
which provides `scopes`, `loops`, `ifs`, `function`, `binding()`, `local_functions` and `tree`.
"""
from __future__ import annotations

import ast
import re
from typing import Any, Dict, List, Optional, Set

from ..astutil import receiver_name
from .data import STEP_CALL_NAMES, STEP_NAME_RE, STEP_RECEIVER_HINTS
from .nodes import FUNC_TYPES, LOOP_TYPES, child_nodes, contains, find_nodes

STEP_COUNTER_RE = re.compile(r"(?:^|_)(?:step|steps|iter|iters|iteration)$", re.IGNORECASE)
# MindSpore training steps by name: STEP_NAME_RE (`train_step(x, y)`, `_train_one_batch(b)`, `train_iter(...)`);
# and the cells that run one (`nn.TrainOneStepCell`, `TrainStepWrap`).
TRAIN_STEP_CLASS_RE = re.compile(r"(?i)train_?(?:one_?)?step")
_STEP_BARRIERS = LOOP_TYPES + FUNC_TYPES + (ast.ClassDef, ast.Lambda)


class StepLoops:
    """FileContext's step-loop questions (cached per loop and per called local function)."""

    scopes: List[Any]
    loops: List[ast.AST]
    ifs: List[Any]
    local_functions: Dict[str, ast.AST]
    tree: ast.Module
    _step_cache: Dict[object, bool]
    _step_callees: Optional[Set[str]]

    def in_step_loop(self, called_only: bool = False) -> bool:
        """Inside the innermost step loop of the current function (or a per-step function).

        With `called_only`, a per-step function outside any loop counts only when a step loop of this
        file calls it (directly or through one more local function): a test or benchmark function that
        runs one `.backward()` is not a step loop body.
        """
        loop = self.current_loop()
        if loop is not None and self.is_step_loop(loop):
            return True
        if any(s.step for s in self.scopes):  # a step loop elsewhere calls this function
            return True
        if loop is not None:
            return False
        func = self.function
        if func is None or not self.is_step_loop(func.node):  # (the cached _performs_step)
            return False
        return not called_only or func.name in self.step_loop_callees()

    def step_loop_callees(self) -> Set[str]:
        """Names of local functions/methods called from a step loop of this file (computed once)."""
        if self._step_callees is None:
            names: Set[str] = set()
            for node in ast.walk(self.tree):
                if isinstance(node, LOOP_TYPES) and self.is_step_loop(node):
                    names.update(_called_local_names(node))
            for name in list(names):  # one level further: the step function's own helpers
                target = self.local_functions.get(name)
                if target is not None:
                    names.update(_called_local_names(target))
            self._step_callees = names
        return self._step_callees

    def current_loop(self) -> Optional[ast.AST]:
        """The innermost enclosing loop of the current function."""
        func = self.function
        for loop in reversed(self.loops):
            if func is None or contains(func.node, loop):
                return loop
        return None

    def is_step_loop(self, loop: ast.AST) -> bool:
        key = id(loop)
        if key not in self._step_cache:
            self._step_cache[key] = self._performs_step(loop)
        return self._step_cache[key]

    def is_step_loop_unwalked(self, loop: ast.AST) -> bool:
        """`is_step_loop` asked before the walk (the project summary): names are not bound yet, so the
        answer may differ from the walk's and nothing is kept in the cache the walk reads."""
        kept, self._step_cache = self._step_cache, {}
        try:
            return self._performs_step(loop)
        finally:
            self._step_cache = kept

    def _callee_steps(self, target: ast.AST, depth: int) -> bool:
        """_performs_step of a called local function, cached (many loops call the same helpers)."""
        key = (id(target), depth)
        if key not in self._step_cache:
            self._step_cache[key] = self._performs_step(target, depth)
        return self._step_cache[key]

    def _performs_step(self, root: ast.AST, depth: int = 0) -> bool:
        """Does `root` run a training step itself (not inside a nested loop or function)?"""
        todo = child_nodes(root)
        while todo:
            node = todo.pop()
            if isinstance(node, _STEP_BARRIERS):
                continue
            if isinstance(node, ast.Call):
                if is_step_call(node) or self._mindspore_step(node):
                    return True
                callee = _local_callee(node)
                if callee and depth < 2 and callee in self.local_functions:
                    target = self.local_functions[callee]
                    if target is not root and self._callee_steps(target, depth + 1):
                        return True
            todo.extend(child_nodes(node))
        return False

    def _mindspore_step(self, call: ast.Call) -> bool:
        """A MindSpore training step that `is_step_call` cannot see from the call alone: a call named like a
        step (`train_step(x, y)`, `self._train_one_batch(b)`), an instance of a `TrainOneStep*` cell
        (`trainer = nn.TrainOneStepCell(net, opt)`; `trainer(x, y)`), or `optimizer(out[1])`."""
        raw = receiver_name(call.func)
        name = raw.lower().replace("_", "")
        if STEP_NAME_RE.search(name):
            return not raw[:1].isupper()  # `nn.TrainOneStepCell(net, opt)` builds the cell, it runs no step
        if (name.startswith("optim") or name == "opt") and len(call.args) == 1 and not call.keywords \
                and not isinstance(call.args[0], ast.Call):
            return True
        if isinstance(call.func, ast.Name):
            bound = self.binding(call.func.id)
            value = bound.value if bound is not None and bound.index is None else None
            return isinstance(value, ast.Call) and TRAIN_STEP_CLASS_RE.search(receiver_name(value.func)) is not None
        return False

    def guarded(self, modulo_only: bool = True) -> bool:
        """Is the current node under an `if` inside the current loop (an `if step % N == 0` guard)?"""
        loop = self.current_loop()
        for if_node, in_else in reversed(self.ifs):
            if loop is not None and not contains(loop, if_node):
                break
            if not modulo_only:
                return True
            for test in self._guard_tests(if_node.test):
                if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)):
                    return True
                if not in_else and self._single_step_test(test):
                    return True
        return False

    def _guard_tests(self, test: ast.expr) -> List[ast.expr]:
        """The test, and the values of the local names it reads (`is_log_step = step % n == 0`, then
        `if is_log_step:`): a guard held in a variable is a guard."""
        tests = [test]
        for node in ast.walk(test):
            if isinstance(node, ast.Name):
                bound = self.binding(node.id)
                if bound is not None and bound.value is not None and bound.index is None:
                    tests.append(bound.value)
        return tests

    def _single_step_test(self, test: ast.expr) -> bool:
        """`if i == 10:` / `if self.global_step == max_steps:`: a step counter compared for equality
        (the current loop's target, or a name ending in `step`/`iter`)."""
        loop = self.current_loop()
        counters: Set[str] = set()
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            counters.update(n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name))
        for node in ast.walk(test):
            if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops):
                for side in [node.left] + node.comparators:
                    for sub in ast.walk(side):
                        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
                        if name in counters or STEP_COUNTER_RE.search(name):
                            return True
        return False


def _called_local_names(root: ast.AST) -> Set[str]:
    """`f(...)` / `self.f(...)` names called anywhere under `root`."""
    names: Set[str] = set()
    for node in find_nodes(root, (ast.Call,)):
        name = _local_callee(node)
        if name:
            names.add(name)
    return names


def _local_callee(call: ast.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return func.attr
    return None


def is_step_call(call: ast.Call) -> bool:
    """`loss.backward()`, `optimizer.step()`, `scaler.step(opt)`, `*.train_one_step(...)`, `optimizer(grads)`."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            return True
        if func.attr == "step":
            name = receiver_name(func.value).lower()
            return "sched" not in name and any(h in name for h in STEP_RECEIVER_HINTS)
        if func.attr in ("train_one_step", "train_step"):
            return True
    name = receiver_name(func).lower()
    if name in STEP_CALL_NAMES:
        return True
    if "optim" in name and call.args and not call.keywords and isinstance(func, (ast.Name, ast.Attribute)):
        first = call.args[0]
        return isinstance(first, ast.Name) and "grad" in first.id.lower()
    return False
