"""Configuration files: discovery, keys, validation errors (exit 2), per-file ignores, rule options."""
from __future__ import annotations

import pytest

from ascend_lint.cli import main
from ascend_lint.config import ConfigError, find_config, load_settings

BAD = "import torch, torch_npu\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(BAD)
    return tmp_path


def test_pyproject_table_is_found_from_a_subdirectory(project, monkeypatch, capsys):
    (project / "pyproject.toml").write_text('[tool.ascend-lint]\nignore = ["ASC101"]\n')
    monkeypatch.chdir(project / "pkg")
    assert find_config(".") == str(project / "pyproject.toml")
    assert run(capsys, "check", "bad.py")[0] == 0


def test_pyproject_without_our_table_is_skipped(project, capsys):
    (project / "pkg" / "pyproject.toml").write_text('[tool.other]\nx = 1\n')
    (project / ".ascend-lint.yaml").write_text("ignore: [ASC101]\n")
    assert find_config(str(project / "pkg")) == str(project / ".ascend-lint.yaml")


def test_yaml_config_and_cli_overrides_it(project, capsys):
    (project / ".ascend-lint.yaml").write_text("select: [ASC000]\n")
    assert run(capsys, "check", "pkg")[0] == 0
    assert run(capsys, "check", "pkg", "--select", "ASC1")[0] == 1


def test_isolated_ignores_config(project, capsys):
    (project / ".ascend-lint.yaml").write_text("ignore: [ASC]\n")
    assert run(capsys, "check", "pkg")[0] == 0
    assert run(capsys, "check", "pkg", "--isolated")[0] == 1


def test_explicit_config_file(project, capsys, tmp_path_factory):
    other = tmp_path_factory.mktemp("cfg") / "custom.yaml"
    other.write_text("ignore: [ASC101]\n")
    assert run(capsys, "check", "pkg", "--config", str(other))[0] == 0
    code, _, err = run(capsys, "check", "pkg", "--config", "missing.toml")
    assert code == 2 and "not found" in err


@pytest.mark.parametrize("name,content,needle", [
    ("pyproject.toml", "[tool.ascend-lint]\nselekt = ['ASC']\n", "unknown key 'selekt'"),
    ("pyproject.toml", "[tool.ascend-lint]\npreview = 'yes'\n", "'preview' must be true or false"),
    ("pyproject.toml", "[tool.ascend-lint]\nselect = 'ASC'\n", "'select' must be a list of rule codes"),
    ("pyproject.toml", "[tool.ascend-lint]\ntarget = 'gpu'\n", "'target' must be one of 'auto', 'npu'"),
    ("pyproject.toml", "[tool.ascend-lint\nselect = [\n", "invalid TOML"),
    (".ascend-lint.yaml", "select: [ASC\n", "invalid YAML"),
    (".ascend-lint.yaml", "- just\n- a list\n", "expected a mapping"),
    (".ascend-lint.yaml", "select: !!python/object/apply:os.system ['echo pwned']\n", "invalid YAML"),
    (".ascend-lint.yaml", "select: [NOPE1]\n", "unknown rule selector 'NOPE1'"),
    (".ascend-lint.yaml", "rules:\n  ASC101:\n    bogus: 1\n", "rule ASC101 has no option 'bogus'"),
    (".ascend-lint.yaml", "rules:\n  ASC999:\n    x: 1\n", "unknown rule code 'ASC999'"),
    (".ascend-lint.yaml", "per-file-ignores:\n  tests/*: ASC101\n", "'per-file-ignores' must be a table"),
])
def test_bad_config_exits_2_naming_file_and_key(project, capsys, name, content, needle):
    (project / name).write_text(content)
    code, out, err = run(capsys, "check", "pkg")
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    if needle != "unknown rule selector 'NOPE1'":
        assert name in err


def test_yaml_python_tag_is_never_executed(project, capsys):
    marker = project / "pwned"
    (project / ".ascend-lint.yaml").write_text(f"select: !!python/object/apply:os.system ['touch {marker}']\n")
    run(capsys, "check", "pkg")
    assert not marker.exists()


def test_per_file_ignores(project, capsys):
    (project / ".ascend-lint.yaml").write_text("per-file-ignores:\n  'pkg/*.py': [ASC1]\n")
    assert run(capsys, "check", "pkg")[0] == 0
    (project / ".ascend-lint.yaml").write_text("per-file-ignores:\n  'bad.py': [ASC101]\n")
    assert run(capsys, "check", "pkg")[0] == 0
    (project / ".ascend-lint.yaml").write_text("per-file-ignores:\n  'other/*.py': [ASC101]\n")
    assert run(capsys, "check", "pkg")[0] == 1


def test_exclude_and_extend_exclude_in_config(project, capsys):
    (project / ".ascend-lint.yaml").write_text("extend-exclude: ['pkg/']\n")
    assert run(capsys, "check", ".")[0] == 0
    (project / ".ascend-lint.yaml").write_text("exclude: ['bad.py']\n")
    assert run(capsys, "check", ".")[0] == 0


def test_rule_option_types_are_checked(project):
    from conftest import REGISTRY
    from ascend_lint.registry import validate_rule_options

    rule = next((r for r in REGISTRY.sorted_rules() if r.options), None)
    if rule is None:
        pytest.skip("no rule with options registered")
    key, default = next(iter(rule.options.items()))
    (project / ".ascend-lint.yaml").write_text(f"rules:\n  {rule.code}:\n    {key}: [1]\n")
    settings = load_settings(None, False, str(project))
    with pytest.raises(ConfigError, match=f"option '{key}' of {rule.code} must be"):
        validate_rule_options(REGISTRY, settings)


# ----------------------------------------------------------------------------- issue #30: YAML errors on one line
@pytest.mark.parametrize("text", [
    "select: [ASC1\nfoo: \"\n",  # a flow sequence left open
    "a:\n\t- b\n",  # a tab
    "a: b: c\n",
    "\"unterminated\n",
    "key: [1, 2\n  3]: x\n",
    "? [a, b]\n: c\n",
    "a: !!binary \"xx\"\n",
])
def test_yaml_errors_are_one_readable_line(project, capsys, text):
    (project / ".ascend-lint.yaml").write_text(text)
    code, out, err = run(capsys, "check", "--no-cache", "pkg")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "invalid YAML: " in err and "\\n" not in err and " at line " in err
