"""The project model through every face: multi-file fixture projects (tests/fixtures/projects/*, one per
class of fact that lives in another file), each flagged or silent as its `# expect: CODE` comments say,
through the CLI on the directory, the CLI on a file list and on one file at a time, the flake8 plugin,
stdin and --fix; the cache (warm runs reuse, an edit in one file changes another file's findings)."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Counter as CounterT, List, Tuple

import pytest

from ascend_lint.cli import main
from ascend_lint.engine.linter import Linter

FIXTURES = Path(__file__).parent / "fixtures" / "projects"
PROJECTS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
EXPECT_RE = re.compile(r"#\s*expect:\s*([A-Z0-9,\s]+)$")
Key = Tuple[str, int, str]  # (path relative to the project, line, code)


def expected(root: Path) -> CounterT[Key]:
    found: CounterT[Key] = Counter()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = EXPECT_RE.search(line)
            if match:
                for code in re.split(r"[,\s]+", match.group(1).strip()):
                    found[(rel, number, code)] += 1
    return found


def copy_project(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    return root


def cli(root: Path, *args: str, monkeypatch, capsys) -> CounterT[Key]:
    """Findings of `ascend-lint check --output-format json ARGS` run in `root`."""
    monkeypatch.chdir(root)
    capsys.readouterr()
    code = main(["check", "--output-format", "json", "--exit-zero", *args])
    out = capsys.readouterr().out
    assert code == 0, out
    return Counter((os.path.relpath(f["filename"], root).replace(os.sep, "/"), f["location"]["row"], f["code"])
                   for f in json.loads(out))


def python_files(root: Path) -> List[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if ".ascend_lint_cache" not in p.parts)


# ----------------------------------------------------------------------------- every class, every face
@pytest.mark.parametrize("name", PROJECTS)
def test_cli_on_the_directory(name, tmp_path, monkeypatch, capsys):
    root = copy_project(name, tmp_path)
    assert cli(root, "--no-cache", ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root)
    # with the cache: a cold run then a warm run give the same findings
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root)
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root)


@pytest.mark.parametrize("name", PROJECTS)
def test_cli_on_a_file_list_and_on_one_file(name, tmp_path, monkeypatch, capsys):
    root = copy_project(name, tmp_path)
    files = python_files(root)
    assert cli(root, *files, monkeypatch=monkeypatch, capsys=capsys) == expected(root)  # pre-commit style
    one_at_a_time: CounterT[Key] = Counter()
    for path in files:  # an editor or pre-commit with one staged file: the rest of the project still counts
        found = cli(root, "--no-cache", path, monkeypatch=monkeypatch, capsys=capsys)
        assert {key[0] for key in found} <= {path}  # findings only for the file asked
        one_at_a_time += found
    assert one_at_a_time == expected(root)


flake8_available = pytest.mark.skipif(
    subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True).returncode != 0,
    reason="flake8 is not installed")


def flake8(root: Path, *paths: str) -> CounterT[Key]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAKE8")}
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "-j", "1", *paths], cwd=root,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    found: CounterT[Key] = Counter()
    for line in proc.stdout.splitlines():
        path, number, _col, rest = line.split(":", 3)
        found[(os.path.normpath(path).replace(os.sep, "/"), int(number), rest.split()[0])] += 1
    return found


@flake8_available
@pytest.mark.parametrize("name", PROJECTS)
def test_flake8_plugin(name, tmp_path):
    root = copy_project(name, tmp_path)
    assert flake8(root, ".") == expected(root)
    files = [k[0] for k in expected(root)] or python_files(root)[:1]
    target = sorted(files)[0]
    assert flake8(root, target) == Counter({k: v for k, v in expected(root).items() if k[0] == target})


# ----------------------------------------------------------------------------- stdin and --fix
def run_stdin(root: Path, path: str, text: str, monkeypatch, capsys, *extra: str) -> str:
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    capsys.readouterr()
    main(["check", "--output-format", "concise", "--exit-zero", *extra, "-", "--stdin-filename", path])
    return capsys.readouterr().out


def test_stdin_gets_the_facts_of_the_other_files(tmp_path, monkeypatch, capsys):
    root = copy_project("step_helper", tmp_path)
    text = (root / "utils.py").read_text()
    out = run_stdin(root, "utils.py", text, monkeypatch, capsys)
    assert "utils.py:10:5: ASC202" in out and "the step loop in `train.py:8` calls it" in out
    # the buffer replaces the file on disk: a helper only the buffer has is not hot
    out = run_stdin(root, "utils.py", text.replace("def sync_all", "def sync_all_renamed"), monkeypatch, capsys)
    assert "ASC202" not in out
    # a buffer for train.py that no longer calls the helper: train.py's own findings only
    out = run_stdin(root, "train.py", (root / "train.py").read_text(), monkeypatch, capsys)
    assert "utils.py" not in out and "train.py:10:9: ASC304" in out


def test_fix_does_not_touch_modules_migrated_by_their_entry(tmp_path, monkeypatch, capsys):
    migrated = copy_project("migration_direct", tmp_path)
    before = (migrated / "models" / "net.py").read_text()
    monkeypatch.chdir(migrated)
    main(["check", "--fix", "--exit-zero", "."])
    assert (migrated / "models" / "net.py").read_text() == before
    plain = copy_project("migration_none", tmp_path)
    monkeypatch.chdir(plain)
    main(["check", "--fix", "--exit-zero", "."])
    fixed = (plain / "models" / "net.py").read_text()
    assert ".npu()" in fixed and "'npu:0'" in fixed.replace('"', "'")
    capsys.readouterr()


# ----------------------------------------------------------------------------- configuration
@pytest.mark.parametrize("setting, flagged", [("true", False), ("false", True), ('"auto"', False)])
def test_runtime_migration_setting(setting, flagged, tmp_path, monkeypatch, capsys):
    root = copy_project("migration_package", tmp_path)
    (root / "pyproject.toml").write_text(f"[tool.ascend-lint]\npreview = true\nruntime-migration = {setting}\n")
    found = cli(root, "--no-cache", ".", monkeypatch=monkeypatch, capsys=capsys)
    assert bool(found) is flagged


def test_migrating_modules_setting(tmp_path, monkeypatch, capsys):
    root = copy_project("migration_none", tmp_path)
    (root / "train.py").write_text("import torch_npu\nimport launcher_patch\n\nfrom models.net import build\n\n"
                                   "if __name__ == '__main__':\n    build()\n")
    assert cli(root, "--no-cache", ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root)
    (root / "pyproject.toml").write_text('[tool.ascend-lint]\npreview = true\nmigrating-modules = ["launcher_patch"]\n')
    assert cli(root, "--no-cache", ".", monkeypatch=monkeypatch, capsys=capsys) == Counter()


@pytest.mark.parametrize("table, message", [
    ("runtime-migration = 1", "'runtime-migration' must be \"auto\", true or false"),
    ("migrating-modules = \"x\"", "'migrating-modules' must be a list of module names"),
])
def test_bad_project_settings_are_reported(table, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text(f"[tool.ascend-lint]\n{table}\n")
    (tmp_path / "a.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "."]) == 2
    assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------- the cache
class Spy:
    """Paths the engine lints in this process."""

    def __init__(self, monkeypatch):
        self.paths: List[str] = []
        original = Linter.lint_source

        def lint_source(linter, source, *args, **kwargs):
            self.paths.append(os.path.normpath(source.path).replace(os.sep, "/"))
            return original(linter, source, *args, **kwargs)

        monkeypatch.setattr(Linter, "lint_source", lint_source)


def age(root: Path) -> None:
    old = 1_600_000_000 * 1_000_000_000
    for path in root.rglob("*.py"):
        os.utime(path, ns=(old, old))


def test_warm_run_reuses_every_result(tmp_path, monkeypatch, capsys):
    root = copy_project("step_helper", tmp_path)
    age(root)
    first = cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)
    spy = Spy(monkeypatch)
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == first
    assert spy.paths == []


def test_editing_the_training_script_changes_the_helpers_findings(tmp_path, monkeypatch, capsys):
    root = copy_project("step_helper", tmp_path)
    age(root)
    assert ("utils.py", 6, "ASC203") in cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)
    train = root / "train.py"
    train.write_text(train.read_text().replace("        log_metrics(loss)\n", ""))
    spy = Spy(monkeypatch)
    found = cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)
    assert ("utils.py", 6, "ASC203") not in found and ("utils.py", 10, "ASC202") in found
    assert sorted(spy.paths) == ["train.py", "utils.py"]  # the edited file, and the one whose answers changed
    # and back: the cached result of utils.py is not reused while its answers differ
    train.write_text(train.read_text().replace("        sync_all()\n", "        sync_all()\n        log_metrics(loss)\n"))
    assert ("utils.py", 6, "ASC203") in cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)


def test_cold_run_parses_each_file_once_when_no_answer_changes(tmp_path, monkeypatch, capsys):
    root = copy_project("bases", tmp_path)
    spy = Spy(monkeypatch)
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root)
    assert Counter(spy.paths).most_common(1)[0][1] == 1  # the provisional model already had every answer


def test_a_cold_run_builds_the_model_at_most_twice(tmp_path, monkeypatch, capsys):
    """The provisional model and the final one: step loops found meanwhile refresh it cheaply, and a file
    that turns out not to parse waits for the final build (a full build costs seconds on a large tree)."""
    import gc

    from ascend_lint.analysis.model import ProjectModel

    root = copy_project("step_helper", tmp_path)
    (root / "broken.py").write_text("import torch\nloss.backward()\ndef f(:\n")  # (step words: linted first)
    (root / "zz_broken.py").write_text("import torch\ny = x.transpose(0, 1).contiguous()\nclass C(:\n")
    builds = []
    original = ProjectModel.build.__func__
    monkeypatch.setattr(ProjectModel, "build", classmethod(lambda cls, *a, **k: builds.append(len(a[0])) or original(cls, *a, **k)))
    found = cli(root, ".", "--no-cache", monkeypatch=monkeypatch, capsys=capsys)
    assert Counter({k: v for k, v in found.items() if k[0] not in ("broken.py", "zz_broken.py")}) == expected(root)
    assert len(builds) <= 2, builds
    assert gc.get_freeze_count() == 0  # the objects the run kept out of the GC's passes are handed back


def test_deps_are_stored_and_replayed(tmp_path, monkeypatch, capsys):
    from ascend_lint.pipeline.cache import ResultCache
    from ascend_lint.config import load_settings
    from ascend_lint.pipeline.index import ProjectIndex
    from ascend_lint.analysis.questions import Deps
    from ascend_lint.analysis.view import replay
    from ascend_lint.registry import load_registry, select_rules

    root = copy_project("step_helper", tmp_path)
    cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)
    settings = load_settings(None, False, str(root))
    registry = load_registry()
    rules, _ = select_rules(registry, settings)
    cache = ResultCache.open(settings, rules, registry.fingerprint(), project=True)
    entry = cache.entry(str(root / "utils.py"))
    assert entry is not None and entry[4], "no deps stored"
    index = ProjectIndex.open([str(root)], settings)
    model = index.model()
    assert replay(model, entry[4], index.summary_of)
    assert not replay(model, entry[4])  # the reasons name `train.py:8`: the line comes from train.py's summary
    assert entry[4][0] == Deps.SCHEMA  # (the tuple form: [schema, [question, [args], answer], ...])
    changed = [entry[4][0]] + [list(dep) for dep in entry[4][1:]]
    facts = next(dep for dep in changed[1:] if dep[0] == "module_facts")
    facts[-1] = [{}, {}]  # (no roles: another answer)
    assert not replay(model, changed, index.summary_of)
    assert not replay(model, "garbage") and not replay(model, [["no_such_query", 1]])
    assert not replay(model, [Deps.SCHEMA + 1] + entry[4][1:], index.summary_of)  # another version: a miss
    assert not replay(model, [Deps.SCHEMA, ["role", ["x"], ["not a role"]]])  # a malformed answer: a miss
    assert replay(model, [], index.summary_of)  # no questions asked


def test_an_edit_that_only_moves_lines_keeps_the_stored_model(tmp_path, monkeypatch, capsys):
    from ascend_lint.analysis import model as model_mod

    root = copy_project("step_helper", tmp_path)
    cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)
    builds = []
    original = model_mod.ProjectModel.build
    monkeypatch.setattr(model_mod.ProjectModel, "build",
                        classmethod(lambda cls, *a, **k: builds.append(len(a[0])) or original(*a, **k)))
    train = root / "train.py"
    train.write_text("# a comment moves every line down\n" + train.read_text())
    out = run_stdin(root, "utils.py", (root / "utils.py").read_text(), monkeypatch, capsys)
    assert "the step loop in `train.py:9` calls it" in out  # the new line, from the stored model
    found = cli(root, "train.py", "utils.py", monkeypatch=monkeypatch, capsys=capsys)
    assert ("train.py", 11, "ASC304") in found and ("utils.py", 10, "ASC202") in found
    assert builds == []


@pytest.mark.parametrize("name", ["step_helper", "monkeypatch", "migration_package"])
def test_worker_processes_see_the_same_facts(name, tmp_path, monkeypatch, capsys):
    from ascend_lint.pipeline import runner

    monkeypatch.setattr(runner, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(runner, "PARALLEL_MIN_FILES", 2)
    root = copy_project(name, tmp_path)
    assert cli(root, "--no-cache", "-j", "2", ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root)


@pytest.mark.parametrize("cache", [True, False])
def test_text_summaries_made_in_workers_are_the_same(cache, tmp_path, monkeypatch):
    from ascend_lint.config import Settings
    from ascend_lint.pipeline import index as index_module

    root = copy_project("migration_package", tmp_path)
    (root / "unreadable.py").write_bytes(b"\xff\xfe\x00bad")
    serial = index_module.ProjectIndex.open([str(root)], Settings(project_root=str(root)), cache=cache)
    monkeypatch.setattr(index_module, "PARALLEL_MIN_FILES", 1)
    shutil.rmtree(root / ".ascend_lint_cache", ignore_errors=True)
    parallel = index_module.ProjectIndex.open([str(root)], Settings(project_root=str(root)), cache=cache, jobs=2)
    assert dict(parallel.summaries.items()) == dict(serial.summaries.items()) and len(serial.summaries) > 3
    assert parallel.hashes == serial.hashes and parallel.model().tables() == serial.model().tables()


def test_the_index_api_an_editor_uses(tmp_path):
    """One entry point: open the index of a file's project, lint a buffer with it, refresh from edits."""
    from ascend_lint.config import load_settings
    from ascend_lint.pipeline.index import ProjectIndex
    from ascend_lint.registry import load_registry, select_rules

    root = copy_project("step_helper", tmp_path)
    settings = load_settings(None, False, str(root))
    rules, _ = select_rules(load_registry(), settings)
    index = ProjectIndex.open([str(root / "utils.py")], settings)
    assert index.root == str(root)
    linter = Linter(rules, settings, project=index)
    utils = (root / "utils.py").read_text()
    assert [f.code for f in linter.check(utils, str(root / "utils.py"))] == ["ASC203", "ASC202"]
    # the training script is edited in the editor (not saved): its buffer replaces its summary
    train = (root / "train.py").read_text().replace("        sync_all()\n", "")
    index.refresh(str(root / "train.py"), train)
    assert [f.code for f in linter.check(utils, str(root / "utils.py"))] == ["ASC203"]
    view = index.view_for(str(root / "utils.py"))
    role = view.module_facts().roles["log_metrics"]
    assert role.kind == "per_step" and role.reason.describe() == "the step loop in `train.py:8` calls it"


@pytest.mark.parametrize("name", PROJECTS)
def test_a_model_refreshed_with_tree_facts_equals_a_full_build(name):
    """The runner's cheap update (light summaries first, tree facts added later) gives the same model as
    building from the full summaries: no table is lost on the way."""
    import ast

    from ascend_lint.analysis.model import ProjectModel
    from ascend_lint.analysis.summary import light_summary, summarize

    root = FIXTURES / name
    texts = {rel: (root / rel).read_text(encoding="utf-8") for rel in python_files(root)}
    light = {rel: light_summary(text) for rel, text in texts.items()}
    full = {rel: summarize(ast.parse(text), text, None, light[rel]) for rel, text in texts.items()}
    refreshed = ProjectModel.build(light).with_tree_facts(full)
    assert refreshed is not None and refreshed.tables() == ProjectModel.build(full).tables()


@pytest.mark.parametrize("name", PROJECTS)
def test_a_model_built_on_the_lookups_of_the_last_one_equals_a_full_build(name):
    """A run's final model reuses its provisional model's lookups (module names, each module's imports):
    every file in turn losing its facts (a file found not to parse), or gaining its tree facts, gives the
    model a build from scratch gives."""
    import ast

    from ascend_lint.pipeline.index import _empty
    from ascend_lint.analysis.model import ProjectModel
    from ascend_lint.analysis.summary import light_summary, summarize

    root = FIXTURES / name
    texts = {rel: (root / rel).read_text(encoding="utf-8") for rel in python_files(root)}
    light = {rel: light_summary(text) for rel, text in texts.items()}
    full = {rel: summarize(ast.parse(text), text, None, light[rel]) for rel, text in texts.items()}
    previous = ProjectModel.build(light)
    for rel in sorted(texts):
        for files in ({**full, rel: _empty()}, full, {**light, rel: _empty()}):
            model = ProjectModel.build(files, previous=previous)
            assert model.tables() == ProjectModel.build(files).tables(), rel
            previous = model
    assert previous.builder is not None and previous.builder.r is not ProjectModel.build(full).builder.r


@pytest.mark.parametrize("name", PROJECTS)
def test_a_model_built_on_lookups_prepared_file_by_file_equals_a_full_build(name):
    """With worker processes, the index makes each file's lookups while it waits for the other files'
    summaries (`prepare`, then `learn` in any order); files never learned, or whose summary changed since,
    are looked up again by the build."""
    from ascend_lint.pipeline.index import _empty
    from ascend_lint.analysis.model import ProjectModel
    from ascend_lint.analysis.summary import light_summary

    root = FIXTURES / name
    light = {rel: light_summary((root / rel).read_text(encoding="utf-8")) for rel in python_files(root)}
    expected = ProjectModel.build(light).tables()
    for skipped in [None, *sorted(light)]:
        prepared = ProjectModel.prepare(reversed(list(light)))
        for rel in reversed(list(light)):
            if rel != skipped:
                prepared.learn(rel, light[rel])
        assert ProjectModel.build(light, previous=prepared).tables() == expected, skipped
    prepared = ProjectModel.prepare(light)
    for rel, summary in light.items():
        prepared.learn(rel, _empty())
    assert ProjectModel.build(light, previous=prepared).tables() == expected


def test_a_module_that_lost_its_facts_no_longer_passes_on_the_migration():
    """The reused lookups of a module whose facts are gone (it does not parse) are not trusted: what it
    imported is no longer reached through it."""
    from ascend_lint.pipeline.index import _empty
    from ascend_lint.analysis.model import ProjectModel
    from ascend_lint.analysis.summary import light_summary

    files = {"train.py": light_summary("from torch_npu.contrib import transfer_to_npu\nimport middle\n\n"
                                       "if __name__ == '__main__':\n    middle.run()\n"),
             "middle.py": light_summary("import leaf\n\n\ndef run():\n    leaf.go()\n"),
             "leaf.py": light_summary("import torch\n\n\ndef go():\n    return torch.ones(1)\n")}
    before = ProjectModel.build(files)
    assert before.migrated("leaf") is not None
    after = ProjectModel.build({**files, "middle.py": _empty()}, previous=before)
    assert after.migrated("leaf") is None and after.migrated("middle") is not None


def test_precision_words_need_the_tree_only_when_precision_is_gathered():
    from ascend_lint.analysis.summary import light_summary

    text = "from mindspore import Model\n\nmodel = Model(net, loss, opt, amp_level='O2')\n"
    assert light_summary(text).light and not light_summary(text, precision=False).light
    assert light_summary(text + "loss.backward()\n", precision=False).light  # (step loops still do)


def test_precision_is_gathered_only_for_rules_that_read_it(tmp_path, monkeypatch, capsys):
    """No default rule reads the training precision, so a run of them neither parses a script for it nor
    stores it; a later run whose rules read it (here with the same cache) gathers it and finds what it
    should."""
    from ascend_lint.engine import linter as engine

    root = copy_project("precision_fp32", tmp_path)
    parsed: List[str] = []
    real = engine.parse
    monkeypatch.setattr(engine, "parse", lambda text, path: parsed.append(os.path.basename(path)) or real(text, path))
    assert cli(root, "--no-preview", ".", monkeypatch=monkeypatch, capsys=capsys) == Counter()
    assert "train.py" not in parsed
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == expected(root) != Counter()
    assert "train.py" in parsed


def test_an_editor_index_gathers_precision_once_a_files_rules_read_it(tmp_path):
    """The editor and flake8 open a project's index for the first file asked; a file under a configuration
    whose rules read the training precision opens it again with it, and its Linter sees the new one."""
    from ascend_lint.config import ConfigResolver, load_settings
    from ascend_lint.registry import load_registry
    from ascend_lint.pipeline.workspace import Workspace

    root = copy_project("precision_fp32", tmp_path)
    (root / "pyproject.toml").write_text('[tool.ascend-lint]\nselect = ["ASC101"]\n')
    (root / "src" / ".ascend-lint.yaml").write_text('extend: ../pyproject.toml\npreview: true\nselect: ["ASC402"]\n')
    workspace = Workspace(ConfigResolver(load_settings(None, False, str(root))), load_registry(), [str(root)],
                          cache=False)
    assert not workspace.project_linter(str(root / "train.py")).project.precision
    linter = workspace.project_linter(str(root / "src" / "head.py"))
    assert linter.project.precision and linter.project is workspace.index_for(str(root / "train.py"))
    found = {(f.line, f.code) for f in linter.lint_path(str(root / "src" / "head.py")).findings}
    assert found == {(line, code) for rel, line, code in expected(root) if rel == "src/head.py"} != set()


def test_a_patch_is_placed_on_its_own_line_and_only_project_names_patch():
    """`X.attr = f` records the line it is on (tabs, a patch on the first line, one after a docstring), and
    neither an attribute of `self` nor a value no project name reaches is a patch."""
    from ascend_lint.analysis.summary import light_summary

    text = ('mod.first = impl.g\n"""A\ndocstring."""\nimport mod\nfrom pkg import impl\n\n'
            'mod.Model.forward = impl.fast_forward\n\tmod.f = impl.g\nself._x = _y\nother.thing = _z\n')
    assert light_summary(text).patches == (("mod.f", "impl.g", 8), ("mod.Model.forward", "impl.fast_forward", 7),
                                           ("mod.first", "impl.g", 1))


def test_a_patch_reason_names_the_line_of_the_assignment(tmp_path, monkeypatch, capsys):
    root = copy_project("monkeypatch", tmp_path)
    monkeypatch.chdir(root)
    main(["check", "--isolated", "--no-cache", "--preview", "--select", "ASC202", "--output-format", "json", "."])
    messages = {f["filename"]: f["message"] for f in json.loads(capsys.readouterr().out)}
    lines = {rel: (root / rel).read_text(encoding="utf-8").splitlines() for rel in messages}
    for rel, message in messages.items():
        line = int(re.search(re.escape(rel) + r":(\d+)", message).group(1))
        assert re.match(r"\s*\w+\.forward = ", lines[rel][line - 1]), (rel, message)


def test_a_modules_own_class_shadows_an_import_and_the_first_import_binds_a_name():
    """Names resolve as Python binds them here: a module's own class or function over an import of the
    same name, and of two imports of one name the first (a later one is usually a fallback)."""
    from ascend_lint.analysis.model import ProjectModel
    from ascend_lint.analysis.summary import light_summary

    files = {"lib.py": light_summary("import torch\n\n\nclass Layer(torch.nn.Module):\n    pass\n"),
             "own.py": light_summary("from lib import Layer\n\n\nclass Layer:\n    pass\n\n\n"
                                     "class Net(Layer):\n    pass\n"),
             "first.py": light_summary("from lib import Layer\nfrom elsewhere import Layer\n\n\n"
                                       "class Net(Layer):\n    pass\n"),
             "fallback.py": light_summary("from elsewhere import Layer\nfrom lib import Layer\n\n\n"
                                          "class Net(Layer):\n    pass\n")}
    model = ProjectModel.build(files)
    assert model.class_kind("own.Net") is None
    assert model.class_kind("first.Net") == "module"
    assert model.class_kind("fallback.Net") is None


@pytest.mark.parametrize("text", [
    "x.cuda()", "torch.cuda.synchronize()", "a = 'cuda'", "a = \"cuda:1\"", "backend='nccl'", "d = 'cuda:0'",
    "mycuda(x)", "x.cuda", "torch_cuda.x", "'cuda", "s = 'nccl2'", "f(torch.cuda)", "xtorch.cuda.y", "# cuda\nx.cuda()",
    "x.npu()", "'npu'", "\"npu:0\"", "'hccl'", "torch.npu.synchronize()", "torch_npu", "'npu", "npu(", "torch.npu",
    "a = 'npu'\n" * 3 + "b.cuda(", "pre torch.npu.x",
])
def test_device_context_is_the_whole_text_search(text):
    """`search_near` tries the device patterns only around their anchors: the same answer as a search of the
    whole text."""
    from ascend_lint.analysis.data import GPU_TEXT_NEEDLES, GPU_TEXT_RE, NPU_TEXT_NEEDLES, NPU_TEXT_RE
    from ascend_lint.analysis.textfacts import gpu_context, npu_context

    assert gpu_context(text) == (any(n in text for n in GPU_TEXT_NEEDLES) and GPU_TEXT_RE.search(text) is not None)
    assert npu_context([], text) == (any(n in text for n in NPU_TEXT_NEEDLES) and NPU_TEXT_RE.search(text) is not None)



def _near_misses(words):
    """Each word, cut, glued to its neighbours and halves of two words joined: texts that hold a word or almost do."""
    for word in words:
        yield from (word, word[1:], word[:-1], f"a{word}_b", f"{word[:2]} {word[2:]}", word.upper(), word * 2)
        for other in words:
            yield word[:len(word) // 2] + other[len(other) // 2:]


def test_needle_searches_find_what_substring_tests_find():
    """The anchored searches that stand in for `any(needle in text ...)` (NPU needles, precision words)
    give its answer, on texts holding a needle or almost one."""
    from ascend_lint.analysis.data import NPU_TEXT_NEEDLES, PRECISION_WORDS
    from ascend_lint.analysis.textfacts import needle_searches

    for needles, anchors in ((NPU_TEXT_NEEDLES, ("npu", "hccl")), (PRECISION_WORDS, ("6", "M", "v", "(", "_f")),
                             (["ab", "cab", "b(", "x"], ("b", "a"))):
        searches = needle_searches(needles, anchors)
        for text in _near_misses(list(needles)):
            assert any(search(text) for search in searches) == any(n in text for n in needles), (needles, text)


@pytest.mark.parametrize("word", ["TrainOneStep", "build_train_network"])
def test_precision_words_left_to_might_step(word):
    """light_summary does not look for these precision words: a text that holds one is one might_step accepts,
    wherever the word lies in a name."""
    from ascend_lint.analysis.factlines import might_step
    from ascend_lint.analysis.summary import light_summary

    for text in (word, f"x = {word}", f"_{word}_", f"aTrain{word}Rain2", f"xRAIN_{word}(a)", f"\u00e9{word}\u00f6"):
        assert might_step(text) and light_summary(text).light


def test_light_flag_is_the_precision_word_test():
    """The "light" flag: might_step, or any precision word in the text."""
    from ascend_lint.analysis.data import PRECISION_WORDS
    from ascend_lint.analysis.factlines import might_step
    from ascend_lint.analysis.summary import light_summary

    for text in _near_misses(PRECISION_WORDS):
        assert light_summary(text).light == (might_step(text) or any(w in text for w in PRECISION_WORDS)), text


STEP_CALLS = [
    "loss.backward()", "loss.backward (retain_graph=True)", "optimizer.step()", "self.optimizer.step()",
    "scaler.step(opt)", "opt\\\n    .step()", "(optimizer\n .step())", "(opt).step()", "model.train_step(x, y)",
    "engine.train_one_step(b)", "train_one_step(b)", "Train_Net(x)", "self.train_network(x)",
    "train_step_cell(x)", "self._train_one_batch(b)", "train_iter(it)", "optimizer(grads)",
    "self.optim(grads)", "opt(grads)", "Opt(grads)", "_opt(g)", "self.optimizer(out[1])", "self.run_optimizer(grads)",
]
NOT_STEP_CALLS = ["self.scheduler.step(latents)", "noise_scheduler.step(x)", "self.ema.step(x)", "opts[i].step()",
                  "timesteps = scheduler.timesteps", "x = Optional[int]", "adopt(x)", "'s'.step()",
                  "opt = get_optimizer(model)"]


@pytest.mark.parametrize("call", STEP_CALLS + NOT_STEP_CALLS)
def test_step_calls_are_found_in_the_text(call):
    """The text scan that decides whether a file may hold step loops finds every call the semantic layer
    takes for a training step, on its line (a superset: never a step loop lost to the pre-filter), and
    passes over a diffusion scheduler's `step`."""
    import ast

    from ascend_lint.analysis.factlines import might_step, step_call_lines
    from ascend_lint.analysis.semantic import FileContext, is_step_call

    text = f"import torch\ntrainer = nn.TrainOneStepCell(net, opt)\n\n\ndef f():\n    {call}\n"
    tree = ast.parse(text)
    ctx = FileContext("t.py", text, tree)
    steps = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and node.lineno > 2 and
             (is_step_call(node) or ctx._mindspore_step(node))]
    assert bool(steps) == (call in STEP_CALLS)
    if steps:
        assert might_step(text)
        assert set(step_call_lines(text)) & set(range(steps[0].lineno, steps[0].end_lineno + 1))
    else:
        assert not might_step(text.replace("nn.TrainOneStepCell(net, opt)", "None"))
    assert might_step(text)  # (a `TrainOneStepCell` makes every call of its instance a step)


@pytest.mark.parametrize("helpers", [1, 40])
def test_a_loop_calling_a_helper_that_steps_is_a_step_loop(helpers):
    """A loop that calls a function of the file that steps, two calls deep, is a step loop: found alike
    whether the file's stepping functions are few (each name searched for) or many (one pass for all)."""
    import ast

    from ascend_lint.analysis.summary import light_summary, summarize

    text = "".join(f"def helper_{n}(opt):\n    opt.step()\n\n\n" for n in range(helpers)) + (
        "def apply(opt):\n    helper_0(opt)\n\n\ndef train(loader, opt):\n    for x in loader:\n"
        "        print(x)\n        apply(opt)\n")
    loop = text.count("\n", 0, text.index("for x"))
    summary = summarize(ast.parse(text), text, None, light_summary(text))
    assert summary.steps == (("train", loop + 1, {"apply": loop + 3}),)


def test_lines_calling_many_names_are_found_as_for_a_few():
    """For many names, the lines holding `name(` come from one pass over the reversed text: the lines a
    search of each name finds (inside longer names, in comments, at the text's ends, non-ASCII names)."""
    from ascend_lint.analysis.factlines import call_offsets, line_numbers, word_offsets

    names = {f"f{n}" for n in range(40)} | {"g", "größe", "_h2"}
    text = "f1(x)\nyf2(x)\n g (x)\nf3 = f4\n\nprint(größe(1), _h2())\n#f39(\nf5("
    each = line_numbers(text, word_offsets(text, [name + "(" for name in names]))
    assert each == [1, 2, 6, 7, 8]
    assert line_numbers(text, call_offsets(text, names)) == each


@pytest.mark.parametrize("line, fp32", [
    ("", True), ("    net.to_float(mstype.float32)\n", False), ("    print('bf16')\n", False),
    ("    return net\n\n\ndef other():\n    print('bf16')\n", True)])
def test_a_model_trained_without_amp_is_fp32_unless_its_body_mentions_a_reduced_precision(line, fp32):
    """`Model(net)` without `amp_level` trains `net` in fp32, unless the body that builds it mentions a
    reduced precision anywhere (a precision word such as `to_float`, or only an fp word such as 'bf16')."""
    import ast

    from ascend_lint.analysis.summary import light_summary, summarize

    text = "from mindspore import Model\n\n\ndef main():\n    net = Net()\n    model = Model(net, loss)\n" + line
    summary = summarize(ast.parse(text), text, None, light_summary(text))
    trained = (("Net", "fp32", 6, "`Model(...)` without `amp_level`", "main"),)
    assert summary.models == (trained if fp32 else ())


def _step_scripts(root: Path, helpers_elsewhere: bool) -> None:
    """Four training scripts whose step loops call a helper that reads a tensor (ASC203 in the helper): their
    own `log_loss`, or one in `utils_N.py` (a module with a step call of its own, so linted first too)."""
    (root / "pyproject.toml").write_text("[tool.ascend-lint]\npreview = true\n")
    head = "import torch\nimport torch_npu\n"
    helper = "\n\ndef log_loss(loss):\n    print(loss.item())\n\n\ndef apply(optimizer):\n    optimizer.step()\n"
    for number in range(4):
        if helpers_elsewhere:
            (root / f"utils_{number}.py").write_text(head + helper)
        (root / f"train_{number}.py").write_text(
            head + (f"from utils_{number} import log_loss\n" if helpers_elsewhere else helper) +
            "\n\ndef train(model, loader, optimizer):\n    for x in loader:\n        loss = model(x).sum()\n"
            "        loss.backward()\n        optimizer.step()\n        log_loss(loss)\n")


@pytest.mark.parametrize("helpers_elsewhere", [False, True])
def test_step_loops_read_while_linting_reach_the_findings(helpers_elsewhere, tmp_path, monkeypatch, capsys):
    """A step loop is read from the tree the run parses to lint its file, after a model was built from the
    text. A helper in the same file gets its role at once (the file is linted once); a helper in a module
    linted before the loop was known is linted again under the final model: with -j 2, in the workers.
    Either way the findings are those of -j 1."""
    from ascend_lint.pipeline import runner

    monkeypatch.setattr(runner, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(runner, "PARALLEL_MIN_FILES", 2)
    root = tmp_path / "scripts"
    root.mkdir()
    _step_scripts(root, helpers_elsewhere)
    serial = cli(root, "--no-cache", "-j", "1", ".", monkeypatch=monkeypatch, capsys=capsys)
    passes: List[List[str]] = []
    original = runner._run

    def recording(linter, todo, sizes, jobs, *args):
        passes.append(sorted(os.path.basename(path) for path, _ in todo))
        assert jobs == 2
        return original(linter, todo, sizes, jobs, *args)

    monkeypatch.setattr(runner, "_run", recording)
    assert cli(root, "--no-cache", "-j", "2", ".", monkeypatch=monkeypatch, capsys=capsys) == serial
    helpers = [f"utils_{n}.py" for n in range(4)] if helpers_elsewhere else [f"train_{n}.py" for n in range(4)]
    assert [(name, 6, "ASC203") for name in helpers] == sorted(k for k in serial if k[2] == "ASC203")
    first = sorted(helpers + [f"train_{n}.py" for n in range(4)]) if helpers_elsewhere else helpers
    assert passes == ([first, helpers] if helpers_elsewhere else [first])


def test_touched_files_with_the_stored_bytes_are_not_summarised_again(tmp_path, monkeypatch, capsys):
    """A checkout, `touch` or a restored CI cache gives every file a new mtime: the index re-reads and
    re-hashes them (as the result cache does) and takes the stored summary of the same bytes; only a file
    whose bytes changed gets a new text summary."""
    from ascend_lint.pipeline import index as index_module

    root = copy_project("step_helper", tmp_path)
    first = cli(root, ".", monkeypatch=monkeypatch, capsys=capsys)
    summarised: List[int] = []
    original = index_module.text_rows
    monkeypatch.setattr(index_module, "text_rows", lambda *args: summarised.append(1) or original(*args))
    later = 10 ** 9 * (int(os.stat(root / "train.py").st_mtime) + 100)
    for path in root.glob("*.py"):
        os.utime(path, ns=(later, later))
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == first and summarised == []
    (root / "utils.py").write_text((root / "utils.py").read_text() + "\n\ndef more():\n    pass\n")
    assert cli(root, ".", monkeypatch=monkeypatch, capsys=capsys) == first and summarised == [1]


@pytest.mark.parametrize("jobs", [1, 2])
def test_files_with_the_same_bytes_get_equal_summaries(jobs, tmp_path, monkeypatch):
    """A model zoo copies files by the thousand: copies get equal summaries, text-only and complete, while
    each copy keeps its own findings; an edited copy gets its own."""
    from ascend_lint.config import load_settings
    from ascend_lint.pipeline.discovery import Target
    from ascend_lint.pipeline import index as index_module
    from ascend_lint.registry import load_registry, select_rules
    from ascend_lint.pipeline.runner import lint_targets

    root = tmp_path / "zoo"
    for copy in ("model_a", "model_b", "model_c"):
        shutil.copytree(FIXTURES / "step_helper", root / copy, ignore=shutil.ignore_patterns("pyproject.toml"))
    (root / "pyproject.toml").write_text("[tool.ascend-lint]\npreview = true\n")
    (root / "model_c" / "utils.py").write_text((root / "model_c" / "utils.py").read_text() + "\n# edited\n")
    monkeypatch.setattr(index_module, "PARALLEL_MIN_FILES", 1)
    settings = load_settings(None, False, str(root))
    index = index_module.ProjectIndex.open([str(root)], settings, cache=False, jobs=jobs)
    summaries = index.summaries
    assert summaries["model_a/train.py"] == summaries["model_b/train.py"] == summaries["model_c/train.py"]
    rules, _ = select_rules(load_registry(), settings)
    paths = sorted(str(p) for p in root.rglob("*.py"))
    results = lint_targets(Linter(rules, settings), [Target(p, True) for p in paths], jobs=jobs, index=index)
    assert summaries["model_a/train.py"] == summaries["model_b/train.py"] and not summaries["model_a/train.py"].light
    codes = {os.path.relpath(r.path, root).replace(os.sep, "/"): [f.code for f in r.findings] for r in results}
    assert codes["model_a/utils.py"] == codes["model_b/utils.py"] == codes["model_c/utils.py"] == ["ASC203", "ASC202"]


def test_relpath_of_paths_as_given_from_the_root_and_from_elsewhere(tmp_path, monkeypatch):
    """A run from the root takes discovery's relative paths as they are; any other spelling, or a run from
    another directory, is normalised first: the same answers either way."""
    from ascend_lint.pipeline.index import ProjectIndex

    root = tmp_path / "proj"
    (root / "a").mkdir(parents=True)
    index = ProjectIndex(str(root), None)
    spellings = ["a/b.py", "./a/b.py", "a/../b.py", "a//b.py", "a/b.py/.", str(root / "a" / "b.py"), "../x.py", ""]
    expected_rel = ["a/b.py", "a/b.py", "b.py", "a/b.py", "a/b.py", "a/b.py", None, None]
    monkeypatch.chdir(root)
    assert [index.relpath(p) for p in spellings] == expected_rel
    monkeypatch.chdir(root / "a")
    assert index.relpath("b.py") == "a/b.py" and index.relpath("../b.py") == "b.py"


SKETCHED = '''\
import torch
from mindspore import Model
OPTIMIZER = torch.optim.SGD


class Trainer:
    @staticmethod
    def unrelated(
            a,
            b):
        """Many lines no fact is read from."""
        return [a for _ in range(b)]

    def helper(self, opt):
        opt.step()

    def apply(self, opt):
        self.helper(opt)

    def train(self, loader, opt):
        for x in loader:
            self.apply(opt)  # (through the top-level `helper`: not a step loop)


def helper(x):  # the name of a method that steps: kept among the file's local functions (it wins there)
    return x


async def fetch(x):
    return [y async for y in x]


def build(config):
    net = Net(config)
    return Model(net, amp_level="O2")


for epoch in range(3):
    loss.backward()
    build(config)
'''


@pytest.mark.parametrize("precision", [False, True])
@pytest.mark.parametrize("text", [SKETCHED, SKETCHED.replace("\n", "\r\n"), SKETCHED.replace("\n", "\r")])
def test_a_file_no_rule_parses_is_summarised_from_the_parts_that_can_hold_its_facts(text, precision):
    """summarize_text parses the functions and methods that may hold a step loop or a precision decision, and
    module-level statements; the others are cut to `def name(): pass`. Its summary is that of the whole
    file's tree (CRLF and lone-CR line ends too: a lone CR is parsed whole)."""
    import ast

    from ascend_lint.analysis.summary import light_summary, summarize, summarize_text

    parsed: List[str] = []

    def parse(source: str):
        parsed.append(source)
        return ast.parse(source)

    light = light_summary(text, precision=precision)
    whole = summarize(ast.parse(text), text, None, light, precision)
    assert summarize_text(text, light, precision, parse) == whole
    assert len(parsed) == 1
    if "\r" in text.replace("\r\n", ""):
        assert parsed == [text]
    else:
        assert whole.steps == (("", 38, {"build": 40}),) and bool(whole.models) == precision
        kept = parsed[0].splitlines()
        assert len(kept) == len(text.splitlines())
        assert "Many lines" not in parsed[0] and "async for" not in parsed[0]
        assert kept[6:11] == ["    @staticmethod", "    def unrelated(): pass", "", "", ""]
        assert ("Model(net" in parsed[0]) == precision and "opt.step()" in parsed[0]


def test_the_whole_file_is_parsed_when_the_parts_do_not_parse_and_none_when_neither_does():
    """A sketch that does not parse falls back to a parse of the whole file; a file that does not parse
    there either gives no summary (no facts)."""
    import ast

    from ascend_lint.analysis.summary import light_summary, summarize_text

    parsed: List[str] = []

    def parse(source: str):
        parsed.append(source)
        try:
            return ast.parse(source)
        except SyntaxError:
            return None

    broken = SKETCHED.replace("return [a for", "return [a for for")  # (in a function the sketch cuts away)
    assert summarize_text(broken, light_summary(broken), False, parse).steps
    assert len(parsed) == 1 and "for for" not in parsed[0]
    broken = SKETCHED.replace("opt.step()", "opt.step(:")  # (in one it keeps)
    parsed.clear()
    assert summarize_text(broken, light_summary(broken), False, parse) is None
    assert len(parsed) == 2 and parsed[1] == broken
