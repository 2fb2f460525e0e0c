"""ASC502 dataset-autotune-off."""
from __future__ import annotations

import ast
from typing import List

from ascend_lint.rule import Case, Docs, Rule
from ascend_lint.astutil import argument, constant, method_name

TRAIN_METHODS = frozenset({"train", "fit"})
AUTOTUNE = "set_enable_autotune"


class DatasetAutotuneOff(Rule):
    code = "ASC502"
    name = "dataset-autotune-off"
    message = ("training with `dataset_sink_mode=True` on a `mindspore.dataset` pipeline without AutoTune: call "
               "`mindspore.dataset.config.set_enable_autotune(True)` before training")
    preview = True
    triggers = ("dataset", AUTOTUNE)
    docs = Docs(
        summary="MindSpore data-sink training without dataset AutoTune.",
        what="Flags `model.train(...)` / `model.fit(...)` with `dataset_sink_mode=True` in a MindSpore script "
             "that builds a `mindspore.dataset` pipeline (imports or calls `mindspore.dataset`) but never "
             "calls `mindspore.dataset.config.set_enable_autotune(True)`.",
        why="Dataset AutoTune adjusts the pipeline's parallelism (`num_parallel_workers`, prefetch sizes) "
            "while training so that the data pipeline keeps up with the device; it is off by default and "
            "takes effect only in dataset sink mode. MindSpore's tuning notes recommend enabling it (not "
            "together with profiling).",
        known_problems="A script whose dataset is built in another module that does not import "
                       "`mindspore.dataset` itself is not checked; a sink mode given as a variable is "
                       "trusted.",
        example="""
            import mindspore.dataset as ds

            data = ds.ImageFolderDataset(data_dir, num_parallel_workers=8).batch(256)
            model.train(90, data, callbacks=[LossMonitor()], dataset_sink_mode=True)
        """,
        use_instead="""
            import mindspore.dataset as ds

            ds.config.set_enable_autotune(True)
            data = ds.ImageFolderDataset(data_dir, num_parallel_workers=8).batch(256)
            model.train(90, data, callbacks=[LossMonitor()], dataset_sink_mode=True)
        """,
        fix_safety="No fix: AutoTune changes the pipeline's resource use, and it must not run together "
                   "with profiling.",
        source="MindSpore performance tuning notes (dataset AutoTune, sink mode only); "
               "`mindspore.dataset.config.set_enable_autotune` API docs (off by default).",
    )
    cases = (
        Case("""
            import mindspore.dataset as ds
            data = ds.MnistDataset(path).batch(32)
            model.train(10, data, dataset_sink_mode=True)
            """, line=3, message_contains="training with `dataset_sink_mode=True` on a `mindspore.dataset`"),
    )
    flagged = (
        "from mindspore import dataset as de\nmodel.fit(10, train_ds, eval_ds, dataset_sink_mode=True)",
        "import mindspore as ms\ndata = ms.dataset.GeneratorDataset(source, ['x'])\n"
        "model.train(1, data, dataset_sink_mode=True)",
        "import mindspore.dataset as ds\nds.config.set_enable_autotune(False)\n"
        "model.train(10, data, dataset_sink_mode=True)",
    )
    clean = (
        "import mindspore.dataset as ds\nds.config.set_enable_autotune(True)\n"
        "model.train(10, data, dataset_sink_mode=True)",
        "import mindspore.dataset as ds\nfrom mindspore.dataset.config import set_enable_autotune\n"
        "set_enable_autotune(True, './autotune')\nmodel.train(10, data, dataset_sink_mode=True)",
        "import mindspore.dataset as ds\nds.config.set_enable_autotune(args.autotune)\n"
        "model.train(10, data, dataset_sink_mode=True)",
        "import mindspore.dataset as ds\nmodel.train(10, data, dataset_sink_mode=False)",
        "import mindspore.dataset as ds\nmodel.train(10, data, dataset_sink_mode=args.sink)",
        "import mindspore.dataset as ds\nmodel.eval(data, dataset_sink_mode=True)",  # not training
        "from mindspore import Model\nfrom src.data import create_dataset\n"
        "model.train(10, create_dataset(), dataset_sink_mode=True)",  # no mindspore.dataset here
    )

    def start_file(self) -> None:
        self.sink_calls: List[ast.Call] = []
        self.builds_pipeline = False
        self.autotune = False

    def visit_Call(self, node: ast.Call) -> None:
        qual = self.ctx.call_name(node) or ""
        if qual.startswith("mindspore.dataset."):
            self.builds_pipeline = True
            if qual.endswith("." + AUTOTUNE):
                enable = argument(node, "enable", 0)
                if enable is None or constant(enable, True) is not False:
                    self.autotune = True
            return
        if method_name(node) in TRAIN_METHODS:
            sink = argument(node, "dataset_sink_mode")
            if sink is not None and constant(sink) is True:
                self.sink_calls.append(node)

    def end_file(self) -> None:
        if self.autotune or not (self.builds_pipeline or self.ctx.imports("mindspore.dataset")):
            return
        for call in self.sink_calls:
            self.report(call)
