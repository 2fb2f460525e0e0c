"""Structural matching shared by the fusion rules.

Expressions are compared by structure, never by spelling: local names are followed to the value
they held at that point (`ctx.binding_before`, so `x = f(x)` chains resolve), casts are looked
through, and squares, halves and activations are recognised in each of their usual forms.
"""
from __future__ import annotations

import ast
from typing import Callable, ClassVar, FrozenSet, List, NamedTuple, Optional, Tuple

from ascend_lint.rule import Rule
from ascend_lint.analysis.semantic import FileContext
from ascend_lint.astutil import argument, constant, keyword

from ._reach import encloses, function_defs

# Look-up of a local name: (bound value, unpack index) or None when unknown.
Lookup = Callable[[ast.Name], Optional[Tuple[ast.expr, Optional[int], Optional[ast.stmt]]]]
CASTS = frozenset({"to", "float", "half", "bfloat16", "type", "type_as", "contiguous", "astype"})
MAX_STEPS = 8
_NAME_HANDLERS = ("visit_Attribute", "visit_Name", "visit_ImportFrom")  # FusionRule's, for fused ops


class FusionRule(Rule):
    """A fusion rule: candidates found during the walk are reported at the end of the file, unless the
    file already uses one of `fused_ops` (then the hand-written block is its explicit fallback)."""

    npu_context = True
    frameworks: ClassVar[Tuple[str, ...]] = ("torch",)  # the fused ops are torch_npu's unless a rule says more
    fused_ops: ClassVar[FrozenSet[str]] = frozenset()  # names of the fused op(s)
    fused_markers: ClassVar[Tuple[str, ...]] = ()  # substrings that name a fused op family (flash_attn...)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        names = tuple(sorted(cls.fused_ops)) + cls.fused_markers  # the name handlers look for these alone
        cls.handler_triggers = {handler: names for handler in _NAME_HANDLERS}

    def start_file(self) -> None:
        self._pending: List[Tuple[ast.AST, str]] = []
        self._fused_seen = False

    def _fused(self, name: str) -> bool:
        return name in self.fused_ops or (bool(self.fused_markers) and any(m in name for m in self.fused_markers))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self._fused_seen and self._fused(node.attr):
            self._fused_seen = True

    def visit_Name(self, node: ast.Name) -> None:
        if not self._fused_seen and self._fused(node.id):
            self._fused_seen = True

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not self._fused_seen and any(self._fused(alias.name) for alias in node.names):
            self._fused_seen = True

    def candidate(self, node: ast.AST, message: str) -> None:
        """Queue a finding: code of the frameworks the fused ops belong to, not in a function or class that a
        monkey-patch replaces at run time (the block never runs). (Test files, where a hand-written block is
        the reference the fused op is checked against, are not training code: never reported.)"""
        if any(self.ctx.imports(f) for f in self.frameworks) and not self.ctx.replaced_by():
            self._pending.append((node, message))

    def end_file(self) -> None:
        if self._fused_seen:
            return
        for node, message in self._pending:
            self.report(node, message=message)


# ------------------------------------------------------------------------------------ resolution
def ctx_lookup(ctx: FileContext) -> Lookup:
    """Name look-up at the name's own position: a local of the enclosing function through the assignments
    that may reach it (the last in text order that is not in a branch excluding the use), any other name
    through the semantic model."""
    reach = ctx_reach(ctx)

    def look(name: ast.Name):
        found = reach(name)
        if found is not None:
            return found[0] if found and found[0][0] is not None else None
        bound = ctx.binding_before(name.id, name)
        if bound is None or bound.value is None:
            return None
        return bound.value, bound.index, bound.stmt
    return look


def ctx_reach(ctx: FileContext) -> Callable[[ast.Name], Optional[List[Tuple[Optional[ast.expr], Optional[int],
                                                                                ast.stmt]]]]:
    """Every assignment of a local name that may reach the name's position, the last in text order first
    (value None: unknown); None for a name that is not a local of the enclosing function."""
    scope = ctx.function

    def reach(name: ast.Name):
        if scope is None or not encloses(scope.node, name):
            return None
        if name.id not in scope.bindings:  # never assigned in the function (so far): a parameter or not local
            return [] if name.id in scope.params else None
        defs = function_defs(scope.node)
        if not defs.is_local(name.id):
            return None
        return [(d.value, d.index, d.stmt) for d in defs.reaching(name)]
    return reach


def alternatives(ctx: FileContext, name: ast.Name) -> List[ast.expr]:
    """The values a name may hold at its position (each reaching assignment, a literal tuple's element for
    an unpacked one); the semantic model's binding for a name that is not a local."""
    found = ctx_reach(ctx)(name)
    if found is None:
        bound = ctx.binding_before(name.id, name)
        found = [(bound.value, bound.index, bound.stmt)] if bound is not None else []
    values = []
    for value, index, _ in found:
        if value is not None and index is not None:
            value = _element(value, index)
        if value is not None:
            values.append(value)
    return values


def _element(value: ast.expr, index: int) -> Optional[ast.expr]:
    """The index-th element of a literal tuple or list (None when it is not one)."""
    if (isinstance(value, (ast.Tuple, ast.List)) and index < len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in value.elts)):
        return value.elts[index]
    return None


def body_lookup(func: ast.AST) -> Lookup:
    """Name look-up inside a small function body (its top-level assignments, last one before the use)."""
    assigns: List[Tuple[ast.stmt, str, ast.expr, Optional[int]]] = []
    for stmt in getattr(func, "body", []):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                assigns.append((stmt, target.id, stmt.value, None))
            elif isinstance(target, (ast.Tuple, ast.List)):
                for i, element in enumerate(target.elts):
                    if isinstance(element, ast.Name):
                        assigns.append((stmt, element.id, stmt.value, i))

    def look(name: ast.Name):
        found = None
        for stmt, ident, value, index in assigns:
            if ident == name.id and (stmt.end_lineno, stmt.end_col_offset) <= (name.lineno, name.col_offset):
                found = (value, index, stmt)
        return found
    return look


def resolve(look: Lookup, node: ast.expr) -> ast.expr:
    """Follow a local name to its value (not through tuple unpacking)."""
    for _ in range(MAX_STEPS):
        if not isinstance(node, ast.Name):
            break
        bound = look(node)
        if bound is None:
            break
        value, index = bound[0], bound[1]
        if index is not None:  # `a, b = x1, x2`: the index-th element of a literal tuple
            value = _element(value, index)
            if value is None:
                break
        node = value
    return node


def peel(look: Lookup, node: ast.expr) -> ast.expr:
    """Resolve names and look through dtype casts (`.float()`, `.to(dtype)`, `.type_as(x)`)."""
    for _ in range(MAX_STEPS):
        node = resolve(look, node)
        inner = uncast(node)
        if inner is node:
            break
        node = inner
    return node


def uncast(node: ast.expr) -> ast.expr:
    """`node` without the dtype casts around it (`.float()`, `.to(dtype)`, `.astype(t)`); names left as they are."""
    for _ in range(MAX_STEPS):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CASTS
                and not _is_module_call(node)):
            break
        node = node.func.value
    return node


def _is_module_call(call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("torch", "F")


def same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def qual_or_method(ctx: FileContext, call: ast.AST, torch_name: str) -> Optional[ast.expr]:
    """For `torch.<name>(x, ...)` return x; for `x.<name>(...)` (unknown receiver) return x."""
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    if ctx.qualname(func) == f"torch.{torch_name}":
        return call.args[0] if call.args else None
    if isinstance(func, ast.Attribute) and func.attr == torch_name and ctx.qualname(func) is None:
        return func.value
    return None


def is_last_dim(node: Optional[ast.expr]) -> bool:
    """The dim is -1, or not a literal (unknown: assumed to be the last one)."""
    value = constant(node, default=None)
    if node is None:
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return value == -1
    return not isinstance(node, ast.Constant)


def square_base(ctx: FileContext, look: Lookup, node: ast.expr) -> Optional[ast.expr]:
    """S for `S.pow(2)`, `torch.pow(S, 2)`, `S ** 2`, `S * S`, `S.square()`, `torch.square(S)`."""
    node = peel(look, node)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow) and constant(node.right) == 2:
            return node.left
        if isinstance(node.op, ast.Mult) and same(node.left, node.right):
            return node.left
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    qual = ctx.qualname(func)
    if qual == "torch.pow" and len(node.args) == 2 and constant(node.args[1]) == 2:
        return node.args[0]
    if qual == "torch.square" and node.args:
        return node.args[0]
    if isinstance(func, ast.Attribute) and qual is None:
        if func.attr == "pow" and len(node.args) == 1 and constant(node.args[0]) == 2:
            return func.value
        if func.attr == "square" and not node.args:
            return func.value
    return None


# ------------------------------------------------------------------------------------ activations
ACTIVATION_FUNCS = {
    "torch.nn.functional.silu": "silu", "torch.silu": "silu",
    "torch.nn.functional.gelu": "gelu", "torch.gelu": "gelu",
}
ACTIVATION_MODULES = {"torch.nn.SiLU": "silu", "torch.nn.GELU": "gelu"}
# Activation tables indexed by a configuration string (transformers' ACT2FN): name -> (kind, tanh-approximated)
ACTIVATION_TABLES = ("ACT2FN", "ACT2CLS")
ACTIVATION_NAMES = {"silu": ("silu", False), "swish": ("silu", False), "gelu": ("gelu", False),
                    "gelu_new": ("gelu", True), "gelu_pytorch_tanh": ("gelu", True), "gelu_fast": ("gelu", True)}


def activation(ctx: FileContext, look: Lookup, node: ast.expr) -> Optional[Tuple[str, ast.expr, Optional[bool]]]:
    """(kind, input, tanh-approximated: None when chosen at run time) for `F.silu(a)`, `nn.SiLU()(a)`,
    `self.act(a)` with `self.act = nn.GELU(...)` in `__init__`, or a local bound to such a module."""
    node = resolve(look, node)
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return None
    if any(k.arg not in ("approximate", "inplace") for k in node.keywords):
        return None
    func = node.func
    qual = ctx.qualname(func)
    if qual in ACTIVATION_FUNCS:
        return ACTIVATION_FUNCS[qual], node.args[0], _tanh(keyword(node, "approximate"))
    module = _module_value(ctx, look, func)
    if isinstance(module, ast.Call):
        kind = ACTIVATION_MODULES.get(ctx.qualname(module.func) or "")
        if kind is not None:
            return kind, node.args[0], _tanh(keyword(module, "approximate"))
    if isinstance(module, ast.Subscript):
        named = _table_activation(ctx, module)
        if named is not None:
            return named[0], node.args[0], named[1]
    return None


def _table_activation(ctx: FileContext, lookup: ast.Subscript) -> Optional[Tuple[str, Optional[bool]]]:
    """`ACT2FN["silu"]`, or `ACT2FN[config.hidden_act]` where the project's configuration classes default
    `hidden_act` to one activation: (kind, tanh-approximated; None when a configuration picks it)."""
    table = lookup.value
    qual = ctx.qualname(table)  # an imported table by its own name (`ACT2FN as A`), else as spelled
    name = (qual.rsplit(".", 1)[-1] if qual else table.attr if isinstance(table, ast.Attribute)
            else table.id if isinstance(table, ast.Name) else "")
    if name not in ACTIVATION_TABLES:
        return None
    key = lookup.slice
    value = constant(key)
    if value is None and isinstance(key, ast.Attribute):
        named = ACTIVATION_NAMES.get(ctx.config_default(key.attr) or "")
        return (named[0], None) if named is not None else None  # a checkpoint's config may pick gelu_new
    return ACTIVATION_NAMES.get(value) if isinstance(value, str) else None


def _tanh(kw: Optional[ast.keyword]) -> Optional[bool]:
    """Is GELU tanh-approximated: its `approximate=` keyword (absent: exact); None when chosen at run time."""
    if kw is None:
        return False
    value = constant(kw.value, default=None)
    return value == "tanh" if isinstance(value, str) else None


def _module_value(ctx: FileContext, look: Lookup, func: ast.expr) -> Optional[ast.expr]:
    """What a called object is: `nn.SiLU()` itself, a local bound to it, or `self.<attr>` set in the class."""
    if isinstance(func, ast.Call):
        return func
    if isinstance(func, ast.Name):
        return resolve(look, func)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        cls = ctx.class_scope
        if cls is not None:
            return cls.attributes.get(func.attr)
    return None


# ------------------------------------------------------------------------------------ halves
def _chunk_source(ctx: FileContext, value: ast.expr, pieces: int) -> Optional[ast.expr]:
    """X for `X.chunk(2, dim=-1)`, `torch.chunk(X, 2, -1)`, `X.split(n, dim=-1)`, `torch.split(X, n, -1)`."""
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    qual = ctx.qualname(func)
    if qual in ("torch.chunk", "torch.split") and value.args:
        source, offset, name = value.args[0], 1, qual[6:]
    elif isinstance(func, ast.Attribute) and func.attr in ("chunk", "split") and qual is None:
        source, offset, name = func.value, 0, func.attr
    else:
        return None
    if name == "chunk" and constant(argument(value, "chunks", offset)) != 2:
        return None
    if name == "split" and pieces != 2:
        return None
    if not is_last_dim(argument(value, "dim", offset + 1)):
        return None
    return source


def _last_axis_slice(node: ast.expr) -> Optional[Tuple[ast.expr, ast.Slice]]:
    """(X, slice) for `X[..., a:b]` or `X[:, :, a:b]` (a slice of the last axis, written as such)."""
    if not isinstance(node, ast.Subscript):
        return None
    index = node.slice
    if isinstance(index, ast.Tuple) and len(index.elts) > 1 and isinstance(index.elts[-1], ast.Slice):
        if all(_full(e) for e in index.elts[:-1]):
            return node.value, index.elts[-1]
    return None


def _full(node: ast.expr) -> bool:
    if isinstance(node, ast.Slice):
        return node.lower is None and node.upper is None and node.step is None
    return constant(node) is Ellipsis


def halves(ctx: FileContext, look: Lookup, first: ast.expr, second: ast.expr) -> Optional[ast.expr]:
    """X when `first` is the first and `second` the second half of X along the last dim."""
    return (_unpacked_halves(ctx, look, first, second) or _indexed_halves(ctx, look, first, second)
            or _sliced_halves(look, first, second))


def _unpacked_halves(ctx: FileContext, look: Lookup, first: ast.expr, second: ast.expr) -> Optional[ast.expr]:
    """`a, b = X.chunk(2, dim=-1)`: X for the names `a` and `b`."""
    if not (isinstance(first, ast.Name) and isinstance(second, ast.Name)):
        return None
    a, b = look(first), look(second)
    if a is None or b is None or a[2] is not b[2] or a[2] is None or (a[1], b[1]) != (0, 1):
        return None
    target = a[2].targets[0] if isinstance(a[2], ast.Assign) else None
    pieces = len(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else 0
    return _chunk_source(ctx, a[0], pieces)


def _indexed_halves(ctx: FileContext, look: Lookup, first: ast.expr, second: ast.expr) -> Optional[ast.expr]:
    """`c = X.chunk(2, -1)`: X for `c[0]` and `c[1]`."""
    if isinstance(first, ast.Subscript) and isinstance(second, ast.Subscript):
        if constant(first.slice) == 0 and constant(second.slice) == 1 and same(first.value, second.value):
            return _chunk_source(ctx, resolve(look, first.value), 0)  # pieces of a split unknown: chunk only
    return None


def _sliced_halves(look: Lookup, first: ast.expr, second: ast.expr) -> Optional[ast.expr]:
    """X for `X[..., :h]` and `X[..., h:]`."""
    one = _last_axis_slice(resolve(look, first))
    two = _last_axis_slice(resolve(look, second))
    if one is None or two is None or not same(one[0], two[0]):
        return None
    s1, s2 = one[1], two[1]
    if (s1.lower is None and s1.upper is not None and s2.upper is None and s2.lower is not None
            and s1.step is None and s2.step is None and same(s1.upper, s2.lower)):
        return one[0]
    return None


def src(ctx: FileContext, node: ast.AST, placeholder: str, limit: int = 40) -> str:
    """Source text of `node` for messages, or `placeholder` when it is too long to quote whole (a
    message never shows an expression cut in the middle)."""
    text = ctx.segment(node) or ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= limit else placeholder


def src_at(ctx: FileContext, node: ast.AST, at: ast.AST, placeholder: str) -> str:
    """Like `src`, for a tensor named where the match starts but quoted in a message about `at`: a name
    rebound in between (`x = x.chunk(2, -1)` makes `x` the tuple) is replaced by the value it held."""
    if isinstance(node, ast.Name):
        then, now = ctx.binding_before(node.id, node), ctx.binding_before(node.id, at)
        if then is not now:
            if then is not None and then.value is not None and then.index is None:
                return src(ctx, then.value, placeholder)
            return placeholder
    return src(ctx, node, placeholder)


# ------------------------------------------------------------------------------------ gated units
class Gate(NamedTuple):
    """`act(a) * b` with a, b halves of one tensor (`source`) or projections of one input."""

    source: Optional[ast.expr]  # the tensor split in halves (None: two projections)
    act_first: bool  # the activation takes the first half
    tanh: Optional[bool]  # the activation is tanh-approximated (None: the code chooses at run time)
    projections: Optional[Tuple[ast.expr, ast.expr]] = None  # (gate projection, up projection)


def gated(ctx: FileContext, node: ast.BinOp, kind: str, allow_projections: bool) -> Optional[Gate]:
    """Match `act(a) * b` (either order) where act is `kind` ('silu' or 'gelu')."""
    if not isinstance(node.op, ast.Mult):
        return None
    look = ctx_lookup(ctx)
    for act_side, other in ((node.left, node.right), (node.right, node.left)):
        found = activation(ctx, look, act_side)
        if found is None or found[0] != kind:
            continue
        a, tanh = found[1], found[2]
        source = halves(ctx, look, a, other)
        if source is not None:
            return Gate(source, True, tanh)
        source = halves(ctx, look, other, a)
        if source is not None:
            return Gate(source, False, tanh)
        if allow_projections:
            pair = _projections(look, a, other)
            if pair is not None:
                return Gate(None, True, tanh, pair)
    return None


def _projections(look: Lookup, a: ast.expr, b: ast.expr) -> Optional[Tuple[ast.expr, ast.expr]]:
    """(gate, up) for `self.w1(x)` and `self.w3(x)`: two different callables applied to the same input."""
    a, b = resolve(look, a), resolve(look, b)
    if not (isinstance(a, ast.Call) and isinstance(b, ast.Call)):
        return None
    if len(a.args) != 1 or len(b.args) != 1 or a.keywords or b.keywords:
        return None
    if not (isinstance(a.func, (ast.Attribute, ast.Name)) and isinstance(b.func, (ast.Attribute, ast.Name))):
        return None
    if same(a.func, b.func) or not same(a.args[0], b.args[0]):
        return None
    if isinstance(a.args[0], ast.Constant):
        return None
    return a.func, b.func
