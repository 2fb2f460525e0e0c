"""Parallel runs and the result cache: same output whatever -j, exact cache round trips, invalidation."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from typing import List

import pytest

from ascend_lint.pipeline import cache as cache_mod
from ascend_lint.pipeline import runner
from ascend_lint.pipeline.cache import ResultCache, run_key
from ascend_lint.pipeline.cache_entries import decode_finding, encode_finding
from ascend_lint.cli import main
from ascend_lint.config import Settings
from ascend_lint.pipeline.discovery import Target
from ascend_lint.engine.linter import Linter
from ascend_lint.registry import load_registry
from ascend_lint.rule import Applicability, Edit, Finding, Fix, Severity, Span

REGISTRY = load_registry()
RULES = REGISTRY.sorted_rules()
BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
GOOD = "import torch\ny = x.view(2, -1)\n"
OLD = 1_000_000_000 * 1_600_000_000  # an mtime long past: entries written for it trust the stat


def make_tree(root, n: int = 12) -> List[Target]:
    targets = []
    for i in range(n):
        path = root / f"m{i:02d}.py"
        body = BAD * (i % 3 + 1) if i % 2 else GOOD
        path.write_text(body + f"# file {i}\n")
        targets.append(Target(str(path), False))
    return targets


def linter_for(root, **changes) -> Linter:
    settings = replace(Settings(preview=True, project_root=str(root)), **changes)
    return Linter(RULES, settings)


def open_cache(linter: Linter, fingerprint: str = "") -> ResultCache:
    return ResultCache.open(linter.settings, linter.rules, fingerprint or REGISTRY.fingerprint())


def snapshot(results):
    return [(r.path, r.findings) for r in results]


def age(targets: List[Target]) -> None:
    for t in targets:
        os.utime(t.path, ns=(OLD, OLD))


class Spy:
    """Counts the files the engine really lints (in this process)."""

    def __init__(self, monkeypatch):
        self.paths: List[str] = []
        original = Linter.lint_source

        def lint_source(linter, source, *args, **kwargs):
            self.paths.append(source.path)
            return original(linter, source, *args, **kwargs)

        monkeypatch.setattr(Linter, "lint_source", lint_source)


# ----------------------------------------------------------------------------- parallel runs
def test_jobs_1_and_2_give_identical_results(tmp_path, monkeypatch):
    targets = make_tree(tmp_path, 16)
    linter = linter_for(tmp_path)
    serial = runner.lint_targets(linter, targets, jobs=1)
    pools = []

    class Pool(runner.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(runner, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(runner, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(runner, "PARALLEL_MIN_FILES", 2)
    parallel = runner.lint_targets(linter, list(reversed(targets)), jobs=2)
    assert pools, "the worker pool was not used"
    assert snapshot(parallel) == snapshot(serial)
    assert [r.path for r in parallel] == sorted(t.path for t in targets)
    assert sum(len(r.findings) for r in serial) > 0
    for r in parallel:  # sources come back only where findings are (the fixer needs them)
        assert (r.source is not None) == bool(r.findings)


def test_cli_output_is_the_same_for_any_worker_count(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, 16)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr(runner, "PARALLEL_MIN_BYTES", 0)
    outputs = []
    for jobs in ("1", "2", "3"):
        code = main(["check", "--isolated", "--no-cache", "-j", jobs, "."])
        outputs.append((code, capsys.readouterr().out))
    assert outputs[0][0] == 1 and "ASC101" in outputs[0][1]
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]


def test_small_runs_stay_in_process(tmp_path, monkeypatch):
    targets = make_tree(tmp_path, 3)
    monkeypatch.setattr(runner, "ProcessPoolExecutor", None)  # would fail if used
    assert runner.lint_targets(linter_for(tmp_path), targets, jobs=8)


def test_chunks_cover_every_file_once_biggest_first():
    todo = [(f"f{i}", None) for i in range(50)]
    sizes = {f"f{i}": (i * 7919) % 100_000 for i in range(50)}
    chunks = runner.make_chunks(todo, sizes, jobs=2)
    flat = [p for chunk in chunks for p, _ in chunk]
    assert sorted(flat) == sorted(p for p, _ in todo)
    assert sizes[flat[0]] == max(sizes.values())


def test_rules_are_rebuilt_from_their_import_paths():
    refs = runner.rule_refs(RULES)
    assert refs is not None
    assert runner.rebuild_rules(refs) == RULES


# ----------------------------------------------------------------------------- the cache
def test_findings_with_fixes_round_trip_exactly():
    fix = Fix(Applicability.UNSAFE, "use `torch_npu.npu_x` \u00e9\ud800",
              (Edit("replace", Span(3, 4, 5, 6), "a\nb", ""), Edit("set_keyword", Span(1, 0, 1, 9), "True", "k")),
              ("torch_npu", "apex.optimizers"))
    findings = [
        Finding("p.py", 3, 5, 5, 7, "ASC101", "name", "message \u4e2d", Severity.ERROR, fix),
        Finding("p.py", 1, 1, 1, 1, "ASC000", "unreadable-file", "syntax error", Severity.WARNING, None),
        Finding("p.py", 2, 1, 2, 9, "ASC303", "n", "m", Severity.INFO,
                Fix(Applicability.SAFE, "d", ())),
    ]
    encoded = json.loads(json.dumps([encode_finding(f) for f in findings]))
    decoded = [decode_finding(e, "p.py") for e in encoded]
    assert decoded == findings
    assert all(isinstance(d.fix.edits, tuple) and isinstance(d.fix.imports, tuple) for d in decoded if d.fix)
    assert decoded[0].fix.applicability is Applicability.UNSAFE and decoded[0].severity is Severity.ERROR


def test_cache_hit_returns_identical_findings_without_linting(tmp_path, monkeypatch):
    targets = make_tree(tmp_path)
    age(targets)
    linter = linter_for(tmp_path)
    cold = runner.lint_targets(linter, targets, cache=open_cache(linter), keep_sources=False)
    spy = Spy(monkeypatch)
    warm = runner.lint_targets(linter, targets, cache=open_cache(linter), keep_sources=False)
    assert spy.paths == []
    assert snapshot(warm) == snapshot(cold)
    # with sources wanted (--fix), files with findings are read (and re-hashed) but not linted
    warm_sources = runner.lint_targets(linter, targets, cache=open_cache(linter), keep_sources=True)
    assert spy.paths == []
    assert snapshot(warm_sources) == snapshot(cold)
    assert all((r.source is not None) == bool(r.findings) for r in warm_sources)


def test_fresh_files_are_rehashed_not_trusted_by_mtime(tmp_path, monkeypatch):
    targets = make_tree(tmp_path, 4)  # just written: their mtimes are "racy"
    linter = linter_for(tmp_path)
    runner.lint_targets(linter, targets, cache=open_cache(linter))
    entries = open_cache(linter).entries
    assert all(entry[2] == 0 for entry in entries.values())
    spy = Spy(monkeypatch)
    runner.lint_targets(linter, targets, cache=open_cache(linter))
    assert spy.paths == []  # same bytes: answered by the hash


def test_changing_a_file_invalidates_it_even_with_same_size_and_mtime(tmp_path, monkeypatch):
    targets = make_tree(tmp_path, 4)
    linter = linter_for(tmp_path)
    before = runner.lint_targets(linter, targets, cache=open_cache(linter))
    path = targets[1].path
    assert before[1].findings
    stat = os.stat(path)
    text = open(path).read()
    with open(path, "w") as handle:  # same length, no finding any more
        handle.write(text.replace("transpose", "transpost"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_size == stat.st_size
    spy = Spy(monkeypatch)
    after = runner.lint_targets(linter, targets, cache=open_cache(linter))
    assert spy.paths == [path]
    assert after[1].findings == []


@pytest.mark.parametrize("change", [
    {"target": "npu"},
    {"per_file_ignores": {"m01.py": ["ASC101"]}},
    {"rule_options": {"ASC101": {}}},
])
def test_changing_the_configuration_invalidates(tmp_path, monkeypatch, change):
    targets = make_tree(tmp_path, 4)
    age(targets)
    linter = linter_for(tmp_path)
    runner.lint_targets(linter, targets, cache=open_cache(linter))
    other = linter_for(tmp_path, **change)
    assert open_cache(other).key != open_cache(linter).key
    spy = Spy(monkeypatch)
    runner.lint_targets(other, targets, cache=open_cache(other))
    assert sorted(spy.paths) == sorted(t.path for t in targets)


def test_output_only_settings_share_the_cache(tmp_path):
    linter = linter_for(tmp_path)
    same = linter_for(tmp_path, output_format="json", fix=True, cache_dir="elsewhere", exclude=["x"])
    assert run_key(same.settings, same.rules, "f") == run_key(linter.settings, linter.rules, "f")


def test_changing_the_selected_rules_or_a_pack_version_invalidates(tmp_path, monkeypatch):
    targets = make_tree(tmp_path, 4)
    age(targets)
    linter = linter_for(tmp_path)
    runner.lint_targets(linter, targets, cache=open_cache(linter))
    fewer = Linter([r for r in RULES if r.code != "ASC101"], linter.settings)
    assert open_cache(fewer).key != open_cache(linter).key
    upgraded = REGISTRY.fingerprint() + ";affinity=ascend-lint 99"
    assert open_cache(linter, upgraded).key != open_cache(linter).key
    spy = Spy(monkeypatch)
    runner.lint_targets(linter, targets, cache=open_cache(linter, upgraded))
    assert len(spy.paths) == len(targets)


def test_editing_a_rule_module_invalidates(tmp_path, monkeypatch):
    """An editable install keeps its version while rules change: their source files are in the key."""
    module = tmp_path / "ascend_tmp_pack_for_cache_test.py"
    module.write_text(textwrap.dedent("""
        from ascend_lint.rule import Rule

        class Demo(Rule):
            code = "XYZ901"
            name = "demo"
    """))
    os.utime(module, ns=(OLD, OLD))
    monkeypatch.syspath_prepend(str(tmp_path))
    import ascend_tmp_pack_for_cache_test as pack

    try:
        linter = Linter([pack.Demo], Settings(project_root=str(tmp_path)))
        key = open_cache(linter).key
        assert open_cache(linter).key == key
        os.utime(module, ns=(OLD + 10**9, OLD + 10**9))
        assert open_cache(linter).key != key
    finally:
        sys.modules.pop("ascend_tmp_pack_for_cache_test", None)


@pytest.mark.parametrize("garbage", [
    b"\x00\xffnot json",
    b'{"schema": 2, "key": "someone else", "entries": {}}',
    b"[1, 2, 3]",
    b'{"schema": 2, "key": "KEY", "entries": {"PATH": ["sha", "size", 0, [], [], [], 0, 0]}}',
    b'{"schema": 2, "key": "KEY", "entries": {"PATH": ["SHA", 1, 0, [[1, 2, 3]], [], [], 0, 0]}}',
    b'{"schema": 2, "key": "KEY", "entries": {"PATH": ["SHA", 1, 0, [[1,1,1,1,"ASC101","n","m","bogus",null]], '
    b'[], [], 0, 0]}}',
    b'{"schema": 2, "key": "KEY", "entries": {"PATH": ["SHA", 1, 0, [[1,1,1,1,"ASC101","n","m","warning",[1]]], '
    b'[], [], 0, 0]}}',
    b'{"schema": 2, "key": "KEY", "entries": {"PATH": ["SHA", 1, 0, [], "not deps", [], 0, 0]}}',
    b'{"schema": 2, "key": "KEY", "entries": {"PATH": ["SHA", 1, 0, [], []]}}',  # the layout before issue #30
])
def test_corrupt_or_foreign_cache_is_ignored_and_rewritten(tmp_path, garbage):
    targets = make_tree(tmp_path, 2)
    linter = linter_for(tmp_path)
    expected = snapshot(runner.lint_targets(linter, targets))
    cache = open_cache(linter)
    shard = cache.shard_path(targets[1].path)
    os.makedirs(os.path.dirname(shard), exist_ok=True)
    with open(targets[1].path, "rb") as handle:
        sha = cache_mod.content_hash(handle.read())
    data = (garbage.replace(b"KEY", cache.key.encode()).replace(b"PATH", os.path.abspath(targets[1].path).encode())
            .replace(b"SHA", sha.encode()))
    with open(shard, "wb") as handle:
        handle.write(data)
    assert snapshot(runner.lint_targets(linter, targets, cache=open_cache(linter))) == expected
    with open(shard, "rb") as handle:
        stored = json.loads(handle.read())
    assert stored["key"] == cache.key and os.path.abspath(targets[1].path) in stored["entries"]
    assert len(open_cache(linter).entries) == 2
    assert snapshot(runner.lint_targets(linter, targets, cache=open_cache(linter))) == expected


def test_entries_of_deleted_files_are_pruned_from_the_shards_a_run_rewrites(tmp_path):
    targets = make_tree(tmp_path, 4)
    linter = linter_for(tmp_path)
    cache = open_cache(linter)
    gone = tmp_path / "gone.py"
    neighbour = next(tmp_path / f"n{i}.py" for i in range(10_000)
                     if cache.shard_path(str(tmp_path / f"n{i}.py")) == cache.shard_path(str(gone)))
    gone.write_text(BAD)
    neighbour.write_text(GOOD)
    runner.lint_targets(linter, targets + [Target(str(gone), False), Target(str(neighbour), False)],
                        cache=open_cache(linter))
    assert len(open_cache(linter).entries) == 6
    gone.unlink()
    runner.lint_targets(linter, targets[2:], cache=open_cache(linter))  # a run over part of the tree
    entries = open_cache(linter).entries
    assert os.path.abspath(targets[1].path) in entries  # still there, just not linted this time
    neighbour.write_text(GOOD + "# changed\n")  # its shard is rewritten: the deleted file's entry goes
    runner.lint_targets(linter, [Target(str(neighbour), False)], cache=open_cache(linter))
    entries = open_cache(linter).entries
    assert str(gone) not in entries and len(entries) == 5


def test_a_run_rewrites_only_the_shards_of_the_files_it_changed(tmp_path):
    targets = make_tree(tmp_path, 40)
    age(targets)
    linter = linter_for(tmp_path)
    runner.lint_targets(linter, targets, cache=open_cache(linter))
    folder = open_cache(linter).folder
    before = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in os.listdir(folder)}
    assert len(before) > 8  # sharded
    with open(targets[3].path, "a") as handle:
        handle.write("# edited\n")
    runner.lint_targets(linter, targets, cache=open_cache(linter))
    after = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in os.listdir(folder)}
    changed = [name for name in after if after[name] != before.get(name)]
    assert changed == [os.path.basename(open_cache(linter).shard_path(targets[3].path))]


def test_concurrent_writers_merge_instead_of_clobbering(tmp_path):
    targets = make_tree(tmp_path, 4)
    linter = linter_for(tmp_path)
    first, second = open_cache(linter), open_cache(linter)
    runner.lint_targets(linter, targets[:2], cache=first)
    runner.lint_targets(linter, targets[2:], cache=second)
    assert len(open_cache(linter).entries) == 4
    leftovers = [n for n in os.listdir(first.folder) if n.startswith(".")]
    assert leftovers == []


def test_cache_dir_layout_and_flags(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, 2)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--isolated", "--no-cache", "."]) == 1
    assert not (tmp_path / ".ascend_lint_cache").exists()
    assert main(["check", "--isolated", "."]) == 1
    cache_dir = tmp_path / ".ascend_lint_cache"
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert "*" in (cache_dir / ".gitignore").read_text().split()
    assert main(["check", "--isolated", "--cache-dir", "sub/c", "."]) == 1
    assert (tmp_path / "sub" / "c" / "CACHEDIR.TAG").exists()
    (tmp_path / "pyproject.toml").write_text('[tool.ascend-lint]\ncache-dir = "from-config"\n')
    (tmp_path / "pkg").mkdir()
    monkeypatch.chdir(tmp_path / "pkg")
    assert main(["check", ".."]) == 1
    assert (tmp_path / "from-config" / "CACHEDIR.TAG").exists()  # relative to the project root
    capsys.readouterr()


def test_warm_cli_run_prints_the_same_report(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, 6)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    runs = []
    for _ in range(2):
        code = main(["check", "--isolated", "."])
        runs.append((code, capsys.readouterr().out))
    assert runs[0] == runs[1] and "2 | y = torch.transpose" in runs[0][1]


def _safe_fix_example():
    for rule in RULES:
        if rule.fix_applicability is not Applicability.SAFE:
            continue
        for example in rule.flagged_sources():
            source = textwrap.dedent(example)
            findings = Linter([rule], Settings(preview=True, target="npu")).check(source, "x.py")
            if any(f.fix and f.fix.applicability is Applicability.SAFE for f in findings):
                return rule, source
    return None


def test_a_fix_run_never_reuses_results_of_the_file_it_rewrote(tmp_path, monkeypatch, capsys):
    found = _safe_fix_example()
    if found is None:
        pytest.skip("no registered rule has a safe fix yet")
    rule, source = found
    path = tmp_path / "train.py"
    path.write_text(source)
    os.utime(path, ns=(OLD, OLD))
    monkeypatch.chdir(tmp_path)
    base = ["check", "--isolated", "--target", "npu", "--preview", "--select", rule.code, "--output-format", "json"]
    assert main(base) == 1  # fills the cache with the unfixed file's findings
    capsys.readouterr()
    main(base + ["--fix"])
    capsys.readouterr()
    assert path.read_text() != source
    main(base)
    cached = json.loads(capsys.readouterr().out)
    main(base + ["--no-cache"])
    fresh = json.loads(capsys.readouterr().out)
    assert cached == fresh


def test_plain_check_never_imports_libcst(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    code = textwrap.dedent(f"""
        import sys
        from ascend_lint.cli import main
        main(["check", "--isolated", "--preview", "-j", "1", {str(tmp_path)!r}])
        main(["check", "--isolated", "--preview", {str(tmp_path)!r}])
        print("LIBCST", "libcst" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "LIBCST False" in out.stdout, out.stdout + out.stderr


def test_freed_memory_is_given_back_between_phases_without_failing(monkeypatch):
    """`heap.give_back` trims glibc's heap where there is one and is a no-op elsewhere."""
    import platform

    from ascend_lint import heap

    heap.give_back()
    heap.give_back()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert heap._trim is not None
    monkeypatch.setattr(heap.sys, "platform", "darwin")
    assert heap._find_malloc_trim() is None
