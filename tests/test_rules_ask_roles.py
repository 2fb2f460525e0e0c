"""ASC501 asks the project's roles (ctx.role(), ctx.step_role()) for saves in helpers, without walking other files
(issue #29). A helper that a step loop elsewhere calls is not reported: the role does not record conditions at
the call other than `if step % N == 0:` (saves are mostly called under an epoch change or `if is_best:`)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List

from ascend_lint.cli import main

TRAIN = """\
import torch
import torch_npu

from ckpt import save_last, save_best


def train(model, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        save_last(model)
        if step % 1000 == 0:
            save_best(model)
"""
CKPT = """\
import torch


def save_last(model):
    torch.save(model.state_dict(), "last.pt")


def save_best(model):
    torch.save(model.state_dict(), "best.pt")
"""


def findings(root: Path, files: Dict[str, str], monkeypatch, capsys, *args: str) -> List[dict]:
    (root / "pyproject.toml").write_text("[tool.ascend-lint]\n")
    for name, text in files.items():
        (root / name).write_text(text)
    monkeypatch.chdir(root)
    capsys.readouterr()
    assert main(["check", "--output-format", "json", "--exit-zero", "--select", "ASC501", *args]) == 0
    return [f for f in json.loads(capsys.readouterr().out) if f["code"] == "ASC501"]


def test_save_in_a_helper_a_step_loop_elsewhere_calls(tmp_path, monkeypatch, capsys):
    assert findings(tmp_path, {"train.py": TRAIN, "ckpt.py": CKPT}, monkeypatch, capsys) == []


def test_save_in_the_step_loop_itself(tmp_path, monkeypatch, capsys):
    inline = TRAIN.replace("        save_last(model)\n", '        torch.save(model.state_dict(), "last.pt")\n')
    found = findings(tmp_path, {"train.py": inline, "ckpt.py": CKPT}, monkeypatch, capsys)
    assert [(os.path.basename(f["filename"]), f["location"]["row"]) for f in found] == [("train.py", 12)]


def test_save_under_a_condition_of_the_helper_is_not_per_step(tmp_path, monkeypatch, capsys):
    guarded = CKPT.replace('    torch.save(model.state_dict(), "last.pt")',
                           '    if model.is_best:\n        torch.save(model.state_dict(), "last.pt")')
    assert findings(tmp_path, {"train.py": TRAIN, "ckpt.py": guarded}, monkeypatch, capsys) == []
