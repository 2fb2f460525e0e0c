"""The analysis layer's shape (issue #26): its modules import one way (no circle, nothing above the base
modules), its facts are typed, versioned records with a tuple form that survives JSON and marshal, and the
reasons rules quote are worded in one place."""
from __future__ import annotations

import ast
import json
import marshal
from pathlib import Path
from typing import Dict, Set

import pytest

from ascend_lint.analysis.model import ProjectModel
from ascend_lint.analysis.questions import NULL_VIEW, QUESTIONS, Dep, Deps, Question
from ascend_lint.analysis.records import (CALLED, DEF, IMPORT, PER_FORWARD, PER_STEP, STEP_CALL, STEP_LOOP, TRAINED,
                                          Call, Function, ModuleFacts, Place, Precision, Reason, Role, Summary)
from ascend_lint.analysis.summary import light_summary, summarize
from ascend_lint.analysis.textscan import share_rows, text_rows
from ascend_lint.analysis.view import ProjectView, replay

PACKAGE = Path(__file__).parent.parent / "ascend_lint" / "analysis"
BASE_MODULES = {"compat", "fileio", "rule", "astutil"}  # (ascend_lint/*.py the analysis layer may import)

TRAIN = """import torch
from utils import log_metrics


def main(model, loader, optimizer):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        log_metrics(loss)
"""
UTILS = """import torch


def log_metrics(loss):
    print(loss.item())
"""


def _imports() -> Dict[str, Set[str]]:
    """module -> the modules of the analysis package it imports; and, under '..', the others."""
    found: Dict[str, Set[str]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        deps: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif isinstance(node, ast.ImportFrom) and node.level == 2:
                deps.add(".." + (node.module or ""))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                deps.update(".." + n[len("ascend_lint."):] for n in names if n.startswith("ascend_lint"))
        found[path.stem] = deps
    return found


def test_the_analysis_package_imports_one_way():
    graph = _imports()
    outside = {d[2:].split(".")[0] for deps in graph.values() for d in deps if d.startswith("..")}
    assert outside <= BASE_MODULES  # (not engine/, fix/, pipeline/ or a face)
    done: Set[str] = set()

    def visit(module: str, path: tuple) -> None:
        assert module not in path, f"import circle: {' -> '.join(path + (module,))}"
        if module in done:
            return
        for dep in graph.get(module, ()):
            if not dep.startswith(".."):
                visit(dep, path + (module,))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert not any(d in graph["records"] for d in graph)  # the records import nothing of the package


def test_a_summary_survives_json_and_marshal():
    text = TRAIN + "\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return self.proj(x)\n"
    summary = summarize(ast.parse(text), text, None, light_summary(text))
    assert summary.steps and summary.defs["Net.forward"].calls == ("self.proj",)
    assert Summary.from_tuple(json.loads(json.dumps(summary.to_tuple()))) == summary
    rows = share_rows(text_rows(text), {})
    assert Summary.from_tuple(marshal.loads(marshal.dumps(rows))) == light_summary(text)
    assert summary.shape() == Summary.from_tuple(json.loads(json.dumps(summary.to_tuple()))).shape()


@pytest.mark.parametrize("change", [
    lambda row: [Summary.SCHEMA + 1] + row[1:],  # another version
    lambda row: row[:-1],  # a field missing
    lambda row: row[:2] + [[["torch", None, None, 0, 1]]] + row[3:],  # an import record short of a field
    lambda row: row[:3] + [[]] + row[4:],  # classes not a table
    lambda row: row[:1] + ["yes"] + row[2:],  # `light` not a bool
])
def test_a_malformed_or_foreign_summary_is_refused(change):
    row = json.loads(json.dumps(light_summary(TRAIN).to_tuple()))
    with pytest.raises((ValueError, TypeError)):
        Summary.from_tuple(change(row))


def test_equal_records_of_different_summaries_are_one_object():
    shared: dict = {}
    first, second = light_summary(TRAIN, shared), light_summary(TRAIN, shared)
    assert first == second and first is not second
    assert first.imports[0] is second.imports[0] and first.defs["main"] is second.defs["main"]


def test_a_function_knows_the_receivers_of_its_calls():
    calls = Function(1, 9, ("helper", "mod.run", "self.head.proj", "self.step")).call_sites()
    assert [c.receiver for c in calls] == ["name", "dotted", "self_attribute", "self_method"]
    assert calls[0] == Call("helper", "name")


def test_reasons_are_worded_in_one_place_and_lines_come_from_the_current_summaries():
    files = {"train.py": summarize(ast.parse(TRAIN), TRAIN), "utils.py": light_summary(UTILS)}
    model = ProjectModel.build(files)
    role = model.role("utils.log_metrics")
    assert role == Role(PER_STEP, Reason(STEP_CALL, (), Place("train.py", STEP_LOOP, 0)))
    assert role.reason.describe() == "the step loop in `train.py` calls it"  # (no line: not resolved)
    view = ProjectView(model, "utils", "utils.py", files.get)
    asked = view.role("utils.log_metrics")
    assert asked.reason.place.line == 6
    assert asked._replace(name="log_metrics").describe() == \
        "`log_metrics` runs every step: the step loop in `train.py:6` calls it"
    moved = {**files, "train.py": summarize(ast.parse("\n\n" + TRAIN), "\n\n" + TRAIN)}
    assert moved["train.py"].shape() == files["train.py"].shape()  # (the model stands)
    assert not replay(model, view.deps, moved.get) and replay(model, view.deps, files.get)


@pytest.mark.parametrize("reason, text", [
    (Reason(CALLED, ("Attention.forward",), Place("model.py", DEF, "Attention.forward", 40)),
     "`Attention.forward` in `model.py:40` calls it"),
    (Reason(CALLED, ("pkg.mod.f",)), "pkg.mod.f calls it"),
    (Reason("applies", cause=Reason("imports", ("torch_npu.contrib.transfer_to_npu",), Place("run.py", IMPORT, 0, 2))),
     "it applies it: `run.py:2` imports `torch_npu.contrib.transfer_to_npu`"),
    (Reason(TRAINED, ('`amp.initialize(opt_level="O1")`',), Place("train.py", "model", 0, 12)),
     '`amp.initialize(opt_level="O1")` in `train.py:12`'),
])
def test_reason_texts(reason, text):
    assert reason.describe() == text
    assert Reason.from_tuple(json.loads(json.dumps(reason))) == reason
    assert Role(PER_FORWARD, reason, "helper").describe() == f"`helper` (a hot path: {text})"


def test_deps_round_trip_and_a_malformed_or_foreign_entry_is_a_miss():
    reason = Reason(STEP_CALL, (), Place("train.py", STEP_LOOP, 0, 6))
    deps = Deps((Dep(Question("role", ("utils.f",)), Role(PER_STEP, reason)),
                 Dep(Question("module_facts", ("utils",)), ModuleFacts({"f": Role(PER_STEP, reason)}, {})),
                 Dep(Question("class_precision", ("net.Net",)), Precision("fp16", Reason(TRAINED, ("`.half()`",)))),
                 Dep(Question("config_default", ("hidden_act", None)), "silu"),
                 Dep(Question("migrated", ("utils",)), None)))
    stored = json.loads(json.dumps(deps.to_tuple()))
    assert Deps.load(stored) == deps and Deps.load([]) == Deps()
    assert Deps.load([Deps.SCHEMA + 1] + stored[1:]) is None
    assert Deps.load([Deps.SCHEMA, ["role", ["a", "b"], None]]) is None  # the wrong number of arguments
    assert Deps.load([Deps.SCHEMA, ["no_such_question", ["a"], None]]) is None
    assert Deps.load([Deps.SCHEMA, ["role", ["a"], ["per_step", ["no_such_kind", [], None, None, None], ""]]]) is None
    assert set(QUESTIONS) <= {name for name in dir(ProjectModel) if not name.startswith("_")}


def test_the_null_view_knows_nothing_and_records_nothing():
    assert NULL_VIEW.module_facts() == ModuleFacts({}, {}) and NULL_VIEW.role("x") is None
    assert NULL_VIEW.deps == Deps() and NULL_VIEW.migrated() is None
