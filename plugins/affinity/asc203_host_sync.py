"""ASC203 host-sync-in-step-loop."""
from __future__ import annotations

import ast
from typing import Dict, Optional, Tuple

from ascend_lint.analysis.placement import Place
from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.analysis.semantic import Binding
from ascend_lint.astutil import argument, contains, method_name, receiver_name

# Tensor methods that copy device data to the host (`asnumpy` is MindSpore's `numpy`).
SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist", "asnumpy"})
# Methods that return a tensor when called on a tensor.
TENSOR_METHODS = frozenset({
    "sum", "mean", "max", "min", "norm", "std", "var", "abs", "exp", "log", "sqrt", "pow", "float", "half",
    "double", "long", "int", "bool", "detach", "clone", "contiguous", "view", "reshape", "squeeze", "unsqueeze",
    "argmax", "argmin", "softmax", "sigmoid", "to", "npu", "cuda", "eq", "ne", "gt", "lt", "ge", "le", "mul",
    "div", "add", "sub", "prod", "flatten", "all", "any",
})
# Of those, the ones no Python or numpy object has: their receiver must be a tensor.
TENSOR_ONLY_METHODS = frozenset({"detach", "float", "half", "double", "long", "npu", "cuda", "norm",
                                 "softmax", "sigmoid", "contiguous"})
# torch.X functions that do not return a tensor.
NON_TENSOR_TORCH = frozenset({
    "is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype", "typename", "device", "dtype",
    "Size", "manual_seed", "initial_seed", "seed", "is_grad_enabled", "no_grad", "enable_grad", "save", "load",
    "get_rng_state", "finfo", "iinfo", "is_nonzero",
})
TENSOR_MODULES = ("torch.nn.functional.", "torch.linalg.", "torch.special.", "torch.fft.")


class HostSyncInStepLoop(Rule):
    code = "ASC203"
    name = "host-sync-in-step-loop"
    message = ("`{expr}` copies a device tensor to the host on every training step and blocks until the NPU "
               "catches up: keep it on the device and read it only every N steps (`if step % N == 0:`)")
    preview = True
    # a step loop needs one of these words (`.backward()`, `.step()`, `train_one_step`, `optimizer(grads)`)
    # `float(t)` / `int(t)` / `print(t)` are common words: they are looked at on lines that also name a
    # loss or call a torch function directly (a bare `print(` or `torch.` would make every line a candidate)
    triggers = ("item", "cpu", "numpy", "tolist", "backward", "scale", "loss", "int(torch", "float(torch",
                "print(torch")
    docs = Docs(
        summary="A host sync such as `.item()` or `.cpu()` in the training-step loop stalls the NPU on every step.",
        what="Flags `.item()`, `.cpu()`, `.numpy()`, `.tolist()` (and MindSpore's `.asnumpy()`), `float(t)` / "
             "`int(t)` of a tensor and `print(t)` of a tensor expression in the body of the innermost "
             "training-step loop (a loop that calls `.backward()`, `optimizer.step()`, `scaler.step()` or a "
             "MindSpore train-one-step cell, directly or through a function of the same file), unless the "
             "statement is under an `if step % N == 0:` guard. Through the project model, a function called from such a loop in any module (up to three calls deep, not under a periodic guard) runs every step too; step loops in test code do not count.",
        why="Each of these is a device-to-host copy: the host must wait until every queued operator has run "
            "before it can read the value, so it stops launching the next step's operators and the NPU idles "
            "(Ascend's large-model training guide, \"减少同步接口调用\", shows such waits as device free time). "
            "`torch_npu.npu.set_sync_debug_mode(\"warn\")` confirms them at run time.",
        known_problems="`float(t)`, `int(t)` and `print(t)` are reported only when `t` is known to be a tensor "
                       "(a `torch` function result, a tensor method chain, or a name that `.backward()`, apex "
                       "`amp.scale_loss` or `scaler.scale` was applied to), and only on lines that mention a "
                       "loss or a `torch.` function. Tensors taken straight from the data loader (the loop variables) are host tensors "
                       "and are not reported, nor are tensors that placement (ascend_lint/analysis/placement.py) finds "
                       "on the host: built without a device (`r = torch.tensor(rewards).float(); r.mean().item()`) "
                       "or moved there with `.cpu()`: computing with them is host work, not a sync. A one-step guard (`if i == len(loader) - 1:`) counts like "
                       "`if step % N == 0:`.",
        example="""
            for step, (images, target) in enumerate(loader):
                loss = criterion(model(images.npu()), target.npu())
                loss.backward()
                optimizer.step()
                total += loss.item()
        """,
        use_instead="""
            total = torch.zeros((), device="npu")
            for step, (images, target) in enumerate(loader):
                loss = criterion(model(images.npu()), target.npu())
                loss.backward()
                optimizer.step()
                total += loss.detach()
                if step % 100 == 0:
                    print(f"step {step} loss {total.item() / (step + 1):.4f}")
        """,
        fix_safety="No fix: where the value is needed, and how often, depends on the script.",
        source="CANN 7.0 large-model training guide, \"减少同步接口调用\" (https://www.hiascend.com/document/detail/"
               "zh/canncommercial/700/foundmodeldev/foundmodeltrain/PT_LMTMOG_000080.html); torch_npu "
               "`torch_npu.npu.set_sync_debug_mode` (torch_npu/npu/utils.py in Ascend/pytorch).",
    )
    cases = (
        Case("""
            import torch
            for x, y in loader:
                loss = model(x.npu()).sum()
                loss.backward()
                optimizer.step()
                total += loss.item()
            """, line=6, message_contains="`loss.item()` copies a device tensor to the host on every"),
        Case("""
            import torch
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
                print(loss)
            """, line=6, message_contains="`print(loss)` copies a device tensor to the host on every"),
    )
    flagged = (
        "import torch\nfor x, y in loader:\n    out = model(x.npu())\n    out.sum().backward()\n    optimizer.step()\n"
        "    preds = out.argmax(1).cpu()",
        "import torch\nfor x, y in loader:\n    out = model(x.npu())\n    out.sum().backward()\n    optimizer.step()\n"
        "    history.append(out.detach().numpy())",
        "import torch\nfor x, y in loader:\n    out = model(x.npu())\n    out.sum().backward()\n    optimizer.step()\n"
        "    ids = out.argmax(-1).tolist()",
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n"
        "    losses.append(float(loss))",
        "import torch\nfor x, y in loader:\n    out = model(x)\n    out.sum().backward()\n    optimizer.step()\n"
        "    correct += int(torch.sum(out.argmax(1) == y))",
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n"
        "    print(f'loss {loss}')",
        # a per-step function called from the step loop counts as the loop body
        "import torch\ndef train_step(model, batch, optimizer):\n    loss = model(batch)\n    loss.backward()\n"
        "    optimizer.step()\n    return loss.item()\nfor batch in loader:\n    train_step(model, batch, opt)",
        # MindSpore functional training step
        "import mindspore\nfor data, label in dataset.create_tuple_iterator():\n    loss, grads = grad_fn(data, label)\n"
        "    optimizer(grads)\n    print(loss.asnumpy())",
    )
    clean = (
        # guarded by `if step % N == 0`
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n"
        "    optimizer.step()\n    if step % 100 == 0:\n        print(loss.item())",
        # once per epoch: the epoch loop around the step loop is not hot
        "import torch\nfor epoch in range(10):\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n"
        "        optimizer.step()\n    print(loss.item())",
        # evaluation loop: no backward/step
        "import torch\nfor x, y in val_loader:\n    acc += (model(x).argmax(1) == y).sum().item()",
        # host tensors: built on the host without a device (RL rewards), or already moved there
        "import torch\nfor batch in loader:\n    loss = model(batch.npu()).sum()\n    loss.backward()\n"
        "    optimizer.step()\n    r = torch.tensor(rewards).float()\n    mean_reward = r.mean().item()\n"
        "    history.append(float(torch.tensor(lengths).sum()))\n    print(f'{r.std()}')",
        # host data from the loader, and numpy/python values
        "import torch\nimport numpy as np\nfor x, y in loader:\n    labels = y.numpy()\n    loss = model(x.npu()).sum()\n"
        "    loss.backward()\n    optimizer.step()\n    n = np.mean(a).item()\n    k = int(len(y))\n"
        "    print('step done')",
        # pieces of the loader's batch are host data too
        "import torch\nfor batch in loader:\n    x, y = batch\n    labels = batch['label']\n    loss = model(x.npu()).sum()\n"
        "    loss.backward()\n    optimizer.step()\n    hist.append(y.numpy())\n    hist.append(labels.tolist())",
        # already copied to the host on an earlier line (that line is the one reported)
        "import torch\nfor x, y in loader:\n    out = model(x)\n    out.sum().backward()\n    optimizer.step()\n"
        "    if step % 10 == 0:\n        idx = out.argmax(-1).cpu()\n        print(idx.numpy())",
        # float/int/print of things not known to be tensors
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n"
        "    lr = float(scheduler.get_last_lr()[0])\n    print(lr, x.shape)",
        # tests and benchmarks are not training code
        "import torch\ndef test_training_converges(model, loader, optimizer):\n    for x, y in loader:\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        losses.append(loss.item())",
        # a guard held in a variable
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n"
        "    optimizer.step()\n    is_log_step = step % 100 == 0\n    if is_log_step:\n        print(loss.item())",
        # a one-step guard on the loop counter
        "import torch\nfor i, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n"
        "    optimizer.step()\n    if i == len(loader) - 1:\n        print(loss.item())",
        # a nested non-step loop inside the step loop body (e.g. over parameters) is a different loop
        "import torch\nfor x, y in loader:\n    model(x).sum().backward()\n    optimizer.step()\n"
        "    for p in params:\n        pass",
    )

    def start_file(self) -> None:
        # (function node id, name) -> the binding `.backward()` was called on: a known tensor
        self._backwarded: Dict[Tuple[int, str], Optional[Binding]] = {}

    def visit_Call(self, node: ast.Call) -> None:
        method = method_name(node)
        if method is not None:  # cheapest tests first: this runs for every call on a trigger line
            self._method_call(node, method)
            return
        func = node.func
        if (isinstance(func, ast.Name) and func.id in ("float", "int", "print") and not self.ctx.is_local(func.id)
                and self.ctx.aliases.get(func.id) is None):
            if func.id == "print":
                self._print_call(node)
            elif len(node.args) == 1 and not node.keywords:
                arg = node.args[0]
                if self._is_tensor(arg) and not self._has_sync(arg) and not self._placed_on_host(arg):
                    self._check(node, _short(node, f"{func.id}()"))

    def _method_call(self, node: ast.Call, method: str) -> None:
        """`loss.backward()` and `scaler.scale(loss)` name a tensor; `.item()`, `.cpu()`, ... sync."""
        if method == "backward":
            self._remember_tensor(node.func.value)
        elif (method == "scale_loss" and self.ctx.call_name(node) == "apex.amp.scale_loss") or (
                method == "scale" and "scaler" in receiver_name(node.func.value).lower()):
            self._remember_tensor(argument(node, "loss", 0))  # amp.scale_loss(loss, opt) / scaler.scale(loss)
        elif method in SYNC_METHODS and not node.args and not self._host_receiver(node.func.value) \
                and not self._placed_on_host(node.func.value):
            self._check(node, _short(node, f".{method}()"))

    def _print_call(self, node: ast.Call) -> None:
        """`print(loss)`: formatting a device tensor copies it to the host."""
        for arg in node.args:
            value = self._printed_tensor(arg)
            if value is not None:
                shown = _short(value, "")
                self._check(node, f"print({shown})" if shown else "print()")
                return

    # ------------------------------------------------------------------ helpers
    def _remember_tensor(self, node: Optional[ast.expr]) -> None:
        """A name known to hold a tensor here: `.backward()` was called on it, or AMP scales it."""
        if isinstance(node, ast.Call) and method_name(node) == "scale" and node.args:
            node = node.args[0]  # scaler.scale(loss).backward()
        if isinstance(node, ast.Name):
            self._backwarded[(self._func_key(), node.id)] = self.ctx.binding(node.id)

    def _check(self, node: ast.Call, expr: str) -> None:
        ctx = self.ctx
        if ctx.in_step_loop(called_only=True) and not ctx.guarded():
            role = ctx.step_role()
            self.report(node, message=self.message.format(expr=expr) + (f" ({role.describe()})" if role else ""))

    def _func_key(self) -> int:
        func = self.ctx.function
        return id(func.node) if func is not None else 0

    def _printed_tensor(self, arg: ast.expr) -> Optional[ast.expr]:
        if isinstance(arg, ast.JoinedStr):
            for part in arg.values:
                if isinstance(part, ast.FormattedValue) and self._is_tensor(part.value) \
                        and not self._has_sync(part.value) and not self._placed_on_host(part.value):
                    return part.value
            return None
        return arg if self._is_tensor(arg) and not self._has_sync(arg) and not self._placed_on_host(arg) else None

    def _placed_on_host(self, node: ast.expr) -> bool:
        """A host tensor by placement (`r = torch.tensor(rewards).float()`, a `.cpu()` result): reading it
        computes on the host and waits for no device."""
        return self.ctx.placement(node, tensor=True) is Place.HOST

    def _has_sync(self, node: ast.AST) -> bool:
        """A sync call somewhere in the receiver chain (it is reported on its own)."""
        while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Call):
                if method_name(node) in SYNC_METHODS:
                    return True
                node = node.func
            else:
                node = node.value
        return False

    def _host_receiver(self, node: ast.expr, depth: int = 0) -> bool:
        """Host data: a numpy value, an earlier sync in the chain (also through a local name bound to
        one: `idx = idx.cpu()` then `idx.numpy()`), or a tensor straight from the loader."""
        if self._has_sync(node):
            return True
        base = node
        while isinstance(base, (ast.Call, ast.Attribute, ast.Subscript)):
            if isinstance(base, ast.Call):
                qual = self.ctx.call_name(base)
                if qual and qual.startswith("numpy."):
                    return True
                base = base.func
            else:
                base = base.value
        if not isinstance(base, ast.Name):
            return False
        if self.ctx.qualname(base) == "numpy":
            return True
        bound = self.ctx.binding(base.id)
        if bound is not None and bound.value is not None and bound.index is None and depth < 3:
            if self._host_receiver(bound.value, depth + 1):
                return True
        return self._is_loop_variable(base.id)

    def _is_loop_variable(self, name: str, depth: int = 0) -> bool:
        """`name` is still the value a `for` target of the current function received (not rebound),
        or a piece of it (`x, y = batch`, `y = batch["label"]`)."""
        bound = self.ctx.binding(name)
        if bound is not None:
            value = bound.value
            while isinstance(value, ast.Subscript):
                value = value.value
            return isinstance(value, ast.Name) and depth < 3 and self._is_loop_variable(value.id, depth + 1)
        func = self.ctx.function
        for loop in self.ctx.loops:
            if isinstance(loop, (ast.For, ast.AsyncFor)) and (func is None or contains(func.node, loop)):
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(loop.target)):
                    return True
        return False

    def _is_tensor(self, node: ast.expr, depth: int = 0) -> bool:
        """Known to evaluate to a tensor (conservative: unknown is False)."""
        if depth > 6:
            return False
        ctx = self.ctx
        if isinstance(node, ast.Name):
            key = (self._func_key(), node.id)
            if key in self._backwarded and self._backwarded[key] is ctx.binding(node.id):
                return True
            bound = ctx.binding(node.id)
            if bound is not None and bound.value is not None and bound.index is None:
                return self._is_tensor(bound.value, depth + 1)
            return False
        if isinstance(node, ast.Call):
            qual = ctx.call_name(node)
            if qual is not None:
                return _torch_returns_tensor(qual)
            method = method_name(node)
            if method in TENSOR_ONLY_METHODS:
                return True
            if method in TENSOR_METHODS:
                return self._is_tensor(node.func.value, depth + 1)
            return False
        if isinstance(node, ast.BinOp):
            return self._is_tensor(node.left, depth + 1) or self._is_tensor(node.right, depth + 1)
        if isinstance(node, ast.UnaryOp):
            return self._is_tensor(node.operand, depth + 1)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._is_tensor(node.left, depth + 1)
        if isinstance(node, ast.Subscript):
            return self._is_tensor(node.value, depth + 1)
        if isinstance(node, ast.Attribute) and node.attr in ("data", "grad", "T"):
            return self._is_tensor(node.value, depth + 1)
        return False


def _torch_returns_tensor(qual: str) -> bool:
    if qual.startswith(TENSOR_MODULES):
        return True
    parts = qual.split(".")
    return len(parts) == 2 and parts[0] == "torch" and parts[1][:1].islower() and parts[1] not in NON_TENSOR_TORCH


def _short(node: ast.expr, generic: str) -> str:
    """The expression's source when it is short, else `generic` (a message never shows cut source)."""
    text = ast.unparse(node)
    return text if len(text) <= 50 and "\n" not in text else generic
