"""Precision decisions of one body about the models it constructs, read from its syntax tree (for the summary):
a model built (`net = Net(...)`) and cast or trained with or without mixed precision (records.ModelDecision);
functions called with such a model or under autocast carry that precision (records.AmpCall)."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Sequence, Tuple

from .nodes import call_text, expressions, statements
from .records import AmpCall, ModelDecision

_LOW_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "fp16": "fp16", "bf16": "bf16"}
_AMP_LEVELS_LOW = ("O1", "O2", "O3", "auto")
_WRAPPERS = frozenset({"WithLossCell", "DataParallel", "DistributedDataParallel", "DDP"})
_TRAIN_CELLS = frozenset({"TrainOneStepCell", "TrainOneStepWithLossScaleCell"})
_FSDP = ("FSDP", "FullyShardedDataParallel", "fully_shard")
Decision = Tuple[str, str, int]  # (dtype, how, line)


class PrecisionScan:
    """The precision decisions of one body (`scan`), appended to `models` and `amp_calls`. `maybe_low`: the
    body mentions reduced precision (never conclude fp32 there)."""

    def __init__(self, owner: str, maybe_low: bool, models: List[ModelDecision], amp_calls: List[AmpCall]) -> None:
        self.owner = owner
        self.maybe_low = maybe_low
        self.models = models
        self.amp_calls = amp_calls
        self.classes: Dict[str, str] = {}  # local name -> class constructed, as written
        self.decided: Dict[str, Decision] = {}  # local name -> its precision
        self.trained: Dict[str, Tuple[int, str]] = {}  # local -> (line, how) of a training wrapper without amp

    def scan(self, body: Sequence[ast.stmt]) -> None:
        found = list(statements(body))
        for stmt in found:
            self._bind(stmt)
            if self.classes:  # (a call decides something only about a model constructed before it)
                for node in expressions(stmt):
                    if isinstance(node, ast.Call):
                        self._call(node)
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                self._autocast_body(stmt)
        if self.decided:
            self._passed_models(found)
        for local, cls in self.classes.items():
            if local in self.decided:
                dtype, how, line = self.decided[local]
                self.models.append(ModelDecision(cls, dtype, line, how, self.owner))
            elif local in self.trained and not self.maybe_low:
                line, how = self.trained[local]
                self.models.append(ModelDecision(cls, "fp32", line, how, self.owner))

    def _passed_models(self, found: Sequence[ast.stmt]) -> None:
        """A model passed to a function (or its parameters) carries its precision to the callee."""
        for stmt in found:
            for node in expressions(stmt):
                if isinstance(node, ast.Call) and call_text(node.func):
                    for arg in [*node.args, *(k.value for k in node.keywords)]:
                        local = self._passed_model(arg)
                        if local is not None:
                            dtype, how, _ = self.decided[local]
                            self.amp_calls.append(AmpCall(call_text(node.func), dtype, node.lineno, how))
                            break

    def _passed_model(self, arg: ast.AST) -> Optional[str]:
        """The decided model an argument passes: `model`, or its parameters (`model.parameters()`)."""
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and \
                arg.func.attr in ("parameters", "named_parameters") and not arg.args:
            arg = arg.func.value
        return arg.id if isinstance(arg, ast.Name) and arg.id in self.decided else None

    # ------------------------------------------------------------------ assignments
    def _bind(self, stmt: ast.stmt) -> None:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            return
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1:
            return
        target, value = targets[0], stmt.value
        if isinstance(target, ast.Tuple):
            self._bind_unpacked(target, value)
        elif isinstance(target, ast.Name):
            self._bind_name(target.id, value)
            cast = _cast(value)
            if cast is not None and target.id in self.classes:
                self._decide(target.id, cast[0], cast[1], stmt.lineno)

    def _bind_unpacked(self, target: ast.Tuple, value: ast.expr) -> None:
        """`model, opt = amp.initialize(model, opt, ...)`: the first name is the model passed first."""
        if target.elts and isinstance(target.elts[0], ast.Name) and isinstance(value, ast.Call) and \
                value.args and isinstance(value.args[0], ast.Name) and value.args[0].id in self.classes:
            self.classes.setdefault(target.elts[0].id, self.classes[value.args[0].id])

    def _bind_name(self, name: str, value: ast.expr) -> None:
        """`model = Net(...)` constructs a model; `model = model.half()`, `net = WithLossCell(net, loss)`: the
        same model under another name."""
        cls = _model_class(value)
        if cls is not None:
            self.classes[name] = cls
            return
        source = self._model_name(value.func.value if isinstance(value, ast.Call) and
                                  isinstance(value.func, ast.Attribute) else value)
        if source is None and isinstance(value, ast.Call) and _last(value) in _WRAPPERS and value.args:
            source = self._model_name(value.args[0])
        if source is not None and source != name:
            self.classes.setdefault(name, self.classes[source])
            if source in self.decided:
                self.decided.setdefault(name, self.decided[source])

    def _model_name(self, expr: Optional[ast.AST]) -> Optional[str]:
        while isinstance(expr, ast.Call):
            if _last(expr) in _WRAPPERS and expr.args:
                expr = expr.args[0]
            elif isinstance(expr.func, ast.Attribute):
                expr = expr.func.value
            else:
                return None
        return expr.id if isinstance(expr, ast.Name) and expr.id in self.classes else None

    def _decide(self, local: Optional[str], dtype: str, how: str, line: int) -> None:
        if local is not None and local not in self.decided:
            self.decided[local] = (dtype, how, line)

    # ------------------------------------------------------------------ calls
    def _call(self, call: ast.Call) -> None:
        """A call decides only about a model it is called on (a cast) or passed first (a training set-up)."""
        first = self._model_name(call.args[0]) if call.args else None
        receiver = self._model_name(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if receiver is not None:
            self._called_on(receiver, call)
        if first is not None:
            self._passed_first(first, call, _last(call))

    def _called_on(self, receiver: str, call: ast.Call) -> None:
        cast = _cast(call)
        if cast is not None:
            self._decide(receiver, cast[0], cast[1], call.lineno)
        elif _last(call) == "add_flags_recursive":
            flag = _kw(call, "fp16") or _kw(call, "bf16")
            if isinstance(flag, ast.Constant) and flag.value:
                self._decide(receiver, "fp16", "`add_flags_recursive(fp16=True)`", call.lineno)

    def _passed_first(self, first: str, call: ast.Call, last: str) -> None:
        if last == "initialize" and "amp" in (call_text(call.func) or ""):
            level = _level(call, "opt_level", None)
            if level != "O0":
                self._decide(first, "fp16", f'`amp.initialize(opt_level="{level or "O1"}")`', call.lineno)
        elif last in ("auto_mixed_precision", "build_train_network", "Model"):
            self._amp_level(first, call, last)
        elif last in _TRAIN_CELLS:
            self.trained.setdefault(first, (call.lineno, f"`{last}` without a cast to float16"))
        elif last in _FSDP:
            policy = _kw(call, "mixed_precision") or _kw(call, "mp_policy")
            dtype = _dtype_of(_kw(policy, "param_dtype", 0)) if isinstance(policy, ast.Call) else None
            if dtype in ("fp16", "bf16"):
                self._decide(first, dtype, f"`{last}` with `param_dtype` {dtype}", call.lineno)

    def _amp_level(self, first: str, call: ast.Call, last: str) -> None:
        """MindSpore's `auto_mixed_precision(net, level)`, `build_train_network(net, ..., level)` and
        `Model(net, ..., amp_level=...)`: a reduced-precision level, or training without one."""
        if last == "Model":
            level = _level(call, "amp_level", None)
            low, plain = f'`Model(..., amp_level="{level}")`', "`Model(...)` without `amp_level`"
        else:
            level = _level(call, "amp_level", 1) if last == "auto_mixed_precision" else _level(call, "level", 3)
            low, plain = f'`{last}(..., "{level}")`', f"`{last}` without mixed precision"
        if level in _AMP_LEVELS_LOW:
            self._decide(first, "fp16", low, call.lineno)
        elif level in (None, "O0"):
            self.trained.setdefault(first, (call.lineno, plain))

    def _autocast_body(self, stmt: ast.AST) -> None:
        dtype = _autocast(stmt)
        if dtype is None:
            return
        for inner in statements(stmt.body):  # type: ignore[attr-defined]
            for node in expressions(inner):
                if isinstance(node, ast.Call) and call_text(node.func):
                    self.amp_calls.append(AmpCall(call_text(node.func), dtype, node.lineno, "`autocast`"))


def _dtype_of(node: Optional[ast.AST]) -> Optional[str]:
    """'fp16' / 'bf16' / 'fp32' for a dtype expression (`torch.bfloat16`, `mstype.float16`, 'fp16')."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        text = node.value if isinstance(node.value, str) else ""
    else:
        text = call_text(node) or ""
    last = text.rsplit(".", 1)[-1].lower()
    if last in _LOW_DTYPES:
        return _LOW_DTYPES[last]
    if last in ("float32", "float", "fp32"):
        return "fp32"
    return None


def _kw(call: ast.Call, name: str, position: Optional[int] = None) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and position < len(call.args):
        return call.args[position]
    return None


def _last(call: ast.Call) -> str:
    name = call_text(call.func) or ""
    return name.rsplit(".", 1)[-1]


def _model_class(value: ast.AST) -> Optional[str]:
    """`Net(...)`, `models.Net(cfg).npu()`: the class constructed (a capitalised name), as written."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            not value.func.attr[:1].isupper() and isinstance(value.func.value, ast.Call):
        value = value.func.value  # `.npu()`, `.to(device)`, `.half()` chained on the construction
    if isinstance(value, ast.Call):
        name = call_text(value.func)
        if name and name.rsplit(".", 1)[-1][:1].isupper():
            return name
    return None


def _cast(call: ast.AST) -> Optional[Tuple[str, str]]:
    """A reduced-precision cast anywhere in a call chain: `Net().half()`, `.to(torch.bfloat16)`,
    `.to_float(mstype.float16)`; (dtype, how)."""
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        found = _cast_here(call, call.func.attr)
        if found is not None:
            return found
        call = call.func.value
    return None


def _cast_here(call: ast.Call, attr: str) -> Optional[Tuple[str, str]]:
    if attr in ("half", "bfloat16") and not call.args:
        return _LOW_DTYPES[attr], f"`.{attr}()`"
    if attr == "to":
        for arg in list(call.args) + [k.value for k in call.keywords]:
            dtype = _dtype_of(arg)
            if dtype in ("fp16", "bf16"):
                return dtype, f"`.to({call_text(arg) or dtype})`"
    if attr == "to_float" and _dtype_of(_kw(call, "dst_type", 0)) in ("fp16", "bf16"):
        return "fp16", "`.to_float(float16)`"
    return None


def _level(call: ast.Call, name: str, position: Optional[int]) -> Optional[str]:
    value = _kw(call, name, position)
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else (
        None if value is None else "?")


def _autocast(stmt: ast.AST) -> Optional[str]:
    """The dtype a `with autocast(...)` runs its body in (None: not autocast, or disabled)."""
    for item in stmt.items:  # type: ignore[attr-defined]
        expr = item.context_expr
        if isinstance(expr, ast.Call) and (call_text(expr.func) or "").endswith("autocast"):
            enabled = _kw(expr, "enabled")
            if isinstance(enabled, ast.Constant) and enabled.value is False:
                return None
            return _dtype_of(_kw(expr, "dtype")) or "fp16"
    return None
