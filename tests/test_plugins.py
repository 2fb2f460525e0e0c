"""Third-party rule packs through the `ascend_lint.plugins` entry point group, like the built-in ones."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PACK_RULE = '''
import ast
from ascend_lint.rule import Docs, Rule


class NoPrint(Rule):
    code = "XYZ001"
    name = "no-print-in-train"
    message = "print() in training code"
    triggers = ("print",)
    docs = Docs(what="Flags print().", why="Noise.")
    flagged = ("print(1)",)
    clean = ("log(1)",)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == "print":
            self.report(node)


RULES = [NoPrint]
'''


def _dist_info(site, name, entry_value, module_source=None, module_name=None):
    """A minimal installed distribution: METADATA + entry_points.txt (+ an optional module)."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[ascend_lint.plugins]\n{name} = {entry_value}\n")
    if module_source is not None:
        (site / f"{module_name}.py").write_text(module_source)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Install a real third-party pack distribution with pip into a private site directory."""
    src = tmp_path_factory.mktemp("pack-src")
    (src / "xyz_pack").mkdir()
    (src / "xyz_pack" / "__init__.py").write_text(PACK_RULE)
    (src / "pyproject.toml").write_text(textwrap.dedent('''
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "xyz-pack"
        version = "0.3.0"
        [project.entry-points."ascend_lint.plugins"]
        xyz = "xyz_pack:RULES"
        [tool.setuptools]
        packages = ["xyz_pack"]
    '''))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    return target


def run(args, site_dirs, cwd):
    env = dict(os.environ, NO_COLOR="1",
               PYTHONPATH=os.pathsep.join([str(d) for d in site_dirs] + [os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "ascend_lint", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_third_party_pack_runs_is_selected_and_ignored(site, tmp_path):
    (tmp_path / "train.py").write_text("import torch\nprint(1)\n")
    out = run(["check", "train.py", "--isolated", "--output-format", "concise"], [site], tmp_path)
    assert out.returncode == 1 and "train.py:2:1: XYZ001 print() in training code" in out.stdout
    out = run(["check", "train.py", "--isolated", "--select", "XYZ"], [site], tmp_path)
    assert out.returncode == 1 and "XYZ001" in out.stdout
    out = run(["check", "train.py", "--isolated", "--ignore", "XYZ001"], [site], tmp_path)
    assert out.returncode == 0 and "XYZ001" not in out.stdout
    out = run(["rules"], [site], tmp_path)
    assert "XYZ001" in out.stdout and "xyz" in out.stdout
    out = run(["rule", "XYZ001"], [site], tmp_path)
    assert out.returncode == 0 and "no-print-in-train" in out.stdout


def test_duplicate_code_is_a_clear_error_naming_both_packs(site, tmp_path):
    dup = tmp_path / "dup"
    _dist_info(dup, "dupe", "dupe_mod:RULES", PACK_RULE, "dupe_mod")
    (tmp_path / "train.py").write_text("print(1)\n")
    out = run(["check", "train.py", "--isolated"], [site, dup], tmp_path)
    assert out.returncode == 2
    assert "XYZ001 is defined twice" in out.stderr
    assert "'dupe'" in out.stderr and "'xyz'" in out.stderr
    assert "Traceback" not in out.stderr


def test_pack_that_fails_to_import_is_skipped_with_a_warning(site, tmp_path):
    broken = tmp_path / "broken"
    _dist_info(broken, "broken", "broken_mod:RULES", "raise ImportError('needs torch 9')\n", "broken_mod")
    (tmp_path / "train.py").write_text("import torch_npu\nprint(1)\ny = x.t().contiguous() @ w\n")
    out = run(["check", "train.py", "--isolated", "--output-format", "concise"], [site, broken], tmp_path)
    assert out.returncode == 1
    assert "rule pack 'broken'" in out.stderr and "needs torch 9" in out.stderr
    assert "XYZ001" in out.stdout and "ASC101" in out.stdout


def test_a_packs_exit_handlers_run_before_the_command_exits(tmp_path):
    """The command leaves with os._exit (no heap teardown), after running what was registered with atexit."""
    packs = tmp_path / "packs"
    source = PACK_RULE + ("\nimport atexit\natexit.register(lambda: open('exit-marker.txt', 'w').write('ran'))\n")
    _dist_info(packs, "exitpack", "exitpack_mod:RULES", source, "exitpack_mod")
    (tmp_path / "train.py").write_text("import torch\nprint(1)\n")
    out = run(["check", "train.py", "--isolated"], [packs], tmp_path)
    assert out.returncode == 1 and "XYZ001" in out.stdout
    assert (tmp_path / "exit-marker.txt").read_text() == "ran"
