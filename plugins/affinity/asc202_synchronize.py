"""ASC202 synchronize-in-hot-path."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional

from ascend_lint.analysis.frameworks import DEVICE_ABSTRACTIONS
from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule
from ascend_lint.astutil import parent_map, receiver_name

# Device-wide synchronizes (torch_npu.npu.X is canonicalised to torch.npu.X by the semantic model).
DEVICE_SYNCS = frozenset({
    "torch.npu.synchronize", "torch.cuda.synchronize", "torch.accelerator.synchronize",
    "mindspore.hal.synchronize", "mindspore.runtime.synchronize",
})
# Calls that return a stream or an event: `<that>.synchronize()` is a synchronize.
STREAM_FACTORIES = frozenset(
    f"{module}.{name}"
    for module in ("torch.npu", "torch.cuda", "mindspore.hal", "mindspore.runtime")
    for name in ("current_stream", "default_stream", "Stream", "Event", "ExternalStream")
) | {"torch.Event", "torch.Stream", "torch.accelerator.current_stream"}
RECEIVER_WORDS = ("stream", "event")
# Device abstractions (analysis/frameworks.py, data): accessor calls, module-level objects and classes whose
# handle's methods synchronize the device (`get_accelerator().synchronize()`, `current_platform.synchronize()`).
HANDLE_SYNCS: Dict[str, frozenset] = {}
for _record in DEVICE_ABSTRACTIONS:
    for _name in _record.accessors + _record.objects + _record.classes:
        if _record.sync_methods:
            HANDLE_SYNCS[_name] = HANDLE_SYNCS.get(_name, frozenset()) | frozenset(_record.sync_methods)
STEP_REMEDY = "remove it, or run it only every N steps (`if step % N == 0:`)"
# A forward/construct runs on every step: "every N steps" does not apply there.
HOT_REMEDY = ("remove it; to order work between streams, make the consuming stream wait on an event "
              "(`event.record()` then `torch.npu.current_stream().wait_event(event)`), which does not block the host")


class SynchronizeInHotPath(Rule):
    code = "ASC202"
    name = "synchronize-in-hot-path"
    preview = True  # demoted by the held-out precision measurement (docs/precision.md)
    message = "`{call}` in {where} drains the device queue on every call: {remedy}"
    fix_applicability = Applicability.UNSAFE
    triggers = ("synchronize",)
    docs = Docs(
        summary="A device, stream or event synchronize in a hot path stalls the NPU pipeline.",
        what="Flags device, stream and event synchronizes (`torch.npu.synchronize()`, "
             "`torch_npu.npu.synchronize()`, `torch.cuda.synchronize()`, `<stream>.synchronize()` including "
             "`torch.npu.current_stream().synchronize()`, `<event>.synchronize()`, "
             "`mindspore.hal.synchronize()` / `mindspore.runtime.synchronize()`, and the synchronize of a device "
             "abstraction from the table in ascend_lint/analysis/frameworks.py: DeepSpeed "
             "`get_accelerator().synchronize()`, `torch.get_device_module().synchronize()`, "
             "`torch.accelerator.synchronize()`, vLLM `current_platform.synchronize()`, also through a local or a "
             "`self.<attr>` that holds such a handle) inside a hot scope: "
             "`forward` of an `nn.Module`, `construct` of a MindSpore `Cell`, `forward`/`backward` of a "
             "`torch.autograd.Function`, or the body of the innermost training-step loop. Through the project model, a function called from such a method (in any module, up to three calls deep) or assigned as one by a monkey-patch is hot too, and a class deriving from a model base defined in another module or from a well-known third-party base (transformers, mmengine, Megatron, mindformers) is a model. Through the project model, a function called from a step loop in any module (up to three calls deep, not under a periodic guard) runs every step too; step loops in test code do not count.",
        why="Operators are launched from the host one by one and queued on the NPU; a synchronize makes the "
            "host wait until the queue is empty, so the next operators are launched into an idle device. The "
            "ShuffleNetV2 tuning case on Ascend 910 found synchronizes left in forward/backward; Ascend's "
            "large-model training guide (\"减少同步接口调用\", reduce synchronization calls) shows them as "
            "device free time in the profile.",
        known_problems="A synchronize that a model needs for correctness (the ShuffleNetV2 tuning kept one "
                       "because removing it broke convergence) is reported too: keep it with "
                       "`# noqa: ASC202`. Streams and events are recognised by their constructor or by a "
                       "receiver name containing `stream` or `event`. In `forward`/`construct`, which "
                       "run on every step, the advice is to remove the call or, where it orders work between "
                       "streams, to make the consuming stream wait on an event (`wait_event`), which does not "
                       "block the host; \"every N steps\" is the advice only for the step loop.",
        example="""
            for step, (images, target) in enumerate(loader):
                loss = criterion(model(images), target)
                loss.backward()
                optimizer.step()
                torch.npu.synchronize()
        """,
        use_instead="""
            for step, (images, target) in enumerate(loader):
                loss = criterion(model(images), target)
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    torch.npu.synchronize()  # only for the periodic timing log
        """,
        fix_safety="Unsafe: the fix deletes the synchronize statement (a block left empty gets `pass`), and "
                   "with it the local stream or event variable it was the last use of (`s = "
                   "torch.npu.current_stream()`) and an import it was the last use of. It is offered only when "
                   "the call is the whole statement and such a variable holds a stream/event lookup or a plain "
                   "name, and it is unsafe because the call may be needed (timing code, a stream hand-off, "
                   "convergence).",
        source="Ascend PyTorch model tuning case: ShuffleNetV2 on Ascend 910; CANN 7.0 large-model training "
               "guide, \"减少同步接口调用\" (PT_LMTMOG_000080).",
    )
    cases = (
        # forward of a Module, every spelling
        Case("""
            import torch
            import torch_npu
            class M(torch.nn.Module):
                def forward(self, x):
                    torch.npu.synchronize()
                    return x
            """, line=5, message_contains="`torch.npu.synchronize()` in `forward` drains the device queue",
             fixed="""
            import torch
            import torch_npu
            class M(torch.nn.Module):
                def forward(self, x):
                    return x
            """),
        Case("""
            import torch
            from deepspeed.accelerator import get_accelerator
            for batch in loader:
                model(batch).sum().backward()
                optimizer.step()
                get_accelerator().synchronize()
            """, line=6, message_contains="`get_accelerator().synchronize()` in the training step loop drains "
                                          "the device queue",
             fixed="""
            import torch
            from deepspeed.accelerator import get_accelerator  # noqa: F401
            for batch in loader:
                model(batch).sum().backward()
                optimizer.step()
            """),
    )
    flagged = (
        # device abstractions (analysis/frameworks.py DEVICE_ABSTRACTIONS)
        "import torch\nfrom deepspeed.accelerator import get_accelerator\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        get_accelerator().synchronize()\n        return x",
        "import torch\nfor x, y in loader:\n    model(x).sum().backward()\n    optimizer.step()\n"
        "    torch.get_device_module().synchronize()",
        "import torch\nfrom vllm.platforms import current_platform\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        current_platform.synchronize()\n        return x",
        "import torch\nfrom deepspeed.accelerator import get_accelerator\nclass M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.accelerator = get_accelerator()\n"
        "    def forward(self, x):\n        self.accelerator.synchronize()\n        return x",
        "import torch_npu\nfrom torch import nn\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        torch_npu.npu.synchronize()\n        return x",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        torch.cuda.synchronize()\n        return x",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        torch.npu.current_stream().synchronize()\n        return x",
        # resolved through import aliases
        "import torch\nfrom torch_npu import npu as tnpu\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        tnpu.synchronize()\n        return x",
        # backward of an autograd Function, a stream and an event
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
        "        ctx.stream.synchronize()\n        return g",
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        done = torch.npu.Event()\n        done.record()\n        done.synchronize()\n        return x",
        # the `else` of a one-step guard runs on every other step
        "import torch\nfor i, (x, y) in enumerate(loader):\n    model(x).sum().backward()\n"
        "    optimizer.step()\n    if i == 0:\n        pass\n    else:\n        torch.npu.synchronize()",
        # a per-step function called from the step loop
        "import torch\ndef train_step(batch):\n    model(batch).sum().backward()\n    optimizer.step()\n"
        "    torch.npu.synchronize()\nfor batch in loader:\n    train_step(batch)",
        # MindSpore construct
        "import mindspore as ms\nfrom mindspore import nn\nclass Net(nn.Cell):\n    def construct(self, x):\n"
        "        ms.hal.synchronize()\n        return x",
        "import mindspore\nclass Net(mindspore.nn.Cell):\n    def construct(self, x):\n"
        "        mindspore.runtime.synchronize()\n        return x",
        # the innermost step loop
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
        "    optimizer.step()\n    torch.npu.synchronize()",
        "import torch\ndef train(model, loader, optimizer):\n    for epoch in range(10):\n"
        "        for x, y in loader:\n            optimizer.zero_grad()\n            model(x).sum().backward()\n"
        "            optimizer.step()\n            torch.npu.synchronize()",
    )
    clean = (
        # outside hot scopes: benchmark timing, evaluation, set-up
        "import torch\ndef bench(model, x):\n    torch.npu.synchronize()\n    return model(x)",
        "import torch\ndef evaluate(model, loader):\n    for x, y in loader:\n        model(x)\n"
        "        torch.npu.synchronize()",
        # once per epoch, around the step loop: not hot
        "import torch\ndef train(model, loader, optimizer):\n    for epoch in range(10):\n"
        "        for x, y in loader:\n            model(x).sum().backward()\n            optimizer.step()\n"
        "        torch.npu.synchronize()",
        # a test/benchmark function running one backward is not a step loop (no step loop calls it)
        "import torch\ndef bench(q):\n    out = q.sum()\n    out.backward()\n    torch.npu.synchronize()",
        # tests and benchmarks are not training code
        "import torch\ndef test_optimizer_step(model, optimizer):\n    for _ in range(10):\n"
        "        model(x).sum().backward()\n        optimizer.step()\n        torch.npu.synchronize()",
        # once, on one given step
        "import torch\nfor i, (x, y) in enumerate(loader):\n    model(x).sum().backward()\n"
        "    optimizer.step()\n    if i == 10:\n        torch.npu.synchronize()",
        # guarded by `if step % N == 0`
        "import torch\nfor step, (x, y) in enumerate(loader):\n    model(x).sum().backward()\n"
        "    optimizer.step()\n    if step % 100 == 0:\n        torch.npu.synchronize()",
        # a local object that happens to have a synchronize method, outside a hot scope
        "import torch\nclass Timer:\n    def synchronize(self):\n        pass\ntimer = Timer()\ntimer.synchronize()",
        # a local helper that happens to be called synchronize
        "import torch\ndef synchronize():\n    pass\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        synchronize()\n        return x",
        # a forward of a class that is not a Module
        "import torch\nclass Helper:\n    def forward(self, x):\n        torch.npu.synchronize()\n        return x",
        # a device abstraction's synchronize outside hot code, and a handle's method that is no sync
        "import torch\nfrom deepspeed.accelerator import get_accelerator\ndef bench(model, x):\n"
        "    get_accelerator().synchronize()\n    return model(x)",
        "import torch\nfrom deepspeed.accelerator import get_accelerator\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x.to(get_accelerator().current_device_name())",
        # an accelerate Accelerator has no device synchronize (its wait_for_everyone is a process barrier)
        "import torch\nfrom accelerate import Accelerator\nclass M(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.accelerator = Accelerator()\n    def forward(self, x):\n"
        "        self.accelerator.synchronize()\n        return x",
        # a method called synchronize on something that is not a stream/event, in forward
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        self.buffers_state.synchronize()\n        return x",
    )

    def visit_Call(self, node: ast.Call) -> None:
        label = self._sync_label(node)
        if label is None:
            return
        ctx = self.ctx
        hot = ctx.hot_method()
        if hot is not None:
            where, remedy = ctx.hot_role().describe(), HOT_REMEDY
        elif ctx.in_step_loop(called_only=True):
            role = ctx.step_role()
            where = f"the training step loop ({role.describe()})" if role else "the training step loop"
            remedy = STEP_REMEDY
        else:
            return
        if ctx.guarded():
            return
        self.report(node, call=label, where=where, remedy=remedy, fix=self._fix(node))

    # ------------------------------------------------------------------ fix
    def _fix(self, node: ast.Call) -> Optional[Fix]:
        """Delete the statement; and the local stream/event it was the last use of, or no fix."""
        ctx = self.ctx
        parent = ctx.parent
        if not (isinstance(parent, ast.Expr) and parent.value is node):
            return None
        edits = [Edit("remove_statement", ctx.span(parent))]
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        func = ctx.function
        if isinstance(receiver, ast.Name) and func is not None:
            binding = _binding_used_only_here(func.node, receiver, parent)
            if binding is _UNUSED_AFTER:
                return None  # it would leave a variable assigned but never used
            if binding is not None:
                if not self._removable_value(binding.value):
                    return None
                edits.append(Edit("remove_statement", ctx.span(binding)))
        return Fix(Applicability.UNSAFE, "Remove the synchronize call", tuple(edits))

    def _removable_value(self, value: ast.expr) -> bool:
        """Can the assignment go with the call: a stream/event lookup or a plain name/attribute?"""
        if isinstance(value, ast.Call):
            return self.ctx.call_name(value) in STREAM_FACTORIES and not value.args and not value.keywords
        while isinstance(value, ast.Attribute):
            value = value.value
        return isinstance(value, ast.Name)

    def _sync_label(self, call: ast.Call) -> Optional[str]:
        """How to name the call in the message if it is a synchronize, else None."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "synchronize"):
            return None
        qual = self.ctx.qualname(func)
        if qual is not None:
            if qual in DEVICE_SYNCS or func.attr in HANDLE_SYNCS.get(qual.rpartition(".")[0], ()):
                return qual + "()"  # `torch.npu.synchronize`, `current_platform.synchronize` (vLLM)
            return None
        receiver = func.value
        resolved = self._handle_value(receiver)
        if isinstance(resolved, ast.Call):
            made_by = self.ctx.call_name(resolved)
            if made_by in STREAM_FACTORIES or func.attr in HANDLE_SYNCS.get(made_by or "", ()):
                return f"{_short(receiver)}.synchronize()"
        name = receiver_name(receiver).lower()
        if any(word in name for word in RECEIVER_WORDS):
            return f"{_short(receiver)}.synchronize()"
        return None


    def _handle_value(self, receiver: ast.expr) -> Optional[ast.expr]:
        """What the receiver was made by: itself, the value of a local bound to it, or the value `__init__`
        gives `self.<attr>` (`self.accelerator = get_accelerator()`)."""
        if isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) \
                and receiver.value.id == "self" and self.ctx.class_scope is not None:
            return self.ctx.class_scope.attributes.get(receiver.attr)
        return self.ctx.resolve(receiver)


def _short(receiver: ast.expr) -> str:
    """The receiver as written when short, else its last name (`<...>.stream`): never cut mid-expression."""
    text = ast.unparse(receiver)
    if len(text) <= 40:
        return text
    name = receiver_name(receiver)
    return f"<...>.{name}" if name else "<stream>"


_UNUSED_AFTER = ast.Pass()  # marker: removing the call would leave the variable without any read


def _binding_used_only_here(func: ast.AST, use: ast.Name, stmt: ast.stmt):
    """The `name = value` statement whose value only this call reads (to remove with it), None when there
    is none to remove, `_UNUSED_AFTER` when the call is the function's last read of a variable it assigns.

    The statement qualifies when it is the name's only assignment and the call its only read, or when it
    directly precedes the call in the same block (no other use of the name in between) and the next use
    of the name after the call, if any, is a new assignment."""
    parents = parent_map(func)
    occurrences = sorted((n for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == use.id),
                         key=lambda n: (n.lineno, n.col_offset))
    loads = [n for n in occurrences if isinstance(n.ctx, ast.Load)]
    if len(loads) == len(occurrences):
        return None  # a parameter, a global or a closure variable: nothing assigned here
    stores = [n for n in occurrences if not isinstance(n.ctx, ast.Load)]
    if len(loads) == 1 and len(stores) == 1:  # one assignment, read only here: it goes with the call
        assign = parents.get(id(stores[0]))
        return assign if _assigns_only(assign, stores[0]) else _UNUSED_AFTER
    assign = _assignment_just_before(parents, occurrences, use, stmt)
    if assign is not None:
        return assign
    return _UNUSED_AFTER if len(loads) == 1 else None


def _assignment_just_before(parents: Dict[int, ast.AST], occurrences: List[ast.Name], use: ast.Name,
                            stmt: ast.stmt) -> Optional[ast.Assign]:
    """`name = value` right before the call's read of the name, in the same block, when the name's next use
    after the call (if any) assigns it again."""
    at = next(i for i, n in enumerate(occurrences) if n is use)
    before = occurrences[at - 1] if at else None
    after = occurrences[at + 1] if at + 1 < len(occurrences) else None
    assign = parents.get(id(before)) if before is not None and not isinstance(before.ctx, ast.Load) else None
    if _assigns_only(assign, before) and _same_block(parents, assign, stmt) and not _is_load(after):
        return assign
    return None


def _assigns_only(assign: Optional[ast.AST], target: Optional[ast.Name]) -> bool:
    """`target = value`: a plain assignment to that one name."""
    return isinstance(assign, ast.Assign) and len(assign.targets) == 1 and assign.targets[0] is target


def _is_load(name: Optional[ast.Name]) -> bool:
    return name is not None and isinstance(name.ctx, ast.Load)


def _same_block(parents, first: ast.stmt, second: ast.stmt) -> bool:
    owner = parents.get(id(first))
    if owner is None or owner is not parents.get(id(second)):
        return False
    return any(first in block and second in block for block in (getattr(owner, f, None) for f in
                                                                 ("body", "orelse", "finalbody"))
               if isinstance(block, list))
