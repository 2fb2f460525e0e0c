"""ASC201's buffer fix: register a tensor of constants once in `__init__` and use it in `forward`, offered
only where the buffer computes what the per-call tensor did (plain data fixed at construction) and no code
can tell that every call now shares one tensor (`_h2d_sharing`)."""
from __future__ import annotations

import ast
import keyword as pykeyword
from typing import Dict, List, Optional, Set, Tuple

from ascend_lint.rule import Applicability, Edit, Fix
from ascend_lint.astutil import callee_name, constant, keyword, method_name

from ._h2d_sharing import SharingCheck
from ._h2d_values import MUTATORS, PURE_BUILTINS, comprehension_names, name_nodes

# Functions that reorder the list they are given in place (`random.shuffle(self.order)`).
SHUFFLES = frozenset({"shuffle"})
# Builtins a constant-only expression may call (pure, no inputs).


class BufferFix(SharingCheck):
    """Mixin of the ASC201 rule: `_fix` builds the buffer fix for the node being visited; the caches are
    per-file state the rule resets in `start_file`."""

    _buffer_names: Dict[int, Set[str]]
    _class_scans: Dict[tuple, tuple]

    def _fix(self, node: ast.Call, ctor: ast.Call, buffer_expr: ast.expr) -> Optional[Fix]:
        """Register the constant tensor as a non-persistent buffer in `__init__`, use it in `forward`."""
        ctx = self.ctx
        cls, hot = self._hot_class(), ctx.hot_method()
        if cls is None or hot is None or ctx.function is not hot or not isinstance(cls.node, ast.ClassDef):
            return None
        self_name = self._self_name()
        init = self._fixable_init(cls.node, self_name)
        if init is None or self_name is None:
            return None
        if node is not ctor and not self._plain_move(node):
            return None
        if _sets_requires_grad(buffer_expr) or self._buffer_visible(node, hot.node):
            return None  # see Fix safety: the shared buffer would be mutated, aliased or returned
        init_attrs = {attr for attr in _init_only_attributes(cls.node, init, self_name)
                      if self._plain_attribute(cls.node, init, self_name, attr)}
        kept: List[ast.AST] = [buffer_expr]
        if buffer_expr is ctor:  # the `device=` keyword is dropped: only the rest must be constant
            kept = list(ctor.args) + [kw.value for kw in ctor.keywords if kw.arg != "device"] + [ctor.func]
        if not all(self._constant_only(part, init_attrs, self_name) for part in kept):
            return None
        source = self._buffer_source(buffer_expr)
        if source is None:
            return None
        name = self._buffer_name(cls.node, buffer_expr)
        text = f"{self_name}.register_buffer({name!r}, {source}, persistent=False)"
        return Fix(
            Applicability.UNSAFE,
            f"Register the tensor once as buffer `{name}` in `__init__` and use `{self_name}.{name}`",
            (Edit("insert_body_end", ctx.span(init), text=text),
             Edit("replace", ctx.span(node), text=f"{self_name}.{name}")),
        )









    @staticmethod
    def _fixable_init(cls: ast.ClassDef, self_name: Optional[str]) -> Optional[ast.FunctionDef]:
        """The class's `__init__`, when a statement appended to it always runs (no `return` in it) and its first
        parameter is the hot method's `self`."""
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            return None
        init_args = init.args.posonlyargs + init.args.args
        if not init_args or init_args[0].arg != self_name or any(isinstance(n, ast.Return) for n in ast.walk(init)):
            return None  # (an early `return` could skip the appended register_buffer)
        return init

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
        params = {a.arg for a in init.args.posonlyargs + init.args.args + init.args.kwonlyargs} - {self_name}
        values, local_values = _init_assignments(init, self_name)
        locals_ = {name: vals[0] for name, vals in local_values.items() if len(vals) == 1 and name not in params}
        found = self._class_scans[key] = (_changed_in_place(cls, self_name), values, params, locals_)
        return found

    def _plain_data(self, expr: ast.expr, params: Set[str], locals_: Dict[str, ast.expr], depth: int = 0) -> bool:
        if depth > 4:
            return False
        if not all(self._plain_node(sub, expr, params) for sub in ast.walk(expr)):
            return False
        ctx = self.ctx
        own = comprehension_names(expr)
        for name_node in name_nodes(expr):
            name = name_node.id
            if name in own or name in params or name in ctx.constants or name in PURE_BUILTINS:
                continue
            if (ctx.aliases.get(name) or "").split(".")[0] in ("numpy", "math"):
                continue
            if name in locals_ and self._plain_data(locals_[name], params, locals_, depth + 1):
                continue
            return False
        return True

    def _plain_node(self, sub: ast.AST, expr: ast.expr, params: Set[str]) -> bool:
        """May a node of `expr` appear in plain data: no lambda/walrus/await/yield, no attribute other than
        numpy/math or a method, and calls only of pure builtins, numpy/math, or non-mutating methods."""
        ctx = self.ctx
        if isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(sub, ast.Attribute) and not _is_call_target(expr, sub) and (
                ctx.qualname(sub) or "").split(".")[0] not in ("numpy", "math"):
            return False  # attributes (configs, other members) are not followed: not known to be data
        if not isinstance(sub, ast.Call):
            return True
        func = sub.func
        qual = ctx.call_name(sub)
        if isinstance(func, ast.Name) and func.id in PURE_BUILTINS and func.id not in params:
            return True
        if qual is not None and qual.split(".")[0] in ("numpy", "math"):
            return True
        # a method of plain data: `.reshape(...)`, `.tolist()`
        return isinstance(func, ast.Attribute) and qual is None and not (
            func.attr.endswith("_") or func.attr in MUTATORS)

    @staticmethod
    def _plain_move(call: ast.Call) -> bool:
        """`.to(device)`, `.npu()`, `.cuda()` that change nothing but the device."""
        extra = [kw for kw in call.keywords if kw.arg not in ("device", "non_blocking")]
        if method_name(call) == "to":
            positional = call.args[1:] if keyword(call, "device") is None else call.args
            return not extra and all(isinstance(constant(a), bool) for a in positional)
        return not extra and len(call.args) <= 1

    def _constant_only(self, expr: ast.expr, init_attrs: Set[str], self_name: str) -> bool:
        ctx = self.ctx
        own = comprehension_names(expr)
        for sub in ast.walk(expr):
            if isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == self_name:
                if sub.attr not in init_attrs:
                    return False
        for name_node in name_nodes(expr):
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
        base = base.strip("_") or "const"
        name = f"_{base}_buf"
        if not name.isidentifier() or pykeyword.iskeyword(name):
            name = "_const_buf"
        candidate, number = name, 2
        while candidate in taken:
            candidate, number = f"{name}{number}", number + 1
        taken.add(candidate)
        return candidate


def _init_only_attributes(cls: ast.ClassDef, init: ast.FunctionDef, self_name: str) -> Set[str]:
    """`self` attributes assigned in `__init__` and in no other method of the class."""
    attrs = _assigned_self_attrs(init, self_name)
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item is not init:
            attrs -= _assigned_self_attrs(item, self_name)
    return attrs


def _changed_in_place(cls: ast.ClassDef, self_name: str) -> Set[str]:
    """The `self` attributes changed in place anywhere in the class: by a container mutator or a trailing-`_`
    method called on them, given to a shuffle or a trailing-`_` function, or stored into."""
    changed: Set[str] = set()
    for sub in ast.walk(cls):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and _self_attr(
                sub.func.value, self_name) and (sub.func.attr in MUTATORS or sub.func.attr.endswith("_")):
            changed.add(sub.func.value.attr)
        called = (callee_name(sub) if isinstance(sub, ast.Call) else '')
        if called in SHUFFLES or called.endswith("_"):
            changed.update(a.attr for a in sub.args if _self_attr(a, self_name))  # `random.shuffle(self.order)`
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and _self_attr(target.value, self_name):
                    changed.add(target.value.attr)
    return changed


def _init_assignments(init: ast.FunctionDef, self_name: str) -> Tuple[Dict[str, List[Optional[ast.expr]]],
                                                                        Dict[str, List[ast.expr]]]:
    """The values `__init__` assigns to each `self` attribute, and to each local name (`half = channels // 2`;
    an empty list for a name bound some other way, which is not followed)."""
    values: Dict[str, List[Optional[ast.expr]]] = {}
    local_values: Dict[str, List[ast.expr]] = {}
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


def _is_attribute_base(expr: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.value is name for sub in ast.walk(expr))


def _sets_requires_grad(expr: ast.AST) -> bool:
    """A `requires_grad=` other than False, or `.requires_grad_()`: a buffer would freeze that choice (often
    `requires_grad=self.training`, which `train()`/`eval()` toggle)."""
    for sub in ast.walk(expr):
        if isinstance(sub, ast.keyword) and sub.arg == "requires_grad" and constant(sub.value, ast) is not False:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "requires_grad_":
            return True
    return False
