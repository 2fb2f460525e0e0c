"""Questions of the rule API that no built-in rule exercises fully on its own: `ctx.runs_training_steps()`."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.pipeline.index import ProjectIndex
from ascend_lint.rule import Docs, Rule
from conftest import STEP_CALL, STEP_TRAIN, STEP_UTILS


class _AsksSteps(Rule):
    """Reports, at each call and at the end of the file, whether the module runs training steps."""

    code = "TST010"
    name = "asks-steps"
    message = "{answer}"
    file_triggers = ()
    triggers = ("(",)
    training_code_only = False
    docs = Docs(what="test", why="test")

    def visit_Call(self, node):
        self.report(node, answer=self.ctx.runs_training_steps())

    def end_file(self):
        self.report(self.ctx.tree.body[0], answer=self.ctx.runs_training_steps())


def _answers(text: str, path: str = "train.py", project=None):
    return {f.message for f in Linter([_AsksSteps], Settings(), project).check(text, path)}


@pytest.mark.parametrize("text,runs", [
    ("import torch\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n", True),
    ("import torch\ndef train(loader):\n    for batch in loader:\n        step(batch)\n"
     "def step(batch):\n    model(batch).backward()\n", True),  # through a local helper
    ("import mindspore as ms\ndef main(net, data):\n    for x, y in data:\n        train_net(x, y)\n", True),
    ("import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return self.fc(x)\n", False),
    ("import torch\nfor t in timesteps:\n    latents = scheduler.step(noise, t, latents)\n", False),  # no training
    ("import torch\nprint(len(loader))\n", False),
])
def test_runs_training_steps_from_the_file(text, runs):
    assert _answers(text) == {str(runs)}  # the same answer wherever the walk is when it is asked


def test_runs_training_steps_from_the_project(tmp_path: Path, monkeypatch):
    """`utils.py` has no loop; a step loop in `train.py` calls its `log_metrics` on every step."""
    for call, runs in ((STEP_CALL, True), ("", False)):
        (tmp_path / "utils.py").write_text(STEP_UTILS, encoding="utf-8")
        (tmp_path / "train.py").write_text(STEP_TRAIN.format(module="utils", call=call), encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        index = ProjectIndex(str(tmp_path), Settings(project_root=str(tmp_path)))
        index.load()
        index.complete()
        assert _answers(STEP_UTILS, os.path.join(str(tmp_path), "utils.py"), index) == {str(runs)}
