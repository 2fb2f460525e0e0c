"""A release is one tag away: the sdist and the wheel build from this checkout as `python -m build` builds them
(the sdist, then the wheel from the unpacked sdist; here offline, without build isolation), their metadata pass
the checks `twine check` and the package index make, and the wheel installs with `pip install --no-index
--no-deps` into a fresh virtual environment, where the command, the rule packs and the flake8 plugin work.

Every install and pin line of the README and the docs resolves from this repository: pip lines install the checkout
or `git+<homepage>`, pinned lines name one commit SHA (until the first release tag) that is in this repository's
history and has the hooks, Action inputs and outputs and extras the docs describe, and pip builds that pinned line
from a clone of this repository."""
from __future__ import annotations

import email.parser
import importlib
import importlib.metadata
import json
import os
import re
import shlex
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


def install_offline(venv: Path, requirement: str) -> Path:
    """A fresh virtual environment (no pip of its own) at `venv` with `requirement` installed by this environment's
    pip, offline (`--no-index --no-deps --no-build-isolation`), and the dependencies it finds here; its bin
    directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps",
                           "--no-build-isolation", "--no-cache-dir", "--disable-pip-version-check", "--quiet",
                           requirement], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dependencies-of-the-test.pth").write_text("\n".join(dependency_dirs()) + "\n", encoding="utf-8")
    return python.parent


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    """The wheel installed offline in a fresh virtual environment; its bin directory."""
    return install_offline(tmp_path_factory.mktemp("venv") / "env", str(built.wheel))


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


# ------------------------------------------------------------------------------ install and pin lines
HOMEPAGE = PYPROJECT["project"]["urls"]["Homepage"]
LINE_FILES = ["README.md", "CONTRIBUTING.md", ".pre-commit-hooks.yaml", *(f"docs/{p.name}" for p in
                                                                          sorted((ROOT / "docs").glob("*.md")))]
PIP_RE = re.compile(r"pip install ([^`\n]*)")
PIN_RES = [re.compile(r"repo:\s*(?P<repo>\S+)\s*\n[#\s]*rev:\s*(?P<pin>\S+)"),  # pre-commit
           re.compile(r"uses:\s*(?P<repo>ascend-lint/ascend-lint)@(?P<pin>[\w.\-]+)"),  # the Action
           re.compile(r"git\+(?P<repo>https://\S+?)@(?P<pin>[0-9a-f]{7,40}|v[\w.\-]+)\b")]  # pip
SHA_RE = re.compile(r"[0-9a-f]{40}")


def doc_texts() -> Dict[str, str]:
    return {name: (ROOT / name).read_text(encoding="utf-8") for name in LINE_FILES if (ROOT / name).exists()}


def pip_requirements() -> List[tuple]:
    """(file, argument) for every argument of every `pip install` line of the docs."""
    out = []
    for name, text in doc_texts().items():
        for match in PIP_RE.finditer(text):
            line = re.split(r"\s(?:&&|#)", match.group(1))[0]
            out += [(name, arg) for arg in shlex.split(line) if not arg.startswith("-")]
    return out


def pins() -> List[tuple]:
    """(file, repository, pin) for every pinned reference to this repository in the docs."""
    return [(name, m["repo"], m["pin"]) for name, text in doc_texts().items() for pattern in PIN_RES
            for m in pattern.finditer(text) if "ascend-lint/ascend-lint" in m["repo"]]


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)


def release_tags() -> Set[str]:
    if shutil.which("git") is None:
        return set()
    return set(git("tag", "--list", "v*").stdout.split())


def test_pip_lines_install_this_checkout_or_this_repository():
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    checked = 0
    for name, arg in pip_requirements():
        if arg == "." or arg.startswith(".["):
            assert set(arg[2:-1].split(",")) <= extras if arg != "." else True, (name, arg)
            continue
        requirement = Requirement(arg)
        if requirement.name != "ascend-lint":
            continue  # another package (a rule's docs may name one)
        checked += 1
        assert requirement.extras <= extras, (name, arg)
        if requirement.url is None:  # from the package index: only once a release is tagged
            assert release_tags(), f"{name}: `pip install {arg}` names a release, and none is tagged yet"
            continue
        url, _, pin = requirement.url.partition(f"git+{HOMEPAGE}")[2].partition("@")
        assert requirement.url.startswith(f"git+{HOMEPAGE}") and not url, (name, arg)
        assert not pin or SHA_RE.fullmatch(pin) or pin in release_tags(), (name, arg)
    assert checked >= 5  # README's, docs/editors.md's and docs/ci.md's lines were all seen


def test_pinned_lines_name_one_commit_sha_until_the_first_release_tag():
    found = pins()
    assert {name for name, _, _ in found} >= {"README.md", "docs/ci.md", ".pre-commit-hooks.yaml"}
    for name, repo, _ in found:
        assert repo in (HOMEPAGE, "ascend-lint/ascend-lint"), (name, repo)
    values = {pin for _, _, pin in found}
    assert len(values) == 1, f"the docs pin different revisions: {sorted(values)}"
    pin = values.pop()
    assert SHA_RE.fullmatch(pin) or pin in release_tags(), f"{pin!r} is neither a commit SHA nor a release tag"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "take a commit SHA until the first release tag" in readme and f"`{pin[:12]}`" in readme


def pinned_file(pin: str, path: str) -> str:
    proc = git("show", f"{pin}:{path}")
    assert proc.returncode == 0, f"{path} at the pinned commit {pin}: {proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def pin() -> str:
    """The pinned commit, when this checkout has its full history (a shallow clone or an unpacked sdist has not)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the repository's history")
    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.skip("a shallow clone does not have the pinned commit")
    value = pins()[0][2]
    assert git("cat-file", "-e", f"{value}^{{commit}}").returncode == 0, f"the pinned {value} is not in this repository"
    assert git("merge-base", "--is-ancestor", value, "HEAD").returncode == 0, f"{value} is not in HEAD's history"
    return value


def test_the_pinned_commit_has_what_the_docs_describe(pin):
    import yaml

    now = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    then = yaml.safe_load(pinned_file(pin, "action.yml"))
    for part in ("inputs", "outputs"):
        missing = set(now[part]) - set(then.get(part) or {})
        assert not missing, f"the pinned action lacks the {part} {sorted(missing)}: pin a newer commit in the docs"
    hooks_now = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert {h["id"] for h in yaml.safe_load(pinned_file(pin, ".pre-commit-hooks.yaml"))} == hooks_now
    extras = set(tomllib.loads(pinned_file(pin, "pyproject.toml"))["project"]["optional-dependencies"])
    assert {e for _, arg in pip_requirements() if arg.startswith("ascend-lint[")
            for e in Requirement(arg).extras} <= extras


def test_pip_installs_the_pinned_line_from_a_clone_of_this_repository(pin, tmp_path):
    """The README's `pip install "ascend-lint[server] @ git+<homepage>@<pin>"` with the homepage replaced by this
    repository: pip clones it, checks the pinned commit out and builds it (here, where the build requirements
    are: offline, no build isolation); the wheel installs."""
    here = ROOT.as_uri().replace("file:///", "file://localhost/")  # (older pips refuse a URL without a host)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "--no-build-isolation",
                           "--no-cache-dir", "--disable-pip-version-check", "--quiet", "--wheel-dir", str(tmp_path),
                           f"ascend-lint[server] @ git+{here}@{pin}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bin_dir = install_offline(tmp_path / "env", str(next(tmp_path.glob("ascend_lint-*.whl"))))
    proc = run_installed(bin_dir, "ascend-lint", "rule", "ASC101", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("ASC101 contiguous-after-view"), proc.stderr
