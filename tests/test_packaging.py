"""A release is one tag away: the sdist and the wheel build from this checkout as `python -m build` builds them
(the sdist, then the wheel from the unpacked sdist; here offline, without build isolation), their metadata pass
the checks `twine check` and the package index make, and the wheel installs with `pip install --no-index
--no-deps` into a fresh virtual environment, where the command, the rule packs and the flake8 plugin work."""
from __future__ import annotations

import email.parser
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Set

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import ascend_lint

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
NOT_SOURCES = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "dist", ".ascend_lint_cache",
                                     ".pytest_cache", ".hypothesis", ".venv", "*.pyc")
BAD = "import torch, torch_npu\n\n\ny = torch.transpose(x, -2, -1).contiguous() @ w\n"


@dataclass
class Built:
    sdist: Path
    wheel: Path


def _build_requirements_met() -> None:
    for text in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(text)
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"building needs {text} (pip install -e '.[test]')")
        if not requirement.specifier.contains(installed, prereleases=True):
            pytest.skip(f"building needs {text}, {installed} is installed (pip install -e '.[test]')")


def _hook(source: Path, hook: str, out: Path) -> Path:
    """Run the PEP 517 hook `build_sdist` / `build_wheel` of pyproject's backend in `source`, as a frontend
    without build isolation does; the built file."""
    backend = PYPROJECT["build-system"]["build-backend"]
    script = f"import sys, {backend} as backend; print(backend.{hook}(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", script, str(out)], cwd=str(source), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    _build_requirements_met()
    work = tmp_path_factory.mktemp("release")
    shutil.copytree(ROOT, work / "checkout", ignore=NOT_SOURCES)  # building writes egg-info and build/ in place
    sdist = _hook(work / "checkout", "build_sdist", work / "dist")
    with tarfile.open(sdist) as archive:
        top = {name.split("/", 1)[0] for name in archive.getnames()}
        assert len(top) == 1, top
        archive.extractall(work / "unpacked")
    wheel = _hook(work / "unpacked" / top.pop(), "build_wheel", work / "dist")
    return Built(sdist, wheel)


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))


def sdist_metadata(sdist: Path) -> email.message.Message:
    with tarfile.open(sdist) as archive:
        name = next(n for n in archive.getnames() if n.count("/") == 1 and n.endswith("/PKG-INFO"))
        return email.parser.Parser().parsestr(archive.extractfile(name).read().decode("utf-8"))


# ------------------------------------------------------------------------------ metadata (what twine check checks)
@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_metadata_is_complete_and_valid(built, kind):
    meta = sdist_metadata(built.sdist) if kind == "sdist" else wheel_metadata(built.wheel)
    assert Version(meta["Metadata-Version"]) >= Version("2.1")
    assert meta["Name"] == PYPROJECT["project"]["name"] == "ascend-lint"
    assert meta["Version"] == ascend_lint.__version__ and str(Version(meta["Version"])) == meta["Version"]
    assert meta["Summary"] == PYPROJECT["project"]["description"] and "\n" not in meta["Summary"]
    assert meta["Requires-Python"] == PYPROJECT["project"]["requires-python"]
    assert meta["License"] == PYPROJECT["project"]["license"]["text"]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Homepage"] == "https://github.com/ascend-lint/ascend-lint"
    assert all(u.startswith(urls["Homepage"]) for u in urls.values())
    # the long description: the README, rendered as Markdown (twine check fails a missing content type)
    assert meta["Description-Content-Type"] == "text/markdown"
    body = meta.get_payload() or meta["Description"]
    assert body.strip() == (ROOT / "README.md").read_text(encoding="utf-8").strip()
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    assert all(r.url is None for r in requires)  # the package index refuses direct references
    if kind == "wheel":  # (an older setuptools leaves the dependencies out of the sdist's PKG-INFO)
        assert {r.name for r in requires if not r.marker} >= {"pathspec", "pyyaml", "libcst"}
        assert set(meta.get_all("Provides-Extra")) == set(PYPROJECT["project"]["optional-dependencies"])
        assert {r.name for r in requires if r.marker and r.marker.evaluate({"extra": "server"})} >= {"pygls"}


def test_classifiers_are_known_to_the_package_index(built):
    classifiers = pytest.importorskip("trove_classifiers").classifiers
    declared = wheel_metadata(built.wheel).get_all("Classifier")
    assert declared and not [c for c in declared if c not in classifiers]


# ------------------------------------------------------------------------------ contents
def source_packages() -> Set[str]:
    """Importable package names of the checkout, as the wheel must hold them (`plugins` is installed as
    `ascend_lint_plugins`)."""
    out = set()
    for top, name in (("ascend_lint", "ascend_lint"), ("plugins", "ascend_lint_plugins")):
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                out.add(".".join([name, *init.parent.relative_to(ROOT / top).parts]))
    return out


def test_the_wheel_holds_every_package_and_its_data(built):
    with zipfile.ZipFile(built.wheel) as archive:
        names = archive.namelist()
        wheel_info = archive.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode("utf-8")
    packages = {os.path.dirname(n).replace("/", ".") for n in names if n.endswith("/__init__.py")}
    assert packages == source_packages(), "pyproject.toml's [tool.setuptools] packages list is out of date"
    assert "ascend_lint/precision.json" in names
    assert "Tag: py3-none-any" in wheel_info and "Root-Is-Purelib: true" in wheel_info
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_entry_points_register_the_command_the_packs_and_the_flake8_plugin(built):
    with zipfile.ZipFile(built.wheel) as archive:
        text = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")))
    groups: Dict[str, Dict[str, str]] = {}
    group = ""
    for line in text.decode("utf-8").splitlines():
        if line.startswith("["):
            group = line.strip("[]")
        elif "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            groups.setdefault(group, {})[key] = value
    assert groups["console_scripts"] == {"ascend-lint": "ascend_lint.cli:entry"}
    assert groups["flake8.extension"] == {"ASC": "ascend_lint.flake8_plugin:AscendLintChecker"}
    assert groups["ascend_lint.plugins"] == PYPROJECT["project"]["entry-points"]["ascend_lint.plugins"]


# ------------------------------------------------------------------------------ installing the wheel
def dependency_dirs() -> List[str]:
    """Where this environment has the wheel's dependencies (and theirs), for a .pth in the new environment:
    the install is offline and `--no-deps`; the dependencies themselves are not what is tested."""
    dirs, todo, seen = [], [Requirement(r) for r in PYPROJECT["project"]["dependencies"]], set()
    while todo:
        requirement = todo.pop()
        if requirement.name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(requirement.name)
        dist = importlib.metadata.distribution(requirement.name)
        location = str(dist.locate_file(""))
        if location not in dirs:
            dirs.append(location)
        todo += [Requirement(r) for r in dist.requires or []]
    return dirs


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    """A fresh virtual environment (no pip of its own) with the wheel installed offline; its bin directory."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps",
                           "--no-build-isolation", "--disable-pip-version-check", "--quiet", str(built.wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dependencies-of-the-test.pth").write_text("\n".join(dependency_dirs()) + "\n", encoding="utf-8")
    return python.parent


def run_installed(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_installed_wheel_runs_from_its_own_copy(installed, tmp_path):
    proc = run_installed(installed, "python", "-c", "import ascend_lint; print(ascend_lint.__file__)", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).resolve().is_relative_to(installed.parent.resolve())  # not the checkout
    (tmp_path / "train.py").write_text(BAD, encoding="utf-8")
    proc = run_installed(installed, "ascend-lint", "check", "--isolated", "--no-cache", "train.py", cwd=tmp_path)
    assert proc.returncode == 1 and "train.py:4:" in proc.stdout and "ASC101" in proc.stdout, proc.stderr


def test_the_installed_wheel_loads_every_pack_and_the_flake8_plugin(installed, tmp_path):
    proc = run_installed(installed, "ascend-lint", "rules", "--output-format", "json", cwd=tmp_path)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    packs = {row["pack"] for row in json.loads(proc.stdout)}
    assert packs == {"core"} | set(PYPROJECT["project"]["entry-points"]["ascend_lint.plugins"])
    proc = run_installed(installed, "python", "-c", "import importlib.metadata as m; print([e.value for e in "
                         "m.entry_points(group='flake8.extension') if e.name == 'ASC'])", cwd=tmp_path)
    assert proc.stdout.strip() == "['ascend_lint.flake8_plugin:AscendLintChecker']", proc.stderr
    assert re.search(r"precision: \d+ % TRUE", run_installed(installed, "ascend-lint", "rule", "ASC501",
                                                             cwd=tmp_path).stdout)  # precision.json shipped
