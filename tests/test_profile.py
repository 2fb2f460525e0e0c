"""The Ascend profile reader on generated profiles (tests/profile_fixtures.py), good and broken."""
from __future__ import annotations

import io
import json
import os
import random
import shutil

import pytest

import profile_fixtures as fx
from ascend_lint.profile import PATTERNS, PROFILE_SCHEMA, read_profile
from ascend_lint.profile import jsonstream
from ascend_lint.profile.stacks import ProjectPaths, parse_call_stack, parse_frame
from ascend_lint.profile.trace import to_ns

OUTPUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("torch")
    project = fx.write_project(str(base / "project"), fx.TORCH_PROJECT)
    root = fx.write_torch_profile(str(base / "profiles"))
    return project, root, read_profile(root, project_root=project)


def at(source: str, marker: str) -> int:
    return fx.line_of(source, marker)


# -- the training script's profile -------------------------------------------------------------------
def test_reads_the_torch_npu_exports(torch_run):
    _, root, profile = torch_run
    assert profile.ok and profile.schema == PROFILE_SCHEMA
    assert profile.framework == "torch_npu"
    assert profile.versions == {"torch_npu_version": "2.1.0.post10", "cann_version": "8.0.RC3"}
    assert set(profile.files) == {"trace_view.json", "kernel_details.csv", "operator_details.csv",
                                  "step_trace_time.csv", "op_statistic.csv", "api_statistic.csv"}
    assert profile.step_numbers == tuple(range(3, 13))
    assert [t.step for t in profile.step_times] == list(range(3, 13))
    assert {s.op_type for s in profile.op_statistics} >= {"MatMul", "IndexPutV2"}
    assert any(a.name == "aclopCompileAndExecute" and a.count == 10 for a in profile.api_statistics)
    assert not [d for d in profile.diagnostics if d.severity != "info"]


def test_nine_in_ten_stacked_events_of_the_steps_map_to_a_line(torch_run):
    mapping = torch_run[2].mapping
    assert mapping.step_events_with_stack > 100
    assert mapping.step_share >= 0.9
    # the data loader's stack is all library code: those events carry a stack that maps nowhere
    assert mapping.step_events_mapped < mapping.step_events_with_stack


def test_profile_only_patterns_at_their_lines(torch_run):
    found = {(o.code, o.path, o.line) for o in torch_run[2].observations}
    assert found == {
        ("ASC801", "models/net.py", at(fx.NET_PY, "index_put")),
        ("ASC802", "train.py", at(fx.TRAIN_PY, "h2d_blocking")),
        ("ASC803", "train.py", at(fx.TRAIN_PY, "item")),
        ("ASC804", "train.py", at(fx.TRAIN_PY, "h2d_async")),
        ("ASC805", "models/net.py", at(fx.NET_PY, "dynamic")),
    }


def test_observation_facts_and_messages(torch_run):
    by_code = {o.code: o for o in torch_run[2].observations}
    aicpu = by_code["ASC801"]
    assert aicpu.facts["op_types"] == ("IndexPutV2",)
    assert "torch.where" in aicpu.message and aicpu.cost.device_us == pytest.approx(200.0)
    assert aicpu.steps == tuple(range(3, 13)) and aicpu.function == "forward"
    assert by_code["ASC803"].cost.wait_us == pytest.approx(450.0)
    assert by_code["ASC802"].cost.wait_us == pytest.approx(30.0)
    recompile = by_code["ASC805"]
    assert recompile.facts["input_shapes"] == 5 and recompile.facts["steps_seen"] == 9
    assert "set_compile_mode(jit_compile=False)" in recompile.message
    for observation in by_code.values():
        assert observation.name == PATTERNS[observation.code].name


def test_aicpu_type_and_dtypes_come_from_kernel_details(small_run):
    project, root = small_run
    path = os.path.join(root, OUTPUT, "kernel_details.csv")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("Accelerator Core", "Task Type")
                     .replace(",IndexPutV2,AI_CPU,", ",Mul,AI_CPU,").replace("FLOAT;BOOL;FLOAT", "INT16;INT16"))
    aicpu = [o for o in read_profile(root, project_root=project).observations if o.code == "ASC801"]
    assert aicpu[0].facts["op_types"] == ("Mul",)
    assert "cast the int16 inputs" in aicpu[0].message


def test_line_costs_per_step(torch_run):
    costs = torch_run[2].line_costs
    fc = costs[("models/net.py", at(fx.NET_PY, "fc"))]
    # forward MatMul (50 us) plus the backward MatMul its fwdbwd flow links back to it (80 us)
    assert fc.self_cost.device_us == pytest.approx(130.0)
    assert fc.calls_per_step == pytest.approx(4.0)  # aten::linear, aten::addmm and the two backward operators
    forward_call = costs[("train.py", at(fx.TRAIN_PY, "forward"))]
    assert forward_call.self_cost.device_us == 0
    assert forward_call.total_cost.device_us == pytest.approx(50 + 80 + 5 + 200 + 8 + 18)
    item = costs[("train.py", at(fx.TRAIN_PY, "item"))]
    assert item.self_cost.wait_us == pytest.approx(450.0) and item.self_cost.host_us == pytest.approx(450.0)
    assert ("train.py", at(fx.TRAIN_PY, "init")) not in costs  # ran before the first profiled step
    assert not any(path == "tools/net.py" for path, _ in costs)
    ranked = torch_run[2].ranked_lines()
    assert ranked[0].path == "train.py" and ranked[0].line == at(fx.TRAIN_PY, "item")


def test_functions_per_step(torch_run):
    functions = torch_run[2].functions_per_step
    step = functions[("train.py", "train_step")]
    assert step.every_step and step.describe() == "observed in the profile, steps 3-12"
    evaluate = functions[("train.py", "evaluate")]
    assert evaluate.steps == (5,) and not evaluate.every_step
    assert functions[("models/net.py", "forward")].every_step


def test_without_a_project_frames_keep_their_recorded_paths(torch_run):
    profile = read_profile(torch_run[1])
    assert (f"{fx.RECORDED_ROOT}/train.py", at(fx.TRAIN_PY, "item")) in profile.line_costs
    assert not any(fx.LIB in path for path, _ in profile.line_costs)


def test_accepts_the_output_directory_a_trace_file_and_a_parent(torch_run, tmp_path):
    _, root, profile = torch_run
    project = torch_run[0]
    for path in (os.path.join(root, OUTPUT), os.path.join(root, OUTPUT, "trace_view.json")):
        again = read_profile(path, project_root=project)
        assert {(o.code, o.line) for o in again.observations} == {(o.code, o.line) for o in profile.observations}
    parent = tmp_path / "ranks"
    shutil.copytree(root, parent / "b_ascend_pt")
    shutil.copytree(root, parent / "a_ascend_pt")
    both = read_profile(str(parent), project_root=project)
    assert both.root.endswith("a_ascend_pt") and both.observations
    assert any("holds 2 profile directories" in d.message for d in both.diagnostics)


def test_device_time_from_operator_details_without_flows(tmp_path):
    project = fx.write_project(str(tmp_path / "project"), fx.TORCH_PROJECT)
    root = fx.write_torch_profile(str(tmp_path), with_flows=False)
    profile = read_profile(root, project_root=project)
    put = profile.line_costs[("models/net.py", at(fx.NET_PY, "index_put"))]
    assert put.self_cost.device_us > 0
    assert any("operator_details.csv" in d.source for d in profile.diagnostics)
    codes = {o.code for o in profile.observations}
    assert {"ASC802", "ASC803", "ASC805"} <= codes and "ASC801" not in codes  # AI CPU needs the task links


def test_profile_without_call_stacks_says_so(tmp_path):
    root = fx.write_torch_profile(str(tmp_path), with_stack=False, steps=range(1, 3))
    profile = read_profile(root, project_root=str(tmp_path))
    assert not profile.line_costs and not profile.observations
    assert any("with_stack=False" in d.message for d in profile.diagnostics)


def test_mindspore_profile(tmp_path):
    project = fx.write_project(str(tmp_path / "project"), fx.MS_PROJECT)
    root = fx.write_mindspore_profile(str(tmp_path))
    profile = read_profile(root, project_root=project)
    assert profile.framework == "mindspore" and profile.step_numbers == (1, 2, 3, 4, 5)
    assert profile.mapping.step_share == 1.0
    step_def = at(fx.MS_TRAIN_PY, "train_step")
    assert {(o.code, o.path, o.line) for o in profile.observations} == {("ASC803", "train_ms.py", step_def)}
    construct = profile.line_costs[("train_ms.py", at(fx.MS_TRAIN_PY, "construct"))]
    assert construct.function == "Net.construct" and construct.self_cost.device_us == pytest.approx(80.0)
    assert construct.line_is_def and profile.observations[0].facts["line_is_def"]
    assert profile.functions_per_step[("train_ms.py", "train_step")].every_step


# -- bad input ---------------------------------------------------------------------------------------
@pytest.fixture
def small_run(tmp_path):
    project = fx.write_project(str(tmp_path / "project"), fx.TORCH_PROJECT)
    root = fx.write_torch_profile(str(tmp_path / "profiles"), steps=range(1, 4))
    return project, root


def _trace(root: str) -> str:
    return os.path.join(root, OUTPUT, "trace_view.json")


def test_truncated_trace_keeps_the_events_before_the_cut(small_run):
    project, root = small_run
    path = _trace(root)
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) * 2 // 3])
    profile = read_profile(root, project_root=project)
    assert profile.ok and profile.line_costs
    assert any(d.source == "trace_view.json" and "cut short" in d.message for d in profile.diagnostics)


@pytest.mark.parametrize("content", [
    b"", b"   \n", b"\x00\x01\x02\xff\xfe" * 1000, b"not json at all", b"{}", b'{"traceEvents": 3}', b"[1, 2, ",
    b'[{"ph": "X", "name": 5, "ts": null}, {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": "x", '
    b'"args": []}, {"ph": "s", "cat": "async_npu", "id": [1], "ts": {}}, "text", 7, {"ph": "M"}]',
    bytes(random.Random(7).getrandbits(8) for _ in range(5000)),
])
def test_broken_trace_never_raises(small_run, content):
    project, root = small_run
    with open(_trace(root), "wb") as handle:
        handle.write(content)
    profile = read_profile(root, project_root=project)
    assert isinstance(profile.diagnostics, tuple)
    assert any(d.source == "trace_view.json" for d in profile.diagnostics)


@pytest.mark.parametrize("seed", range(6))
def test_mutated_trace_never_raises(small_run, seed):
    project, root = small_run
    rng = random.Random(seed)
    with open(_trace(root), "rb") as handle:
        data = bytearray(handle.read())
    for _ in range(40):
        at_byte = rng.randrange(len(data))
        data[at_byte:at_byte + rng.randrange(1, 4)] = rng.choice([b"", b"x", b'"', b"}", b"{", b"-1", b"9" * 30])
    with open(_trace(root), "wb") as handle:
        handle.write(bytes(data))
    profile = read_profile(root, project_root=project)
    assert not any("bug" in d.message for d in profile.diagnostics)


def test_chrome_object_form(small_run):
    project, root = small_run
    with open(_trace(root), encoding="utf-8") as handle:
        events = json.load(handle)
    with open(_trace(root), "w", encoding="utf-8") as handle:
        json.dump({"displayTimeUnit": "ns", "otherData": {"x": [1, {"y": 2}]}, "traceEvents": events}, handle,
                  indent=1)
    profile = read_profile(root, project_root=project)
    assert {o.code for o in profile.observations} == {"ASC801", "ASC802", "ASC803", "ASC804", "ASC805"}


@pytest.mark.parametrize("name", ["kernel_details.csv", "operator_details.csv", "step_trace_time.csv",
                                  "op_statistic.csv", "api_statistic.csv"])
@pytest.mark.parametrize("content", [b"", b"a,b,c\n1,2,3\n", b"\x00\xff\x00junk\n\x00",
                                     b'Name,"Call Stack\n"unterminated'])
def test_broken_csv_never_raises(small_run, name, content):
    project, root = small_run
    with open(os.path.join(root, OUTPUT, name), "wb") as handle:
        handle.write(content)
    profile = read_profile(root, project_root=project)
    assert profile.ok
    assert {o.code for o in profile.observations} >= {"ASC802", "ASC803", "ASC805"}


def test_csv_without_a_needed_column_is_named(small_run):
    project, root = small_run
    with open(os.path.join(root, OUTPUT, "op_statistic.csv"), "w", encoding="utf-8") as handle:
        handle.write("OP Type,Count\nMatMul,3\n")
    profile = read_profile(root, project_root=project)
    assert any(d.source == "op_statistic.csv" and "'Core Type'" in d.message for d in profile.diagnostics)
    assert profile.op_statistics == ()


def test_missing_and_empty_directories(tmp_path):
    missing = read_profile(str(tmp_path / "nope"))
    assert not missing.ok and "no such profile directory" in missing.diagnostics[0].message
    (tmp_path / "empty_ascend_pt" / OUTPUT).mkdir(parents=True)
    empty = read_profile(str(tmp_path / "empty_ascend_pt"))
    assert not empty.ok and empty.framework == "torch_npu"
    unrelated = read_profile(str(tmp_path))
    assert not unrelated.ok


def test_unreadable_profiler_info(small_run):
    project, root = small_run
    with open(os.path.join(root, "profiler_info.json"), "wb") as handle:
        handle.write(b"\xff{{{")
    profile = read_profile(root, project_root=project)
    assert profile.ok and profile.versions == {}
    assert any("profiler_info.json" in d.source for d in profile.diagnostics)


# -- pieces ------------------------------------------------------------------------------------------
def _events(text: str, chunk: int, monkeypatch) -> list:
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)
    return list(jsonstream.iter_trace_events(io.BytesIO(text.encode("utf-8"))))


@pytest.mark.parametrize("chunk", [7, 64, 1 << 22])
def test_stream_matches_json_loads(monkeypatch, chunk):
    rng = random.Random(chunk)
    events = []
    for i in range(300):
        events.append({"ph": rng.choice("XsfM"), "name": rng.choice(["a}, {b", "é€😀", "x\\\"y", "plain"]) + str(i),
                       "ts": f"{rng.randrange(10**15)}.{rng.randrange(1000):03d}", "dur": rng.random(),
                       "args": {"Call stack": "a.py(1): f;\r\nb.py(2): g",
                                "nested": {"deep": [1, {"k": "}, {"}, {"l": 2}]}}})
    for separators in ((", ", ": "), (",", ":")):
        text = json.dumps(events, ensure_ascii=False, separators=separators)
        assert _events(text, chunk, monkeypatch) == events
    assert _events(json.dumps({"traceEvents": events}), chunk, monkeypatch) == events


def test_stream_reports_where_the_text_breaks():
    with pytest.raises(jsonstream.TraceFormatError) as error:
        list(jsonstream.iter_trace_events(io.BytesIO(b'[{"a": 1}, {"b": }]')))
    assert error.value.offset > 0


def test_frames_and_call_stacks():
    assert parse_frame("/a/b/train.py(12): train_step") == ("/a/b/train.py", 12, "train_step", False)
    assert parse_frame("train_ms.py(14):nn.Cell.Net.construct", line_is_def=True).function == "nn.Cell.Net.construct"
    assert parse_frame("C:\\proj (copy)\\t.py(3): <module>").file == "C:\\proj (copy)\\t.py"
    assert parse_frame("<built-in method item of Tensor object at 0x7f>") is None
    assert parse_frame("<string>(1): <module>") is None
    stack = parse_call_stack("x.py(1): f;\r\ny.py(2): g;\r\nz.py(3): h")
    assert [f.file for f in stack] == ["x.py", "y.py", "z.py"]
    assert parse_call_stack("x.py(1): f;\\r\\ny.py(2): g") == parse_call_stack("x.py(1): f;y.py(2): g")


def test_project_paths_by_longest_suffix():
    paths = ProjectPaths(["train.py", "models/net.py", "tools/net.py", "a/b/utils.py", "c/b/utils.py"])
    assert paths.resolve("/home/ci/proj/models/net.py") == "models/net.py"
    assert paths.resolve("/home/ci/proj/train.py") == "train.py"
    assert paths.resolve("/elsewhere/net.py") is None  # models/ or tools/: ambiguous
    assert paths.resolve("/x/a/b/utils.py") == "a/b/utils.py"
    assert paths.resolve("/x/b/utils.py") is None
    assert paths.resolve("C:\\work\\proj\\models\\net.py") == "models/net.py"
    assert paths.resolve(f"{fx.LIB}/train.py") is None
    assert paths.resolve("/usr/lib/python3.10/train.py") is None
    assert paths.resolve("") is None


@pytest.mark.parametrize("text,ns", [("1700000000123.456", 1700000000123456), ("12.5", 12500), ("7", 7000),
                                     ("0.001", 1), (1.5, 1500), (3, 3000), ("88.250\t", 88250), ("-2.5", -2500)])
def test_timestamps(text, ns):
    assert to_ns(text) == ns


def test_pattern_docs_are_complete():
    assert sorted(PATTERNS) == ["ASC801", "ASC802", "ASC803", "ASC804", "ASC805"]
    for pattern in PATTERNS.values():
        assert pattern.docs.what and pattern.docs.why and pattern.docs.source and pattern.docs.summary
