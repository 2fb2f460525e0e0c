"""Where a tensor expression lives: on the device, on the host, not a tensor at all, or unknown.

Simple data flow inside one function, read at the point the walk has reached (the names' bindings so far):

- a tensor made by a torch or MindSpore constructor without a device (`torch.tensor(...)`, `torch.zeros(n)`,
  `torch.from_numpy(a)`, `mindspore.Tensor(a)`) is on the host; with `device=` an NPU/CUDA device, or the
  device of a device tensor (`device=x.device`), it is on the device;
- `.to(dev)`, `.npu()`, `.cuda()` move it to the device, `.cpu()` to the host; `.to(dtype)` keeps it where it
  is; `.item()`, `.tolist()`, `.numpy()` give host values (not tensors);
- the inputs of `forward`/`construct` (and of the functions the project model finds they call) are INPUT: device tensors once a tensor operation or a torch function
  takes them (a bare input may be a flag: `if causal:` is not a tensor test); the module's parameters and buffers (`self.w = nn.Parameter(...)`,
  `self.register_buffer("w", ...)`) and the results of its sub-modules are on the device;
- the result of an operation is where its tensor operands are: on the device when one is, on the host when
  all are; shapes, sizes, dtypes, devices and Python scalars are values, never tensors.

Anything else is UNKNOWN: rules that report a host sync or a host-to-device copy speak only where the answer
is DEVICE (or HOST), never on a guess.
"""
from __future__ import annotations

import ast
import enum
from typing import Any, Dict, Iterable, List, Optional, Protocol

from .data import DEVICE_QUERY_METHODS



class WalkState(Protocol):
    """What placement reads of the semantic model (semantic.FileContext) where the walk is."""

    scopes: List[Any]
    local_functions: Dict[str, ast.AST]

    @property
    def function(self) -> Any: ...

    @property
    def class_scope(self) -> Any: ...

    def binding_before(self, name: str, node: ast.AST) -> Any: ...

    def is_local(self, name: str) -> bool: ...

    def qualname(self, node: ast.AST) -> Optional[str]: ...


class Place(str, enum.Enum):
    DEVICE = "device"
    HOST = "host"
    VALUE = "value"  # a Python or numpy value, not a framework tensor
    INPUT = "input"  # an input of forward/construct: on the device if it is a tensor (it may be a flag)
    UNKNOWN = "unknown"


DEVICE, HOST, VALUE, INPUT, UNKNOWN = Place.DEVICE, Place.HOST, Place.VALUE, Place.INPUT, Place.UNKNOWN

# Constructors that allocate a new tensor: on the host unless a `device=` says otherwise.
TORCH_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "Tensor", "LongTensor", "FloatTensor", "IntTensor", "BoolTensor",
    "HalfTensor", "zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "randperm", "normal", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
    "randn_like", "randint_like", "tril_indices", "triu_indices",
})
# `*_like` factories take their device from their first argument when `device=` is absent.
LIKE_FACTORIES = frozenset(f for f in TORCH_FACTORIES if f.endswith("_like"))
# Attributes and methods of a tensor that give a Python value, not a tensor (and need no device data).
VALUE_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "is_leaf", "layout",
                              "grad_fn", "names", "T_shape"})
VALUE_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "stride", "is_contiguous",
                           "data_ptr", "get_device", "is_floating_point", "is_complex", "storage_offset",
                           "type", "ndimension"})
# Methods that copy device data to the host and return it as host data.
TO_HOST_VALUE = frozenset({"item", "tolist", "numpy", "asnumpy"})
# Tensor methods whose result lives where the receiver lives.
KEEPS_PLACE = frozenset({
    "sum", "mean", "max", "min", "norm", "std", "var", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "float",
    "half", "double", "long", "int", "bool", "bfloat16", "detach", "clone", "contiguous", "view", "view_as",
    "reshape", "reshape_as", "squeeze", "unsqueeze", "argmax", "argmin", "softmax", "log_softmax", "sigmoid",
    "tanh", "relu", "eq", "ne", "gt", "lt", "ge", "le", "mul", "div", "add", "sub", "prod", "flatten", "all",
    "any", "transpose", "permute", "t", "expand", "expand_as", "repeat", "masked_fill", "gather", "index_select",
    "chunk", "split", "narrow", "flip", "roll", "cumsum", "topk", "sort", "clamp", "clamp_", "round", "floor",
    "ceil", "type_as", "matmul", "bmm", "mm", "neg", "reciprocal", "square", "sign", "nonzero", "where",
    "masked_select", "logical_not", "logical_and", "logical_or", "float_", "add_", "mul_", "sub_", "div_",
    "fill_", "zero_", "copy_", "masked_fill_", "abs_", "exp_", "unbind", "swapaxes", "movedim", "amax", "amin",
    "logsumexp", "mT", "T", "astype", "asnumpy_",
})
PYTHON_VALUE_FUNCTIONS = frozenset({"len", "range", "int", "float", "bool", "str", "list", "tuple", "dict", "set",
                                    "isinstance", "hasattr", "getattr", "enumerate", "zip", "sorted", "round",
                                    "abs", "min", "max", "sum", "any", "all", "repr", "type", "id", "hash"})
# Modules whose functions compute on the host (numpy arrays, Python values).
HOST_MODULES = ("numpy", "math", "random", "np")
# Functions of these namespaces return tensors placed like their tensor arguments (`torch.cat`, `F.softmax`,
# `torch_npu.npu_rms_norm`, `ops.matmul`); torch's other namespaces (distributed, npu, cuda, utils, ...) do not.
TENSOR_MODULES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft", "torch_npu",
                            "mindspore.ops", "mindspore.ops.functional", "mindspore.numpy", "mindspore.mint",
                            "mindspore.mint.nn.functional"})
# Functions of those namespaces that give a Python value.
NON_TENSOR_FUNCTIONS = frozenset({
    "is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype", "typename", "device", "dtype",
    "Size", "manual_seed", "initial_seed", "seed", "is_grad_enabled", "no_grad", "enable_grad", "save", "load",
    "get_rng_state", "finfo", "iinfo", "is_nonzero", "equal", "allclose", "is_same_size", "is_storage",
    "is_inference_mode_enabled", "is_autocast_enabled", "result_type", "promote_types", "can_cast",
})
DEVICE_WORDS = ("npu", "cuda", "device", "dev", "rank", "gpu")


class Placement:
    """Placement of expressions in one file, asked at the walk's current position (see the module docstring).
    Answers are memoised per node; each question costs the size of the expressions it follows."""

    MAX_DEPTH = 12  # names followed through their bindings

    def __init__(self, ctx: WalkState) -> None:
        self.ctx = ctx
        self._memo: Dict[int, Place] = {}
        self._buffers: Dict[int, frozenset] = {}  # class node -> the names it registers as buffers

    def of(self, node: Optional[ast.AST], depth: int = 0) -> Place:
        if node is None or depth > self.MAX_DEPTH:
            return UNKNOWN
        key = id(node)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._place(node, depth)
        return found

    def is_device(self, node: Optional[ast.AST]) -> bool:
        return self.of(node) is DEVICE

    def of_tensor(self, node: Optional[ast.AST]) -> Place:
        """`of`, for an expression known to be a tensor (the receiver of a tensor method): an INPUT is DEVICE."""
        found = self.of(node)
        return DEVICE if found is INPUT else found

    # ------------------------------------------------------------------ by node type
    def _place(self, node: ast.AST, depth: int) -> Place:
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            return VALUE
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.DictComp, ast.SetComp,
                             ast.GeneratorExp, ast.Lambda)):
            return VALUE
        if isinstance(node, ast.Name):
            return self._name(node, depth)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.BinOp):
            return _join(self.of(node.left, depth + 1), self.of(node.right, depth + 1))
        if isinstance(node, ast.UnaryOp):
            return VALUE if isinstance(node.op, ast.Not) else self.of(node.operand, depth + 1)
        if isinstance(node, ast.Compare):
            return self._compare(node, depth)
        if isinstance(node, ast.IfExp):
            body, orelse = self.of(node.body, depth + 1), self.of(node.orelse, depth + 1)
            return body if body is orelse else UNKNOWN
        if isinstance(node, ast.NamedExpr):
            return self.of(node.value, depth + 1)
        return UNKNOWN

    def _compare(self, node: ast.Compare, depth: int) -> Place:
        """`a > b` of tensors is a tensor; `is`, `in`, and comparisons of values are values."""
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return VALUE
        return _join(self.of(node.left, depth + 1), *(self.of(c, depth + 1) for c in node.comparators))

    def _name(self, node: ast.Name, depth: int) -> Place:
        ctx = self.ctx
        scope = ctx.function
        bound = ctx.binding_before(node.id, node)
        if bound is not None and bound.value is not None:
            if bound.index is not None:  # `a, b = ...`: each piece is where the whole is (for tensors)
                whole = self.of(bound.value, depth + 1)
                return whole if whole in (DEVICE, HOST) else UNKNOWN
            return self.of(bound.value, depth + 1)
        if scope is not None and node.id in scope.params and not _bound_in(scope, node.id):
            return self._parameter(scope, node.id)
        return UNKNOWN

    def _parameter(self, scope, name: str) -> Place:
        """Inputs of forward/construct are device tensors unless their default or annotation says otherwise."""
        if name in ("self", "cls") or not self._is_forward(scope):
            return UNKNOWN
        args = scope.node.args
        if (args.vararg is not None and args.vararg.arg == name) or (args.kwarg is not None and args.kwarg.arg == name):
            return VALUE
        default = scope.defaults.get(name)
        if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
            return VALUE
        annotation = _annotation(scope.node, name)
        if annotation is not None and not _tensor_annotation(annotation):
            return VALUE
        return INPUT

    def _is_forward(self, scope) -> bool:
        """A forward/construct, or a function the project model finds one calls (its tensor arguments come
        from the forward): the innermost function of the walk."""
        scopes = self.ctx.scopes
        if scopes[-1] is not scope or not scope.hot:
            return False
        if scope.reason is not None:  # a helper that a forward calls
            return True
        return len(scopes) >= 3 and scopes[-2].kind == "class" and bool(scopes[-2].class_kind)

    def _attribute(self, node: ast.Attribute, depth: int) -> Place:
        if node.attr in VALUE_ATTRIBUTES:
            return VALUE
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return self._self_attribute(node.attr)
        if node.attr in ("T", "mT", "data", "grad", "real", "imag"):
            return self.of(node.value, depth + 1)
        return UNKNOWN

    def _self_attribute(self, attr: str) -> Place:
        """Parameters and buffers of the module (in a model class) are on the device with the model."""
        cls = self.ctx.class_scope
        if cls is None or not cls.class_kind:
            return UNKNOWN
        value = cls.attributes.get(attr)
        if value is not None and isinstance(value, ast.Call):
            name = self.ctx.qualname(value.func) or ""
            if name.endswith((".Parameter", ".parameter.Parameter")):
                return DEVICE
        buffers = self._buffers.get(id(cls.node))
        if buffers is None:
            buffers = self._buffers[id(cls.node)] = _registered_buffers(cls.node)
        if attr in buffers:
            return DEVICE
        return UNKNOWN

    def _subscript(self, node: ast.Subscript, depth: int) -> Place:
        value = self.of(node.value, depth + 1)
        if value in (DEVICE, HOST, INPUT):
            return value
        if isinstance(node.value, ast.Attribute) and node.value.attr in ("shape",):
            return VALUE
        return VALUE if value is VALUE else UNKNOWN

    # ------------------------------------------------------------------ calls
    def _call(self, node: ast.Call, depth: int) -> Place:
        func = node.func
        name = self.ctx.qualname(func) or ""
        if name:
            placed = self._known_function(node, name, depth)
            if placed is not None:
                return placed
        if isinstance(func, ast.Name) and func.id in PYTHON_VALUE_FUNCTIONS and not self.ctx.is_local(func.id):
            return VALUE
        if isinstance(func, ast.Attribute):
            return self._method(node, func, depth)
        return UNKNOWN

    def _known_function(self, node: ast.Call, name: str, depth: int) -> Optional[Place]:
        module, _, last = name.rpartition(".")
        if module.split(".", 1)[0] in HOST_MODULES:
            return VALUE
        if module in ("torch", "mindspore", "mindspore.common.tensor") and last in TORCH_FACTORIES or \
                name in ("mindspore.Tensor", "mindspore.common.tensor.Tensor"):
            return self._factory(node, last, depth)
        if module in TENSOR_MODULES:
            if last in NON_TENSOR_FUNCTIONS:
                return VALUE
            args = [self.of(a, depth + 1) for a in _tensor_args(node)]
            return _join(*(DEVICE if a is INPUT else a for a in args)) if args else UNKNOWN
        return None

    def _factory(self, node: ast.Call, last: str, depth: int) -> Place:
        device = next((k.value for k in node.keywords if k.arg == "device"), None)
        if device is not None:
            return self._device_expr(device, depth)
        if last in LIKE_FACTORIES and node.args:
            return self.of(node.args[0], depth + 1)
        return HOST

    def _method(self, node: ast.Call, func: ast.Attribute, depth: int) -> Place:
        method = func.attr
        if method in ("npu", "cuda"):
            return DEVICE
        if method == "cpu":
            return HOST
        if method in TO_HOST_VALUE or method in VALUE_METHODS:
            return VALUE
        if method == "to":
            return self._to(node, func, depth)
        if method in KEEPS_PLACE:
            receiver = self.of(func.value, depth + 1)
            return DEVICE if receiver is INPUT else receiver
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id == "self" and self._submodule(method):
            args = [self.of(a, depth + 1) for a in node.args]
            return DEVICE if DEVICE in args or INPUT in args else UNKNOWN
        return UNKNOWN

    def _submodule(self, attr: str) -> bool:
        """Is `self.<attr>` a sub-module of a model class (assigned a constructed object, not a method)?"""
        cls = self.ctx.class_scope
        if cls is None or not cls.class_kind:
            return False
        value = cls.attributes.get(attr)
        return isinstance(value, ast.Call) and attr not in self.ctx.local_functions

    def _to(self, node: ast.Call, func: ast.Attribute, depth: int) -> Place:
        """`.to(device)`, `.to(other)`, `.to(dtype)`, `.to(device=...)`."""
        target = next((k.value for k in node.keywords if k.arg == "device"), None)
        if target is None and node.args:
            target = node.args[0]
        if target is None:  # `.to(dtype=...)`
            return self.of(func.value, depth + 1)
        kind = self._to_target(target, depth)
        return self.of(func.value, depth + 1) if kind is None else kind

    def _to_target(self, target: ast.AST, depth: int) -> Optional[Place]:
        """Where `.to(target)` sends a tensor; None when `target` is a dtype (it stays where it is)."""
        name = self.ctx.qualname(target) or ""
        if name.startswith(("torch.float", "torch.int", "torch.bfloat", "torch.half", "torch.bool", "torch.long",
                            "torch.double", "torch.uint", "torch.complex", "mindspore.float", "mindspore.int")):
            return None
        if isinstance(target, ast.Attribute) and target.attr == "dtype":
            return None
        if isinstance(target, ast.Name) and "dtype" in target.id.lower():
            return None
        placed = self._device_expr(target, depth)
        if placed is UNKNOWN:
            other = self.of(target, depth + 1)  # `.to(other_tensor)`
            return other if other in (DEVICE, HOST) else UNKNOWN
        return placed

    def _device_expr(self, device: ast.AST, depth: int) -> Place:
        """The placement a device expression names: 'cpu' -> HOST, 'npu:0'/'cuda' -> DEVICE, `x.device` -> x's."""
        if isinstance(device, ast.Constant):
            if isinstance(device.value, str):
                return HOST if device.value.split(":")[0] == "cpu" else DEVICE
            if isinstance(device.value, int) and not isinstance(device.value, bool):
                return DEVICE  # a device index
            return UNKNOWN
        if isinstance(device, ast.Attribute) and device.attr == "device":
            owner = self.of(device.value, depth + 1)
            return DEVICE if owner is INPUT else owner if owner in (DEVICE, HOST) else UNKNOWN
        if isinstance(device, ast.Call):
            name = self.ctx.qualname(device.func) or ""
            if name == "torch.device" and device.args:
                return self._device_expr(device.args[0], depth + 1)
            if _is_device_query(name, device):
                return DEVICE
            return UNKNOWN
        words = _words(device)
        if words and "cpu" not in words and any(w in DEVICE_WORDS or w.endswith(DEVICE_WORDS) for w in words):
            return DEVICE  # `device`, `self.device`, `args.device`, `local_rank`
        return UNKNOWN


def _is_device_query(name: str, call: ast.Call) -> bool:
    """`torch.npu.current_device()`, `get_accelerator().current_device_name()`, `accelerator.device`..."""
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else name.rpartition(".")[2]
    return method in DEVICE_QUERY_METHODS


def _join(*places: Place) -> Place:
    """The placement of a result computed from operands placed so (inputs stay inputs: `x == 4` may be a flag's
    test)."""
    tensors = [p for p in places if p is not VALUE]
    if DEVICE in tensors:
        return DEVICE
    if not tensors:
        return VALUE if places else UNKNOWN
    if all(p is INPUT for p in tensors):
        return INPUT
    return HOST if all(p is HOST for p in tensors) else UNKNOWN


def _tensor_args(node: ast.Call) -> Iterable[ast.AST]:
    for arg in node.args:
        if isinstance(arg, (ast.List, ast.Tuple)):
            yield from arg.elts
        elif not isinstance(arg, ast.Starred):
            yield arg
    for keyword in node.keywords:
        if keyword.arg in ("input", "other", "tensors", "x"):
            yield keyword.value


def _bound_in(scope, name: str) -> bool:
    return name in scope.bindings


def _annotation(func: ast.AST, name: str) -> Optional[ast.expr]:
    args = getattr(func, "args", None)
    if args is None:
        return None
    for arg in args.posonlyargs + args.args + args.kwonlyargs:
        if arg.arg == name:
            return arg.annotation
    return None


def _tensor_annotation(annotation: ast.expr) -> bool:
    """Does an annotation admit a tensor (`Tensor`, `torch.Tensor`, `Optional[Tensor]`, a string of one)?"""
    text = ast.unparse(annotation) if not isinstance(annotation, ast.Constant) else str(annotation.value)
    return "Tensor" in text or "tensor" in text or "Any" in text


def _registered_buffers(cls_node: ast.AST) -> frozenset:
    """Names a class registers with `self.register_buffer("name", ...)` anywhere in its body."""
    names = set()
    for node in ast.walk(cls_node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("register_buffer", "register_parameter") and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)
    return frozenset(names)


def _words(node: ast.AST) -> list:
    """The lower-cased names of a Name/Attribute chain (`self.args.local_rank` -> ['self', 'args', 'local_rank'])."""
    words = []
    while isinstance(node, ast.Attribute):
        words.append(node.attr.lower())
        node = node.value
    if isinstance(node, ast.Name):
        words.append(node.id.lower())
        return words
    return []


