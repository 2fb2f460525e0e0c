"""Hostile and broken input through the real CLI: a clear ASC000 per bad file, and the run goes on."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ascend_lint.cli import main

GOOD = b"import torch_npu\ny = x.t().contiguous() @ w\n"  # one ASC101 on line 2, so we see the run went on
TRIGGER = b"import torch_npu  # contiguous\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "zz_good.py").write_bytes(GOOD)
    return tmp_path


def check(capsys, *paths, fmt="json"):
    code = main(["check", *paths, "zz_good.py", "--isolated", "--output-format", fmt, "-j", "1"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def by_file(out):
    rows = json.loads(out)
    result = {}
    for row in rows:
        result.setdefault(row["filename"], []).append(row)
    return result


def assert_one_asc000(capsys, name, needle, line=None):
    code, out, _ = check(capsys, name)
    rows = by_file(out)
    assert code == 1
    assert [r["code"] for r in rows["zz_good.py"]] == ["ASC101"], "the run must go on to the next file"
    (bad,) = rows[name]
    assert bad["code"] == "ASC000" and needle in bad["message"], bad["message"]
    if line is not None:
        assert bad["location"]["row"] == line
    return bad


CASES = {
    "syntax_error.py": (TRIGGER + b"def f(:\n    pass\n", "syntax error", 2),
    "py2_print.py": (TRIGGER + b'print "x"\n', "Python 2 code", 2),
    "py2_except.py": (TRIGGER + b"try:\n    pass\nexcept ValueError, e:\n    pass\n", "Python 2 code", 4),
    "newer_syntax.py": (TRIGGER + b"type Alias[T] = list[T]\n" if sys.version_info < (3, 12) else None,
                        "parsed as Python", 2),
    "latin1_no_cookie.py": (TRIGGER + "s = 'caf\xe9'\n".encode("latin-1"), "not valid utf-8", 2),
    "cp1252_no_cookie.py": (TRIGGER + "s = '\u201cquoted\u201d'\n".encode("cp1252"), "not valid utf-8", 2),
    "utf16.py": (TRIGGER.decode().encode("utf-16"), "UTF-16", 1),
    "invalid_utf8.py": (TRIGGER + b"s = '\xc3\x28'\n", "not valid utf-8", 2),
    "nul_bytes.py": (TRIGGER + b"x = 1\x00\n", "binary file", 2),
    "binary.py": (bytes(range(256)) * 4, "", None),
    "bad_cookie.py": (b"# -*- coding: no-such-codec -*-\n" + TRIGGER, "encoding", 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_source_files(project, capsys, name):
    data, needle, line = CASES[name]
    if data is None:
        pytest.skip("this interpreter supports that syntax")
    (project / name).write_bytes(data)
    bad = assert_one_asc000(capsys, name, needle, line)
    if name == "binary.py":
        assert "binary" in bad["message"] or "UTF-16" in bad["message"] or "not valid" in bad["message"]


@pytest.mark.parametrize("name,data,encoding", [
    ("latin1_cookie.py", "# -*- coding: latin-1 -*-\nimport torch_npu\ns = 'caf\xe9'; y = x.t().contiguous() @ w\n", "latin-1"),
    ("cp1252_cookie.py", "# coding: cp1252\nimport torch_npu\ns = '\u20ac'; y = x.t().contiguous() @ w\n", "cp1252"),
    ("bom.py", "\ufeffimport torch_npu\ns = 'é'; y = x.t().contiguous() @ w\n", "utf-8"),
])
def test_declared_encodings_are_linted(project, capsys, name, data, encoding):
    (project / name).write_bytes(data.encode(encoding))
    code, out, _ = check(capsys, name)
    (finding,) = by_file(out)[name]
    assert finding["code"] == "ASC101" and finding["location"]["row"] == data.lstrip("\ufeff").count("\n", 0, data.index("y =")) + 1


def test_empty_file_is_fine(project, capsys):
    (project / "empty.py").write_bytes(b"")
    code, out, _ = check(capsys, "empty.py")
    assert "empty.py" not in by_file(out)


def test_ten_megabyte_generated_file(project, capsys):
    line = b"weights_%06d = torch.zeros(16, 16, dtype=torch.float16, device='cpu')  # generated\n"
    body = b"".join(line % i for i in range(120_000))
    data = b"import torch_npu\n" + body + b"y = x.t().contiguous() @ w\n"
    assert 10_000_000 < len(data) <= 10 * 1024 * 1024  # just under the default `max-file-size` (10 MiB)
    (project / "big.py").write_bytes(data)
    code, out, _ = check(capsys, "big.py")
    assert [r["location"]["row"] for r in by_file(out)["big.py"]] == [120_002]


@pytest.mark.parametrize("data", [
    TRIGGER + b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
    TRIGGER + b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    TRIGGER + b"x = " + b" + ".join([b"a"] * 200_000) + b"\n",
    TRIGGER + b"x = " + b"-" * 200_000 + b"1\n",
], ids=["parens", "lists", "long-sum", "unary-chain"])
def test_deep_nesting_gives_a_diagnostic_not_a_crash(project, capsys, data):
    (project / "deep.py").write_bytes(data)
    code, out, _ = check(capsys, "deep.py")
    rows = by_file(out)
    assert [r["code"] for r in rows["zz_good.py"]] == ["ASC101"]
    for row in rows.get("deep.py", []):
        assert row["code"] == "ASC000"


def test_directory_named_like_a_python_file(project, capsys):
    (project / "pkg.py").mkdir()
    (project / "pkg.py" / "inner.py").write_bytes(GOOD)
    code, out, _ = check(capsys, "pkg.py")
    assert [r["code"] for r in by_file(out)[os.path.join("pkg.py", "inner.py")]] == ["ASC101"]


def test_broken_symlink(project, capsys):
    os.symlink(project / "missing_target.py", project / "dangling.py")
    assert_one_asc000(capsys, "dangling.py", "broken symbolic link", 1)


def test_symlink_loop(project, capsys):
    os.symlink(project / "loop_b.py", project / "loop_a.py")
    os.symlink(project / "loop_a.py", project / "loop_b.py")
    assert_one_asc000(capsys, "loop_a.py", "cannot read the file", 1)
    os.symlink(project, project / "dirloop")
    code, out, _ = check(capsys, ".")  # walking a tree with a directory loop terminates
    assert code == 1


def test_unreadable_file(project, capsys, monkeypatch):
    (project / "secret.py").write_bytes(GOOD)
    real_open = os.open  # sources are opened with os.open (non-blocking, regular files only)

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith("secret.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    assert_one_asc000(capsys, "secret.py", "permission denied", 1)


def test_path_that_does_not_exist(project, capsys):
    assert_one_asc000(capsys, "no/such/file.py", "no such file or directory", 1)


def test_non_utf8_file_name(project):
    raw_name = b"caf\xe9_model.py"
    with open(os.path.join(os.fsencode(str(project)), raw_name), "wb") as handle:
        handle.write(GOOD)
    for fmt in ("full", "concise", "json"):
        out = subprocess.run([sys.executable, "-m", "ascend_lint", "check", ".", "--isolated", "--output-format", fmt],
                             cwd=project, capture_output=True)
        assert out.returncode == 1, out.stderr
        assert b"Traceback" not in out.stderr
        assert "caf\ufffd_model.py".encode() in out.stdout
