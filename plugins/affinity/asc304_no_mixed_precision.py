"""ASC304 no-mixed-precision (preview)."""
from __future__ import annotations

import ast
import re
from typing import Optional

from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.analysis.semantic import is_step_call


# Identifiers that show the file runs (or can switch on) reduced precision somewhere: AMP contexts and
# scalers, apex amp, MindSpore amp levels, half/bf16 casts and the usual `args.fp16` / `use_amp` switches.
EVIDENCE_RE = re.compile(
    r"(?i)autocast|scaler|scale_loss|loss_scal|(?:^|_)amp(?:$|_)|fp16|bf16|float16|mixed_?precision|to_float|"
    r"build_train_network|param_dtype")
HALF_ATTRS = ("half", "bfloat16", "float16")  # x.half(), torch.half, torch.bfloat16
# A backward outside any loop counts only in a function named like a training step (a unit test of an
# operator also calls `.backward()` once).
STEP_FUNCTION_RE = re.compile(r"(?i)train|step|fit|update|epoch|learn|optimi")
AMP_MODULES = ("apex.amp", "apex.fp16_utils", "torch.cuda.amp", "torch.npu.amp", "torch.amp", "torch_npu.npu.amp",
               "mindspore.amp", "deepspeed", "accelerate",
               # FSDP's MixedPrecision(param_dtype=...) / FSDP2's MixedPrecisionPolicy
               "torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy",
               "torch.distributed._composable.fsdp.MixedPrecisionPolicy")


class NoMixedPrecision(Rule):
    code = "ASC304"
    name = "no-mixed-precision"
    message = "training step without mixed precision: run the forward under `torch.npu.amp.autocast()` and scale " \
              "the loss with `torch.npu.amp.GradScaler()` so MatMul/Conv run in fp16 on the Cube unit"
    preview = True
    npu_context = True
    project_facts = frozenset({"precision"})  # (ctx.caller_precision)
    triggers = ("backward", "step", "autocast", "Scaler", "scaler", "amp", "scale_loss", "loss_scal", "fp16", "bf16",
                "float16", "half", "precision", "Precision", "to_float", "build_train_network", "param_dtype")
    docs = Docs(
        summary="An NPU training script that uses no mixed precision.",
        what="Flags an NPU PyTorch training script (one that calls `loss.backward()` in a step loop and steps an "
             "optimizer) that uses no mixed precision at all: no `autocast`, no `GradScaler`, no apex `amp.initialize`/`amp.scale_loss`, no FSDP "
             "`MixedPrecision(param_dtype=...)` / `MixedPrecisionPolicy`, no "
             "MindSpore `amp_level`/`to_float`, no half/bf16 cast and no `fp16`/`use_amp`-style switch.",
        why="The Ascend Cube unit computes matrix products in fp16 (bf16 on newer parts); an fp32 model "
            "runs its MatMul/Conv far slower or is silently down-cast by the default precision mode. The "
            "Ascend migration guide asks to enable mixed precision right after porting "
            "(`torch_npu.npu.amp.autocast` + `GradScaler`), and every tuning case in the Ascend model zoo "
            "(ShuffleNetV2, MobileNetV1) starts from AMP.",
        known_problems="File-level, with one fact from the project: a training function that the project calls "
                       "with a model cast to fp16/bf16 (`model.half()`, apex `amp.initialize`, FSDP "
                       "`MixedPrecision`) or under `autocast` is taken as mixed precision; other set-ups in another "
                       "module (a framework configured by a YAML file) are invisible; any AMP-looking name in the file "
                       "(`scaler`, `args.fp16`, `use_amp`) keeps the rule silent. A `.backward()` outside any loop counts "
                       "only in a function named like a training step (`train*`, `*step*`, `fit`, `update`), so an "
                       "operator's unit test is not a training script. `x.backward(...)` calls with a "
                       "positional argument (`accelerator.backward(loss)`, DeepSpeed's `engine.backward(loss)`) "
                       "are framework-managed and not counted; a file without an optimizer step (a pipeline schedule that only "
                       "runs forward/backward) is not a training script, and neither are MindSpore files.",
        example="""
            import torch_npu

            for images, target in loader:
                loss = criterion(model(images), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        use_instead="""
            import torch_npu

            scaler = torch.npu.amp.GradScaler()
            for images, target in loader:
                with torch.npu.amp.autocast():
                    loss = criterion(model(images), target)
                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """,
        fix_safety="No fix: enabling mixed precision is a numerics decision (loss scaling, layers to keep in fp32).",
        source="Ascend PyTorch migration guide (enable mixed precision after migration; torch_npu.npu.amp); "
               "Ascend tuning cases ShuffleNetV2 and MobileNetV1.",
    )
    cases = (
        Case("""
            import torch_npu
            for x, y in loader:
                loss = crit(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, line=5, message_contains="training step without mixed precision"),
    )
    flagged = (
        "import torch\nmodel = model.to('npu')\ndef train(loader):\n    for x, y in loader:\n"
        "        loss = crit(model(x), y)\n        loss.backward(retain_graph=True)\n        optimizer.step()",
        # a per-step function called from the loop elsewhere
        "import torch_npu\ndef train_step(model, batch, opt):\n    loss = model(batch)\n    loss.backward()\n"
        "    opt.step()",
    )
    clean = (
        # torch/torch_npu native AMP, apex, a configurable switch, a half model, a scaler passed in
        "import torch_npu\nscaler = torch.npu.amp.GradScaler()\nfor x, y in loader:\n"
        "    with torch.npu.amp.autocast():\n        loss = crit(model(x), y)\n    scaler.scale(loss).backward()\n"
        "    scaler.step(opt)\n    scaler.update()",
        "import torch_npu\nfrom apex import amp\nfor x, y in loader:\n    loss = crit(model(x), y)\n"
        "    with amp.scale_loss(loss, opt) as scaled:\n        scaled.backward()\n    opt.step()",
        "import torch_npu\nfor x, y in loader:\n    with torch.autocast('npu', dtype=torch.bfloat16):\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    opt.step()",
        "import torch_npu\ndef train(args, loader):\n    for x, y in loader:\n        loss = crit(model(x), y)\n"
        "        if args.fp16:\n            loss = loss * 1.0\n        loss.backward()\n        opt.step()",
        "import torch_npu\nmodel = model.half()\nfor x, y in loader:\n    loss = crit(model(x), y)\n"
        "    loss.backward()\n    opt.step()",
        # not a training step loop: one backward outside a loop, a framework-managed backward
        "import torch_npu\nloss = crit(model(x), y)\nloss.backward()",
        "import torch_npu\ndef check_shuffle():\n    out = ChannelShuffle(64)(x.npu())\n    out.sum().backward()\n"
        "def train(loader):\n    for x in loader:\n        opt.zero_grad()\n        model(x).sum()\n        opt.step()",
        "import torch_npu\nfor batch in loader:\n    loss = model(batch)\n    accelerator.backward(loss)\n    opt.step()",
        # no optimizer step in the file (a pipeline schedule), a unit test, a MindSpore file
        "import torch, torch_npu\ndef forward_backward(model, batches):\n    for b in batches:\n"
        "        model(b).backward()",
        "import torch, torch_npu\nclass TestEma:\n    def test_step(self):\n        for _ in range(3):\n"
        "            loss = model(x).sum()\n            loss.backward()\n            opt.step()",
        "import mindspore\nfor x, y in data:\n    loss = net(x, y)\n    loss.backward()\n    optimizer.step()",
        # MindSpore amp level
        # FSDP mixed precision
        "import torch, torch_npu\nfrom torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy\n"
        "fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=low))\n"
        "for x in loader:\n    model(x).sum().backward()\n    opt.step()",
        "import torch, torch_npu\nfrom torch.distributed import fsdp\n"
        "policy = fsdp.MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32)\n"
        "for x in loader:\n    model(x).sum().backward()\n    opt.step()",
        "import mindspore\nfrom mindspore import Model\nmodel = Model(net, loss, opt, amp_level='O2')\n"
        "for x, y in data:\n    y.backward()\n    opt.step()",
        # not NPU code
        "import torch\nfor x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()",
    )

    def start_file(self) -> None:
        self._first_backward: Optional[ast.Call] = None
        self._optimizer_step = False
        ctx = self.ctx
        self._evidence = any(ctx.imports(m) for m in AMP_MODULES)
        # only PyTorch training code: not MindSpore (or a torch API layer over it)
        self._skip = not (ctx.imports("torch") or ctx.imports("torch_npu")) or ctx.imports("mindspore")

    def visit_Call(self, node: ast.Call) -> None:
        if self._skip or self._evidence:
            return
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "backward":
            if self._first_backward is None and not node.args and self._in_training_step():
                if self.ctx.caller_precision() is not None:  # its callers run it in mixed precision
                    self._evidence = True
                    return
                self._first_backward = node
        elif not self._optimizer_step and is_step_call(node):
            self._optimizer_step = True

    def _in_training_step(self) -> bool:
        ctx = self.ctx
        if ctx.in_non_training_code():
            return False  # a unit test, a benchmark, ...: not a training script
        loop = ctx.current_loop()
        if loop is not None:
            return ctx.is_step_loop(loop)
        func = ctx.function
        return func is not None and STEP_FUNCTION_RE.search(func.name) is not None

    def visit_Name(self, node: ast.Name) -> None:
        if not self._evidence and EVIDENCE_RE.search(node.id):
            self._evidence = True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self._evidence and (node.attr in HALF_ATTRS or EVIDENCE_RE.search(node.attr)):
            self._evidence = True

    def visit_keyword(self, node: ast.keyword) -> None:
        if not self._evidence and node.arg and (EVIDENCE_RE.search(node.arg) or node.arg == "precision"):
            self._evidence = True

    def end_file(self) -> None:
        if self._first_backward is not None and self._optimizer_step and not self._evidence and not self._skip:
            self.report(self._first_backward)
