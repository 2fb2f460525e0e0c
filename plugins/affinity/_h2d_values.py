"""ASC201's questions about values in the hot method: where it is (its class, `self`), whether a tensor is
built from host data and moved to a device, whether its data depend on the method's inputs, whether it is
cached across calls."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple

from ascend_lint.astutil import argument, constant, contains, keyword, method_name

if TYPE_CHECKING:  # pragma: no cover
    from ascend_lint.analysis.semantic import FileContext, Scope

TORCH_CTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor"} | {
    f"torch.{kind}Tensor" for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char",
                                       "Byte", "Bool")
})
MOVES = ("to", "npu", "cuda")
# Keyword arguments of a constructor that are not its data.
NON_DATA_KEYWORDS = frozenset({"device", "dtype", "requires_grad", "pin_memory", "const_arg", "internal"})
# In-place container methods: a list built empty and appended to holds computed data.
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "__setitem__", "pop", "remove",
                      "clear", "sort", "reverse", "popitem", "discard"})
SIZE_METHODS = frozenset({"size", "numel", "dim"})
PURE_BUILTINS = frozenset({"range", "list", "tuple", "len", "int", "float", "bool", "sum", "min", "max", "abs",
                           "sorted", "reversed", "zip", "enumerate", "round", "True", "False", "None"})
# Words of functions whose result differs from call to call (a random mask is not the same per shape).
RANDOM_WORDS = ("rand", "shuffle", "choice", "permutation", "normal", "uniform", "sample", "binomial", "poisson")


class HotValues:
    """Mixin of the ASC201 rule: answers from `self.ctx` at the node being visited; `_scans` is per-file
    state the rule resets in `start_file`."""

    ctx: FileContext
    _scans: Dict[int, Tuple[Set[str], Set[str]]]

    def _hot_class(self) -> Optional[Scope]:
        scopes = self.ctx.scopes
        for index, scope in enumerate(scopes):
            if scope.hot:
                return scopes[index - 1] if index and scopes[index - 1].kind == "class" else None
        return None

    def _hot_class_kind(self) -> Optional[str]:
        cls = self._hot_class()
        return cls.class_kind if cls is not None else None

    def _self_name(self) -> Optional[str]:
        hot = self.ctx.hot_method()
        if hot is None or self._hot_class_kind() not in ("module", "cell"):
            return None
        args = hot.node.args
        first = (args.posonlyargs + args.args)[:1]
        return first[0].arg if first else None

    def _target_is_device(self, call: ast.Call) -> bool:
        if method_name(call) in ("npu", "cuda"):
            return True
        device = keyword(call, "device")
        if device is not None:
            return self._is_device(device.value)
        return bool(call.args) and self._is_device(call.args[0], positional=True)

    def _is_device(self, node: ast.expr, positional: bool = False, depth: int = 0) -> bool:
        """A device that is not the CPU (`'npu'`, `x.device`, `torch.device('npu:0')`, `device`, a tensor)."""
        value = constant(node, default=ast)
        if value is not ast:
            return _device_constant(value)
        if isinstance(node, ast.JoinedStr):
            return "cpu" not in ast.unparse(node)
        if isinstance(node, ast.Call):
            return self._device_call(node)
        qual = self.ctx.qualname(node)
        if qual is not None and qual.startswith("torch."):
            return False  # torch.float16, torch.long: a dtype
        if isinstance(node, ast.Attribute):
            return node.attr == "device" or ("device" in node.attr.lower() and "type" not in node.attr.lower())
        if isinstance(node, ast.Name):
            return self._device_name(node, positional, depth)
        return False

    def _device_call(self, node: ast.Call) -> bool:
        """`torch.device('npu:0')` (not 'cpu'), `'npu:{}'.format(rank)`."""
        if self.ctx.call_name(node) == "torch.device":
            first = argument(node, "type", 0)
            return not (isinstance(constant(first), str) and constant(first).startswith("cpu"))
        return method_name(node) == "format" and "cpu" not in ast.unparse(node.func)

    def _device_name(self, node: ast.Name, positional: bool, depth: int) -> bool:
        """`device`, `dev`, a local bound to a device, or (`.to(x)`) an input tensor of the hot method."""
        name = node.id.lower()
        if "dtype" in name or "type" in name:
            return False
        if "device" in name or name == "dev":
            return True
        bound = self.ctx.binding(node.id)
        if bound is not None and bound.value is not None and bound.index is None and depth < 3:
            return self._is_device(bound.value, positional, depth + 1)
        func = self.ctx.function
        # `.to(x)` with an input tensor: moves to x's device
        return positional and func is not None and node.id in func.params and node.id != self._self_name()

    def _host_tensor(self, node: ast.expr) -> Optional[Tuple[ast.Call, bool]]:
        """The host constructor call that `node` evaluates to, and whether it is written inline."""
        direct = True
        for _ in range(8):
            if isinstance(node, ast.Call):
                qual = self.ctx.call_name(node)
                if qual in TORCH_CTORS:
                    return node, direct
                if qual is not None or not isinstance(node.func, ast.Attribute) or node.func.attr in MOVES:
                    return None
                node = node.func.value  # torch.tensor(...).float().view(...)
            elif isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Name):
                bound = self.ctx.binding(node.id)
                if bound is None or bound.value is None or bound.index is not None:
                    return None
                node, direct = bound.value, False
            else:
                return None
        return None

    def _depends_on_inputs(self, ctor: ast.Call, depth: int = 0, beyond_shape: bool = False) -> bool:
        """Do the constructor's data read a parameter or an unknown local of the hot method? `beyond_shape`:
        other than through its shape (`x.size(1)`, `x.shape[0]`, `len(x)`, `x.dim()`), which is the same on
        every call with inputs of one shape."""
        data = list(ctor.args) + [kw.value for kw in ctor.keywords if kw.arg not in NON_DATA_KEYWORDS]
        return any(self._expr_depends(expr, depth, beyond_shape) for expr in data)

    def _shape_dependent(self, ctor: ast.Call) -> bool:
        """Are the constructor's data computed from the inputs' shapes alone (`np.arange(x.size(1))[::-1]`)?"""
        return self._depends_on_inputs(ctor) and not self._depends_on_inputs(ctor, beyond_shape=True)

    def _expr_depends(self, expr: ast.expr, depth: int, beyond_shape: bool = False) -> bool:
        ctx = self.ctx
        own = comprehension_names(expr)
        self_name = self._self_name()
        if beyond_shape and self._impure_call(expr):
            return True  # computed by code not known to give the same data for the same shape
        for name in (names_outside_shapes(expr) if beyond_shape else loaded_names(expr)):
            if name in own or name == self_name or not ctx.is_local(name):
                continue
            bound = ctx.binding(name)
            if bound is None or bound.value is None or depth >= 3:
                return True
            func = ctx.function
            if func is not None and name in self._scan(func.node)[1]:
                return True  # filled in place (`out = []; out.append(...)`): unknown content
            if self._expr_depends(bound.value, depth + 1, beyond_shape):
                return True
        return False

    def _impure_call(self, expr: ast.expr) -> bool:
        """Does `expr` call anything but builtins, non-random numpy/math functions and methods of plain
        values (`.copy()`, `.reshape(...)`)?"""
        for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call)):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if not name or any(word in name.lower() for word in RANDOM_WORDS):
                return True
            qual = self.ctx.call_name(call)
            if isinstance(func, ast.Name):
                if func.id in PURE_BUILTINS and not self.ctx.is_local(func.id) and qual is None:
                    continue
                if qual is None or qual.split(".")[0] not in ("numpy", "math"):
                    return True
            elif qual is not None:
                if qual.split(".")[0] not in ("numpy", "math") or ".random." in qual:
                    return True
            elif isinstance(func.value, ast.Name) and func.value.id == self._self_name():
                return True  # a method of the module: not known to be pure
        return False

    def _ms_host_data(self, node: ast.expr, depth: int = 0, follow: bool = True) -> bool:
        """numpy values and Python literals (lists, tuples, numbers), through locals and constants."""
        if depth > 6:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, bool)) and node.value is not None
        if isinstance(node, (ast.List, ast.Tuple)):
            return bool(node.elts) and all(self._ms_host_data(e, depth + 1, follow) for e in node.elts)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return True
        if isinstance(node, ast.UnaryOp):
            return self._ms_host_data(node.operand, depth + 1, follow)
        if isinstance(node, ast.BinOp):
            return (self._ms_host_data(node.left, depth + 1, follow)
                    and self._ms_host_data(node.right, depth + 1, follow))
        if isinstance(node, ast.Call):
            return self._ms_host_call(node, depth, follow)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self._self_name():
            cls = self.ctx.class_scope
            value = cls.attributes.get(node.attr) if cls is not None else None
            return value is not None and self._ms_host_data(value, depth + 1, follow=False)
        if isinstance(node, ast.Name) and follow:
            return self._ms_host_name(node, depth)
        return False

    def _ms_host_call(self, node: ast.Call, depth: int, follow: bool) -> bool:
        """A numpy call, or a method chain on host data (`np.array(...).reshape(...).astype(...)`)."""
        qual = self.ctx.call_name(node)
        if qual is not None:
            return qual.startswith("numpy.")
        if isinstance(node.func, ast.Attribute):
            return self._ms_host_data(node.func.value, depth + 1, follow)
        return False

    def _ms_host_name(self, node: ast.Name, depth: int) -> bool:
        """A local bound to host data, or a module constant holding it."""
        if self.ctx.is_local(node.id):
            bound = self.ctx.binding(node.id)
            return (bound is not None and bound.value is not None and bound.index is None
                    and self._ms_host_data(bound.value, depth + 1, True))
        value = self.ctx.constants.get(node.id)
        return value is not None and self._ms_host_data(value, depth + 1, follow=False)

    def _batch_fill(self, ctor: ast.Call) -> Optional[Tuple[str, str]]:
        """(size, value) for `torch.tensor([c] * x.shape[0])` / `[c] * len(x)`: a constant repeated a
        batch-sized number of times, which `torch.full` builds on the device."""
        data = argument(ctor, "data", 0)
        if not (isinstance(data, ast.BinOp) and isinstance(data.op, ast.Mult)):
            return None
        for seq, count in ((data.left, data.right), (data.right, data.left)):
            if (isinstance(seq, ast.List) and len(seq.elts) == 1
                    and isinstance(constant(seq.elts[0]), (int, float, bool)) and self._size_expr(count)):
                return ast.unparse(count), ast.unparse(seq.elts[0])
        return None

    def _size_expr(self, node: ast.expr, depth: int = 0) -> bool:
        """`x.shape[0]`, `x.size(0)`, `len(x)`, or a local name bound to one of them."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "len":
                return True
            return isinstance(func, ast.Attribute) and func.attr in SIZE_METHODS and self.ctx.qualname(func) is None
        if isinstance(node, ast.Name) and depth < 3:
            bound = self.ctx.binding(node.id)
            if bound is not None and bound.value is not None:
                value = bound.value
                if bound.index is not None and isinstance(value, ast.Attribute) and value.attr == "shape":
                    return True  # `b, n = x.shape`
                return bound.index is None and self._size_expr(value, depth + 1)
        return False

    def _lazily_cached(self) -> bool:
        """`if self.idx is None: self.idx = torch.tensor(...).npu()`: stored somewhere that outlives the
        call (an attribute, a container slot, a global) under a condition, so built once, not per call."""
        stmt = next((n for n in reversed(self.ctx.stack) if isinstance(n, ast.stmt)), None)
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return False
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(self._persistent(t) for t in targets):
            return False
        hot = self.ctx.hot_method()
        return any(hot is None or contains(hot.node, if_node) for if_node, _ in self.ctx.ifs)

    def _persistent(self, target: ast.AST) -> bool:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            return True
        func = self.ctx.function
        return isinstance(target, ast.Name) and func is not None and target.id in self._scan(func.node)[0]

    def _scan(self, func: ast.AST) -> Tuple[Set[str], Set[str]]:
        """(names declared global/nonlocal, names mutated in place) in a function; cached."""
        key = id(func)
        if key not in self._scans:
            declared: Set[str] = set()
            mutated: Set[str] = set()
            for sub in ast.walk(func):
                if isinstance(sub, (ast.Global, ast.Nonlocal)):
                    declared.update(sub.names)
                elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                      and sub.func.attr in MUTATORS and isinstance(sub.func.value, ast.Name)):
                    mutated.add(sub.func.value.id)
                elif isinstance(sub, (ast.Assign, ast.AugAssign)):
                    for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                            mutated.add(target.value.id)
                        elif isinstance(sub, ast.AugAssign) and isinstance(target, ast.Name):
                            mutated.add(target.id)
            self._scans[key] = (declared, mutated)
        return self._scans[key]


def name_nodes(expr: ast.AST) -> Iterator[ast.Name]:
    return (n for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def loaded_names(expr: ast.AST) -> List[str]:
    return [n.id for n in name_nodes(expr)]


def _device_constant(value: object) -> bool:
    """A device given as a literal: a string that is not 'cpu'/'meta', or a device index."""
    if isinstance(value, str):
        return not value.startswith(("cpu", "meta"))
    return isinstance(value, int) and not isinstance(value, bool)


SHAPE_ATTRIBUTES = frozenset({"shape", "ndim"})
SHAPE_METHODS = frozenset({"size", "dim", "numel", "nelement"})


def names_outside_shapes(expr: ast.AST) -> List[str]:
    """The names `expr` loads, leaving out those it reads only for a shape (`x` of `x.size(1)`, `x.shape[0]`,
    `len(x)`, `x.ndim`)."""
    names: List[str] = []
    stack: List[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) and node.attr in SHAPE_ATTRIBUTES:
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SHAPE_METHODS:
                stack.extend(node.args)
                continue
            if isinstance(func, ast.Name) and func.id == "len":
                continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.append(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return names


def comprehension_names(expr: ast.AST) -> Set[str]:
    names: Set[str] = set()
    for sub in ast.walk(expr):
        if isinstance(sub, ast.comprehension):
            names.update(n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name))
    return names
