"""ASC503 dataloader-without-pin-memory (preview): a DataLoader in NPU training code that does not pin its batches."""
from __future__ import annotations

import ast

from ascend_lint.astutil import argument, has_star_args
from ascend_lint.rule import Applicability, Case, Docs, Edit, Fix, Rule

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
PIN_MEMORY_POSITION = 7


class DataLoaderWithoutPinMemory(Rule):
    code = "ASC503"
    name = "dataloader-without-pin-memory"
    message = ("`DataLoader` without `pin_memory=True` in NPU training code: every batch is copied to the NPU from "
               "pageable host memory; pass `pin_memory=True` so the loader stages batches in pinned memory")
    preview = True
    npu_context = True
    fix_applicability = Applicability.SAFE
    triggers = ("DataLoader",)
    docs = Docs(
        summary="A DataLoader in NPU training code without `pin_memory=True`: batches are copied from pageable memory.",
        what="Flags `torch.utils.data.DataLoader(...)` (any spelling or import alias) in NPU code of a module that "
             "runs training steps, when the call does not pass `pin_memory` at all: not by keyword, not by "
             "position, and no `*args`/`**kwargs` that may hold it.",
        why="Every training step copies a batch from host to device. Copies from pinned (page-locked) host memory "
            "are faster, and only they can overlap with the host's work (`.npu(non_blocking=True)`): PyTorch's "
            "data loading docs, \"Memory Pinning\". With `pin_memory=True` the loader copies each batch into pinned "
            "memory in a background thread before returning it; torch_npu's `DataLoader` "
            "(`torch_npu/utils/dataloader.py`) does so when an NPU is available. Ascend's PyTorch Analyse tool "
            "gives the same advice for `DataLoader`.",
        known_problems="Pinned memory is page-locked host RAM: very large batches or many loaders can leave the "
                       "host short of memory. Batches of a custom type are pinned only if the type defines "
                       "`pin_memory()`. The copy overlaps the host only when it is issued with "
                       "`non_blocking=True`, which the rule does not check. Only modules that run training steps "
                       "are checked (`ctx.runs_training_steps()`: a loop of their own runs `loss.backward()`, "
                       "`optimizer.step()`, ..., or the project model says a step loop elsewhere calls one of "
                       "their functions), so a `build_dataloader()` in a data module is not reported. A "
                       "`pin_memory` passed in any form (`pin_memory=False`, `pin_memory=args.pin`) is a choice "
                       "the rule leaves alone.",
        example="""
            loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=8)
            for images, target in loader:
                images = images.npu(non_blocking=True)
                loss = criterion(model(images), target.npu(non_blocking=True))
                loss.backward()
                optimizer.step()
        """,
        use_instead="""
            loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=8, pin_memory=True)
        """,
        fix_safety="Safe: the fix adds `pin_memory=True` to the call. The loader then returns the same batches "
                   "copied into pinned host memory (`Tensor.pin_memory()`): the same values, dtypes and order; "
                   "where no NPU (or GPU) is available the loader skips the pinning.",
        source="PyTorch `torch.utils.data` docs, Memory Pinning: https://pytorch.org/docs/stable/data.html"
               "#memory-pinning; torch_npu `torch_npu/utils/dataloader.py` (Ascend/pytorch: pins when "
               "`torch_npu.npu.is_available()`); Ascend PyTorch Analyse (msFmkTransplt) parameter advice "
               "`DataLoader.pin_memory`.",
    )
    cases = (
        Case("""
            import torch_npu
            from torch.utils.data import DataLoader
            loader = DataLoader(data, batch_size=32, shuffle=True)
            for x, y in loader:
                loss = model(x.npu()).sum()
                loss.backward()
                optimizer.step()
            """, line=3, message_contains="`DataLoader` without `pin_memory=True` in NPU training code",
             fixed="""
            import torch_npu
            from torch.utils.data import DataLoader
            loader = DataLoader(data, batch_size=32, shuffle=True, pin_memory=True)
            for x, y in loader:
                loss = model(x.npu()).sum()
                loss.backward()
                optimizer.step()
            """),
    )
    flagged = (
        # any spelling; a loader built in a function of a module whose step loop is elsewhere in it
        "import torch, torch_npu\ndef build(ds):\n    return torch.utils.data.DataLoader(ds, 64, True)\n"
        "def main(ds, model, opt):\n    for x in build(ds):\n        model(x).backward()\n        opt.step()",
        "import torch_npu\nfrom torch.utils.data import DataLoader as DL\nloader = DL(ds, num_workers=4)\n"
        "for x in loader:\n    train_one_step(x)",
    )
    clean = (
        # pin_memory passed in any form
        "import torch_npu\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\n"
        "for x in loader:\n    model(x).backward()",
        "import torch_npu\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=False)\n"
        "for x in loader:\n    model(x).backward()",
        "import torch_npu\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=args.pin)\n"
        "for x in loader:\n    model(x).backward()",
        "import torch_npu\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, 8, True, None, None, 4, "
        "None, True)\nfor x in loader:\n    model(x).backward()",
        "import torch_npu\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, **loader_kwargs)\n"
        "for x in loader:\n    model(x).backward()",
        # a module that runs no training step (a data module, an evaluation script)
        "import torch_npu\nfrom torch.utils.data import DataLoader\ndef build(ds):\n    return DataLoader(ds, 32)",
        "import torch_npu\nfrom torch.utils.data import DataLoader\nfor x in DataLoader(ds, 32):\n"
        "    print(model(x.npu()).argmax(1))",
        # test code, a benchmark
        "import torch_npu\nfrom torch.utils.data import DataLoader\ndef test_training(ds, model, opt):\n"
        "    for x in DataLoader(ds, 4):\n        model(x).sum().backward()\n        opt.step()",
        "import torch_npu\nfrom torch.utils.data import DataLoader\ndef bench_step(ds, model, opt):\n"
        "    for x in DataLoader(ds, 4):\n        model(x).sum().backward()\n        opt.step()",
        # not NPU code; not torch's DataLoader
        "import torch\nfrom torch.utils.data import DataLoader\nfor x in DataLoader(ds, 32):\n    model(x).backward()",
        "import torch_npu\nfrom mylib import DataLoader\nfor x in DataLoader(ds, 32):\n    model(x).backward()",
    )

    def visit_Call(self, node: ast.Call) -> None:
        if self.ctx.call_name(node) not in DATALOADERS or has_star_args(node):
            return
        if argument(node, "pin_memory", PIN_MEMORY_POSITION) is not None or not self.ctx.runs_training_steps():
            return
        fix = Fix(Applicability.SAFE, "Pass `pin_memory=True`",
                  (Edit("set_keyword", self.ctx.span(node), "True", "pin_memory"),))
        self.report(node, fix=fix)
