"""The GitHub Action (action.yml): its structure and wiring (inputs, outputs, cache steps), and its shell steps
run here with bash as the runner would run them (Actions themselves cannot run here)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
import yaml

ROOT = Path(__file__).parent.parent
BAD = "import torch, torch_npu\n\n\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
EXPRESSION_RE = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def steps() -> List[dict]:
    return action()["runs"]["steps"]


def step(step_id: str) -> dict:
    return next(s for s in steps() if s.get("id") == step_id)


def expressions(value) -> List[str]:
    """Every `${{ ... }}` expression in a value of action.yml (nested mappings and lists included)."""
    if isinstance(value, dict):
        return [e for v in value.values() for e in expressions(v)]
    if isinstance(value, list):
        return [e for v in value for e in expressions(v)]
    return EXPRESSION_RE.findall(str(value))


def bash() -> str:
    found = shutil.which("bash")
    if found is None:
        pytest.skip("needs bash")
    return found


def ascend_lint_exe() -> str:
    beside = Path(sys.executable).with_name("ascend-lint")
    return str(beside) if beside.exists() else (shutil.which("ascend-lint") or "ascend-lint")


def run_script(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, RUNNER_TEMP=str(cwd), **env)
    full.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([bash(), "-c", script], cwd=str(cwd), env=full, capture_output=True, text=True, timeout=120)


def outputs(path: Path) -> Dict[str, str]:
    """name=value lines a step wrote to $GITHUB_OUTPUT."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# ------------------------------------------------------------------------------ structure and wiring
def test_inputs_and_outputs_are_declared_and_documented():
    spec = action()
    assert set(spec["inputs"]) == {"args", "src", "version", "report-format", "cache"}
    assert spec["inputs"]["report-format"]["default"] == "json" and spec["inputs"]["cache"]["default"] == "true"
    assert set(spec["outputs"]) == {"findings", "report"}
    for item in list(spec["inputs"].values()) + list(spec["outputs"].values()):
        assert item["description"].strip()
    ci = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    for name in list(spec["inputs"]) + list(spec["outputs"]):
        assert f"`{name}`" in ci, f"docs/ci.md does not document the action's {name!r}"


def test_outputs_are_wired_to_what_the_lint_step_writes():
    lint = step("lint")
    for name, item in action()["outputs"].items():
        assert item["value"] == f"${{{{ steps.lint.outputs.{name} }}}}"
        assert f'echo "{name}=' in lint["run"]  # written to $GITHUB_OUTPUT


def test_every_expression_names_a_declared_input_or_an_earlier_step_output():
    spec, seen = action(), {}
    for item in steps():
        for expr in expressions({k: v for k, v in item.items() if k != "run"}):
            for kind, name, *rest in re.findall(r"\b(inputs|steps)\.([\w-]+)(?:\.outputs\.([\w-]+))?", expr):
                if kind == "inputs":
                    assert name in spec["inputs"], expr
                else:
                    assert name in seen, f"{expr}: no earlier step {name!r}"
                    output = rest[0]
                    if seen[name].get("uses", "").startswith("actions/cache/restore@"):
                        assert output == "cache-hit", expr
                    else:
                        assert f"{output}=" in seen[name]["run"], f"{expr}: step {name!r} never writes it"
        if "id" in item:
            seen[item["id"]] = item


def test_run_scripts_take_inputs_only_from_the_environment():
    """An input expanded inside `run:` would be pasted into the script before bash reads it (injection)."""
    for item in steps():
        if "run" in item:
            assert not expressions(item["run"]), item["name"]


def test_the_install_is_cached_by_revision_and_interpreter_and_saved_before_linting():
    names = [s.get("uses", s.get("id", s["name"])).split("@")[0] for s in steps()]
    assert names == ["key", "actions/cache/restore", "Install ascend-lint", "actions/cache/save", "lint"]
    restore, save = steps()[1], steps()[3]
    for cache_step in (restore, save):
        assert cache_step["uses"].endswith("@v4")
        assert cache_step["with"] == {"path": "${{ steps.key.outputs.venv }}", "key": "${{ steps.key.outputs.key }}"}
        assert "inputs.cache == 'true'" in cache_step["if"]
    assert "steps.cache.outputs.cache-hit != 'true'" in save["if"]  # saved once, on a miss


# ------------------------------------------------------------------------------ the key step
def cache_key(tmp_path: Path, action_path: Path, version: str = "") -> Dict[str, str]:
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    proc = run_script(step("key")["run"], tmp_path, ACTION_PATH=str(action_path), INPUT_VERSION=version,
                      GITHUB_OUTPUT=str(out))
    assert proc.returncode == 0, proc.stderr
    return outputs(out)


def test_cache_key_follows_the_revision_the_version_and_the_python(tmp_path):
    rev = tmp_path / "action"
    (rev / "ascend_lint" / "__pycache__").mkdir(parents=True)
    (rev / "plugins").mkdir()
    for name, text in {"action.yml": "a", "pyproject.toml": "p", "ascend_lint/x.py": "1", "plugins/y.py": "2"}.items():
        (rev / name).write_text(text, encoding="utf-8")
    first = cache_key(tmp_path, rev)
    assert first["venv"] == f"{tmp_path}/ascend-lint-venv"
    assert re.fullmatch(rf"ascend-lint-{sys.platform}-py{sys.version_info[0]}\.{sys.version_info[1]}-[0-9a-f]{{16}}-"
                        r"[0-9a-f]{32}", first["key"]), first["key"]
    assert cache_key(tmp_path, rev) == first
    (rev / "ascend_lint" / "__pycache__" / "x.cpython.pyc").write_bytes(b"\0")
    assert cache_key(tmp_path, rev) == first  # byte code is not the revision
    assert cache_key(tmp_path, rev, version="0.2.0")["key"] != first["key"]
    (rev / "plugins" / "y.py").write_text("3", encoding="utf-8")
    assert cache_key(tmp_path, rev)["key"] != first["key"]
    assert "," not in first["key"] and len(first["key"]) < 512  # what actions/cache accepts


# ------------------------------------------------------------------------------ the install step (cache hit)
def test_a_restored_install_is_reused_without_pip(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"  # stands for the restored interpreter: this one, which imports ascend_lint
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    env_file = tmp_path / "github_env"
    proc = run_script(step_named("Install ascend-lint")["run"], tmp_path, VENV=str(venv), ACTION_PATH="/nonexistent",
                      INPUT_VERSION="", GITHUB_ENV=str(env_file))
    assert proc.returncode == 0, proc.stderr
    assert "using the cached install" in proc.stdout
    assert outputs(env_file) == {"ASCEND_LINT": f"{venv}/bin/ascend-lint", "ASCEND_LINT_PYTHON": f"{venv}/bin/python"}


def step_named(name: str) -> dict:
    return next(s for s in steps() if s["name"] == name)


# ------------------------------------------------------------------------------ the lint step
def run_lint(cwd: Path, args: str, src: str, report_format: str = "") -> subprocess.CompletedProcess:
    env = dict(ASCEND_LINT=ascend_lint_exe(), ASCEND_LINT_PYTHON=sys.executable, INPUT_ARGS=args, INPUT_SRC=src,
               GITHUB_OUTPUT=str(cwd / "github_output"))
    if report_format:
        env["INPUT_REPORT_FORMAT"] = report_format
    return run_script(step("lint")["run"], cwd, **env)


def annotated_files(stdout: str):
    return sorted(set(re.findall(r"^::\w+ file=([^,]+),", stdout, re.M)))


def test_action_takes_multi_line_and_quoted_args(tmp_path):
    for folder in ("my src", "vendored code", "other"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text(BAD, encoding="utf-8")
    args = "check\n  --no-cache\n  --extend-exclude 'vendored code'\n  --select \"ASC1\"\n"
    proc = run_lint(tmp_path, args, "'my src'\n'vendored code'\n")
    assert proc.returncode == 1, proc.stderr
    assert annotated_files(proc.stdout) == ["my src/m.py"]  # `other` not named, `vendored code` excluded
    assert not list(tmp_path.glob("ascend-lint-words.*"))  # its temporary file is removed
    assert outputs(tmp_path / "github_output")["findings"] == "1"


def test_action_rejects_an_unbalanced_quote_clearly(tmp_path):
    proc = run_lint(tmp_path, "check --select 'ASC1", ".")
    assert proc.returncode != 0 and "cannot split the 'args' input" in proc.stderr and "::" not in proc.stdout


def test_action_inputs_are_never_evaluated(tmp_path):
    (tmp_path / "m.py").write_text(BAD, encoding="utf-8")
    run_lint(tmp_path, "check --no-cache $(touch pwned) `touch pwned2` ${HOME}", "'$(touch pwned3)' *")
    assert not list(tmp_path.glob("pwned*"))


def count_in(report: Path, fmt: str) -> int:
    text = report.read_text(encoding="utf-8")
    if fmt == "sarif":
        return len(json.loads(text)["runs"][0]["results"])
    if fmt == "junit":
        return text.count("<failure ")
    if fmt == "json-lines":
        return len(text.splitlines())
    return len(json.loads(text))


@pytest.mark.parametrize("fmt", ["json", "json-lines", "sarif", "gitlab", "junit"])
def test_outputs_count_the_findings_and_name_the_report(tmp_path, fmt):
    (tmp_path / "a.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "b.py").write_text(BAD + BAD.splitlines()[-1].replace("y =", "z =") + "\n", encoding="utf-8")
    proc = run_lint(tmp_path, "check --isolated", ".", report_format=fmt)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("::warning file=a.py,line=4,col=5,")  # the annotations still reach the log
    assert annotated_files(proc.stdout) == ["a.py", "b.py"]
    out = outputs(tmp_path / "github_output")
    report = Path(out["report"])
    assert report.parent == tmp_path / "ascend-lint" and report.is_file()
    assert out["findings"] == "3" and count_in(report, fmt) == 3


def test_a_clean_run_outputs_zero_and_passes(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\n", encoding="utf-8")
    proc = run_lint(tmp_path, "check --isolated", ".")
    assert proc.returncode == 0, proc.stderr
    out = outputs(tmp_path / "github_output")
    assert out["findings"] == "0" and json.loads(Path(out["report"]).read_text(encoding="utf-8")) == []


def test_an_error_exits_2_without_outputs(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\n", encoding="utf-8")
    proc = run_lint(tmp_path, "check --isolated --select NOPE", ".")
    assert proc.returncode == 2 and "NOPE" in proc.stderr
    assert outputs(tmp_path / "github_output") == {}
    proc = run_lint(tmp_path, "check --isolated", ".", report_format="csv")
    assert proc.returncode == 2 and "report-format must be" in proc.stderr
