"""Backend switches: what makes CUDA code deliberate rather than a leftover (shared by the migration rules
and ASC303). `in_backend_switch` answers for the node the walk is at: the non-NPU side of a condition that
names the NPU, code under a test that selects another backend or a CUDA-only feature, a backend's entry
of a per-backend table, or the GPU fallback of a device search."""
from __future__ import annotations

import ast
import re
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from ascend_lint.analysis.semantic import FileContext
from ascend_lint.astutil import callee_name

from ._common import WORD_RE, cuda_device_string
from .device_tests import device_test

# Words of names and strings that name a backend.
NPU_WORDS = frozenset({"npu", "npus", "ascend", "hccl"})
# Another backend, or a CUDA-only library, named explicitly: `is_nvidia and ...`, `if is_xformers_available()`.
OTHER_NAME_WORDS = frozenset({"nvidia", "rocm", "hip", "xformers"})
OTHER_STRING_WORDS = OTHER_NAME_WORDS | {"gpu"}  # `dev.startswith("GPU")`
NPU_PROBE_RE = re.compile(r"is_(torch_)?npu_available")
GPU_PROBE_RE = re.compile(r"is_\w*gpu\w*_available")  # `is_torch_bf16_gpu_available()`: a GPU capability check
CUDA_PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
AVAILABILITY_PROBE = frozenset({"torch.cuda.is_available"})
NEGATING_OPS = (ast.NotEq, ast.IsNot, ast.NotIn)


def _words(node: ast.AST) -> Tuple[FrozenSet[str], bool]:
    """The whole words of a name, attribute or short string (`input` holds no `npu`), and whether it is a string."""
    if isinstance(node, ast.Name):
        return frozenset(WORD_RE.findall(node.id.lower())), False
    if isinstance(node, ast.Attribute):
        return frozenset(WORD_RE.findall(node.attr.lower())), False
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 40:
        return frozenset(WORD_RE.findall(node.value.lower())), True
    return frozenset(), False


def names_npu(node: ast.AST) -> bool:
    """Does an expression name the NPU (`is_npu_available()`, `args.device == 'npu'`, `torch.npu...`)?"""
    return any(_words(sub)[0] & NPU_WORDS for sub in ast.walk(node))  # a bounded look at one test


def npu_polarity(test: ast.expr) -> int:
    """+1 when a condition holds on the NPU (`if is_npu:`), -1 when it holds elsewhere (`if not is_npu:`,
    `device != 'npu'`), 0 when it does not name the NPU."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -npu_polarity(test.operand)
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            polarity = npu_polarity(value)
            if polarity:
                return polarity
        return 0
    if not names_npu(test):
        return 0
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(right, ast.Constant) and right.value is None:  # `args.npu is not None`: an NPU is set
            return -1 if isinstance(op, (ast.Is, ast.Eq)) else 1
        if isinstance(op, NEGATING_OPS):  # `device != 'npu'`
            return -1
    return 1


def porting(ctx: FileContext) -> bool:
    """Has the user declared every file NPU code (`--target npu`)? Then a test that only accepts CUDA is no
    backend switch: a branch with no NPU arm is what the port must change."""
    return ctx.target == "npu"


def dispatches_elsewhere(node: ast.AST, cuda_tests: bool = True) -> bool:
    """Does a condition select a non-NPU backend explicitly: the device in use (`x.device.type == 'cuda'`,
    `x.is_cuda`, `'cuda' in device`), a GPU vendor or CUDA-only library (`is_nvidia`, `is_xformers_available()`,
    `dev.startswith('GPU')`), or a GPU capability probe (`is_torch_bf16_gpu_available()`)? With
    `cuda_tests=False` (porting), a test of the device that only accepts CUDA (ASC605's) does not count."""
    for sub in ast.walk(node):  # a bounded look at one test or conditional expression
        if isinstance(sub, ast.Compare) and any(
                isinstance(c, ast.Constant) and cuda_device_string(c.value) for c in [sub.left, *sub.comparators]) \
                and (cuda_tests or device_test(sub) is None):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "is_cuda" and cuda_tests:
            return True
        if isinstance(sub, ast.Call) and GPU_PROBE_RE.fullmatch(callee_name(sub)):
            return True
        words, is_string = _words(sub)
        if words & (OTHER_STRING_WORDS if is_string else OTHER_NAME_WORDS):
            return True
    return False


def later_tests(if_node: ast.If) -> Iterator[ast.expr]:
    """The tests of the `elif` branches after `if_node` (not of an `if` nested in an `else:` block)."""
    node = if_node.orelse[0] if len(if_node.orelse) == 1 else None
    while isinstance(node, ast.If) and node.col_offset == if_node.col_offset:  # `elif` sits at the `if` column
        yield node.test
        node = node.orelse[0] if len(node.orelse) == 1 else None


# Words of a name that make a test select a CUDA-only feature (`if fused_adam_cls is not None`, `if HAS_FLASH:`,
# `if is_sagemaker_mp_enabled():`, `if is_torch_tf32_available():`); the code under such a test is that feature's.
FEATURE_WORDS = frozenset({"fused", "flash", "triton", "xformers", "kernel", "kernels", "cutlass"})
# ... and words that say so only in a probe's name (`is_torch_tf32_available()`), not in a flag (`args.tf32`).
PROBE_FEATURE_WORDS = FEATURE_WORDS | {"sagemaker", "tf32", "fp8"}
# Packages that exist only for CUDA (an optional import of one of them guards CUDA-only code).
CUDA_ONLY_PACKAGES = frozenset({"flash_attn", "xformers", "transformer_engine", "triton", "bitsandbytes", "cupy",
                                "pynvml", "nvidia", "cutlass", "amp_c", "fused_layer_norm_cuda", "mamba_ssm",
                                "causal_conv1d", "liger_kernel", "flashinfer", "apex.contrib"})


def _probe_value(ctx: FileContext, value: ast.AST, probes: FrozenSet[str] = CUDA_PROBES) -> bool:
    """An expression that only probes CUDA: `torch.cuda.is_available()`, `torch.cuda.device_count() > 1`,
    `not x and torch.cuda.is_available()` (no device string, no other call)."""
    probe = False
    for sub in ast.walk(value):  # a bounded look at one assigned value
        if isinstance(sub, ast.Call):
            if ctx.qualname(sub.func) not in probes:
                return False
            probe = True
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            return False
    return probe


def _held_probe(ctx: FileContext, test: ast.AST) -> bool:
    """A test that reads a variable holding a CUDA probe (`if IS_CUDA_AVAILABLE:`, `if use_cuda:`)."""
    for sub in ast.walk(test):
        if isinstance(sub, ast.Name):
            bound = ctx.binding(sub.id)
            value = bound.value if bound is not None and bound.index is None else ctx.constants.get(sub.id)
            if value is not None and _probe_value(ctx, value):
                return True
    return False


_CAMEL_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


def _name_words(name: str) -> FrozenSet[str]:
    """`FusedAdam` -> {fused, adam}; `HAS_FLASH_ATTN` -> {has, flash, attn}."""
    return frozenset(w.lower() for w in _CAMEL_RE.findall(name))


def cuda_only_names(ctx: FileContext) -> FrozenSet[str]:
    """The file's optional names that come from a CUDA-only package or name a CUDA-only feature."""
    names = set()
    for name, modules in ctx.optional_imports().items():
        if _name_words(name) & FEATURE_WORDS or any(_cuda_only_module(m) for m in modules):
            names.add(name)
    return frozenset(names)


def _cuda_only_module(module: str) -> bool:
    lowered = module.lower()
    parts = lowered.split(".")
    return any(p in CUDA_ONLY_PACKAGES for p in parts) or any(lowered.startswith(p + ".") or lowered == p
                                                                  for p in CUDA_ONLY_PACKAGES) \
        or any(_name_words(p) & FEATURE_WORDS for p in module.split(".")[1:])


def _feature_test(ctx: FileContext, test: ast.AST) -> bool:
    """A test of a CUDA-only feature: an optional name from a CUDA-only package, or a name or call that says
    so (`if FusedAdam is not None:`, `if HAS_FLASH_ATTN:`, `fused_cls is not None and torch.cuda.is_available()`,
    `if is_sagemaker_mp_enabled():`, `if is_torch_tf32_available():`)."""
    optional = cuda_only_names(ctx)
    for sub in ast.walk(test):
        if isinstance(sub, ast.Call):
            if _name_words(callee_name(sub)) & PROBE_FEATURE_WORDS:
                return True
            continue
        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else None
        if name is not None and (name in optional or _name_words(name) & FEATURE_WORDS):
            return True
    return False


def _in_feature_code(ctx: FileContext, cache: Dict) -> bool:
    """In code of a CUDA-only feature: a function named for one (`detect_flash_attention_support`), or an
    `if` branch that uses an optional (guarded-import) name (`elif mixed_precision == "fp8": te_recipe...`)."""
    func = ctx.function
    if func is not None and _name_words(func.name) & FEATURE_WORDS:
        return True
    if not ctx.ifs:
        return False
    optional = cuda_only_names(ctx)
    if not optional:
        return False
    if_node, in_else = ctx.ifs[-1]
    key = ("branch", id(if_node), in_else)
    if key not in cache:
        branch = if_node.orelse if in_else else if_node.body
        cache[key] = any(isinstance(n, ast.Name) and n.id in optional for stmt in branch for n in ast.walk(stmt))
    return cache[key]


def _names_cuda(test: ast.expr) -> bool:
    """A test about the CUDA device itself (`if args.cuda:`, `if use_gpu:`)."""
    return any(_words(sub)[0] & {"cuda", "gpu", "gpus"} for sub in ast.walk(test))


def _other_branch_uses_npu(if_node: ast.If, in_else: bool) -> bool:
    """The other branch of this `if` moves work to the NPU (`.npu()`, `torch.npu.*`, an 'npu' device): this
    branch is the CUDA side of a switch."""
    return uses_npu(if_node.body if in_else else if_node.orelse)


def uses_npu(nodes: List[ast.AST]) -> bool:
    """Do these statements (or expressions) move work to the NPU (`.npu()`, `torch.npu.*`, `torch_npu.*`, an
    'npu' device)?"""
    for node in nodes:
        for sub in ast.walk(node):  # a bounded look at one branch
            if isinstance(sub, ast.Attribute) and (sub.attr == "npu" or (
                    isinstance(sub.value, ast.Name) and sub.value.id == "torch_npu")):
                return True
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and (
                    sub.value == "npu" or sub.value.startswith("npu:")):
                return True
    return False


def npu_sibling(ctx: FileContext, if_node: ast.AST) -> bool:
    """Is the `if` statement `if_node` (on the stack) next to an `if` that tests for the NPU: two halves of one
    dispatch (`if 'npu' in d: torch.npu.set_device(d)` then `if 'cuda' in d: torch.cuda.set_device(d)`)?"""
    stack = ctx.stack
    at = next((i for i, n in enumerate(stack) if n is if_node), None)
    if at is None:
        return False
    parent = stack[at - 1] if at else ctx.tree
    bodies = [getattr(parent, name, None) or [] for name in ("body", "orelse", "finalbody")]
    bodies += [h.body for h in getattr(parent, "handlers", None) or ()]
    for body in bodies:
        for i, stmt in enumerate(body):
            if stmt is if_node:
                return any(isinstance(n, ast.If) and npu_polarity(n.test) == 1 for n in body[max(i - 1, 0):i + 2])
    return False


def names_other_backend(nodes: List[ast.AST]) -> bool:
    """Do these expressions or statements name another backend in a string (`'GPU'`, `'gpu'`, `'rocm'`)?"""
    return any(_words(sub)[0] & OTHER_STRING_WORDS and _words(sub)[1] for node in nodes for sub in ast.walk(node))


def _moves(nodes: List[ast.AST], method: str) -> bool:
    """Does every statement (or expression) of a branch move an object with `.<method>(...)` (`m.cuda()`,
    `x = x.to(device)`, `return m.cuda()`)?"""
    for node in nodes:
        value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.Return)) else node
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == method):
            return False
    return bool(nodes)


def moves_alike(side: List[ast.AST], other: List[ast.AST]) -> bool:
    """One side moves objects with `.cuda()` and the other moves them with `.to(...)`, which serves the NPU
    as well (`model.cuda() if device.type == 'cuda' else model.to(device)`): a switch with an NPU-capable arm."""
    return (_moves(side, "cuda") and _moves(other, "to")) or (_moves(side, "to") and _moves(other, "cuda"))


def _module_probe(ctx: FileContext) -> bool:
    """At module level, inside `NAME = torch.cuda.is_available()`: a capability probe; its uses decide. (A
    device count is a quantity the script divides work by: `NGPUS = torch.cuda.device_count()` is reported.)"""
    if ctx.function is not None or ctx.class_scope is not None:
        return False
    for node in ctx.stack:
        if isinstance(node, ast.Assign):
            return all(isinstance(t, ast.Name) for t in node.targets) and _probe_value(
                ctx, node.value, AVAILABILITY_PROBE)
    return False


def in_backend_switch(ctx: FileContext, cache: Dict, within: Optional[ast.AST] = None) -> bool:
    """Is the current node CUDA code on purpose? Yes on the non-NPU side of a condition that names the NPU
    (`if is_npu: ... else: <here>`, `if "cuda" in d: <here> elif "npu" in d: ...`, `x.npu() if npu else
    <here>`), under a condition that selects another backend explicitly (`dispatches_elsewhere`), or, in a
    function that probes for an NPU, under (or inside) a CUDA availability check: the GPU fallback of a
    device search. Never inside an NPU branch (`if device.type == "npu": torch.cuda.set_device(device)`).
    When porting (`--target npu`), a branch with no NPU arm is no switch: under a test that only accepts
    CUDA, or a variable holding a CUDA probe, CUDA code is a leftover. `within`: judge the expression
    `within` (one of the current node's ancestors), i.e. only what encloses it."""
    port = porting(ctx)
    verdict = _enclosing_ifs_verdict(ctx, port)
    if verdict is not None:
        return verdict
    if (not port and _module_probe(ctx)) or _in_feature_code(ctx, cache):
        return True
    stack = _judged_stack(ctx, within)
    if in_backend_table(stack):
        return True
    verdict = _enclosing_expressions_verdict(ctx, stack, port)
    if verdict is not None:
        return verdict
    return gpu_fallback(ctx, cache, _enclosing_tests(ctx))


def _enclosing_ifs_verdict(ctx: FileContext, port: bool) -> Optional[bool]:
    """What the innermost `if` statement around the node that decides says: False inside its NPU branch,
    True on the non-NPU side of a switch; None when none decides."""
    for if_node, in_else in reversed(ctx.ifs):
        polarity = npu_polarity(if_node.test)
        if polarity == (-1 if in_else else 1):
            return False  # inside the NPU branch: CUDA code here is a leftover for sure
        if polarity or dispatches_elsewhere(if_node.test, cuda_tests=not port) \
                or _switch_branch(ctx, if_node, in_else, port):
            return True
    return None


def _switch_branch(ctx: FileContext, if_node: ast.If, in_else: bool, port: bool) -> bool:
    """Is this branch of an `if` whose test names no backend still one side of a switch: under a held CUDA
    probe, a CUDA-only feature test or before an `elif` that tests for the NPU; opposite a branch that uses
    the NPU; or, when porting, opposite a branch that moves the same objects or next to an NPU `if`?"""
    test = if_node.test
    if not in_else and ((not port and _held_probe(ctx, test)) or _feature_test(ctx, test)
                        or any(npu_polarity(t) == 1 for t in later_tests(if_node))):
        return True  # (the `else:` of such a test is the ordinary path)
    if _names_cuda(test) and _other_branch_uses_npu(if_node, in_else):  # `if args.cuda: .. else: m.npu()`
        return True
    return port and (moves_alike(if_node.body, if_node.orelse) or npu_sibling(ctx, if_node))


def _judged_stack(ctx: FileContext, within: Optional[ast.AST]) -> List[ast.AST]:
    """The stack of the current node, down to `within` when given."""
    stack = ctx.stack
    if within is not None:
        stack = stack[: next((i for i, n in enumerate(stack) if n is within), len(stack) - 1) + 1]
    return stack


def _enclosing_expressions_verdict(ctx: FileContext, stack: List[ast.AST], port: bool) -> Optional[bool]:
    """What the outermost conditional expression, boolean operation or optional-import `try:` on `stack`
    that decides says (None: none decides)."""
    for node, child in zip(stack, stack[1:]):
        verdict = _enclosing_verdict(ctx, node, child, port)
        if verdict is not None:
            return verdict
    return None


def _enclosing_verdict(ctx: FileContext, node: ast.AST, child: ast.AST, port: bool) -> Optional[bool]:
    """What `node`, the parent of `child` on the stack, says about the code under it (None: nothing)."""
    if isinstance(node, ast.IfExp) and child is not node.test:
        return _if_exp_verdict(ctx, node, child is node.body, port)
    if isinstance(node, ast.BoolOp) and (dispatches_elsewhere(node, cuda_tests=not port) or _feature_test(ctx, node)):
        return True
    if isinstance(node, ast.Try) and child in node.body and ctx.function is None \
            and _bound_names_any(node, cuda_only_names(ctx)):
        return True
    return None


def _if_exp_verdict(ctx: FileContext, node: ast.IfExp, in_body: bool, port: bool) -> Optional[bool]:
    """What a conditional expression says about one of its arms (`in_body`: the one before `if`): False in
    its NPU arm, True in the other arm of a switch, None when it is no switch."""
    polarity = npu_polarity(node.test)
    if polarity == (1 if in_body else -1):
        return False
    if polarity or dispatches_elsewhere(node.test, cuda_tests=not port):
        return True
    if in_body and not port and _held_probe(ctx, node.test):
        return True
    if port and (uses_npu([node.orelse if in_body else node.body]) or moves_alike([node.body], [node.orelse])):
        return True  # `x.cuda() if x.is_cuda else x.npu()`: the other arm is the NPU's
    return None


def _enclosing_tests(ctx: FileContext) -> List[ast.expr]:
    """The tests of the `if` statements, conditional expressions and `while` loops around the node."""
    tests = [if_node.test for if_node, _ in ctx.ifs]
    tests += [n.test for n in ctx.stack if isinstance(n, (ast.If, ast.IfExp, ast.While))]
    return tests


def _bound_names_any(node: ast.Try, names: set) -> bool:
    """Is this `try:` one of the optional-import blocks (it imports a name the file treats as optional)?"""
    for stmt in node.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            bound = {(a.asname or a.name).split(".")[0] for a in stmt.names}
            if bound & names:
                return True
    return False


def in_backend_table(stack: List[ast.AST]) -> bool:
    """Is the node an entry of a per-backend dispatch table, in any spelling: a dict value whose key names a
    backend (`{'cuda': torch.cuda.is_available(), 'npu': torch.npu.is_available()}`, `{'gpu': 'cuda:0', ...}`),
    a keyword of `dict(...)` (`dict(cuda=torch.cuda.synchronize, npu=torch.npu.synchronize)`), or the value of
    a `(key, value)` pair among such pairs (`[('cuda', torch.cuda.synchronize), ('npu', ...)]`, also inside
    `dict(...)`/`OrderedDict(...)`)? The entry under the `cuda` key is the CUDA backend's on purpose."""
    for node, child in zip(stack, stack[1:]):
        entries = _table_entries(node, child)
        if entries is not None and _backend_entry(entries, child):
            return True
    return False


TableEntries = List[Tuple[Optional[FrozenSet[str]], ast.AST]]  # (words of the key, value) of each entry


def _table_entries(node: ast.AST, child: ast.AST) -> Optional[TableEntries]:
    """The entries of `node` when it is a table that may hold `child` as an entry: a dict display, a
    `dict(...)` call or a sequence of pairs (None: it is none)."""
    if isinstance(node, ast.Dict):
        return [(_key_words(k), v) for k, v in zip(node.keys, node.values)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [(_name_words(kw.arg) if kw.arg else None, kw) for kw in node.keywords]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and child in node.elts and _pair(child):
        return [(_key_words(e.elts[0]) if _pair(e) else None, e) for e in node.elts]
    return None


def _backend_entry(entries: TableEntries, child: ast.AST) -> bool:
    """Is `child` a backend's entry of the table: its key names CUDA, the CPU or another backend, or a key
    of the table names the NPU?"""
    own = [words for words, value in entries if value is child]
    if not own or own[0] is None:
        return False
    named = frozenset().union(*(words for words, _ in entries if words is not None))
    return bool(own[0] & (OTHER_STRING_WORDS | {"cuda", "cpu"}) or named & NPU_WORDS)


def _pair(node: ast.AST) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) == 2


def _key_words(key: Optional[ast.AST]) -> Optional[FrozenSet[str]]:
    """The words of a string key (`'cuda'`, `"npu:0"`); None for any other key."""
    if key is None:
        return None
    words, is_string = _words(key)
    return words if is_string else None


def gpu_fallback(ctx: FileContext, cache: Dict[int, bool], tests: List[ast.expr]) -> bool:
    """In a function that probes for an NPU, code under (or inside) a test calling
    `torch.cuda.is_available()` / `device_count()` is the GPU fallback of a device search."""
    if not any(isinstance(sub, ast.Call) and ctx.qualname(sub.func) in CUDA_PROBES
               for test in tests for sub in ast.walk(test)):
        return False
    func = ctx.function
    if func is None:
        return False
    key = id(func.node)
    if key not in cache:  # `cache` belongs to the rule instance, i.e. to this file
        cache[key] = checks_for_npu(ctx, func.node)
    return cache[key]


def checks_for_npu(ctx: FileContext, func: ast.AST) -> bool:
    """Does this function probe for an NPU (`torch.npu.is_available()`, `import torch_npu`, a helper named
    `is_npu_available`)?"""
    for sub in ast.walk(func):  # a bounded look at the enclosing function, once per function
        if isinstance(sub, ast.Call):
            qual = ctx.qualname(sub.func)
            if qual == "torch.npu.is_available" or NPU_PROBE_RE.search(qual or callee_name(sub)):
                return True
        elif isinstance(sub, ast.Import):
            if any(alias.name.split(".")[0] == "torch_npu" for alias in sub.names):
                return True
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] == "torch_npu":
            return True
    return False
