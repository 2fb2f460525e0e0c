"""What a call does with a tensor passed to it, for ASC201's buffer fix: a buffer is one tensor shared by
every call, so the fix is offered only where no call can change it in place, keep it, or hand it on.

`call_use` answers for one argument: MUTATES (changed in place, kept, or passed to code not known to leave it
alone), READS (read only, the result is a new tensor), or FLOWS (read only, but the result may be the tensor
itself or a view of it, so its uses count as uses of the tensor).
"""
from __future__ import annotations

import ast
from typing import Optional

MUTATES, READS, FLOWS = "mutates", "reads", "flows"

# torch functions that may return their input or a view of it (`torch.reshape(t, ...)` can be `t`'s storage).
ALIASING_TORCH = frozenset({
    "reshape", "view", "view_as", "view_as_real", "view_as_complex", "squeeze", "unsqueeze", "flatten", "ravel",
    "unflatten", "narrow", "select", "transpose", "swapaxes", "swapdims", "t", "adjoint", "permute", "movedim",
    "moveaxis", "chunk", "split", "tensor_split", "hsplit", "vsplit", "dsplit", "unbind", "as_strided",
    "diagonal", "detach", "as_tensor", "asarray", "Tensor", "broadcast_tensors", "broadcast_to", "expand",
    "expand_as", "meshgrid", "atleast_1d", "atleast_2d", "atleast_3d", "real", "imag", "conj", "resolve_conj",
    "resolve_neg", "einsum", "dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d",
    "dropout3d", "unfold", "contiguous", "type_as", "to",
})
# torch namespaces whose functions compute from their tensor arguments (nothing else under torch is assumed:
# `torch.nn.Parameter(t)` shares `t` with an optimizer, `torch.distributed.all_reduce(t)` writes it).
OP_NAMESPACES = ("torch.", "torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
WRITING_NAMESPACES = ("torch.nn.init.", "torch.distributed.")
# Tensor methods that only read their tensor arguments (the receiver may change: `x.masked_fill_(t, 0)` reads
# `t`); their result is the receiver's, never the argument's. `set_` is missing on purpose: it shares storage.
READING_METHODS = frozenset({
    "index_select", "gather", "take", "take_along_dim", "masked_fill", "masked_fill_", "masked_select",
    "masked_scatter", "masked_scatter_", "index_fill", "index_fill_", "index_add", "index_add_", "index_copy",
    "index_copy_", "index_put", "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_",
    "scatter_reduce", "scatter_reduce_", "copy_", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_",
    "true_divide", "floor_divide", "remainder", "fmod", "pow", "pow_", "matmul", "mm", "bmm", "mv", "dot",
    "outer", "where", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "clamp", "clamp_", "clip",
    "lerp", "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_", "expand_as", "view_as", "reshape_as",
    "type_as", "to", "repeat_interleave", "bitwise_and", "bitwise_or", "logical_and", "logical_or",
    "fill_", "new_tensor", "equal", "allclose", "isclose",
})
# Builtins that only look at a value (`list(t)` and `iter(t)` hand out views of its rows: not listed).
READING_BUILTINS = frozenset({"len", "isinstance", "print", "float", "int", "bool", "str", "repr", "format",
                              "hash", "id", "type", "hasattr", "callable"})
MAX_HELPER_DEPTH = 2
# torch.nn.functional functions with an `inplace` parameter -> its position (`F.dropout(h, 0.1, True, True)`).
INPLACE_POSITION = {
    **dict.fromkeys(("relu", "relu6", "selu", "silu", "mish", "hardswish", "hardsigmoid"), 1),
    **dict.fromkeys(("elu", "celu", "leaky_relu"), 2),
    **dict.fromkeys(("hardtanh", "threshold", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                     "feature_alpha_dropout"), 3),
    "rrelu": 4,
}


def writes_in_place(call: ast.Call, qual: Optional[str]) -> bool:
    """A call that writes a tensor it is given whatever the argument: `inplace=True`, an in-place torch
    function (`torch.exp_`, `torch.clamp_`), `nn.init.*`, a collective."""
    if any(kw.arg == "inplace" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
           for kw in call.keywords):
        return True
    if qual is None:
        return False
    namespace, _, last = qual.rpartition(".")
    position = INPLACE_POSITION.get(last) if namespace == "torch.nn.functional" else None
    if position is not None and len(call.args) > position and not (
            isinstance(call.args[position], ast.Constant) and call.args[position].value is False):
        return True
    return qual.startswith(WRITING_NAMESPACES) or (last.endswith("_") and not last.startswith("_"))


def torch_op_use(qual: str) -> str:
    """READS/FLOWS for a function of a torch op namespace, MUTATES for anything else under torch."""
    namespace, _, last = qual.rpartition(".")
    if namespace + "." not in OP_NAMESPACES or last.endswith("_"):
        return MUTATES
    return FLOWS if last in ALIASING_TORCH else READS


def method_use(method: str) -> str:
    """A method of another object given the tensor (`x.index_select(1, t)`)."""
    return READS if method in READING_METHODS else MUTATES


def positional_parameter(func: ast.AST, index: int, skip_first: bool) -> Optional[str]:
    """The parameter of a local function that receives its `index`-th positional argument (None: not known,
    such as `*args`)."""
    args = func.args
    params = [a.arg for a in args.posonlyargs + args.args][1 if skip_first else 0:]
    return params[index] if index < len(params) else None


def keyword_parameter(func: ast.AST, name: str) -> Optional[str]:
    args = func.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    return name if name in params else None
