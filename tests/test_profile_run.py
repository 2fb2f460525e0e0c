"""`ascend-lint check --profile DIR` end to end on the generated profile of the training script
(tests/profile_fixtures.py): costs on findings, `--sort cost`, the profile-only rules, every output format,
`--profile-report`."""
from __future__ import annotations

import json

import pytest

import profile_fixtures as fx
from ascend_lint.analysis.records import PER_STEP, SETUP, Role
from ascend_lint.analysis.view import ProjectView
from ascend_lint.cli import main
from ascend_lint.registry import load_registry

PROFILE_ONLY = {
    ("ASC801", "models/net.py", fx.line_of(fx.NET_PY, "index_put")),
    ("ASC802", "train.py", fx.line_of(fx.TRAIN_PY, "h2d_blocking")),
    ("ASC803", "train.py", fx.line_of(fx.TRAIN_PY, "item")),
    ("ASC804", "train.py", fx.line_of(fx.TRAIN_PY, "h2d_async")),
    ("ASC805", "models/net.py", fx.line_of(fx.NET_PY, "dynamic")),
}


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("profiled")
    project = fx.write_project(str(base / "project"), fx.TORCH_PROJECT)
    return project, fx.write_torch_profile(str(base / "profiles"))


@pytest.fixture
def check(run_dirs, monkeypatch, capsys):
    project, profile = run_dirs
    monkeypatch.chdir(project)

    def run(*args: str, with_profile: bool = True):
        argv = ["check", ".", "--no-cache", "-j", "1"] + (["--profile", profile] if with_profile else []) + list(args)
        code = main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def rows(out: str):
    return json.loads(out)


def test_profile_only_findings_at_their_lines(check):
    code, out, _ = check("--select", "ASC8", "--output-format", "json")
    assert code == 1
    assert {(r["code"], r["filename"].lstrip("./"), r["location"]["row"]) for r in rows(out)} == PROFILE_ONLY
    for row in rows(out):
        assert row["cost"]["steps"] == 10 and row["cost"]["total_us"] > 0
        assert row["url"].endswith(f"#{row['code'].lower()}-{row['name']}")


def test_findings_ranked_by_cost(check):
    code, out, _ = check("--preview", "--sort", "cost", "--output-format", "json")
    found = rows(out)
    costs = [r["cost"]["total_us"] for r in found]
    assert costs == sorted(costs, reverse=True) and len(found) > len(PROFILE_ONLY)
    top, second = found[0], found[1]
    # the operator recompiled every step: 2.5 ms of online compilation per step on the host, the NPU waiting
    assert top["code"] == "ASC805" and top["location"]["row"] == fx.line_of(fx.NET_PY, "dynamic")
    assert top["cost"]["wait_us"] == pytest.approx(2500.0, abs=1.0)
    assert second["location"]["row"] == fx.line_of(fx.TRAIN_PY, "item")  # `loss.item()`: 450 us waited per step
    assert second["cost"]["wait_us"] == pytest.approx(450.0)
    # static findings get the measured cost of their lines too: ASC203 on the `.item()` line
    assert any(r["code"] == "ASC203" and r["cost"]["wait_us"] == pytest.approx(450.0) for r in found)
    # the default order is by path and line, costs or not
    _, by_path, _ = check("--preview", "--output-format", "json")
    assert [(r["filename"], r["location"]["row"]) for r in rows(by_path)] == sorted(
        (r["filename"], r["location"]["row"]) for r in rows(by_path))


def test_nine_in_ten_stacked_step_events_map_to_a_line(check):
    code, out, _ = check("--profile-report", "--output-format", "json")
    report = json.loads(out)
    assert code == 0 and report["mapped_share"] >= 0.9 and report["steps"] == list(range(3, 13))


@pytest.mark.parametrize("fmt,needle", [
    ("full", "[453 us/step]"), ("concise", "[453 us/step]"), ("json-lines", '"cost": {"device_us"'),
    ("github", "title=ASC803 device-to-host-read-per-step (453 us/step)"),
    ("gitlab", "measured: 453 us per step, device 3 us, host wait 450 us, in 10 profiled steps"),
    ("junit", "measured: 453 us per step"),
])
def test_every_output_format_carries_the_cost(check, fmt, needle):
    _, out, _ = check("--select", "ASC803", "--output-format", fmt)
    assert needle in out


def test_sarif_results_carry_the_cost_as_properties(check):
    _, out, _ = check("--select", "ASC8", "--output-format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert len(results) == 5
    item = next(r for r in results if r["ruleId"] == "ASC803")
    assert item["properties"]["costPerStepUs"] == pytest.approx(453.0, abs=1.0)
    assert item["properties"]["hostWaitUs"] == pytest.approx(450.0) and item["properties"]["profiledSteps"] == 10


def test_summary_counts_each_measured_line_once(check):
    _, out, _ = check("--preview", "--output-format", "concise")
    summary = next(line for line in out.splitlines() if line.startswith("Measured cost at the reported lines"))
    assert "of a 3.56 ms profiled step" in summary
    # ASC203 and ASC803 share the `.item()` line; ASC404 and ASC801 the mask assignment: counted once
    _, only_profile, _ = check("--select", "ASC8", "--output-format", "concise")
    assert "3.21 ms per step" in only_profile and "5 of 5 findings are on lines that issued" in only_profile
    assert "[not measured]" in out  # a finding whose lines issued no operator (`loss.backward()`: its callees)


def test_github_summary_table_has_a_cost_column(check, monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    from ascend_lint.reporters.github import markdown_table
    from ascend_lint.rule import Finding, MeasuredCost

    finding = Finding("train.py", 3, 1, 3, 5, "ASC803", "device-to-host-read-per-step", "m",
                      cost=MeasuredCost(3.0, 450.0, steps=10))
    table = markdown_table([finding])
    assert "| Cost per step |" in table and "| 453 us/step |" in table
    assert "Cost" not in markdown_table([Finding("train.py", 3, 1, 3, 5, "ASC803", "n", "m")])


def test_profile_rules_are_selected_ignored_and_noqa_like_any(check, run_dirs):
    _, out, _ = check("--select", "ASC8", "--ignore", "ASC801", "--output-format", "json")
    assert "ASC801" not in {r["code"] for r in rows(out)} and len(rows(out)) == 4
    _, out, _ = check("--select", "ASC8", "--output-format", "json", with_profile=False)
    assert rows(out) == []  # silent without a profile
    project = run_dirs[0]
    path = f"{project}/train.py"
    original = open(path).read()
    try:
        with open(path, "w") as handle:
            handle.write(original.replace("# @item", "# @item  # noqa: ASC803"))
        _, out, _ = check("--select", "ASC8", "--output-format", "json")
        assert "ASC803" not in {r["code"] for r in rows(out)}
    finally:
        with open(path, "w") as handle:
            handle.write(original)


def test_profile_rules_are_registered_with_docs(capsys):
    registry = load_registry()
    for code in ("ASC801", "ASC802", "ASC803", "ASC804", "ASC805"):
        rule = registry.get(code)
        assert rule is not None and rule.pack == "profile" and rule.profile_only
    assert main(["rule", "ASC801"]) == 0
    text = capsys.readouterr().out
    assert "aicpu-kernel-per-step" in text and "--profile DIR" in text and "## Use instead" in text


def test_without_a_profile_nothing_changes(check):
    _, out, _ = check("--preview", "--output-format", "json", with_profile=False)
    assert rows(out) and not any("cost" in r for r in rows(out))
    _, text, _ = check("--preview", "--output-format", "concise", with_profile=False)
    assert "us/step" not in text and "Measured cost" not in text


def test_profile_report_asks_the_model_for_roles(check, monkeypatch):
    asked = []

    def role(self, qualname):
        asked.append(qualname)
        return Role(SETUP, None, qualname) if qualname.endswith("Net.forward") else Role(PER_STEP, None, qualname)

    monkeypatch.setattr(ProjectView, "role", role)
    code, out, _ = check("--profile-report")
    assert code == 0
    assert "models.net.Net.forward: observed in the profile, steps 3-12; the model: setup" in out
    assert "train_step" not in out.split("per step:")[1]  # PER_STEP in the model: not listed
    assert "train.train_step" in asked and "models.net.Net.forward" in asked
    assert "train.train" not in asked and "<module>" not in out  # the step loop's owner, module code: outer frames
    code, out, _ = check("--profile-report", "--output-format", "json")
    listed = json.loads(out)["not_per_step_in_model"]
    assert [(r["qualname"], r["role"]) for r in listed] == [("models.net.Net.forward", "setup")]


def test_profile_report_without_roles_lists_the_function(check):
    _, out, _ = check("--profile-report", "--output-format", "json")
    for row in json.loads(out)["not_per_step_in_model"]:
        assert row["role"] not in ("per_step", "per_forward")


@pytest.mark.parametrize("args,message", [
    (("--sort", "cost"), "--sort cost needs --profile DIR"),
    (("--profile-report",), "--profile-report needs --profile DIR"),
])
def test_profile_flags_need_a_profile(check, args, message):
    code, _, err = check(*args, with_profile=False)
    assert code == 2 and message in err


def test_a_missing_profile_is_an_error_before_linting(check, tmp_path):
    code, out, err = check("--profile", str(tmp_path / "nothing"), with_profile=False)
    assert code == 2 and "--profile" in err and out == ""
    (tmp_path / "empty").mkdir()
    code, _, err = check("--profile", str(tmp_path / "empty"), with_profile=False)
    assert code == 2 and "error" in err
