"""The execution-model fixture projects (tests/fixtures/execution/, issue #29) are well-formed.

No test runs the execution model on them yet: this checks that every file parses, every marker follows the
syntax in tests/fixtures/execution/README.md and names a known kind, and that the fixtures cover every record
of the framework table and every mechanism of the issue, flagged and clean shapes alike.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import Dict, List, NamedTuple

import pytest

from ascend_lint.analysis import frameworks

ROOT = Path(__file__).parent / "fixtures" / "execution"
README = ROOT / "README.md"

ROLES = set(frameworks.ROLES) | {"unreached"}
PLACES = {"device", "host", "unknown"}
BUILT = {"yes", "no"}
KINDS = {"host-sync", "device-sync", "h2d-copy", "cuda-api", "cuda-device", "sync-save", "dynamic-shape",
         "fusion-attention", "fusion-softmax", "fusion-rmsnorm", "fusion-channel-shuffle"}
MECHANISMS = {
    "passed-loss-function", "closure-step-loop", "attribute-held-objects", "deep-calls", "cross-module-helper",
    "method-swap", "forward-host-sync", "host-tensor-math", "registry-dropped-model", "config-type-name",
    "uncalled-function", "orphan-trainer", "generation-only", "vendored-legacy", "constant-flag",
    "gpu-only-example", "offline-scripts", "graph-mode-constant", "port-aliases", "fusion-softmax-cast",
    "fusion-masked-softmax", "fusion-bmm-softmax-bmm", "fusion-rmsnorm-no-weight", "fusion-channel-shuffle",
}
MARKER_RE = re.compile(r"#\s*(covers|mechanism|expect-role|expect-built|expect-placement|expect|clean):\s*(.*)$")
LOOKS_LIKE_MARKER = re.compile(r"#\s*(covers|mechanism|expect|clean)\b")


class Marker(NamedTuple):
    path: Path
    line: int
    kind: str
    value: str
    note: str
    code: str  # the code on the marker's line, stripped


def read_markers(path: Path) -> List[Marker]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    markers = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT or not LOOKS_LIKE_MARKER.match(token.string):
            continue
        match = MARKER_RE.match(token.string)
        assert match, f"{path}:{token.start[0]}: malformed marker {token.string!r}"
        value, _, note = match.group(2).partition(" -- ")
        code = lines[token.start[0] - 1][: token.start[1]].strip()
        markers.append(Marker(path, token.start[0], match.group(1), value.strip(), note.strip(), code))
    return markers


def fixtures() -> Dict[str, List[Path]]:
    found: Dict[str, List[Path]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        found.setdefault(path.relative_to(ROOT).parts[0], []).append(path)
    return found


FIXTURES = fixtures()
ALL_FILES = [p for paths in FIXTURES.values() for p in paths]


def test_there_are_fixtures_and_pytest_collects_none_of_them():
    assert len(FIXTURES) >= 40
    names = [p.name for p in ALL_FILES]
    assert not [n for n in names if n.startswith("test_") or n.endswith("_test.py") or n == "conftest.py"]


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_parses_and_every_marker_is_well_formed(path):
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for marker in read_markers(path):
        where = f"{path.relative_to(ROOT)}:{marker.line}"
        if marker.kind in ("covers", "mechanism"):
            assert marker.code == "", f"{where}: {marker.kind} stands on a line of its own"
        else:
            assert marker.code, f"{where}: {marker.kind} marks a code line"
        if marker.kind == "expect-role":
            assert marker.value in ROLES, where
            assert re.match(r"(async\s+)?def\s", marker.code), f"{where}: expect-role marks a def line"
        elif marker.kind == "expect-built":
            assert marker.value in BUILT, where
            assert marker.code.startswith("class "), f"{where}: expect-built marks a class line"
        elif marker.kind == "expect-placement":
            assert marker.value in PLACES, where
        elif marker.kind == "expect":
            kinds = [k.strip() for k in marker.value.split(",")]
            assert kinds and set(kinds) <= KINDS, f"{where}: unknown kind in {marker.value!r}"
        elif marker.kind == "clean":
            assert marker.value in KINDS, f"{where}: unknown kind {marker.value!r}"
            assert marker.note, f"{where}: a clean marker says why"
        elif marker.kind == "mechanism":
            assert marker.value in MECHANISMS, where


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_fixture_says_what_it_covers_and_has_flagged_and_clean_lines(name):
    markers = [m for path in FIXTURES[name] for m in read_markers(path)]
    kinds = [m.kind for m in markers]
    heads = [m for m in markers if m.kind in ("covers", "mechanism")]
    assert len(heads) == 1, f"{name}: one covers/mechanism line, found {len(heads)}"
    assert (heads[0].kind == "mechanism") == name.startswith("mech_"), name
    assert "expect" in kinds and "clean" in kinds, f"{name}: needs a flagged and a clean line"
    assert "expect-role" in kinds or "expect-built" in kinds, name


def _covered() -> set:
    names = set()
    for paths in FIXTURES.values():
        for marker in (m for p in paths for m in read_markers(p)):
            if marker.kind == "covers":
                names |= {n.strip() for n in marker.value.split(",")}
    return names


def test_every_framework_of_the_table_has_a_fixture():
    table = {r.framework for r in frameworks.HOOKS + frameworks.PASSED_FUNCTIONS + frameworks.NAMED_ROLES}
    table |= {r.name for r in frameworks.DEVICE_ABSTRACTIONS} | {r.framework for r in frameworks.MODEL_REGISTRIES}
    covered = _covered()
    assert covered <= table, f"fixtures cover unknown names: {sorted(covered - table)}"
    assert table <= covered, f"no fixture covers: {sorted(table - covered)}"


def test_every_mechanism_has_a_fixture():
    named = {m.value for paths in FIXTURES.values() for p in paths for m in read_markers(p) if m.kind == "mechanism"}
    assert named == MECHANISMS


def test_the_readme_documents_every_kind_role_and_fixture():
    text = README.read_text(encoding="utf-8")
    for word in sorted(KINDS | ROLES | PLACES | set(FIXTURES)):
        assert f"`{word}`" in text, word
