"""One notion of "not training code" for every rule: tests, benchmarks, offline tools, weight init and
loading, host-side data code (`ascend_lint.analysis.training_code`, `FileContext.non_training_reason`)."""
from __future__ import annotations

import ast
import textwrap

import pytest

from ascend_lint.analysis.semantic import FileContext
from ascend_lint.analysis.training_code import class_reason, function_reason, path_reason
from conftest import REGISTRY, lint

# A view copy, a host-to-device copy in forward and a sync in a step loop: each rule speaks here.
TRAINING = """
import torch
class Net(torch.nn.Module):
    def forward(self, x):
        idx = torch.tensor([0, 2, 1]).npu()
        return x[idx] @ self.w.t().contiguous()
def train(model, loader, optimizer):
    for x in loader:
        loss = model(x)
        loss.backward()
        optimizer.step()
        torch.npu.synchronize()
"""
CODES = {"ASC101", "ASC201", "ASC202"}


def found(src: str, path: str = "train.py"):
    return {f.code for f in lint(src, path=path)} & CODES


@pytest.mark.parametrize("path", [
    "train.py", "models/net.py", "src/tools/train.py", "scripts/run.py", "mmseg/models/utils/shape_convert.py",
    "ops/merge_cells.py", "quantization/converter/model_converter.py", "checkpoint.py", "eval/test.py",
])
def test_training_paths(path):
    assert path_reason(path) is None
    assert found(TRAINING, path) == CODES


@pytest.mark.parametrize("path,reason", [
    ("tests/models/net.py", "test code"), ("pkg/unit_tests/ops/x.py", "test code"), ("test_net.py", "test code"),
    ("net_test.py", "test code"), ("conftest.py", "test code"), ("tests_extend/features/x.py", "test code"),
    ("benchmarks/cases.py", "a benchmark"), ("bench_attention.py", "a benchmark"), ("benchmark.py", "a benchmark"),
    ("tasks/checkpoint/convert_ckpt_deepseek4.py", "an offline conversion/export tool"),
    ("convert_hf2mg.py", "an offline conversion/export tool"), ("pth2onnx.py", "an offline conversion/export tool"),
    ("pytorch2onnx.py", "an offline conversion/export tool"), ("export.py", "an offline conversion/export tool"),
    ("fsdp2/checkpoint/merge_dcp_to_hf.py", "an offline conversion/export tool"),
    ("tools/moe_hf_param_merge_experts.py", "an offline conversion/export tool"),
    ("tools/ckpt_dequant/common_ckpt_dequant.py", "an offline conversion/export tool"),
    ("tools/model_converters/swin2mmseg.py", "an offline conversion/export tool"),
    ("convert/convert_from_mxnet.py", "an offline conversion/export tool"),
])
def test_non_training_paths(path, reason):
    assert path_reason(path) == reason
    assert path_reason(path.replace("/", "\\")) == reason
    assert not found(TRAINING, path)


def test_only_directories_below_the_project_root_count(tmp_path):
    """A project that lives in a directory named `tests` is still linted; its own `tests/` is not."""
    root = tmp_path / "tests" / "proj"
    (root / "tests").mkdir(parents=True)
    for rel in ("train.py", "tests/test_x.py"):
        (root / rel).write_text(textwrap.dedent(TRAINING))
    rules = REGISTRY.sorted_rules()
    from ascend_lint.config import Settings
    from ascend_lint.engine.linter import Linter
    linter = Linter(rules, Settings(preview=True, project_root=str(root)))
    assert {f.code for f in linter.lint_path(str(root / "train.py")).findings} >= CODES
    assert not linter.lint_path(str(root / "tests" / "test_x.py")).findings


@pytest.mark.parametrize("name,reason", [
    ("test_forward", "test code"), ("testSomething", "test code"), ("bench_attention", "a benchmark"),
    ("reset_parameters", "weight initialisation"), ("_init_weights", "weight initialisation"),
    ("init_weights", "weight initialisation"), ("_initialize_weights", "weight initialisation"),
    ("weights_init", "weight initialisation"), ("init_bert_params", "weight initialisation"),
    ("init_method_normal", "weight initialisation"),
    ("load_state_dict", "weight loading"), ("_load_from_state_dict", "weight loading"),
    ("load_checkpoint", "weight loading"), ("load_pretrained_weights", "weight loading"),
    ("load_tf_weights_in_bert", "weight loading"), ("load_hf_model", "weight loading"),
    ("convert_megatron_checkpoint", "checkpoint conversion/export"), ("convert_state_dict", "checkpoint conversion/export"),
    ("onnx_export", "checkpoint conversion/export"), ("convert_pth_to_onnx", "checkpoint conversion/export"),
    ("merge_lora_models", "checkpoint conversion/export"),
    ("collate_fn", "host-side data collation"), ("collater", "host-side data collation"),
])
def test_non_training_functions(name, reason):
    assert function_reason(name) == reason


@pytest.mark.parametrize("name", [
    "forward", "construct", "train_step", "__init__", "_init_layers", "init_group_params", "offload_params",
    "save_checkpoint", "convert_sync_batchnorm", "convert_tokens_to_ids", "merge_heads", "_merge_heads",
    "attention", "load_balancing_loss", "init_process_group",
])
def test_training_functions(name):
    assert function_reason(name) is None


def test_classes():
    assert class_reason("TestAttention", []) == "test code"
    assert class_reason("DataCollatorForSeq2Seq", []) == "host-side data code"
    assert class_reason("ImageNetDataset", []) == "host-side data code"
    assert class_reason("Pairs", ["torch.utils.data.Dataset"]) == "host-side data code"
    assert class_reason("Attention", ["torch.nn.Module"]) is None
    assert class_reason("Tester", []) == "test code"  # (a name is a name)


def test_enclosing_function_or_class_silences_every_rule():
    for wrapper in ("def _init_weights(self):\n", "def load_state_dict(self, sd):\n",
                    "def collate_fn(batch):\n", "def test_layout():\n"):
        src = "import torch_npu\n" + wrapper + "    y = x @ w.t().contiguous()\n"
        assert not found(src), wrapper
        assert found(src.replace(wrapper.split("(")[0][4:], "layout"))
    dataset = "import torch, torch_npu\nfrom torch.utils.data import Dataset\nclass Pairs(Dataset):\n" \
              "    def __getitem__(self, i):\n        return self.x[i] @ self.w.t().contiguous()\n"
    assert not found(dataset)
    assert found(dataset.replace("(Dataset)", "(torch.nn.Module)"))


def test_findings_reported_after_the_walk_use_the_enclosing_definition():
    """File-level rules report in `end_file`, when the walk has left the function: the position decides."""
    src = """
    import torch
    def test_reference(model):
        return torch.optim.Adam(model.parameters())
    def make(model):
        return torch.optim.SGD(model.parameters(), lr=0.1)
    """
    messages = [f.message for f in lint(src, select=["ASC301"], target="npu")]
    assert len(messages) == 1 and "SGD" in messages[0]


def test_reason_query():
    src = "import torch\nclass TestNet:\n    def helper(self):\n        pass\ndef train():\n    pass\n"
    tree = ast.parse(src)
    ctx = FileContext("models/net.py", src, tree)
    helper = tree.body[1].body[0].body[0]
    assert ctx.non_training_reason(helper) == "test code"
    assert ctx.non_training_reason(tree.body[2].body[0]) is None
    assert not ctx.in_non_training_code()  # at module level of a training file
    assert FileContext("tests/x.py", src, tree).non_training_reason() == "test code"


def test_a_rule_may_apply_to_non_training_code():
    assert all(isinstance(r.training_code_only, bool) for r in REGISTRY.sorted_rules())


def test_a_test_function_the_file_calls_itself_is_training_code():
    """Model-zoo scripts name their training function `test_train(cfg)` and call it from main: pytest
    never runs a test that its own file calls."""
    src = """
    import torch
    def test_train(model, loader, optimizer):
        for x in loader:
            loss = model(x)
            loss.backward()
            optimizer.step()
            torch.npu.synchronize()
    def main():
        test_train(*build())
    """
    assert found(src) == {"ASC202"}
    assert not found(src.replace("test_train(*build())", "pass"))



def test_a_test_function_run_from_the_main_block_stays_test_code():
    src = """
    import torch
    def test_op(model, loader, optimizer):
        for x in loader:
            loss = model(x)
            loss.backward()
            optimizer.step()
            torch.npu.synchronize()
    if __name__ == "__main__":
        test_op(*build())
    """
    assert not found(src)
