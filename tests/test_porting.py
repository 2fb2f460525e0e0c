"""Porting mode: a GPU script's run says that NPU-context rules were skipped and names `--target npu`."""
from __future__ import annotations

from pathlib import Path

import pytest

from ascend_lint.cli import main
from ascend_lint.config import Settings
from ascend_lint.engine.linter import NPU_RULES_SKIPPED_FOR_CUDA, Linter
from conftest import REGISTRY

GPU = ("import torch\nmodel = Net().cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
       "for x, y in loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n    opt.step()\n")
HINT = "Porting a GPU project to Ascend? Run with `--target npu --preview`"


def notes(text: str, target: str = "auto"):
    linter = Linter(REGISTRY.sorted_rules(), Settings(target=target))
    return linter.analyse(text, "train.py").notes


def test_note_only_where_npu_rules_were_skipped_in_cuda_code():
    assert notes(GPU) == (NPU_RULES_SKIPPED_FOR_CUDA,)
    assert notes(GPU, target="npu") == ()
    assert notes("import torch_npu\n" + GPU) == ()  # NPU code: the rules ran
    assert notes(GPU.replace(".cuda()", "")) == ()  # no CUDA: nothing to port


@pytest.mark.parametrize("cache", [["--no-cache"], []])
def test_summary_counts_the_files_and_names_target_npu(tmp_path, monkeypatch, capsys, cache):
    monkeypatch.chdir(tmp_path)
    for name in ("a.py", "b.py"):
        Path(name).write_text(GPU)
    Path("npu.py").write_text("import torch_npu\n" + GPU)
    for _ in range(2):  # the second run answers from the cache when there is one
        main(["check", "--isolated", "--preview", *cache, "."])  # (the migration rules are preview)
        out = capsys.readouterr().out
        assert f"NPU-context rules were skipped in 2 files that use CUDA and not torch_npu. {HINT}" in out
    main(["check", "--isolated", "--preview", *cache, "--target", "npu", "."])
    assert "Note:" not in capsys.readouterr().out
    main(["check", "--isolated", "--preview", *cache, "-q", "."])
    assert "Note:" not in capsys.readouterr().out
