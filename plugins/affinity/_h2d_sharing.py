"""ASC201's buffer fix, the sharing check: a tensor built per call is private to that call, a buffer is one
tensor shared by every call, so the fix is offered only where no code can tell the difference (what one call
does with the tensor is `_mutation`'s answer)."""
from __future__ import annotations

import ast
from typing import Dict, Optional, Set, Tuple, Union

from ._h2d_values import MUTATORS, HotValues
from ._mutation import (FLOWS, MAX_HELPER_DEPTH, MUTATES, READING_BUILTINS, READS, keyword_parameter,
                        method_use, positional_parameter, torch_op_use, writes_in_place)

# Tensor attributes that are facts about it, not the tensor: reading them shares nothing.
TENSOR_FACTS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_npu", "requires_grad", "size", "dim",
                          "numel", "item", "tolist", "nelement", "element_size", "stride", "is_contiguous"})


class SharingCheck(HotValues):
    """Mixin of the ASC201 rule: `_buffer_visible` for the hot method being visited; `_parent_maps` is
    per-file state the rule resets in `start_file`."""

    _parent_maps: Dict[int, Dict[int, ast.AST]]

    def _buffer_visible(self, node: ast.expr, func: ast.AST) -> bool:
        """Could code see that every call now gets the same tensor: is the value at `node` (or a local name
        bound to it, or a view of it) changed in place, stored, returned or yielded, or passed to code that
        is not known to leave it alone?"""
        return self._escapes(node, func, set(), 0)

    def _escapes(self, node: ast.AST, func: ast.AST, seen: Set[Tuple[int, str]], depth: int) -> bool:
        parents = self._parents(func)
        current = node
        while True:
            parent = parents.get(id(current))
            if isinstance(parent, (ast.Tuple, ast.List)) and isinstance(parents.get(id(parent)), (ast.Call,
                                                                                                   ast.Subscript)):
                current, parent = parent, parents.get(id(parent))  # `torch.cat([x, t])`, `x[:, t]`
            if parent is None:
                return True
            step = _flow(parent, current, parents)
            if step is None:
                step = self._use(parent, current, func, seen, depth)
            if isinstance(step, bool):
                return step
            current = step

    def _use(self, parent: ast.AST, current: ast.AST, func: ast.AST, seen: Set[Tuple[int, str]],
             depth: int) -> Union[bool, ast.AST]:
        """Where a use that is not a view ends: True (visible), False (only read), or the call it flows out of."""
        if isinstance(parent, ast.Call):
            use = self._call_use(parent, current, func, seen, depth)
            return parent if use == FLOWS else use == MUTATES
        if isinstance(parent, ast.AugAssign):
            return parent.target is current  # `t[0] += 1`, `t.data *= 2` write the shared tensor
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.FormattedValue, ast.Expr, ast.If,
                               ast.While, ast.Assert)):
            return False  # a new value is computed from it, or it is only read
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                return True  # stored in an attribute or a container slot, unpacked, or written (`t[0] = 1`)
            if targets[0] is current:
                return False  # the name is rebound: this use ends here
            return self._name_escapes(targets[0].id, func, seen, depth)
        return True  # returned, yielded, put in a container, bound by `with`/`for`, ...

    def _call_use(self, call: ast.Call, arg: ast.AST, func: ast.AST, seen: Set[Tuple[int, str]],
                  depth: int) -> str:
        """What `call` does with the tensor passed as `arg` (a positional argument or a keyword)."""
        if call.func is arg or (isinstance(arg, ast.keyword) and arg.arg in ("out", None)):
            return MUTATES  # called, written through `out=`, or spread by `**`
        qual = self.ctx.call_name(call)
        if writes_in_place(call, qual):
            return MUTATES
        if qual is not None:
            return torch_op_use(qual) if qual.startswith("torch.") else MUTATES
        callee = call.func
        if isinstance(callee, ast.Attribute):
            if isinstance(callee.value, ast.Name) and callee.value.id == self._self_name():
                method = self._class_method(callee.attr)  # `self.helper(t)`: a method of this class
                return self._helper_use(method, call, arg, True, seen, depth) if method is not None else MUTATES
            return method_use(callee.attr)
        if isinstance(callee, ast.Name):
            if callee.id in READING_BUILTINS and not self.ctx.is_local(callee.id) \
                    and callee.id not in self.ctx.local_functions:
                return READS
            helper = self._local_function(callee.id, func)
            if helper is not None:
                return self._helper_use(helper, call, arg, False, seen, depth)
        return MUTATES  # an unknown callee: not known to leave the tensor alone

    def _helper_use(self, helper: ast.AST, call: ast.Call, arg: ast.AST, method: bool,
                    seen: Set[Tuple[int, str]], depth: int) -> str:
        """A local function given the tensor: READS when its parameter is only read there (judged as in the
        hot method, a return counting as handing it on), else MUTATES."""
        if depth >= MAX_HELPER_DEPTH or isinstance(arg, ast.Starred):
            return MUTATES
        if isinstance(arg, ast.keyword):
            param = keyword_parameter(helper, arg.arg)
        elif any(isinstance(a, ast.Starred) for a in call.args[: call.args.index(arg)]):
            param = None
        else:
            param = positional_parameter(helper, call.args.index(arg), method)
        if param is None:
            return MUTATES
        return MUTATES if self._name_escapes(param, helper, seen, depth + 1) else READS

    def _local_function(self, name: str, func: ast.AST) -> Optional[ast.AST]:
        """A function defined in the hot method or at the top of the module under `name`."""
        for sub in ast.walk(func):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name == name and sub is not func:
                return sub
        return next((s for s in self.ctx.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == name), None)

    def _class_method(self, name: str) -> Optional[ast.AST]:
        cls = self._hot_class()
        if cls is None or not isinstance(cls.node, ast.ClassDef):
            return None
        return next((s for s in cls.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == name and not s.decorator_list), None)

    def _name_escapes(self, name: str, func: ast.AST, seen: Set[Tuple[int, str]], depth: int) -> bool:
        key = (id(func), name)
        if key in seen:
            return False
        seen.add(key)
        parents = self._parents(func)
        for sub in ast.walk(func):  # every use of the local in the function (a bounded look)
            if isinstance(sub, ast.Name) and sub.id == name:
                if isinstance(sub.ctx, ast.Load) and self._escapes(sub, func, seen, depth):
                    return True
                parent = parents.get(id(sub))
                if isinstance(parent, ast.AugAssign) and parent.target is sub:
                    return True  # `total += ...` accumulates into the shared tensor
            elif isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
                return True
        return False

    def _parents(self, func: ast.AST) -> Dict[int, ast.AST]:
        key = id(func)
        if key not in self._parent_maps:
            self._parent_maps[key] = {id(child): node for node in ast.walk(func)
                                      for child in ast.iter_child_nodes(node)}
        return self._parent_maps[key]


def _flow(parent: ast.AST, current: ast.AST, parents: Dict[int, ast.AST]) -> Union[None, bool, ast.AST]:
    """The node the same tensor (or a view of it) flows on to, a verdict (False: only read; True: changed in
    place), or None when `parent` is not a view or a pass-through."""
    if isinstance(parent, ast.Subscript):
        # used as an index: read; else a view of the same storage flows on (`t[0] = 1` is judged where it lands)
        return False if parent.value is not current else parent
    if isinstance(parent, ast.IfExp):
        return False if parent.test is current else parent
    if isinstance(parent, (ast.BoolOp, ast.Starred, ast.keyword)):
        return parent  # the same tensor flows on; an argument by keyword is judged at its call
    if isinstance(parent, ast.Attribute):
        if parent.attr in TENSOR_FACTS:
            return False
        call = parents.get(id(parent))
        if isinstance(call, ast.Call) and call.func is parent:
            if parent.attr.endswith("_") or parent.attr in MUTATORS:
                return True  # in place on the shared tensor
            return call  # `.view()`, `.float()`, `.to()` may return the tensor itself or a view
        return parent  # `.data`, `.T`: the same storage
    return None
