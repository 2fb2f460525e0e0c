"""The cache is untrusted input (issue #30): bounded reads, framing checked, the stat check (size, mtime,
ctime, inode), directories only the user can write, and what a crafted entry can and cannot do."""
from __future__ import annotations

import glob
import json
import os
import shutil
import stat
from typing import List

import pytest
from hypothesis import given, settings, strategies as st

from ascend_lint.cli import main
from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.pipeline import cache_entries, cache_io, cache_store, runner
from ascend_lint.pipeline.cache import ResultCache, content_hash
from ascend_lint.pipeline.cache_entries import decode_finding
from ascend_lint.pipeline.cache_io import nests_within, parse_json
from ascend_lint.pipeline.discovery import Target
from ascend_lint.pipeline.project_store import ProjectStore
from ascend_lint.registry import load_registry

REGISTRY = load_registry()
RULES = REGISTRY.sorted_rules()
BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"
GOOD = "import torch\ny = x.view(2, -1)\n"
SAFE_FIX = "import torch\ny = torch.ones(2)  # noqa: ASC990\n"  # ASC001 (preview): a safe fix removes the code
OLD = 1_000_000_000 * 1_600_000_000
DEEP = b"[" * 100_000 + b"]" * 100_000
CLI = ["check", "--isolated", "--preview", "--output-format", "concise"]
OTHER_UID = 54321


class Spy:
    """The files the engine really lints (in this process)."""

    def __init__(self, monkeypatch):
        self.paths: List[str] = []
        original = Linter.lint_source

        def lint_source(linter, source, *args, **kwargs):
            self.paths.append(os.path.basename(source.path))
            return original(linter, source, *args, **kwargs)

        monkeypatch.setattr(Linter, "lint_source", lint_source)


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(cache_io, "_warned", set())


def run(capsys, *args: str) -> tuple:
    code = main(CLI + list(args))
    out, err = capsys.readouterr()
    return code, out, err


def project(tmp_path, monkeypatch, files=None) -> None:
    """A project (a marker: its whole tree is indexed and its listing stored) with these files."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, text in (files or {"bad.py": BAD, "good.py": GOOD}).items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)


def cache_files(root, pattern: str) -> List[str]:
    return sorted(glob.glob(os.path.join(str(root), ".ascend_lint_cache", pattern)))


def result_entry(root, name: str):
    """(shard path, shard data, entry) of a file's cached result."""
    key = os.path.abspath(os.path.join(str(root), name))
    for path in cache_files(root, "v2/*/*.json"):
        with open(path) as handle:
            data = json.load(handle)
        if key in data["entries"]:
            return path, data, data["entries"][key]
    raise AssertionError(f"no entry for {name}")


def rewrite(path: str, data) -> None:
    with open(path, "w") as handle:
        json.dump(data, handle)


# ----------------------------------------------------------------------------- bounded JSON
def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9\n'),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text('[]{}"\\k'), inner, max_size=3),
                    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans())
def test_the_nesting_scan_measures_json_depth_exactly(value, ascii_only):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    d = depth(value)
    assert nests_within(raw, d) and not (d and nests_within(raw, d - 1))
    assert parse_json(raw) == (value if d <= cache_io.MAX_DEPTH else None)


@pytest.mark.parametrize("raw", [
    DEEP, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"[" * 33 + b"]" * 33,
    b'["' + b"]" * 40 + b'"' + b"[" * 40 + b"]" * 40 + b"]",  # brackets in strings do not hide real ones
    b'["\\"", ' + b"[" * 40 + b"]" * 40 + b"]",  # nor does an escaped quote
    b"[" * 40, b"]]]][[[[", b"\xff\xfe[\x00]\x00", b"[1, 2] trailing", b"",
])
def test_deep_or_malformed_json_is_refused_without_recursion(raw):
    assert parse_json(raw) is None


def test_bounded_json_still_reads_what_the_cache_writes():
    value = {"entries": {"/p/a.py": ["0" * 64, 1, 2, [[1, 1, 1, 2, "ASC101", "n", 'm "[x]"', "warning",
                                                        ["safe", "d", [["replace", [1, 0, 1, 3], "]}", ""]], []]]],
                                     [["q", "x", [["a", [1, 2]]]]], [], 3, 4]}}
    assert parse_json(json.dumps(value).encode("ascii")) == value


# ----------------------------------------------------------------------------- 100,000-deep cache files
@pytest.mark.parametrize("kind", ["v2/*/*.json", "project-v6/*/summaries/*.json", "project-v6/*/index.json",
                                  "project-v6/*/listing.json", "project-v6/*/model-*.json"])
def test_a_100000_deep_cache_file_is_a_miss_and_is_rewritten(tmp_path, monkeypatch, capsys, kind):
    project(tmp_path, monkeypatch)
    files = ("bad.py", "good.py")  # (named files: the project's listing is walked and stored too)
    expected = run(capsys, "--no-cache", *files)
    assert run(capsys, *files) == expected
    targets = cache_files(tmp_path, kind)
    assert targets
    for path in targets:
        with open(path, "wb") as handle:
            handle.write(DEEP)
    assert run(capsys, *files) == expected  # was: RecursionError, an internal error on every later run
    for path in targets:
        with open(path, "rb") as handle:
            assert parse_json(handle.read()) is not None
    assert run(capsys, *files) == expected


def test_a_shard_over_the_size_bound_is_a_miss_and_is_rewritten_within_it(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch)
    expected = run(capsys, "--no-cache", ".")
    run(capsys, ".")
    shard, data, _entry = result_entry(tmp_path, "bad.py")
    data["entries"]["/elsewhere/padding.py"] = ["0" * 64, 1, 0, [], [], ["x" * 4000], 0, 0]
    rewrite(shard, data)
    monkeypatch.setattr(cache_store, "SHARD_BYTES", os.path.getsize(shard) - 1)
    spy = Spy(monkeypatch)
    assert run(capsys, ".") == expected
    assert "bad.py" in spy.paths  # not read: linted
    assert os.path.getsize(shard) <= cache_store.SHARD_BYTES
    assert result_entry(tmp_path, "bad.py")[2][3]  # rewritten with the file's findings


def test_an_entry_too_large_for_a_shard_is_left_out_the_others_are_written(tmp_path):
    cache = ResultCache(str(tmp_path / "c"), "k" * 64)
    entries = {f"/p/{i}.py": ["0" * 64, 1, 0, [], [], ["x" * (100 if i else 5000)], 0, 0] for i in range(5)}
    kept = cache_store.fit(entries, 2000)
    assert "/p/0.py" not in kept and len(kept) == 4
    assert len(json.dumps({"schema": 2, "key": cache.key, "entries": kept})) <= 2000


# ----------------------------------------------------------------------------- framing
ENTRY = ["0" * 64, 10, OLD, [[2, 5, 2, 44, "ASC101", "n", "m", "warning", None]], [], [], OLD, 7]


@pytest.mark.parametrize("change", [
    lambda e: e[:5] + e[6:],  # the old 5/6-field layout
    lambda e: ["0" * 63] + e[1:],
    lambda e: ["0" * 63 + "G"] + e[1:],
    lambda e: [e[0], True] + e[2:],  # a bool is no int
    lambda e: [e[0], -1] + e[2:],
    lambda e: e[:6] + [2 ** 63, e[7]],
    lambda e: e[:4] + [{"not": "a list"}] + e[5:],
    lambda e: e[:4] + [[["q"]]] + e[5:],  # a dep needs a question and an answer
    lambda e: e[:5] + [[1]] + e[6:],  # notes are strings
])
def test_malformed_entries_are_a_miss(change):
    assert cache_entries.well_formed(ENTRY)
    assert not cache_entries.well_formed(change(list(ENTRY)))


@pytest.mark.parametrize("finding", [
    [2, 5, 2, 44, "ASC101", "n", "m", "warning"],
    [0, 5, 0, 44, "ASC101", "n", "m", "warning", None],  # lines are 1-based
    [3, 5, 2, 44, "ASC101", "n", "m", "warning", None],  # ends before it starts
    [2, True, 2, 44, "ASC101", "n", "m", "warning", None],
    [2, 5, 2, 44, "ZZZ999", "n", "m", "warning", None],  # no rule of this run has the code
    [2, 5, 2, 44, "ASC101", "n", "m", "fatal", None],
    [2, 5, 2, 44, "ASC101", "n", "m", "warning", ["safe", "d", [["replace", [1, 0, 1], "x", ""]], []]],
    [2, 5, 2, 44, "ASC101", "n", "m", "warning", ["sure", "d", [], []]],
    [2, 5, 2, 44, "ASC101", "n", "m", "warning", ["safe", "d", [], "torch_npu"]],
    [2, 5, 2, 44, "ASC101", "n", 7, "warning", None],
])
def test_malformed_findings_are_refused(finding):
    good = [2, 5, 2, 44, "ASC101", "n", "m", "warning", ["safe", "d", [["replace", [1, 0, 1, 3], "x", ""]], []]]
    assert decode_finding(good, "p.py", {"ASC101"}).fix.edits[0].text == "x"
    with pytest.raises((KeyError, TypeError, ValueError)):
        decode_finding(finding, "p.py", {"ASC101"})


@pytest.mark.parametrize("names", [["..", "sub"], ["a/b"], ["."], [""], ["a\0b"]])
def test_a_listing_that_leads_out_of_its_directory_is_not_used(tmp_path, names):
    store = ProjectStore(str(tmp_path / "c"), str(tmp_path / "c" / "project-v6" / "p"))
    os.makedirs(store.folder)
    entry = [OLD, ["a.py"], names, None, False, [], "k"]
    rewrite(os.path.join(store.folder, "listing.json"), {"key": "K", "above": {}, "dirs": {str(tmp_path): entry}})
    assert store.listing("K").dirs == {}
    entry[2] = ["sub"]
    rewrite(os.path.join(store.folder, "listing.json"), {"key": "K", "above": {}, "dirs": {str(tmp_path): entry}})
    assert ProjectStore(store.directory, store.folder).listing("K").dirs == {str(tmp_path): entry}


# ----------------------------------------------------------------------------- what a crafted entry can do
def test_a_crafted_entry_without_findings_is_believed_only_inside_the_trust_boundary(tmp_path, monkeypatch, capsys):
    """The cache is keyed by the file's bytes: an entry for the right run key, path and content hash that
    says "no findings" cannot be told from a true one without linting the file again. Whoever can write
    the user's cache directory can hide findings, as whoever can write the configuration can; nobody
    else can: the same entry in a directory another user owns is never read, and it does not survive a
    change of the file, of the run key or of the rules."""
    project(tmp_path, monkeypatch)
    code, out, _ = run(capsys, ".")
    assert code == 1 and "bad.py:2:5: ASC101" in out
    shard, data, entry = result_entry(tmp_path, "bad.py")
    entry[3] = []
    rewrite(shard, data)
    assert run(capsys, ".")[:2] == (0, "All checks passed!\n")  # believed: the user's own cache
    assert run(capsys, "--no-cache", ".")[0] == 1  # the ground truth is one flag away
    assert "ASC101" in run(capsys, "--select", "ASC101", ".")[1]  # another run key: a miss
    rewrite(shard, data)
    os.chown(tmp_path / ".ascend_lint_cache", OTHER_UID, OTHER_UID)
    code, out, err = run(capsys, ".")
    assert code == 1 and "bad.py:2:5: ASC101" in out  # someone else's directory: never read
    assert f"owned by another user (uid {OTHER_UID})" in err
    os.chown(tmp_path / ".ascend_lint_cache", os.getuid(), os.getgid())
    (tmp_path / "bad.py").write_text(BAD + "# edited\n")
    assert "bad.py:2:5: ASC101" in run(capsys, ".")[1]  # other bytes: another hash


def test_a_crafted_finding_with_a_code_the_run_does_not_have_is_a_miss(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch)
    expected = run(capsys, ".")
    shard, data, entry = result_entry(tmp_path, "bad.py")
    entry[3][0][4] = "ZZZ999"
    rewrite(shard, data)
    assert run(capsys, ".") == expected


def _craft_safe_fixes(root, name: str, text: str) -> int:
    """Give every cached finding of `name` a safe fix that writes `text` over it."""
    shard, data, entry = result_entry(root, name)
    for finding in entry[3]:
        line, col, end_line, end_col = finding[:4]
        finding[8] = ["safe", "crafted", [["replace", [line, col - 1, end_line, end_col - 1], text, ""]], []]
    rewrite(shard, data)
    return len(entry[3])


def test_plain_fix_never_writes_a_crafted_safe_fix_from_the_cache(tmp_path, monkeypatch, capsys):
    crafted = "__import__('os').system('touch PWNED')"
    project(tmp_path, monkeypatch, {"m.py": SAFE_FIX + BAD.replace("import torch, torch_npu\n", "import torch_npu\n")})
    reference = tmp_path / "reference"
    reference.mkdir()
    shutil.copy(tmp_path / "m.py", reference / "m.py")
    main(CLI + ["--no-cache", "--fix", str(reference / "m.py")])
    fixed = (reference / "m.py").read_text()
    assert fixed != (tmp_path / "m.py").read_text()  # (a real safe fix applies)
    capsys.readouterr()
    assert run(capsys, "m.py")[0] == 1
    assert _craft_safe_fixes(tmp_path, "m.py", crafted) == 2
    spy = Spy(monkeypatch)
    code, out, _ = run(capsys, "--show-fixes", "m.py")
    assert spy.paths == [] and "ASC101" in out  # a report run reads the entry
    main(CLI + ["--fix", "m.py"])
    capsys.readouterr()
    assert crafted not in (tmp_path / "m.py").read_text() and not (tmp_path / "PWNED").exists()
    assert (tmp_path / "m.py").read_text() == fixed and spy.paths == ["m.py"]  # linted again: its own fixes only


def test_a_fix_run_relints_files_whose_cached_findings_carry_fixes_and_only_those(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch, {"fixable.py": SAFE_FIX, "bad.py": BAD, "good.py": GOOD})
    for name in ("fixable.py", "bad.py", "good.py"):
        os.utime(tmp_path / name, ns=(OLD, OLD))
    run(capsys, ".")
    spy = Spy(monkeypatch)
    run(capsys, "--diff", ".")  # (shows fixes, writes nothing: not a --fix run)
    run(capsys, ".")
    assert spy.paths == []
    main(CLI + ["--fix", "."])
    capsys.readouterr()
    assert spy.paths[0] == "fixable.py" and "bad.py" not in spy.paths and "good.py" not in spy.paths


# ----------------------------------------------------------------------------- the stat check
@pytest.fixture
def trusted_stat(monkeypatch):
    """Entries written in a test trust the stat (the racy window is what a test cannot wait out)."""
    monkeypatch.setattr(cache_entries, "RACY_NS", 0)


def _linted_again(tmp_path, monkeypatch, capsys, change) -> List[str]:
    path = tmp_path / "bad.py"
    run(capsys, ".")
    _shard, _data, entry = result_entry(tmp_path, "bad.py")
    before = os.stat(path)
    assert (entry[1], entry[2], entry[6], entry[7]) == (before.st_size, before.st_mtime_ns, before.st_ctime_ns,
                                                        before.st_ino)
    spy = Spy(monkeypatch)
    run(capsys, ".")
    assert spy.paths == []  # the stat alone answers
    change(path, before)
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    code, out, _ = run(capsys, ".")
    assert code == 0 and "ASC101" not in out
    return spy.paths


def _same_size_without_finding() -> str:
    text = BAD.replace("transpose", "transpost")
    assert len(text) == len(BAD)
    return text


def test_cp_p_with_the_mtime_set_back_and_a_new_inode_is_rehashed(tmp_path, monkeypatch, capsys, trusted_stat):
    project(tmp_path, monkeypatch)

    def cp_p(path, before):  # what `cp -p`, `rsync -a` or `tar x` leave: a new file, the old size and mtime
        other = tmp_path / "incoming.tmp"
        other.write_text(_same_size_without_finding())
        os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(other, path)
        assert os.stat(path).st_ino != before.st_ino

    assert _linted_again(tmp_path, monkeypatch, capsys, cp_p) == ["bad.py"]


def test_a_rewrite_in_place_with_the_mtime_set_back_is_rehashed(tmp_path, monkeypatch, capsys, trusted_stat):
    project(tmp_path, monkeypatch)

    def rewrite_in_place(path, before):
        with open(path, "r+") as handle:
            handle.write(_same_size_without_finding())
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    assert _linted_again(tmp_path, monkeypatch, capsys, rewrite_in_place) == ["bad.py"]


def test_the_project_index_compares_ctime_and_inode_too(tmp_path, trusted_stat):
    path = tmp_path / "m.py"
    path.write_text(BAD)
    store = ProjectStore(str(tmp_path / "c"), str(tmp_path / "c" / "project-v6" / "p"))
    before = os.stat(path)
    assert store.stat_entry("m.py", before) is None
    store.put("m.py", before.st_size, before.st_mtime_ns, before.st_mtime_ns + 1, "a" * 64, None, "shape")
    store.save()
    store = ProjectStore(store.directory, store.folder)
    assert store.stat_entry("m.py", os.stat(path)) == ("a" * 64, "shape")
    other = tmp_path / "incoming.tmp"
    other.write_text(_same_size_without_finding())
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(other, path)
    assert store.stat_entry("m.py", os.stat(path)) is None


def test_a_stat_taken_just_before_a_change_is_not_trusted(tmp_path):
    """git's racy rule, on the ctime too: a file changed within RACY_NS of the read is re-hashed next time,
    whatever its mtime says."""
    path = tmp_path / "m.py"
    path.write_text(BAD)
    os.utime(path, ns=(OLD, OLD))  # an old mtime, a fresh ctime
    cache = ResultCache(str(tmp_path / "c"), "k" * 64)
    st_ = os.stat(path)
    assert cache.lookup(str(path), st_) is None
    cache.store(str(path), "a" * 64, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns + 1, [])
    assert cache._shards.get(os.path.abspath(path))[2] == 0
    cache.store(str(path), "a" * 64, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns + cache_entries.RACY_NS + 1, [])
    assert cache._shards.get(os.path.abspath(path))[2] == OLD
    cache.store(str(path), "a" * 64, st_.st_size + 1, st_.st_mtime_ns, st_.st_ctime_ns + cache_entries.RACY_NS + 1, [])
    assert cache._shards.get(os.path.abspath(path))[2] == 0  # the read saw other bytes than the stat


# ----------------------------------------------------------------------------- whose directory
def _cache_used(tmp_path, monkeypatch, capsys) -> bool:
    spy = Spy(monkeypatch)
    run(capsys, ".")
    return spy.paths == []


@pytest.mark.parametrize("where", ["top", "v2", "run-key", "project"])
@pytest.mark.parametrize("how", ["another-owner", "world-writable", "group-writable", "symlink"])
def test_a_directory_someone_else_can_write_is_not_used(tmp_path, monkeypatch, capsys, where, how):
    project(tmp_path, monkeypatch)
    expected = run(capsys, "--no-cache", ".")
    run(capsys, ".")
    top = tmp_path / ".ascend_lint_cache"
    target = {"top": top, "v2": top / "v2", "run-key": next((top / "v2").iterdir()),
              "project": next((top / "project-v6").iterdir())}[where]
    if how == "another-owner":
        os.chown(target, OTHER_UID, os.getgid())
    elif how == "world-writable":
        os.chmod(target, 0o777 | stat.S_ISVTX)  # (the sticky bit does not stop others adding files)
    elif how == "group-writable":
        os.chown(target, os.getuid(), 100 if os.getgid() != 100 else 101)
        os.chmod(target, 0o775)
    else:
        if where == "top":
            pytest.skip("the cache directory itself may be a symbolic link (the user's choice)")
        moved = tmp_path / "elsewhere"
        os.replace(target, moved)
        os.symlink(moved, target)
    snapshot = sorted(os.path.relpath(p, tmp_path) for p in glob.glob(str(tmp_path / "**"), recursive=True))
    mtimes = {p: os.lstat(p).st_mtime_ns for p in glob.glob(str(top / "**"), recursive=True)}
    code, out, err = run(capsys, ".")
    assert (code, out) == expected[:2]
    assert "warning: the cache directory is not used" in err and err.count("warning") == 1
    assert sorted(os.path.relpath(p, tmp_path) for p in glob.glob(str(tmp_path / "**"), recursive=True)) == snapshot
    assert {p: os.lstat(p).st_mtime_ns for p in glob.glob(str(top / "**"), recursive=True)} == mtimes


def test_a_cache_directory_writable_by_the_users_own_group_is_used(tmp_path, monkeypatch, capsys):
    if not cache_io._private_group(os.getgid()):
        pytest.skip("the user's group is not a user-private group here")
    project(tmp_path, monkeypatch)
    run(capsys, ".")
    os.chmod(tmp_path / ".ascend_lint_cache", 0o775)
    assert _cache_used(tmp_path, monkeypatch, capsys)


def test_files_in_the_cache_someone_else_could_have_written_are_a_miss_and_replaced(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch)
    expected = run(capsys, ".")
    shard = result_entry(tmp_path, "bad.py")[0]
    os.chown(shard, OTHER_UID, os.getgid())
    spy = Spy(monkeypatch)
    assert run(capsys, ".") == expected and spy.paths == ["bad.py"]
    assert os.stat(shard).st_uid == os.getuid()
    os.chmod(shard, 0o666)
    assert run(capsys, ".") == expected and spy.paths == ["bad.py"] * 2
    assert stat.S_IMODE(os.stat(shard).st_mode) & 0o022 == 0
    assert run(capsys, ".") == expected and spy.paths == ["bad.py"] * 2


@pytest.mark.parametrize("kind", ["symlink-to-source", "fifo", "directory"])
def test_a_shard_that_is_not_a_regular_file_is_not_read_through(tmp_path, monkeypatch, capsys, kind):
    project(tmp_path, monkeypatch)
    expected = run(capsys, ".")
    shard = result_entry(tmp_path, "bad.py")[0]
    os.unlink(shard)
    if kind == "symlink-to-source":
        os.symlink(tmp_path / "bad.py", shard)
    elif kind == "fifo":
        os.mkfifo(shard)  # an open would block: it is never opened
    else:
        os.mkdir(shard)
    assert run(capsys, ".") == expected
    assert (tmp_path / "bad.py").read_text() == BAD
    if kind != "directory":
        assert stat.S_ISREG(os.lstat(shard).st_mode)  # replaced by a shard (the link, not its target)


def test_stale_run_folders_are_removed_but_never_through_a_symbolic_link(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch)
    run(capsys, ".")
    parent = tmp_path / ".ascend_lint_cache" / "v2"
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "00.json").write_text("{}")
    (precious / "notes.txt").write_text("keep me")
    stale = parent / ("a" * 32)
    stale.mkdir()
    (stale / "00.json").write_text("{}")
    os.symlink(precious, parent / ("b" * 32))
    for path in (precious, stale):
        os.utime(path, (OLD / 1e9, OLD / 1e9))
    (tmp_path / "bad.py").write_text(BAD + "# edited\n")  # (a run that writes removes stale folders)
    run(capsys, ".")
    assert not stale.exists()
    assert sorted(os.listdir(precious)) == ["00.json", "notes.txt"]


def test_with_umask_0_the_cache_is_still_private_and_used(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch)
    old = os.umask(0)
    try:
        run(capsys, ".")
        top = tmp_path / ".ascend_lint_cache"
        for path in [str(top)] + glob.glob(str(top / "**"), recursive=True):
            assert stat.S_IMODE(os.lstat(path).st_mode) & 0o022 == 0, path
        assert _cache_used(tmp_path, monkeypatch, capsys)
    finally:
        os.umask(old)


def test_the_warning_names_the_directory_and_is_given_once(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch)
    os.mkdir(tmp_path / "shared")
    os.chmod(tmp_path / "shared", 0o777)
    code, _out, err = run(capsys, "--cache-dir", "shared", ".")
    assert code == 1
    assert err == (f"warning: the cache directory is not used (the run goes on without it): {tmp_path / 'shared'}: "
                   "every user can write it; remove it, or choose another with --cache-dir or the cache-dir setting\n")
    assert os.listdir(tmp_path / "shared") == []


# ----------------------------------------------------------------------------- left to the record decoders
@pytest.mark.parametrize("what", ["summary", "model", "deps"])
def test_a_well_framed_crafted_summary_model_or_dep_does_not_crash_the_run(tmp_path, monkeypatch, capsys, what):
    """Entries whose framing is right but whose records are not (the analysis layer's decoders refuse them):
    a miss, the same findings as a run without the cache."""
    project(tmp_path, monkeypatch, {"a.py": BAD, "b.py": "import torch\nfrom a import *\n"})
    expected = run(capsys, "--no-cache", ".")
    run(capsys, ".")
    if what == "deps":
        shard, data, entry = result_entry(tmp_path, "a.py")
        entry[4] = [1, ["class_kind", [5], None], ["module_facts", ["a"], {"X": 5}], ["nope", [], 1]]
        rewrite(shard, data)
        assert run(capsys, ".")[:2] == expected[:2]
        return
    crafted = cache_files(tmp_path, "project-v6/*/summaries/*.json" if what == "summary" else
                          "project-v6/*/model-*.json")
    assert crafted
    for path in crafted:
        with open(path) as handle:
            data = json.load(handle)
        if what == "summary":
            for row in data["entries"].values():  # (the schema kept, every record replaced)
                row[2:] = [[[1, 2]] if isinstance(v, list) else {"X": 5} if isinstance(v, dict) else v
                           for v in row[2:]]
        else:
            tables = data["tables"]
            for key in list(tables):
                if key != "schema":
                    tables[key] = {"X": 5} if isinstance(tables[key], dict) else [[1, 2]]
        rewrite(path, data)
    if what == "summary":
        for model in cache_files(tmp_path, "project-v6/*/model-*.json"):
            os.unlink(model)
    assert run(capsys, ".")[:2] == expected[:2]


def test_content_hash_is_sha256():
    assert content_hash(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_a_run_with_an_unreadable_cache_directory_goes_on(tmp_path):
    (tmp_path / "c").write_text("not a directory")
    settings = Settings(project_root=str(tmp_path), cache_dir="c")
    cache = ResultCache.open(settings, RULES, REGISTRY.fingerprint())
    path = tmp_path / "m.py"
    path.write_text(BAD)
    linter = Linter(RULES, Settings(project_root=str(tmp_path), preview=True))
    results = runner.lint_targets(linter, [Target(str(path), False)], cache=cache)
    assert [f.code for f in results[0].findings] == ["ASC101"]


def test_a_file_linted_again_after_a_stat_hit_keeps_its_recorded_stat(tmp_path, trusted_stat):
    """(The lint after a stat hit, when the project model's answers changed: the stat the hit confirmed
    is recorded again, so the next run is not made to re-hash the file.)"""
    path = tmp_path / "m.py"
    path.write_text(BAD)
    st_ = os.stat(path)
    cache = ResultCache(str(tmp_path / "c"), "k" * 64)
    assert cache.lookup(str(path), st_) is None
    cache.store(str(path), content_hash(BAD.encode()), st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns + 1, [])
    cache.save()
    again = ResultCache(cache.directory, cache.key)
    assert again.lookup(str(path), os.stat(path)) is not None
    again.store(str(path), content_hash(BAD.encode()), st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns + 1, [])
    assert again._shards.get(os.path.abspath(path))[2] == st_.st_mtime_ns
