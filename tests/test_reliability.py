"""Issue 14 regressions through the real CLI (and the flake8 plugin where it applies): hostile inputs that
used to hang, exhaust memory or print a traceback; terminal and diff injection; the write policy."""
from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile

import pytest

from ascend_lint.cli import main
from ascend_lint.sanitize import diff_name, sanitize

GOOD = b"import torch_npu\ny = x.t().contiguous() @ w\n"  # one ASC101 on line 2: the run went on
FIXABLE = "import torch\nimport torch_npu\nmodel = model.cuda()\n"  # one safe ASC601 fix
UNSAFE_CHARS = ("\x1b", "\x07", "\r", "\x7f", "\x9b", "\u202e", "\u2066", "\u2028")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "zz_good.py").write_bytes(GOOD)
    return tmp_path


def run_cli(cwd, *args, stdin=None, timeout=60):
    """`python -m ascend_lint ...` in a subprocess (a hang fails the test instead of the suite)."""
    return subprocess.run([sys.executable, "-m", "ascend_lint", *args], cwd=cwd, input=stdin, capture_output=True,
                          timeout=timeout)


def rows_by_file(stdout: bytes):
    result = {}
    for row in json.loads(stdout):
        result.setdefault(row["filename"], []).append(row)
    return result


def assert_asc000(proc, name, needle):
    assert b"Traceback" not in proc.stderr, proc.stderr
    rows = rows_by_file(proc.stdout)
    assert [r["code"] for r in rows["zz_good.py"]] == ["ASC101"], "the run must go on to the next file"
    (bad,) = rows[name]
    assert bad["code"] == "ASC000" and needle in bad["message"], bad["message"]
    assert proc.returncode == 1


# ----------------------------------------------------------------------------- only regular files, bounded
CHECK_JSON = ("check", "--isolated", "--preview", "--no-cache", "--output-format", "json")


@pytest.mark.parametrize("walked", [False, True], ids=["named", "walked"])
def test_fifo_named_like_python_is_reported_not_opened(project, walked):
    os.mkfifo(project / "x.py")  # nobody ever writes to it: a blocking open would hang forever
    proc = run_cli(project, *CHECK_JSON, *([".", "-j", "1"] if walked else ["x.py", "zz_good.py"]), timeout=30)
    assert_asc000(proc, "x.py", "not a regular file (a FIFO (named pipe))")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_device_linked_as_python_is_not_read(project, device):
    if not os.path.exists(device):
        pytest.skip(f"{device} missing")
    os.symlink(device, project / "dev.py")  # would be read until memory runs out
    proc = run_cli(project, *CHECK_JSON, "dev.py", "zz_good.py", timeout=30)
    assert_asc000(proc, "dev.py", "not a regular file (a character device)")


def test_socket_named_like_python_is_reported(project):
    path = tempfile.mktemp(suffix=".py", dir="/tmp")  # AF_UNIX paths are short: bind outside tmp_path
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path)
        try:
            os.symlink(path, project / "sock.py")
            proc = run_cli(project, *CHECK_JSON, "sock.py", "zz_good.py", timeout=30)
        finally:
            os.unlink(path)
    assert_asc000(proc, "sock.py", "not a regular file (a socket)")


def test_file_over_the_size_cap_is_one_asc000(project):
    data = b"import torch\n" + b"x = 1  # padding\n" * 70_000  # ~1.2 MB
    (project / "big.py").write_bytes(data)
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nmax-file-size = "1 MB"\n')
    proc = run_cli(project, "check", "--no-cache", "--output-format", "json", "big.py", "zz_good.py")
    assert_asc000(proc, "big.py", f"file too large: {len(data):,} bytes, over the 1,048,576-byte limit")
    (project / "pyproject.toml").write_text("[tool.ascend-lint]\nmax-file-size = 2_000_000\n")
    proc = run_cli(project, "check", "--no-cache", "--output-format", "json", "big.py", "zz_good.py")
    assert "big.py" not in rows_by_file(proc.stdout)  # under the raised cap: linted, nothing found


def test_default_size_cap_is_ten_mebibytes(project):
    (project / "huge.py").write_bytes(b"import torch\n" + b"#" * (10 * 1024 * 1024))
    proc = run_cli(project, *CHECK_JSON, "huge.py", "zz_good.py")
    assert_asc000(proc, "huge.py", "over the 10,485,760-byte limit")


@pytest.mark.parametrize("value", ["0", "-5", "true", '"ten"', '"10 parsecs"'])
def test_bad_size_cap_is_a_config_error(project, value):
    (project / "pyproject.toml").write_text(f"[tool.ascend-lint]\nmax-file-size = {value}\n")
    proc = run_cli(project, "check", "zz_good.py")
    assert proc.returncode == 2 and b"'max-file-size' must be a positive size" in proc.stderr
    assert b"Traceback" not in proc.stderr


def test_stdin_over_the_cap_is_reported_and_passed_through_by_fix(project):
    (project / "pyproject.toml").write_text("[tool.ascend-lint]\nmax-file-size = 1000\n")
    data = b"import torch\nimport torch_npu\nm = m.cuda()\n" + b"# pad\n" * 400
    proc = run_cli(project, "check", "--output-format", "json", "-", "--stdin-filename", "s.py", stdin=data)
    (row,) = json.loads(proc.stdout)
    assert row["code"] == "ASC000" and "file too large" in row["message"] and proc.returncode == 1
    proc = run_cli(project, "check", "--fix", "-", "--stdin-filename", "s.py", stdin=data)
    assert proc.stdout == data  # never truncated, even though only the cap was read to lint it


def test_flake8_plugin_honours_the_size_cap(project):
    pytest.importorskip("flake8")
    (project / "pyproject.toml").write_text("[tool.ascend-lint]\nmax-file-size = 200\n")
    (project / "big.py").write_bytes(b"import torch_npu\ny = x.t().contiguous() @ w\n" + b"# pad\n" * 100)
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "big.py", "zz_good.py"], cwd=project,
                          capture_output=True, text=True, timeout=120)
    assert "big.py:1:1: ASC000 file too large" in proc.stdout and "zz_good.py:2:5: ASC101" in proc.stdout
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- configuration bounds
ALIAS_BOMB = """\
a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
select: [*g,*g,*g,*g,*g,*g,*g,*g,*g]
"""


def _deep_toml(depth: int) -> str:
    return "[tool.ascend-lint]\nselect = " + "[" * depth + "]" * depth + "\n"


def _deep_yaml(depth: int) -> str:
    return "select: " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("name, text, needle", [
    (".ascend-lint.yaml", ALIAS_BOMB, "YAML aliases (*name) are not allowed"),
    (".ascend-lint.yaml", "select: &s [ASC1]\nignore: *s\n", "YAML aliases (*name) are not allowed"),
    (".ascend-lint.yaml", _deep_yaml(5000), "nested more than 16 levels deep"),
    ("pyproject.toml", _deep_toml(5000), "nested"),
    ("pyproject.toml", _deep_toml(40), "nested more than 16 levels deep"),
    ("pyproject.toml", '[tool.ascend-lint]\nselect = "' + "A" * 2_000_000 + '"\n', "larger than"),
    ("pyproject.toml", '[tool.ascend-lint]\npreview = "' + "y" * 100_000 + '"\n', "'preview' must be true or false"),
    ("pyproject.toml", "[tool.ascend-lint]\nselect = [" + "1," * 20_000 + "]\n", "more than 10,000 values"),
], ids=["alias-bomb", "alias", "deep-yaml", "deep-toml", "deep-toml-40", "huge-file", "huge-value", "many-values"])
def test_hostile_configuration_is_one_clear_error(project, name, text, needle):
    (project / name).write_text(text)
    proc = run_cli(project, "check", "zz_good.py", timeout=30)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and needle in err and "Traceback" not in err, err
    assert err.startswith("ascend-lint: error: ") and len(err) < 600  # values are shown bounded, never whole
    if name.endswith("toml") or "alias" in err:  # the flake8 plugin reads the same file the same way
        flake = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "zz_good.py"], cwd=project,
                               capture_output=True, text=True, timeout=60)
        assert flake.returncode != 0 and needle in flake.stderr + flake.stdout and "Traceback" not in flake.stderr


def test_config_fifo_does_not_hang(project):
    os.mkfifo(project / "cfg.yaml")
    proc = run_cli(project, "check", "--config", "cfg.yaml", "zz_good.py", timeout=30)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- terminal and diff injection
HOSTILE_NAME = "ev\x1b]0;pwn\x07il\r\x7f\x9b\u202egp.py"


def _no_unsafe(text: str) -> bool:
    return not any(c in text for c in UNSAFE_CHARS)


@pytest.mark.parametrize("args", [
    ("--output-format", "full"), ("--output-format", "concise"), ("--statistics",), ("--fix", "--show-fixes"),
    ("--output-format", "json"), ("--output-format", "sarif"), ("--output-format", "gitlab"),
    ("--output-format", "junit"), ("--output-format", "github"), ("--output-format", "json-lines"),
    ("--diff",),
], ids=["full", "concise", "statistics", "show-fixes", "json", "sarif", "gitlab", "junit", "github", "json-lines",
        "diff"])
def test_hostile_file_names_reach_no_terminal_raw(project, args):
    (project / HOSTILE_NAME).write_text(FIXABLE + "y = x.t().contiguous()  # \x1b[2J\u202e\n")
    (project / ("bad\x1b[31m.py")).write_bytes(b"x = (\n")  # ASC000 with a hostile name, if linted
    proc = run_cli(project, "check", "--isolated", "--preview", "--no-cache", "--exit-zero", "--select", "ASC1,ASC6", ".", *args)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and proc.returncode in ((1,) if args == ("--diff",) else (0,)), err
    assert _no_unsafe(out) and _no_unsafe(err), (out, err)
    if args[-1] in ("json", "sarif", "gitlab"):
        data = json.loads(out)  # the data stay exact: the name decodes back to itself
        assert HOSTILE_NAME in json.dumps(data, ensure_ascii=False) or "gp.py" in out
    elif args[-1] in ("full", "concise", "--show-fixes"):
        assert "ev\\x1b]0;pwn\\x07il\\r\\x7f\\x9b\\u202egp.py" in out  # escaped, visible, findable


def test_warnings_are_sanitised(project):
    path = project / "ro\x1b[2Jx.py"
    path.write_text(FIXABLE)
    os.chmod(path, 0o444)
    proc = run_cli(project, "check", "--isolated", "--preview", "--no-cache", "--fix", path.name)
    err = proc.stderr.decode()
    assert "ro\\x1b[2Jx.py: the file is read-only; fixes not written" in err and _no_unsafe(err)


def test_sanitiser_covers_every_control_format_and_separator_character():
    import unicodedata

    for code in range(0x110000):
        char = chr(code)
        unsafe = unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs")
        cleaned = sanitize("a" + char + "b")
        if unsafe:
            assert char not in cleaned, hex(code)
        elif char.isprintable():
            assert cleaned == "a" + char + "b", hex(code)
    assert sanitize("a\tb", same_width=True) == "a\ufffdb" and sanitize("a\nb", keep="\n") == "a\nb"


@pytest.mark.parametrize("name, header", [
    ("plain.py", "plain.py"), ("my file.py", '"my file.py"'), ('q"uote.py', '"q\\"uote.py"'),
    ("caf\u00e9.py", "caf\u00e9.py"),
    ("a\nb.py", None), ("a\rb.py", None), ("a\tb.py", None), ("a\x1bb.py", None), ("a\u202eb.py", None),
    ("a\udce9.py", None),
])
def test_diff_names_are_quoted_or_refused(name, header):
    assert diff_name(name) == header


def test_diff_refuses_a_file_name_with_a_newline(project):
    name = "evil.py\n+++ victim\n@@ -1 +1 @@\n-x\n+y\n.py"  # would make `patch -p0` write `victim`
    (project / name).write_text(FIXABLE)
    (project / "ok.py").write_text(FIXABLE)
    proc = run_cli(project, "check", "--isolated", "--preview", "--no-cache", "--diff", ".")
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert "no diff shown: its name" in err and "cannot carry safely" in err and _no_unsafe(err)
    assert "victim" not in out and out.count("+++ ") == 1 and "+++ ok.py" in out
    assert proc.returncode == 1 and (project / name).read_text() == FIXABLE  # --diff writes nothing


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_patch_p0_patches_exactly_the_file_named_by_the_diff(project):
    (project / "my file.py").write_text(FIXABLE)
    (project / "my").write_text("decoy: an unquoted name would steer patch here\n")
    proc = run_cli(project, "check", "--isolated", "--preview", "--no-cache", "--diff", "my file.py")
    assert proc.returncode == 1 and b'--- "my file.py"' in proc.stdout
    applied = subprocess.run(["patch", "-p0", "--batch"], cwd=project, input=proc.stdout, capture_output=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (project / "my file.py").read_text() == FIXABLE.replace(".cuda()", ".npu()")
    assert (project / "my").read_text().startswith("decoy")


# ----------------------------------------------------------------------------- one write policy
def _noqa(project, *paths):
    return run_cli(project, "check", "--isolated", "--preview", "--no-cache", "--select", "ASC6", "--add-noqa", *paths)


def _fix(project, *paths):
    return run_cli(project, "check", "--isolated", "--preview", "--no-cache", "--select", "ASC6", "--fix", *paths)


@pytest.mark.parametrize("action", [_fix, _noqa], ids=["fix", "add-noqa"])
def test_read_only_files_are_refused_the_same_way(project, action):
    path = project / "ro.py"
    path.write_text(FIXABLE)
    os.chmod(path, 0o444)
    proc = action(project, "ro.py")
    what = "fixes" if action is _fix else "noqa comments"
    assert f"ro.py: the file is read-only; {what} not written".encode() in proc.stderr
    assert path.read_text() == FIXABLE and b"Traceback" not in proc.stderr


@pytest.mark.parametrize("action", [_fix, _noqa], ids=["fix", "add-noqa"])
def test_hard_links_owner_and_mode_are_kept(project, action):
    path = project / "m.py"
    path.write_text(FIXABLE)
    os.link(path, project / "twin.py")
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, 12345, 23456)
    before = os.stat(path)
    proc = action(project, "m.py")
    after = os.stat(path)
    assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr
    assert path.read_text() != FIXABLE and (project / "twin.py").read_text() == path.read_text()
    assert after.st_ino == before.st_ino and after.st_nlink == 2
    assert stat.S_IMODE(after.st_mode) == 0o640 and (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
@pytest.mark.parametrize("action", [_fix, _noqa], ids=["fix", "add-noqa"])
def test_owner_is_kept_on_atomic_replace(project, action):
    path = project / "m.py"
    path.write_text(FIXABLE)
    os.chown(path, 12345, 23456)
    before = os.stat(path)
    action(project, "m.py")
    after = os.stat(path)
    assert path.read_text() != FIXABLE and after.st_ino != before.st_ino  # replaced atomically...
    assert (after.st_uid, after.st_gid) == (12345, 23456)  # ...and given back to its owner


@pytest.mark.parametrize("action", [_fix, _noqa], ids=["fix", "add-noqa"])
def test_symlinks_are_followed_not_replaced(project, action):
    (project / "real.py").write_text(FIXABLE)
    os.symlink("real.py", project / "link.py")
    action(project, "link.py")
    assert os.path.islink(project / "link.py") and (project / "real.py").read_text() != FIXABLE


def test_add_noqa_in_an_unwritable_directory(project, monkeypatch, capsys):
    """No temporary file can be created next to the file: written in place; if even that fails, one clear
    warning. (The tests run as root, for whom every directory is writable: the denials are injected.)"""
    path = project / "m.py"
    path.write_text(FIXABLE)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    assert main(["check", "--isolated", "--preview", "--no-cache", "--select", "ASC6", "--add-noqa", "m.py"]) == 0
    assert path.read_text() == FIXABLE.replace(".cuda()", ".cuda()  # noqa: ASC601")
    path.write_text(FIXABLE)
    import builtins

    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda p, mode="r", *a, **k: denied() if "+" in mode else
                        real_open(p, mode, *a, **k))
    capsys.readouterr()
    assert main(["check", "--isolated", "--preview", "--no-cache", "--select", "ASC6", "--add-noqa", "m.py"]) == 0
    err = capsys.readouterr().err
    assert "m.py: cannot write the file (Permission denied); noqa comments not written" in err
    assert "Traceback" not in err and path.read_text() == FIXABLE
    assert not [n for n in os.listdir(project) if n.endswith(".tmp")]
