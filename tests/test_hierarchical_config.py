"""Hierarchical configuration, as ruff's: the closest configuration to each file, `extend`, run-wide keys,
`--show-settings` / `--show-files`, the project root of nested configurations, the cache key."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_lint.cli import main
from ascend_lint.config import ConfigError, ConfigResolver, load_config, load_settings, rebase_pattern

from conftest import STEP_CALL, STEP_TRAIN, STEP_UTILS

BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
UTILS = STEP_UTILS
TRAIN = STEP_TRAIN.replace("{call}", STEP_CALL)


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write(root: Path, files: dict) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def reported(out: str) -> set:
    """(path, code) pairs of a `--output-format json` report."""
    return {(os.path.relpath(f["filename"]).replace(os.sep, "/"), f["code"]) for f in json.loads(out)}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository whose root configuration is extended by one model folder and ignored by another."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    return write(tmp_path, {
        ".git/HEAD": "ref: refs/heads/main\n",
        "pyproject.toml": '[tool.ascend-lint]\nextend-exclude = ["model_b/legacy/"]\n'
                          '[tool.ascend-lint.per-file-ignores]\n"model_b/tests/*" = ["ASC1"]\n',
        "model_a/pyproject.toml": '[tool.ascend-lint]\nignore = ["ASC101"]\nextend-exclude = ["gen/"]\n',
        "model_b/.ascend-lint.yaml": "extend: ../pyproject.toml\ntarget: npu\n",
        "model_a/train.py": BAD, "model_a/gen/g.py": BAD, "model_b/train.py": BAD, "model_b/tests/t.py": BAD,
        "model_b/legacy/l.py": BAD, "model_b/deep/legacy/kept.py": BAD, "tools/x.py": BAD,
    })


def test_the_closest_configuration_applies_to_each_file_from_the_root(repo, capsys):
    code, out, _ = run(capsys, "check", "--no-cache", "--output-format", "json")
    assert code == 1
    assert reported(out) == {("model_b/train.py", "ASC101"), ("model_b/deep/legacy/kept.py", "ASC101"),
                             ("tools/x.py", "ASC101")}


def test_a_file_list_from_the_root_uses_each_files_configuration(repo, capsys):
    """pre-commit's way: file names relative to the repository root."""
    code, out, _ = run(capsys, "check", "--no-cache", "--output-format", "json",
                       "model_a/train.py", "model_b/tests/t.py", "tools/x.py")
    assert reported(out) == {("tools/x.py", "ASC101")} and code == 1


def test_show_files_follows_each_directorys_excludes(repo, capsys):
    code, out, _ = run(capsys, "check", "--show-files")
    assert code == 0
    assert out.split() == ["model_a/train.py", "model_b/deep/legacy/kept.py", "model_b/tests/t.py",
                           "model_b/train.py", "tools/x.py"]


def test_command_line_flags_override_every_configuration(repo, capsys):
    code, out, _ = run(capsys, "check", "--no-cache", "--output-format", "json", "--select", "ASC000")
    assert code == 0 and json.loads(out) == []
    (repo / "model_a" / "pyproject.toml").write_text('[tool.ascend-lint]\nselect = ["ASC000"]\n')
    _, out, _ = run(capsys, "check", "--no-cache", "--output-format", "json", "--select", "ASC1", "model_a")
    assert reported(out) == {("model_a/train.py", "ASC101"), ("model_a/gen/g.py", "ASC101")}


def test_show_settings_names_where_each_value_came_from(repo, capsys):
    code, out, _ = run(capsys, "check", "--show-settings", "--ignore", "ASC2", "model_b/tests/t.py")
    assert code == 0
    lines = out.splitlines()
    root = str(repo)
    assert lines[1] == f'Settings path: "{os.path.join(root, "model_b", ".ascend-lint.yaml")}"'
    assert lines[2] == f'  extends: "{os.path.join(root, "pyproject.toml")}"'
    assert f'Project root: "{root}"' in lines
    by_key = {line.split(" = ")[0]: line for line in lines if " = " in line}
    assert by_key["target"].endswith(".ascend-lint.yaml:target")
    assert by_key["per-file-ignores"] == (f'per-file-ignores = {{"tests/*": ["ASC1"]}}  '
                                          f'# {os.path.join(root, "pyproject.toml")}:per-file-ignores')
    assert by_key["extend-exclude"].startswith('extend-exclude = ["/legacy/"]')
    assert by_key["ignore"] == 'ignore = ["ASC2"]  # command line'
    assert by_key["preview"] == "preview = false  # default"
    assert by_key["output-format"].endswith("# default  (run-wide)")
    _, out, _ = run(capsys, "check", "--show-settings", "model_a/train.py")
    assert f'Project root: "{os.path.join(root, "model_a")}"' in out  # a configuration of its own: its project
    assert "extends" not in out


def test_extend_adds_lists_merges_tables_and_replaces_the_rest(tmp_path):
    write(tmp_path, {
        "base.toml": '[tool.ascend-lint]\nextend-select = ["ASC001"]\nignore = ["ASC2"]\npreview = true\n'
                     '[tool.ascend-lint.rules.ASC401]\nmin-dim = 8\nalignment = 8\n'
                     '[tool.ascend-lint.per-file-ignores]\n"sub/gen/*" = ["ASC1"]\n"*.pyi" = ["ASC"]\n',
        "sub/.ascend-lint.yaml": "extend: ../base.toml\nextend-select: [ASC002]\nignore: [ASC3]\n"
                                 "rules: {ASC401: {min-dim: 32}}\n",
    })
    settings = load_config(str(tmp_path / "sub" / ".ascend-lint.yaml"))
    assert settings.extend_select == ["ASC001", "ASC002"] and settings.ignore == ["ASC3"] and settings.preview
    assert settings.rule_options == {"ASC401": {"min-dim": 32}}  # per rule, the extending file wins
    assert settings.per_file_ignores == {"gen/*": ["ASC1"], "*.pyi": ["ASC"]}  # still naming the same files
    assert settings.project_root == str(tmp_path / "sub")
    assert settings.origins["extend_select"].endswith("base.toml:extend-select + "
                                                      + str(tmp_path / "sub" / ".ascend-lint.yaml") + ":extend-select")


@pytest.mark.parametrize("pattern,expected", [
    ("a/gen/*", "gen/*"), ("*.pyi", "*.pyi"), ("build/", "build/"), ("other/x.py", "../other/x.py"),
    ("!a/keep.py", "!keep.py"), ("**/gen/*.py", "../**/gen/*.py"),
])
def test_patterns_of_an_extended_file_keep_naming_the_same_files(tmp_path, pattern, expected):
    assert rebase_pattern(pattern, str(tmp_path), str(tmp_path / "a")) == expected


def test_patterns_from_a_directory_above_still_apply(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {
        "pyproject.toml": '[tool.ascend-lint]\nextend-exclude = ["**/vendored/*"]\n'
                          '[tool.ascend-lint.per-file-ignores]\n"**/scripts/*" = ["ASC1"]\n',
        "pkg/.ascend-lint.yaml": "extend: ../pyproject.toml\n",
        "pkg/vendored/v.py": BAD, "pkg/scripts/s.py": BAD, "pkg/m.py": BAD,
    })
    _, out, _ = run(capsys, "check", "--no-cache", "--output-format", "json", "pkg")
    assert reported(out) == {("pkg/m.py", "ASC101")}


def test_extend_cycle_and_missing_file_are_clear_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"a/.ascend-lint.yaml": "extend: ../b/.ascend-lint.yaml\n",
                     "b/.ascend-lint.yaml": "extend: ../a/.ascend-lint.yaml\n", "a/x.py": BAD,
                     "c/.ascend-lint.yaml": "extend: ../nowhere.toml\n", "c/x.py": BAD,
                     "d/.ascend-lint.yaml": "extend: 3\n", "d/x.py": BAD,
                     "e/pyproject.toml": "[tool.other]\n", "e/f/.ascend-lint.yaml": "extend: ../pyproject.toml\n",
                     "e/f/x.py": BAD})
    code, out, err = run(capsys, "check", "a")
    assert code == 2 and "'extend' makes a cycle" in err and "Traceback" not in err
    assert err.count("\n") == 1 and out == ""
    code, _, err = run(capsys, "check", "c/x.py")
    assert code == 2 and "'extend' names '../nowhere.toml', which is not a file" in err
    assert "c/.ascend-lint.yaml" in err
    code, _, err = run(capsys, "check", "d")
    assert code == 2 and "'extend' must be the path of a configuration file" in err
    code, _, err = run(capsys, "check", "e/f")
    assert code == 2 and "which has no [tool.ascend-lint] table" in err


def test_config_and_isolated_apply_to_every_file(repo, capsys, tmp_path_factory):
    other = tmp_path_factory.mktemp("cfg") / "all.yaml"
    other.write_text("ignore: [ASC101]\n")
    assert run(capsys, "check", "--no-cache", "--config", str(other))[0] == 0
    _, out, _ = run(capsys, "check", "--no-cache", "--isolated", "--output-format", "json", "model_a")
    assert reported(out) == {("model_a/train.py", "ASC101"), ("model_a/gen/g.py", "ASC101")}


def test_run_wide_keys_come_from_the_runs_configuration(repo, capsys):
    (repo / "model_b" / ".ascend-lint.yaml").write_text("extend: ../pyproject.toml\noutput-format: json\n"
                                                        "fix: true\n")
    code, out, _ = run(capsys, "check", "--no-cache", "model_b/train.py")
    assert code == 1 and "model_b/train.py:2:5: ASC101" in out  # full text, nothing fixed
    assert (repo / "model_b" / "train.py").read_text() == BAD
    os.chdir(repo / "model_b")  # run from there: its configuration is the run's
    code, out, _ = run(capsys, "check", "--no-cache", "train.py")
    assert code == 1 and [f["code"] for f in json.loads(out)] == ["ASC101"]


def test_cached_findings_follow_the_files_configuration(repo, capsys):
    """Each configuration has its own run key: editing a nested configuration changes its files' results
    on a warm run, and files under different configurations share one cache directory."""
    assert reported(run(capsys, "check", "--output-format", "json")[1]) == {
        ("model_b/train.py", "ASC101"), ("model_b/deep/legacy/kept.py", "ASC101"), ("tools/x.py", "ASC101")}
    (repo / "model_a" / "pyproject.toml").write_text('[tool.ascend-lint]\nextend-exclude = ["gen/"]\n')
    assert ("model_a/train.py", "ASC101") in reported(run(capsys, "check", "--output-format", "json")[1])
    assert not (repo / "model_a" / ".ascend_lint_cache").exists() and (repo / ".ascend_lint_cache").is_dir()


def test_a_nested_configuration_that_extends_stays_in_the_outer_project(tmp_path, monkeypatch, capsys):
    """The step loop in the root's train.py makes a helper of pkg/ per-step; pkg's configuration extends
    the root's, so pkg is part of the root's project. Without `extend`, pkg is a project of its own."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"pyproject.toml": '[tool.ascend-lint]\npreview = true\nselect = ["ASC202"]\n',
                     "pkg/__init__.py": "",
                     "pkg/.ascend-lint.yaml": "extend: ../pyproject.toml\n", "pkg/utils.py": UTILS,
                     "train.py": TRAIN.format(module="pkg.utils")})
    code, out, _ = run(capsys, "check", "--output-format", "json", "pkg/utils.py")
    assert reported(out) == {("pkg/utils.py", "ASC202")}
    (tmp_path / "pkg" / ".ascend-lint.yaml").write_text("target: auto\n")
    code, out, _ = run(capsys, "check", "--output-format", "json", "pkg/utils.py")
    assert code == 0 and reported(out) == set()


def test_resolver_reads_each_configuration_once(repo, monkeypatch):
    from ascend_lint import config

    loads = []
    real = config.load_table
    monkeypatch.setattr(config, "load_table", lambda path: loads.append(path) or real(path))
    resolver = ConfigResolver(load_settings(None, False, str(repo)))
    first = resolver.for_path(str(repo / "model_b" / "train.py"))
    assert resolver.for_path(str(repo / "model_b" / "tests" / "t.py")) is first
    assert resolver.for_path(str(repo / "tools" / "x.py")) is resolver.run
    assert sorted(os.path.basename(p) for p in loads) == [".ascend-lint.yaml", "pyproject.toml", "pyproject.toml"]


def test_flake8_uses_the_closest_configuration(repo):
    pytest.importorskip("flake8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAKE8")}
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "model_a/train.py",
                           "model_b/train.py", "model_b/tests/t.py"], cwd=str(repo), capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.stdout.split(":")[0] == "model_b/train.py" and proc.stdout.count("\n") == 1, proc.stdout + proc.stderr
    (repo / "model_a" / "pyproject.toml").write_text('[tool.ascend-lint]\nbogus = 1\n')
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "model_a/train.py"],
                          cwd=str(repo), capture_output=True, text=True, env=env, timeout=120)
    assert "ascend-lint: error:" in proc.stderr and "unknown key 'bogus'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_load_settings_still_answers_for_one_directory(repo):
    assert load_settings(None, False, str(repo / "model_a" / "gen")).ignore == ["ASC101"]
    with pytest.raises(ConfigError):
        load_settings("missing.toml", False, str(repo))


def test_flake8_on_a_directory_opens_the_projects_below_it_before_forking(tmp_path):
    """A model folder with a configuration of its own is a project: flake8 sees its cross-file facts,
    and its model is built once in flake8's main process, next to the root project's."""
    pytest.importorskip("flake8")
    write(tmp_path, {".git/HEAD": "ref: refs/heads/main\n", "pyproject.toml": "[tool.ascend-lint]\n",
                     "tools/x.py": BAD, "model_c/pyproject.toml": '[tool.ascend-lint]\npreview = true\nselect = ["ASC202"]\n',
                     "model_c/utils.py": UTILS, "model_c/train.py": TRAIN.format(module="utils")})
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAKE8")}
    proc = subprocess.run([sys.executable, "-m", "flake8", "-j", "2", "--select", "ASC", "."], cwd=str(tmp_path),
                          capture_output=True, text=True, env=env, timeout=120)
    codes = sorted(line.split()[1] + " " + line.split(":")[0] for line in proc.stdout.splitlines())
    assert codes == ["ASC101 ./tools/x.py", "ASC202 ./model_c/utils.py"], proc.stdout + proc.stderr
    stores = list((tmp_path / ".ascend_lint_cache").glob("project-v*/*"))
    assert len(stores) == 2
    from ascend_lint.flake8_plugin import build_workspace

    workspace = build_workspace(None, None, str(tmp_path), [str(tmp_path)])  # what parse_options builds
    assert sorted(workspace.indexes) == [str(tmp_path), str(tmp_path / "model_c")]


def test_a_cached_listing_follows_an_edited_nested_configuration(tmp_path):
    """The project index's cached listing and hierarchical excludes together: a directory listed under
    one configuration is listed again when the configuration that applies to it changes."""
    import time

    from ascend_lint.pipeline.discovery import Listing, discover

    (tmp_path / "pyproject.toml").write_text("[tool.ascend-lint]\n")
    for rel in ["a.py", "model/m.py", "model/gen/g.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    (tmp_path / "model" / ".ascend-lint.yaml").write_text("extend-exclude: [gen]\n")

    def listed(listing):
        resolver = ConfigResolver(load_settings(None, False, str(tmp_path)))
        settings = resolver.for_dir(str(tmp_path))
        targets, _ = discover([str(tmp_path)], settings, resolver=resolver, listing=listing)
        return sorted(os.path.relpath(t.path, tmp_path) for t in targets)

    def age():
        past = time.time() - 10
        for directory, _dirs, _files in os.walk(tmp_path):
            os.utime(directory, (past, past))

    age()
    listing = Listing("k")
    assert listed(listing) == listed(None) == ["a.py", "model/m.py"]
    assert listed(listing) == ["a.py", "model/m.py"]  # served from the listing
    (tmp_path / "model" / ".ascend-lint.yaml").write_text("extend-exclude: [m.py]\n")  # edited in place
    age()
    assert listed(listing) == listed(None) == ["a.py", "model/gen/g.py"]
