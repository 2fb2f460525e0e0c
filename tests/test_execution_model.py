"""The execution model (analysis/execution.py, issue #29): roles of functions from entry points, edges and the
framework tables, and the engine's policy on code reached from nothing. Each mechanism has a minimised case
written for this project: a function it gives a role (flagged) and one it leaves alone (clean)."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Dict, Optional

import pytest

from ascend_lint.analysis.model import ProjectModel
from ascend_lint.analysis.records import Summary
from ascend_lint.analysis.summary import light_summary, summarize_text
from ascend_lint.cli import main

HEAD = "import torch\nimport torch_npu\n"
LOOP = "    for x in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"


def _model(texts: Dict[str, str]) -> ProjectModel:
    return ProjectModel.build({rel: summarize_text(text, None, True, ast.parse)
                               for rel, text in texts.items()})


def _kind(model: ProjectModel, qual: str) -> Optional[str]:
    role = model.role(qual)
    return role.kind if role is not None else None


# ----------------------------------------------------------------------------- depth, cycles, size
def test_calls_are_followed_to_any_depth_from_a_step_loop():
    chain = "".join(f"def f{i}(x):\n    return f{i + 1}(x)\n\n\n" for i in range(6)) + "def f6(x):\n    return x\n"
    model = _model({"train.py": HEAD + chain + "\n\ndef main(model, loader, optimizer):\n" + LOOP +
                    "        f0(loss)\n"})
    role = model.role("train.f6")
    assert role.kind == "per_step" and role.reason.via == "train.f5"  # six calls below the loop
    assert _kind(model, "train.main") == "once"


def test_a_call_cycle_and_a_20000_function_chain():
    size = 20_000
    texts = {f"m{i:05d}.py": f"from m{i + 1:05d} import f{i + 1}\n\n\ndef f{i}(x):\n    return f{i + 1}(x)\n"
             for i in range(size - 1)}
    texts[f"m{size - 1:05d}.py"] = "from m00000 import f0\n\n\ndef f19999(x):\n    return f0(x)\n"  # a cycle
    texts["train.py"] = "from m00000 import f0\n\nfor x in data:\n    f0(x).backward()\n"
    model = ProjectModel.build({rel: light_summary(text) for rel, text in texts.items()}).with_tree_facts(
        {"train.py": summarize_text(texts["train.py"], None, True, ast.parse)})
    assert _kind(model, "m00000.f0") == "per_step" and _kind(model, "m19999.f19999") == "per_step"


# ----------------------------------------------------------------------------- edges
def test_methods_of_attribute_held_objects_and_annotated_parameters():
    model = _model({"trainer.py": HEAD + textwrap.dedent("""
        class Timer:
            def start(self):
                pass

            def report(self):
                pass


        class Sink:
            def push(self, loss):
                pass


        class Trainer:
            def __init__(self, sink: Sink):
                self.timer = Timer()
                self.sink = sink

            def fit(self, model, loader, optimizer):
                for x in loader:
                    self.timer.start()
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
                    self.sink.push(loss)
                self.timer.report()


        def main(model, loader, optimizer):
            Trainer(Sink()).fit(model, loader, optimizer)
        """)})
    assert _kind(model, "trainer.Timer.start") == "per_step"
    assert _kind(model, "trainer.Sink.push") == "per_step"
    assert _kind(model, "trainer.Timer.report") == "once"  # after the loop
    assert _kind(model, "trainer.Trainer.__init__") == "setup"  # a constructor that once-run code calls
    assert model.role("trainer.Trainer.__init__").reason.describe().startswith("`Trainer` is built")


def test_a_closure_step_loop_nested_in_main_counts_as_main():
    model = _model({"train.py": HEAD + textwrap.dedent("""
        def log(loss):
            print(loss.item())


        def unused(loss):
            print(loss.item())


        def main(model, optimizer):
            def epoch(loader):
                for x in loader:
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
                    log(loss)
            epoch([])


        if __name__ == "__main__":
            main(None, None)
        """)})
    assert _kind(model, "train.main") == "once"
    assert _kind(model, "train.log") == "once"  # (the closure's loop is main's: not yet per step)
    assert _kind(model, "train.unused") == "unreached"


def test_a_function_passed_to_the_projects_step_runner_runs_per_step():
    model = _model({"train.py": HEAD + textwrap.dedent("""
        def my_loss(a, b):
            return (a - b).mean()


        def other_loss(a, b):
            return (a - b).abs().mean()


        def run_steps(model, loader, optimizer, loss_fn):
            for x, y in loader:
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()


        def main(model, loader, optimizer):
            run_steps(model, loader, optimizer, loss_fn=my_loss)
        """)})
    assert _kind(model, "train.my_loss") == "per_step"
    assert "run_steps" in model.role("train.my_loss").reason.describe()
    assert _kind(model, "train.other_loss") == "unreached"


def test_functions_passed_to_framework_calls_and_returned_in_a_partial():
    model = _model({"pretrain.py": HEAD + textwrap.dedent("""
        from functools import partial
        from megatron.training import pretrain


        def loss_func(mask, output):
            return output.sum()


        def forward_step(data_iterator, model):
            output = model(next(data_iterator))
            return output, partial(loss_func, None)


        def model_provider():
            return torch.nn.Linear(4, 4)


        def datasets_provider(sizes):
            return None, None, None


        if __name__ == "__main__":
            pretrain(datasets_provider, model_provider, None, forward_step)
        """)})
    assert _kind(model, "pretrain.forward_step") == "per_step"
    assert "every micro-batch" in model.role("pretrain.forward_step").reason.describe()
    assert _kind(model, "pretrain.loss_func") == "per_step"  # returned in a partial by a per-step function
    assert _kind(model, "pretrain.model_provider") == "setup"


def test_a_returned_function_runs_with_its_caller():
    model = _model({"sched.py": HEAD + textwrap.dedent("""
        def get_func():
            return run_micro_batches


        def run_micro_batches(model, x):
            return model(x)


        def train(model, loader, optimizer):
            for x in loader:
                func = get_func()
                func(model, x).sum().backward()
                optimizer.step()
        """)})
    assert _kind(model, "sched.run_micro_batches") == "per_step"


# ----------------------------------------------------------------------------- framework tables
def test_hf_trainer_overrides_take_the_tables_roles():
    model = _model({"trainer.py": HEAD + textwrap.dedent("""
        from transformers import Trainer


        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False):
                return model(**inputs).loss

            def create_optimizer(self):
                return super().create_optimizer()

            def prediction_step(self, model, inputs, prediction_loss_only):
                return None
        """), "train.py": "from trainer import MyTrainer\n\nif __name__ == '__main__':\n    MyTrainer().train()\n"})
    role = model.role("trainer.MyTrainer.compute_loss")
    assert role.kind == "per_step"
    assert role._replace(name="compute_loss").describe() == (
        "`compute_loss` runs every step: `Trainer.compute_loss` override, called by the HF Trainer step")
    assert _kind(model, "trainer.MyTrainer.create_optimizer") == "setup"
    assert _kind(model, "trainer.MyTrainer.prediction_step") == "once"


def test_a_train_one_step_cell_construct_is_per_step_not_per_forward():
    model = _model({"net.py": textwrap.dedent("""
        from mindspore import nn


        class Step(nn.TrainOneStepCell):
            def construct(self, x, y):
                return self.network(x, y)


        class Net(nn.Cell):
            def construct(self, x):
                return x
        """)})
    assert _kind(model, "net.Step.construct") == "per_step"
    assert _kind(model, "net.Net.construct") == "per_forward"


def test_named_load_functions_run_at_load_time():
    model = _model({"layers.py": HEAD + textwrap.dedent("""
        def weight_loader(param, loaded):
            param.data.copy_(loaded)


        def shard(param):
            return param
        """)})
    assert _kind(model, "layers.weight_loader") == "load"
    assert _kind(model, "layers.shard") is None  # a library (no entry point): unknown, not unreached


# ----------------------------------------------------------------------------- unreached and offline
def test_a_module_no_entry_imports_is_unreached():
    model = _model({
        "train_sft.py": "from trainers.sft import SFT\n\nif __name__ == '__main__':\n    SFT().fit(None, [])\n",
        "trainers/__init__.py": "",
        "trainers/sft.py": HEAD + "class SFT:\n    def fit(self, model, loader):\n" + textwrap.indent(LOOP, "    "),
        "trainers/distill.py": HEAD + "class Distill:\n    def fit(self, model, loader):\n        pass\n"})
    assert _kind(model, "trainers.sft.SFT.fit") == "once"
    role = model.role("trainers.distill.Distill.fit")
    assert role.kind == "unreached" and role.reason.describe() == "no entry point imports `trainers/distill.py`"


def test_a_lazy_package_reaches_the_modules_below_it():
    model = _model({
        "run.py": "import lib\n\nif __name__ == '__main__':\n    lib.go()\n",
        "lib/__init__.py": "import importlib\n\n\ndef go():\n    importlib.import_module('lib.models.net')\n",
        "lib/models/__init__.py": "",
        "lib/models/net.py": HEAD + "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"})
    assert _kind(model, "lib.models.net.Net.forward") == "per_forward"


def test_tests_and_tools_are_offline():
    model = _model({
        "train.py": HEAD + "def main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n",
        "tests/test_train.py": "from train import main\n\n\ndef test_main():\n    main()\n"})
    assert _kind(model, "tests.test_train.test_main") == "offline"
    assert _kind(model, "train.main") == "once"  # (the entry reaches it first)


# ----------------------------------------------------------------------------- the engine's policy
SHUFFLE = ("    b, c, h, w = x.size()\n    x = x.view(b, 2, c // 2, h, w)\n    x = torch.transpose(x, 1, 2)\n"
           "    x = x.contiguous()\n    return x.view(b, c, h, w)\n")
UNREACHED_PROJECT = {  # ASC101 on line 9 (`shuffle`, which main calls) and line 17 (`old_shuffle`, nothing calls)
    "train.py": HEAD + "\n\ndef shuffle(x):\n" + SHUFFLE + "\n\ndef old_shuffle(x):\n" + SHUFFLE +
                "\n\ndef main(x):\n    return shuffle(x)\n\n\nif __name__ == '__main__':\n    main(None)\n",
    "pyproject.toml": "[tool.ascend-lint]\n",
}


def _write(root: Path, files: Dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _run(root: Path, capsys, monkeypatch, *args: str) -> str:
    monkeypatch.chdir(root)
    main(["check", "--no-cache", "--select", "ASC101", *args, "."])
    return capsys.readouterr().out


def test_findings_in_unreached_code_are_dropped_by_default_and_noted_in_preview(tmp_path, capsys, monkeypatch):
    _write(tmp_path, UNREACHED_PROJECT)
    default = _run(tmp_path, capsys, monkeypatch)
    assert "train.py:9:" in default and "train.py:17:" not in default
    preview = _run(tmp_path, capsys, monkeypatch, "--preview")
    assert "train.py:17:" in preview and "(reached from nothing: nothing calls it)" in preview


def test_a_rule_may_opt_out_of_the_policy(tmp_path, capsys, monkeypatch):
    from ascend_lint.registry import load_registry
    rule = load_registry().rules["ASC101"]
    monkeypatch.setattr(rule, "silent_where_unreached", False)
    _write(tmp_path, UNREACHED_PROJECT)
    assert "train.py:17:" in _run(tmp_path, capsys, monkeypatch)


def test_a_single_buffer_has_no_roles_and_nothing_is_dropped(capsys, monkeypatch):
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(UNREACHED_PROJECT["train.py"].encode())))
    main(["check", "--no-cache", "--isolated", "--select", "ASC101", "-"])
    assert ":17:" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the summary's new facts
def test_the_summary_keeps_module_calls_passes_and_attributes():
    summary = light_summary(textwrap.dedent("""
        from helpers import build, loss_fn, Net


        class Holder:
            def __init__(self, net: Net):
                self.net = net
                self.other = Net()


        runner(loss_fn=loss_fn)
        build()
        """))
    assert summary.module_calls == ("build",)
    assert [(p.callee, p.name, p.keyword) for p in summary.passes] == [("runner", "loss_fn", "loss_fn")]
    assert summary.attributes == {"Holder": {"net": "Net", "other": "Net"}}
    assert Summary.from_tuple(summary.to_tuple()) == summary


@pytest.mark.parametrize("field", [14, 15, 16, 17])
def test_a_malformed_new_field_is_a_malformed_summary(field):
    row = list(light_summary("x = 1\n").to_tuple())
    row[field] = 7
    with pytest.raises((ValueError, TypeError)):
        Summary.from_tuple(row)


def test_a_module_named_in_a_string_is_reached_and_its_function_is_not_unreached():
    model = _model({
        "run.py": "import patches\n\nif __name__ == '__main__':\n    patches.apply()\n",
        "patches.py": "TABLE = {'megatron.attn': 'impl.fast_attention'}\n\n\ndef apply():\n    pass\n",
        "impl.py": HEAD + "def fast_attention(q):\n    return q\n\n\ndef never(q):\n    return q\n",
        "dead.py": HEAD + "def helper(q):\n    return q\n"})
    assert _kind(model, "impl.fast_attention") is None  # (named in a string: the model cannot say when it runs)
    assert _kind(model, "impl.never") == "unreached"
    assert _kind(model, "dead.helper") == "unreached"


def test_a_refreshed_model_equals_a_full_build_for_a_passed_loss_function():
    """The runner's first model is built from text facts; step loops come later (a refresh). A function passed
    to a project step runner depends on the runner's step loop: the refresh must find it too."""
    text = HEAD + textwrap.dedent("""
        def my_loss(a, b):
            return (a - b).mean()


        def run_steps(model, loader, optimizer, loss_fn):
            for x, y in loader:
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()


        def main(model, loader, optimizer):
            run_steps(model, loader, optimizer, loss_fn=my_loss)
        """)
    full = {"train.py": summarize_text(text, None, True, ast.parse)}
    refreshed = ProjectModel.build({"train.py": light_summary(text)}).with_tree_facts(full)
    assert _kind(refreshed, "train.my_loss") == "per_step"
    assert refreshed.tables() == ProjectModel.build(full).tables()
