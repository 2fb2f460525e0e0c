"""What is not training code: tests, benchmarks and offline tools, told apart by names (data, no rule).

The performance rules speak about code that runs while a model trains. Code that runs once, off the
training path or on the host -- a unit test, a benchmark, a checkpoint converter, a weight-init or
weight-loading function, a data collator -- is not reported: a finding there is noise a user silences.

The signals are names, decided on the tuning corpora (docs/precision.md):
- the file path (relative to the project root): `test_*.py`, `*_test.py`, `conftest.py`, `bench*.py`,
  directories such as `tests/` or `benchmarks/`, and conversion/export scripts (`convert_ckpt_*.py`,
  `pth2onnx.py`, `merge_dcp_to_hf.py`, directories `convert/`, `model_converters/`, `export/`);
- an enclosing function or class: `test*` functions (unless the file calls them itself: model-zoo
  scripts name their training function `test_train`), `bench*` functions, `Test*` classes, weight initialisation
  (`reset_parameters`, `_init_weights`, `init_weights`, ...), weight loading (`load_state_dict`,
  `load_checkpoint`, `load_pretrained_weights`, ...), checkpoint conversion / export
  (`convert_*_checkpoint`, `export_onnx`, ...), data collation (`collate_fn`, `*Collator`) and datasets
  (`*Dataset` classes, subclasses of `torch.utils.data.Dataset`).
What a file does (e.g. "loads and saves state dicts, runs no step") was tried as a signal and rejected:
on the tuning corpora it also matched training entry points and checkpoint utilities of trainers.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

# Shown in the docs of every rule that is silent there (one description, one place).
NOT_TRAINING_CODE = (
    "Code that is not training code is not reported: tests and benchmarks (`test_*.py`, `*_test.py`, "
    "`conftest.py`, `bench*.py`, `tests/` and `benchmarks/` directories, `test*` functions that the file "
    "does not call itself, `bench*` functions, `Test*` classes), offline tools (checkpoint conversion, export and merge scripts such as "
    "`convert_ckpt_*.py` or `pth2onnx.py`), weight initialisation and loading functions "
    "(`reset_parameters`, `_init_weights`, `load_state_dict`, ...), and host-side data code (collate "
    "functions, `*Collator` and `*Dataset` classes)."
)

TEST_DIRS = frozenset({"test", "tests", "testing", "unit_test", "unit_tests", "unittests", "tests_extend"})
BENCH_DIRS = frozenset({"bench", "benches", "benchmark", "benchmarks", "benchmarking"})
TOOL_DIRS = frozenset({"convert", "conversion", "converters", "convertors", "model_converters", "export",
                       "exporters"})
_TEST_FILE = re.compile(r"^(?:test_\w*|\w+_test|conftest|tests|testing_utils)\.pyi?$")
_BENCH_FILE = re.compile(r"^bench", re.IGNORECASE)
# Conversion / export / merge scripts: named for it, or a model-format pair (`pth2onnx`, `mcore2hf`).
_TOOL_FILE = re.compile(
    r"^(?:convert|conversion|export|average_checkpoints|avg_checkpoints|pth2|pthtar2|pytorch2|onnx)"
    r"|(?:^|_|2)(?:onnx|mindir)(?:_|\.|$)"
    r"|(?:ckpt|checkpoint|weights?|hf|mg|mcore|dcp|lora|safetensors?|params?)_?(?:convert|conversion|merge|dequant)"
    r"|(?:convert|conversion|merge|export|dequant)_(?:\w+_)?(?:ckpt|checkpoints?|weights?|hf|mg|mcore|dcp|lora"
    r"|safetensors?|params?|models?|mp_partitions)(?:_|\.|$)",
    re.IGNORECASE,
)
_WEIGHT_INIT_FUNC = re.compile(
    r"^_*(?:reset_parameters|(?:re)?init(?:iali[sz]e)?_(?:\w+_)?weights?|init(?:iali[sz]e)?_(?:bert_)?param(?:eter)?s"
    r"|\w*weights?_init\w*|init_method\w*|zero_init\w*)$",
    re.IGNORECASE,
)
_WEIGHT_LOAD_FUNC = re.compile(
    r"^_*(?!\w*offload)(?:\w*load\w*(?:weights?|checkpoint|ckpt|state_dict|pretrained)\w*|load_hf\w*)$",
    re.IGNORECASE,
)
_CONVERT_FUNC = re.compile(
    r"^_*(?:convert|export|merge)_\w*?(?:weights?|checkpoint|ckpt|state_dict|hf|mg|mcore|megatron|lora|onnx"
    r"|mindir|safetensors?|to_pytorch|to_mindspore)"
    r"|^_*(?:\w+_)?(?:onnx|mindir)_?export\w*$|^_*(?:run|model)_export$",
    re.IGNORECASE,
)
_DATA_CLASS = re.compile(r"(?:Dataset|Collat(?:or|er)\w*)$")
DATASET_BASES = ("torch.utils.data.Dataset", "torch.utils.data.IterableDataset",
                 "torch.utils.data.dataset.Dataset", "torch.utils.data.dataset.IterableDataset")


def path_reason(rel_path: str) -> Optional[str]:
    """Why the file at `rel_path` (relative to the project root, `/`-separated) is not training code."""
    parts = [p for p in rel_path.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if not parts:
        return None
    base, dirs = parts[-1], parts[:-1]
    if _TEST_FILE.match(base) or any(d in TEST_DIRS for d in dirs):
        return "test code"
    if _BENCH_FILE.match(base) or any(d in BENCH_DIRS for d in dirs):
        return "a benchmark"
    if _TOOL_FILE.search(base.rsplit(".", 1)[0]) or any(d in TOOL_DIRS for d in dirs):
        return "an offline conversion/export tool"
    return None


def function_reason(name: str) -> Optional[str]:
    """Why a function named `name` is not training code."""
    lower = name.lower()
    if lower.startswith("test"):
        return "test code"
    if lower.startswith("bench"):
        return "a benchmark"
    if _WEIGHT_INIT_FUNC.match(name):
        return "weight initialisation"
    if _WEIGHT_LOAD_FUNC.match(name):
        return "weight loading"
    if _CONVERT_FUNC.search(name):
        return "checkpoint conversion/export"
    if "collat" in lower:
        return "host-side data collation"
    return None


def class_reason(name: str, base_names: Iterable[Optional[str]]) -> Optional[str]:
    """Why a class named `name` with bases `base_names` (qualified where known) is not training code."""
    if name.startswith("Test"):
        return "test code"
    bases = [b for b in base_names if b]
    if _DATA_CLASS.search(name) or any(b in DATASET_BASES or _DATA_CLASS.search(b) for b in bases):
        return "host-side data code"
    return None
