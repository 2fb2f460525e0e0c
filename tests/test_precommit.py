"""The pre-commit hooks, driven through the real `pre-commit` in temporary git repositories.

pre-commit installs the hook repository (a committed copy of this working tree) into its own
virtualenv with pip, so the package index configured for pip must be reachable (no other network).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Optional

import pytest
import yaml

from ascend_lint.cli import main
from ascend_lint.rule import Applicability

from conftest import REGISTRY, lint

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch, torch_npu\n\n\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def run(cmd, cwd, env: Optional[Dict[str, str]] = None, timeout: int = 600) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items()
            if k not in ("PRE_COMMIT_HOME", "PRE_COMMIT", "GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE")}
    full.update(GIT_ENV, **(env or {}))
    return subprocess.run(cmd, cwd=str(cwd), env=full, capture_output=True, text=True, timeout=timeout)


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    run(["git", "init", "-q", "."], path).check_returncode()
    return path


def commit_all(path: Path) -> str:
    run(["git", "add", "-A", "."], path).check_returncode()
    run(["git", "commit", "-q", "--no-verify", "-m", "snapshot"], path).check_returncode()
    return run(["git", "rev-parse", "HEAD"], path).stdout.strip()


# ------------------------------------------------------------------------------ manifest
def test_manifest():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert set(hooks) == {"ascend-lint", "ascend-lint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi"]
        assert hook["require_serial"] is True
        assert hook["minimum_pre_commit_version"]
        assert hook["entry"].startswith("ascend-lint check")
    assert "--fix" in hooks["ascend-lint-fix"]["entry"].split()
    assert "--fix" not in hooks["ascend-lint"]["entry"].split()


# ------------------------------------------------------------------------------ empty file lists
NO_FILES = "warning: No Python files found under the given path(s)\n"


def test_all_files_excluded_exits_zero_with_a_warning(tmp_path, monkeypatch, capsys):
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "m.py").write_text(BAD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code = main(["check", "--no-cache", "--force-exclude", "--extend-exclude", "gen", "gen/m.py"])
    out = capsys.readouterr()
    assert code == 0 and out.out == "All checks passed!\n" and out.err == NO_FILES


def test_empty_directory_exits_zero_with_a_warning(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "."]) == 0
    out = capsys.readouterr()
    assert out.out == "All checks passed!\n" and out.err == NO_FILES


# ------------------------------------------------------------------------------ the real pre-commit
@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Dict[str, str]:
    """A committed copy of this working tree (what pre-commit installs) and a private pre-commit home."""
    if shutil.which("pre-commit") is None and importlib.util.find_spec("pre_commit") is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    repo = tmp_path_factory.mktemp("hookrepo")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in ("ascend_lint", "plugins"):
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    for name in ("pyproject.toml", ".pre-commit-hooks.yaml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, repo / name)
    if not (repo / "README.md").exists():
        (repo / "README.md").write_text("ascend-lint\n", encoding="utf-8")
    git_repo(repo)
    info = {"repo": str(repo), "rev": commit_all(repo), "home": str(tmp_path_factory.mktemp("pre-commit-home"))}
    # install the hook environment once for the module (pip needs the package index, nothing else)
    setup = project(tmp_path_factory.mktemp("setup"), {}, info, "ascend-lint")
    proc = pre_commit(["install-hooks"], setup, info)
    assert proc.returncode == 0, "pre-commit could not install the hook repository:\n" + proc.stdout + proc.stderr
    return info


def pre_commit(args, cwd: Path, hook_repo) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "pre_commit", *args], cwd, env={"PRE_COMMIT_HOME": hook_repo["home"],
                                                                     "PRE_COMMIT_COLOR": "never"})


def project(tmp_path: Path, files: Dict[str, str], hook_repo, hook: str, config: str = "") -> Path:
    path = git_repo(tmp_path / "project")
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    if config:
        (path / "pyproject.toml").write_text(config, encoding="utf-8")
    cfg = {"repos": [{"repo": hook_repo["repo"], "rev": hook_repo["rev"], "hooks": [{"id": hook}]}]}
    (path / ".pre-commit-config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    commit_all(path)
    return path


def test_check_hook_reports_bad_file_then_passes(tmp_path, hook_repo):
    path = project(tmp_path, {"train.py": BAD, "clean.py": "x = 1\n", "stub.pyi": "def f(x: int) -> int: ...\n"},
                   hook_repo, "ascend-lint")
    proc = pre_commit(["run", "--files", "train.py", "clean.py", "stub.pyi"], path, hook_repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed" in proc.stdout and "train.py:4:5: ASC101" in proc.stdout
    assert "clean.py" not in proc.stdout and "Traceback" not in proc.stdout
    (path / "train.py").write_text(BAD.replace(".contiguous()", ""), encoding="utf-8")
    proc = pre_commit(["run", "--files", "train.py", "clean.py", "stub.pyi"], path, hook_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout


def test_hook_reads_project_config_and_skips_non_python(tmp_path, hook_repo):
    path = project(tmp_path, {"train.py": BAD, "notes.txt": BAD}, hook_repo, "ascend-lint",
                   config='[tool.ascend-lint]\nper-file-ignores = {"train.py" = ["ASC101"]}\n')
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hook_with_no_matching_files(tmp_path, hook_repo):
    path = project(tmp_path, {"README.txt": "no python here\n"}, hook_repo, "ascend-lint")
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(no files to check)" in proc.stdout


def _fixable_example():
    """(rule, source): a flagged example whose every finding a safe fix removes."""
    for rule in REGISTRY.sorted_rules():
        if rule.fix_applicability is not Applicability.SAFE:
            continue
        for src in rule.flagged_sources():
            src = textwrap.dedent(src)
            found = lint(src, select=[rule.code], target="npu")
            if found and all(f.fix is not None and f.fix.applicability is Applicability.SAFE for f in found):
                return rule, src
    return None


def test_fix_hook_rewrites_then_passes(tmp_path, hook_repo):
    if importlib.util.find_spec("ascend_lint.fix.fixer") is None:
        pytest.skip("ascend_lint.fix.fixer (--fix) is not written yet")
    found = _fixable_example()
    if found is None:
        pytest.skip("no rule with a safe fix and a fully fixable flagged example is registered")
    rule, src = found
    preview = "true" if rule.preview else "false"
    config = f'[tool.ascend-lint]\nselect = ["{rule.code}"]\npreview = {preview}\ntarget = "npu"\n'
    path = project(tmp_path, {"train.py": src}, hook_repo, "ascend-lint", config=config)
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 1 and rule.code in proc.stdout, proc.stdout + proc.stderr

    cfg = yaml.safe_load((path / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    cfg["repos"][0]["hooks"] = [{"id": "ascend-lint-fix"}]
    (path / ".pre-commit-config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    commit_all(path)
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in proc.stdout
    fixed = (path / "train.py").read_text(encoding="utf-8")
    assert fixed != src and compile(fixed, "train.py", "exec")
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (path / "train.py").read_text(encoding="utf-8") == fixed


def test_hook_applies_each_model_folders_own_configuration(tmp_path, hook_repo):
    """pre-commit passes file names from the repository root; a model folder's configuration (its
    ignores and, with the hook's --force-exclude, its excludes, also those it extends) still applies."""
    clean = BAD.replace(".contiguous()", "")
    path = project(tmp_path, {"train.py": clean}, hook_repo, "ascend-lint")
    files = {"model_a/pyproject.toml": '[tool.ascend-lint]\nignore = ["ASC101"]\nextend-exclude = ["gen/"]\n',
             "model_a/train.py": BAD,
             "model_b/.ascend-lint.yaml": "extend: ../model_a/pyproject.toml\nignore: []\n",
             "model_b/m.py": clean, "model_b/gen/g.py": BAD}
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    commit_all(path)
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path / "model_b" / "m.py").write_text(BAD, encoding="utf-8")
    commit_all(path)
    proc = pre_commit(["run", "--all-files"], path, hook_repo)
    assert proc.returncode == 1 and "model_b/m.py:4:5: ASC101" in proc.stdout, proc.stdout + proc.stderr
    assert "model_a" not in proc.stdout and "gen" not in proc.stdout
