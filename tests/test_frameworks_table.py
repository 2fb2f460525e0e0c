"""The framework entry-point/hook table (ascend_lint/analysis/frameworks.py) is well-formed data."""
from __future__ import annotations

import string

import pytest

from ascend_lint.analysis import frameworks as fw

IDENT = set(string.ascii_letters + string.digits + "_")


def _is_identifier(name: str) -> bool:
    return bool(name) and set(name) <= IDENT and not name[0].isdigit()


def _is_qualified(name: str) -> bool:
    parts = name.split(".")
    if parts[0] == "*":  # `*.last`: any receiver or module
        parts = parts[1:]
        return len(parts) == 1 and _is_identifier(parts[0])
    return len(parts) >= 2 and all(_is_identifier(p) for p in parts)


def _placeholders(text: str) -> set:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


RECORDS = fw.HOOKS + fw.PASSED_FUNCTIONS + fw.NAMED_ROLES


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r.framework}:{r.role}")
def test_every_record_has_a_known_role_a_reason_and_a_source(record):
    assert record.role in fw.ROLES
    assert record.framework and record.source.strip()
    assert _placeholders(record.reason) <= {"name", "base"}
    assert record.reason.format(name="fn", base="Base")  # formats without a KeyError


@pytest.mark.parametrize("hook_set", fw.HOOKS, ids=lambda r: f"{r.framework}:{r.role}")
def test_hook_sets_name_qualified_bases_and_identifier_methods(hook_set):
    assert hook_set.bases and all(_is_qualified(b) and not b.startswith("*") for b in hook_set.bases)
    assert hook_set.methods and all(_is_identifier(m) for m in hook_set.methods)
    assert len(set(hook_set.methods)) == len(hook_set.methods)
    assert all(_is_identifier(d) for d in hook_set.drivers)


def test_no_base_gives_one_method_two_roles():
    seen = {}
    for hook_set in fw.HOOKS:
        for base in hook_set.bases:
            for method in hook_set.methods:
                key = (base, method)
                assert seen.setdefault(key, hook_set.role) == hook_set.role, key


@pytest.mark.parametrize("record", fw.PASSED_FUNCTIONS, ids=lambda r: f"{r.framework}:{r.role}")
def test_passed_functions_name_calls_and_arguments(record):
    assert record.calls and all(_is_qualified(c) for c in record.calls)
    assert record.arguments
    for keyword, position in record.arguments:
        assert _is_identifier(keyword)
        assert position is None or (isinstance(position, int) and position >= 0)


@pytest.mark.parametrize("record", fw.NAMED_ROLES, ids=lambda r: r.framework)
def test_named_roles_are_identifiers(record):
    assert record.names and all(_is_identifier(n) for n in record.names)


@pytest.mark.parametrize("record", fw.DEVICE_ABSTRACTIONS, ids=lambda r: r.name)
def test_device_abstractions_say_how_to_reach_them_and_what_they_do(record):
    handles = record.accessors + record.objects + record.classes
    assert handles and all(_is_qualified(h) for h in handles)
    assert record.sync_methods or record.device_methods
    assert all(_is_identifier(m) for m in record.sync_methods + record.device_methods)
    assert record.source.strip()


def test_model_registries_name_registrars_and_builders():
    for record in fw.MODEL_REGISTRIES:
        assert (record.registrars or record.mappings) and record.builders and record.source.strip()
        assert all(_is_identifier(n) for n in record.registrars + record.builders + record.mappings)


def test_lookups_answer_the_issue_examples():
    role, reason = fw.hook_role("transformers.Trainer", "compute_loss")
    assert role == fw.PER_STEP and "`Trainer.compute_loss` override" in reason
    assert fw.hook_role("mindspore.train.Callback", "step_end")[0] == fw.PER_STEP
    assert fw.hook_role("mindspore.train.Callback", "epoch_end")[0] == fw.ONCE
    assert fw.hook_role("mmengine.hooks.Hook", "after_train_iter")[0] == fw.PER_STEP
    assert fw.hook_role("lightning.pytorch.LightningModule", "training_step")[0] == fw.PER_STEP
    assert fw.hook_role("mindspore.nn.TrainOneStepCell", "construct")[0] == fw.PER_STEP
    assert fw.hook_role("transformers.Trainer", "forward") is None
    megatron = [r for r in fw.passed_function_roles("megatron.core.pipeline_parallel.forward_backward_func")]
    assert megatron and megatron[0].arguments == (("forward_step_func", None),)
    assert [r.framework for r in fw.passed_function_roles("mindspore.data_sink")] == ["mindspore"]
    index = fw.device_abstraction_index()
    assert "synchronize" in index["deepspeed.accelerator.get_accelerator"].sync_methods
    assert "synchronize" in index["vllm.platforms.current_platform"].sync_methods
    assert "device" in index["accelerate.Accelerator"].device_methods


def test_call_patterns_match_the_last_name_only_with_a_star():
    assert fw.call_matches("*.pretrain", "megatron.training.pretrain")
    assert fw.call_matches("*.pretrain", "pretrain")
    assert not fw.call_matches("*.pretrain", "megatron.training.pretrain_gpt")
    assert not fw.call_matches("mindspore.data_sink", "data_sink")
