"""ASC501 sync-checkpoint-save."""
from __future__ import annotations

import ast
from typing import Optional

from ascend_lint.rule import Applicability, Docs, Edit, Fix, Rule
from ascend_lint.semantic import argument, constant, has_star_args

# MindSpore callables with an `async_save` parameter -> its positional index
MS_SAVE_CONFIG = {"CheckpointConfig": 5}
MS_SAVE_FUNCTIONS = {"mindspore.save_checkpoint": 3, "mindspore.serialization.save_checkpoint": 3}
_MISSING = object()


class SyncCheckpointSave(Rule):
    code = "ASC501"
    name = "sync-checkpoint-save"
    message = "{op} {problem}: {remedy}"
    fix_applicability = Applicability.SAFE
    triggers = ("CheckpointConfig", "save_checkpoint", "save(")
    docs = Docs(
        summary="Synchronous checkpoint saving that blocks training.",
        measured=(340, 340),  # findings, true positives: docs/precision.md
        what="Flags MindSpore `CheckpointConfig(...)` (`mindspore.train.CheckpointConfig`, also imported from "
             "`mindspore` or `mindspore.train.callback`) without a truthy `async_save` (`True`, or "
             "`\"thread\"`/`\"process\"` since MindSpore 2.5); `mindspore.save_checkpoint(...)` inside a loop "
             "without it; and `torch.save(...)` called on every iteration of a training step loop (not under "
             "an `if` inside that loop).",
        why="A synchronous save stops training while the checkpoint is serialised and written. MindSpore "
            "measured 2450 img/s with `async_save=True` against 2200 img/s with the default synchronous "
            "save. Saving with `torch.save` on every step writes the whole state dict each step.",
        known_problems="`async_save` passed as a variable, or through `**kwargs`, is trusted. A "
                       "`save_checkpoint` in a function that is called from a loop is not seen.",
        example="""
            config = CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=10)
            ckpt_cb = ModelCheckpoint(prefix="resnet50", directory="./ckpt", config=config)
        """,
        use_instead="""
            config = CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=10, async_save=True)
            ckpt_cb = ModelCheckpoint(prefix="resnet50", directory="./ckpt", config=config)
        """,
        fix_safety="Safe for the MindSpore cases: the fix adds `async_save=True` (or replaces a false value); "
                   "the checkpoint written is the same, only the write happens in the background. No fix "
                   "for `torch.save`: how often to save is the user's decision.",
        source="MindSpore performance tuning notes (async checkpoint saving, 2450 vs 2200 img/s); "
               "`mindspore.train.CheckpointConfig` and `mindspore.save_checkpoint` API docs.",
    )
    flagged = (
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(save_checkpoint_steps=100)",
        "import mindspore as ms\ncfg = ms.CheckpointConfig(keep_checkpoint_max=5, async_save=False)",
        "from mindspore.train.callback import CheckpointConfig\ncfg = CheckpointConfig(100, 0, 5, 0, True, False)",
        "import mindspore as ms\nfor epoch in range(10):\n    train_one_epoch()\n"
        "    ms.save_checkpoint(net, f'e{epoch}.ckpt')",
        "from mindspore import save_checkpoint\nwhile True:\n    save_checkpoint(net, 'last.ckpt', async_save=None)",
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x, y)\n    loss.backward()\n"
        "    optimizer.step()\n    torch.save(model.state_dict(), 'last.pt')",
    )
    clean = (
        "from mindspore.train import CheckpointConfig\n"
        "cfg = CheckpointConfig(save_checkpoint_steps=100, async_save=True)",
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(async_save='thread')",
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(async_save=args.async_save)",
        "from mindspore.train import CheckpointConfig\ncfg = CheckpointConfig(**ckpt_kwargs)",
        "import mindspore as ms\nms.save_checkpoint(net, 'final.ckpt')",  # once, outside any loop
        "import mindspore as ms\nfor epoch in range(10):\n    ms.save_checkpoint(net, 'e.ckpt', async_save=True)",
        "class CheckpointConfig:\n    pass\ncfg = CheckpointConfig()",  # not MindSpore's
        "import torch\nfor step, (x, y) in enumerate(loader):\n    loss = model(x, y)\n    loss.backward()\n"
        "    optimizer.step()\n    if step % 1000 == 0:\n        torch.save(model.state_dict(), 'last.pt')",
        "import torch\nfor epoch in range(90):\n    for x, y in loader:\n        model(x, y).backward()\n"
        "        optimizer.step()\n    torch.save(model.state_dict(), f'e{epoch}.pt')",  # once per epoch
        "import torch\nfor name, t in tensors.items():\n    torch.save(t, name)",  # not a step loop
        "import torch\ndef test_save(tmp_path):\n    model(x).sum().backward()\n    opt.step()\n"
        "    torch.save(opt.state_dict(), tmp_path)",  # one step, then one save: no loop
    )

    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node)
        if not qual:
            return
        if qual == "torch.save":
            loop = self.ctx.current_loop()
            if loop is not None and self.ctx.is_step_loop(loop) and not self.ctx.guarded(modulo_only=False):
                self.report(node, op="`torch.save`",
                            problem="runs on every training step and blocks it while it writes",
                            remedy="save every N steps (`if step % N == 0:`) or once per epoch")
            return
        if not qual.startswith("mindspore."):
            return
        short = qual.rsplit(".", 1)[-1]
        if short in MS_SAVE_CONFIG:
            self._check_async(node, f"`{short}`", MS_SAVE_CONFIG[short], "saves checkpoints synchronously")
        elif qual in MS_SAVE_FUNCTIONS and self.ctx.current_loop() is not None:
            self._check_async(node, "`mindspore.save_checkpoint`", MS_SAVE_FUNCTIONS[qual],
                              "in a loop blocks training while it writes")

    def _check_async(self, call: ast.Call, op: str, position: int, problem: str) -> None:
        value = argument(call, "async_save", position)
        if value is None and has_star_args(call):
            return  # may come through *args / **kwargs
        current: object = constant(value, _MISSING) if value is not None else False
        if current is _MISSING or current:
            return  # a variable (trusted) or a truthy value
        self.report(call, op=op, problem=problem, remedy="pass `async_save=True`", fix=self._fix(call, value))

    def _fix(self, call: ast.Call, value: Optional[ast.expr]) -> Fix:
        if value is not None and value in call.args:  # positional: replace the value in place
            edit = Edit("replace", self.ctx.span(value), "True")
        else:
            edit = Edit("set_keyword", self.ctx.span(call), "True", "async_save")
        return Fix(Applicability.SAFE, "Pass `async_save=True`", (edit,))
