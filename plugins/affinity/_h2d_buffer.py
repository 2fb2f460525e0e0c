"""ASC201's fix: register the constant tensor a `forward` builds as a non-persistent buffer in `__init__`.

A tensor built per call is private to that call; a buffer is one tensor shared by every call. The fix is
offered only where nothing can tell the difference: the tensor is not mutated, aliased, stored or returned,
and everything it is built from is constant (literals, module constants, `__init__`-only plain attributes).
"""
from __future__ import annotations

import ast
import keyword as pykeyword
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ascend_lint.analysis.semantic import FileContext
from ascend_lint.astutil import constant, keyword, method_name, parent_map
from ascend_lint.rule import Applicability, Edit, Fix

# In-place container methods: a list built empty and appended to holds computed data.
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "__setitem__"})
# Tensor attributes that are facts about it, not the tensor: reading them shares nothing.
TENSOR_FACTS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_npu", "requires_grad", "size", "dim",
                          "numel", "item", "tolist", "nelement", "element_size", "stride", "is_contiguous"})
# Builtins a constant-only expression may call (pure, no inputs).
PURE_BUILTINS = frozenset({"range", "list", "tuple", "len", "int", "float", "bool", "sum", "min", "max", "abs",
                           "sorted", "reversed", "zip", "enumerate", "round", "True", "False", "None"})
Parents = Dict[int, ast.AST]


class BufferFix:
    """Builds ASC201's register_buffer fixes of one file (caches per class and per method)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._buffer_names: Dict[int, Set[str]] = {}  # class node id -> names taken so far
        self._parent_maps: Dict[int, Parents] = {}  # hot method id -> child id -> parent
        self._class_scans: Dict[tuple, tuple] = {}  # (class, __init__, self name) -> _class_scan

    def fix(self, node: ast.Call, ctor: ast.Call, buffer_expr: ast.expr, cls: ast.ClassDef, init: ast.FunctionDef,
            method: ast.AST, self_name: str) -> Optional[Fix]:
        """Register `buffer_expr` once in `init`; `node` (in `method`) reads `self.<name>` instead."""
        if not self._can_share(node, ctor, buffer_expr, cls, init, method, self_name):
            return None
        source = self._buffer_source(buffer_expr)
        if source is None:
            return None
        name = self._buffer_name(cls, buffer_expr)
        text = f"{self_name}.register_buffer({name!r}, {source}, persistent=False)"
        return Fix(
            Applicability.UNSAFE,
            f"Register the tensor once as buffer `{name}` in `__init__` and use `{self_name}.{name}`",
            (Edit("insert_body_end", self.ctx.span(init), text=text),
             Edit("replace", self.ctx.span(node), text=f"{self_name}.{name}")),
        )

    def _can_share(self, node: ast.Call, ctor: ast.Call, buffer_expr: ast.expr, cls: ast.ClassDef,
                   init: ast.FunctionDef, method: ast.AST, self_name: str) -> bool:
        init_args = init.args.posonlyargs + init.args.args
        if not init_args or init_args[0].arg != self_name or any(isinstance(n, ast.Return) for n in ast.walk(init)):
            return False  # (an early `return` could skip the appended register_buffer)
        if node is not ctor and not _plain_move(node):
            return False
        if _sets_requires_grad(buffer_expr) or self._buffer_visible(node, method):
            return False  # see Fix safety: the shared buffer would be mutated, aliased or returned
        init_attrs = {attr for attr in _init_only_attributes(cls, init, self_name)
                      if self._plain_attribute(cls, init, self_name, attr)}
        kept: List[ast.AST] = [buffer_expr]
        if buffer_expr is ctor:  # the `device=` keyword is dropped: only the rest must be constant
            kept = list(ctor.args) + [kw.value for kw in ctor.keywords if kw.arg != "device"] + [ctor.func]
        return all(self._constant_only(part, init_attrs, self_name) for part in kept)

    # ------------------------------------------------------------------ is the tensor seen to be shared?
    def _buffer_visible(self, node: ast.expr, func: ast.AST) -> bool:
        """Could code see that every call now gets the same tensor: is the value at `node` (or the local
        name it is bound to) mutated in place, aliased, stored, returned or yielded?"""
        key = id(func)
        if key not in self._parent_maps:
            self._parent_maps[key] = parent_map(func)
        return self._escapes(node, self._parent_maps[key], func, set())

    def _escapes(self, node: ast.AST, parents: Parents, func: ast.AST, seen: Set[str]) -> bool:
        current = node
        while True:
            parent = parents.get(id(current))
            if isinstance(parent, (ast.Tuple, ast.List)) and isinstance(parents.get(id(parent)), (ast.Call,
                                                                                                   ast.Subscript)):
                current, parent = parent, parents.get(id(parent))  # `torch.cat([x, t])`, `x[:, t]`
            if parent is None:
                return True
            if isinstance(parent, (ast.Assign, ast.AnnAssign)):
                targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
                if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                    return True  # stored in an attribute, a container slot, or unpacked
                return self._name_escapes(targets[0].id, parents, func, seen)
            verdict, current = _value_flow(parent, current, parents)
            if verdict is not None:
                return verdict

    def _name_escapes(self, name: str, parents: Parents, func: ast.AST, seen: Set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        for sub in ast.walk(func):  # every use of the local in the method (a bounded look)
            if isinstance(sub, ast.Name) and sub.id == name:
                if isinstance(sub.ctx, ast.Load) and self._escapes(sub, parents, func, seen):
                    return True
                parent = parents.get(id(sub))
                if isinstance(parent, ast.AugAssign) and parent.target is sub:
                    return True  # `total += ...` accumulates into the shared tensor
            elif isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
                return True
        return False

    # ------------------------------------------------------------------ is it built from constants?
    def _plain_attribute(self, cls: ast.ClassDef, init: ast.FunctionDef, self_name: str, attr: str) -> bool:
        """Is `self.<attr>` plain host data fixed at construction: every value `__init__` assigns to it is
        built from literals, `__init__` arguments, module constants and pure builtins/numpy (not a
        parameter, module or tensor, whose value changes as the model trains), and nothing in the class
        changes it in place?"""
        changed, values, params, locals_ = self._class_scan(cls, init, self_name)
        if attr in changed:
            return False
        assigned = values.get(attr, [])
        return bool(assigned) and all(v is not None and self._plain_data(v, params, locals_) for v in assigned)

    def _class_scan(self, cls: ast.ClassDef, init: ast.FunctionDef, self_name: str) -> tuple:
        """One pass over a class for `_plain_attribute`: the `self` attributes changed in place anywhere in
        it, the values `__init__` assigns to each, `__init__`'s parameters and its single-assignment locals."""
        key = (id(cls), id(init), self_name)
        found = self._class_scans.get(key)
        if found is not None:
            return found
        changed = _changed_attributes(cls, self_name)
        params = {a.arg for a in init.args.posonlyargs + init.args.args + init.args.kwonlyargs} - {self_name}
        values, local_values = _init_assignments(init, self_name)
        locals_ = {name: vals[0] for name, vals in local_values.items() if len(vals) == 1 and name not in params}
        found = self._class_scans[key] = (changed, values, params, locals_)
        return found

    def _plain_data(self, expr: ast.expr, params: Set[str], locals_: Dict[str, ast.expr], depth: int = 0) -> bool:
        if depth > 4:
            return False
        return self._plain_operations(expr, params) and self._plain_names(expr, params, locals_, depth)

    def _plain_operations(self, expr: ast.expr, params: Set[str]) -> bool:
        """No lambda, await or yield; attributes only of numpy/math and methods; calls only of pure builtins,
        numpy/math and methods that change nothing in place."""
        ctx = self.ctx
        for sub in ast.walk(expr):
            if isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(sub, ast.Attribute) and not _is_call_target(expr, sub) and (
                    ctx.qualname(sub) or "").split(".")[0] not in ("numpy", "math"):
                return False  # attributes (configs, other members) are not followed: not known to be data
            if isinstance(sub, ast.Call):
                func = sub.func
                qual = ctx.call_name(sub)
                if isinstance(func, ast.Name) and func.id in PURE_BUILTINS and func.id not in params:
                    continue
                if qual is not None and qual.split(".")[0] in ("numpy", "math"):
                    continue
                if isinstance(func, ast.Attribute) and qual is None and not (
                        func.attr.endswith("_") or func.attr in MUTATORS):
                    continue  # a method of plain data: `.reshape(...)`, `.tolist()`
                return False
        return True

    def _plain_names(self, expr: ast.expr, params: Set[str], locals_: Dict[str, ast.expr], depth: int) -> bool:
        """Every name read is a parameter, a module constant, a pure builtin, numpy/math, or a local of plain data."""
        ctx = self.ctx
        own = comprehension_names(expr)
        for name_node in _name_nodes(expr):
            name = name_node.id
            if name in own or name in params or name in ctx.constants or name in PURE_BUILTINS:
                continue
            if (ctx.aliases.get(name) or "").split(".")[0] in ("numpy", "math"):
                continue
            if name in locals_ and self._plain_data(locals_[name], params, locals_, depth + 1):
                continue
            return False
        return True

    def _constant_only(self, expr: ast.expr, init_attrs: Set[str], self_name: str) -> bool:
        ctx = self.ctx
        own = comprehension_names(expr)
        for sub in ast.walk(expr):
            if isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == self_name:
                if sub.attr not in init_attrs:
                    return False
        for name_node in _name_nodes(expr):
            name = name_node.id
            if name in own:
                continue
            if name == self_name:
                if not _is_attribute_base(expr, name_node):
                    return False
                continue
            if ctx.is_local(name):
                return False
            if name in ctx.constants or ctx.aliases.get(name) or name in PURE_BUILTINS:
                continue
            return False
        return True

    # ------------------------------------------------------------------ the edit
    def _buffer_source(self, expr: ast.expr) -> Optional[str]:
        """The source of `expr` without a `device=` keyword (the buffer follows the module)."""
        segment = self.ctx.segment
        if isinstance(expr, ast.Call) and keyword(expr, "device") is not None:
            if any(isinstance(a, ast.Starred) for a in expr.args):
                return None
            parts = [segment(a) for a in expr.args]
            parts += [segment(kw) for kw in expr.keywords if kw.arg != "device"]
            func = segment(expr.func)
            if func is None or any(p is None for p in parts):
                return None
            return f"{func}({', '.join(parts)})"
        return segment(expr)

    def _buffer_name(self, cls: ast.ClassDef, expr: ast.expr) -> str:
        taken = self._buffer_names.get(id(cls))
        if taken is None:
            taken = self._buffer_names[id(cls)] = _class_names(cls)
        name = f"_{self._name_base(expr)}_buf"
        if not name.isidentifier() or pykeyword.iskeyword(name):
            name = "_const_buf"
        candidate, number = name, 2
        while candidate in taken:
            candidate, number = f"{name}{number}", number + 1
        taken.add(candidate)
        return candidate

    def _name_base(self, expr: ast.expr) -> str:
        """What the buffer is named after: the local or attribute it is assigned to, else the first `self`
        attribute or module constant it is built from."""
        stmt = next((n for n in reversed(self.ctx.stack) if isinstance(n, ast.stmt)), None)
        base = ""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                base = target.id
            elif isinstance(target, ast.Attribute):
                base = target.attr
        if not base:
            for sub in ast.walk(expr):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                    base = sub.attr
                    break
                if isinstance(sub, ast.Name) and sub.id in self.ctx.constants:
                    base = sub.id.lower()
                    break
        return base.strip("_") or "const"


def _value_flow(parent: ast.AST, current: ast.AST, parents: Parents) -> Tuple[Optional[bool], ast.AST]:
    """One step of `_escapes` at `parent`: (True/False, _) when the shared tensor's fate is decided there,
    (None, where it flows on) otherwise."""
    if isinstance(parent, ast.Subscript):
        return (False, current) if parent.value is not current else (None, parent)  # an index is read
    if isinstance(parent, ast.IfExp):
        return (False, current) if parent.test is current else (None, parent)
    if isinstance(parent, (ast.BoolOp, ast.Starred, ast.keyword)):
        return None, parent  # the same tensor flows on (an argument by keyword: judged at its call)
    if isinstance(parent, ast.Attribute):
        if parent.attr in TENSOR_FACTS:
            return False, current
        call = parents.get(id(parent))
        if isinstance(call, ast.Call) and call.func is parent:
            if parent.attr.endswith("_") or parent.attr in MUTATORS:
                return True, current  # in place on the shared tensor
            return None, call  # `.view()`, `.float()`, `.to()` may return the tensor itself or a view
        return None, parent  # `.data`, `.T`: the same storage
    if isinstance(parent, ast.Call):
        func_node = parent.func
        called = func_node.attr if isinstance(func_node, ast.Attribute) else getattr(func_node, "id", "")
        out = isinstance(current, ast.keyword) and current.arg == "out"
        return out or called in MUTATORS or called in ("setattr", "register_buffer"), current
    if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.FormattedValue, ast.AugAssign, ast.Expr, ast.If,
                           ast.While, ast.Assert)):
        return False, current  # a new value is computed from it, or it is only read
    return True, current  # returned, yielded, put in a container, bound by `with`/`for`, ...


def _plain_move(call: ast.Call) -> bool:
    """`.to(device)`, `.npu()`, `.cuda()` that change nothing but the device."""
    extra = [kw for kw in call.keywords if kw.arg not in ("device", "non_blocking")]
    if method_name(call) == "to":
        positional = call.args[1:] if keyword(call, "device") is None else call.args
        return not extra and all(isinstance(constant(a), bool) for a in positional)
    return not extra and len(call.args) <= 1


def _changed_attributes(cls: ast.ClassDef, self_name: str) -> Set[str]:
    """The `self` attributes a class changes in place anywhere (`self.x.append(...)`, `self.x[k] = v`)."""
    changed: Set[str] = set()
    for sub in ast.walk(cls):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and _self_attr(
                sub.func.value, self_name) and (sub.func.attr in MUTATORS or sub.func.attr.endswith("_")):
            changed.add(sub.func.value.attr)
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and _self_attr(target.value, self_name):
                    changed.add(target.value.attr)
    return changed


def _init_assignments(init: ast.FunctionDef, self_name: str) -> Tuple[Dict[str, List[Optional[ast.expr]]],
                                                                     Dict[str, List[ast.expr]]]:
    """(`self` attribute -> the values `__init__` assigns to it, local -> its values; [] when bound otherwise)."""
    values: Dict[str, List[Optional[ast.expr]]] = {}
    local_values: Dict[str, List[ast.expr]] = {}  # `half = channels // 2` in __init__
    for sub in ast.walk(init):
        if isinstance(sub, (ast.Assign, ast.AnnAssign)):
            seen: Set[str] = set()
            for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                if _self_attr(target, self_name) and target.attr not in seen:
                    seen.add(target.attr)
                    values.setdefault(target.attr, []).append(sub.value)
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            local_values.setdefault(sub.targets[0].id, []).append(sub.value)
        elif isinstance(sub, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            for name in (n.id for n in ast.walk(sub) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)):
                local_values[name] = []  # bound some other way: not followed
    return values, local_values


def _name_nodes(expr: ast.AST) -> Iterator[ast.Name]:
    return (n for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def loaded_names(expr: ast.AST) -> List[str]:
    return [n.id for n in _name_nodes(expr)]


def comprehension_names(expr: ast.AST) -> Set[str]:
    names: Set[str] = set()
    for sub in ast.walk(expr):
        if isinstance(sub, ast.comprehension):
            names.update(n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name))
    return names



def _is_attribute_base(expr: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.value is name for sub in ast.walk(expr))


def _assigned_self_attrs(node: ast.AST, self_name: str) -> Set[str]:
    out: Set[str] = set()
    for sub in ast.walk(node):
        targets: List[ast.AST] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
            targets = [sub.target]
        for target in targets:
            for element in ast.walk(target):
                if (isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)
                        and element.value.id == self_name and isinstance(element.ctx, ast.Store)):
                    out.add(element.attr)
    return out


def _init_only_attributes(cls: ast.ClassDef, init: ast.FunctionDef, self_name: str) -> Set[str]:
    """`self` attributes assigned in `__init__` and in no other method of the class."""
    attrs = _assigned_self_attrs(init, self_name)
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item is not init:
            attrs -= _assigned_self_attrs(item, self_name)
    return attrs


def _class_names(cls: ast.ClassDef) -> Set[str]:
    """Every attribute name the class already uses (methods, class attributes, `self.X`)."""
    names: Set[str] = set()
    for sub in ast.walk(cls):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            names.add(sub.value)  # register_buffer("name", ...), getattr(self, "name")
    for item in cls.body:
        if isinstance(item, ast.Assign):
            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return names


def _self_attr(node: ast.AST, self_name: str) -> bool:
    """`self.<any attribute>`."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name


def _is_call_target(expr: ast.AST, attribute: ast.Attribute) -> bool:
    """Is `attribute` the method of a call inside `expr` (`np.array`, `[...].copy`)?"""
    return any(isinstance(sub, ast.Call) and sub.func is attribute for sub in ast.walk(expr))


def _sets_requires_grad(expr: ast.AST) -> bool:
    """A `requires_grad=` other than False, or `.requires_grad_()`: a buffer would freeze that choice (often
    `requires_grad=self.training`, which `train()`/`eval()` toggle)."""
    for sub in ast.walk(expr):
        if isinstance(sub, ast.keyword) and sub.arg == "requires_grad" and constant(sub.value, ast) is not False:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "requires_grad_":
            return True
    return False
