"""Property tests: linting never raises, whatever the program (generated or mutated)."""
from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import hypothesmith
from hypothesis import HealthCheck, given, settings, strategies as st

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.analysis.summary import light_summary, summarize, summarize_text
from ascend_lint.rule import Docs, Rule
from conftest import REGISTRY

ROOT = Path(__file__).parent.parent
CORPUS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*.py"))]
CORPUS += [textwrap.dedent(src) for rule in REGISTRY.sorted_rules() for src in rule.flagged_sources() + rule.clean]
PRELUDE = "import torch\nimport torch_npu\nimport mindspore\nimport torch.nn as nn\n"
EXAMPLES = int(os.environ.get("ASCEND_LINT_FUZZ_EXAMPLES", "40"))
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


class _NoPruning(Rule):
    """No trigger texts: the walker then descends into every statement, so every handler sees every node."""

    code = "TST999"
    name = "no-pruning"
    message = ""
    docs = Docs(what="test", why="test")


def all_rules_linter() -> Linter:
    return Linter(REGISTRY.sorted_rules() + [_NoPruning], Settings(preview=True, target="npu"))


LINTER = all_rules_linter()


def lint_never_raises(source: str) -> None:
    result = LINTER.lint_bytes(source.encode("utf-8", "surrogatepass"), "fuzz.py")
    for finding in result.findings:
        assert finding.line >= 1 and finding.col >= 1 and finding.code


@FUZZ_SETTINGS
@given(hypothesmith.from_grammar())
def test_generated_programs(source):
    lint_never_raises(PRELUDE + source)


@st.composite
def mutated(draw, corpus=CORPUS):
    text = draw(st.sampled_from(corpus))
    lines = text.splitlines(keepends=True) or [""]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop", "dup", "swap", "cut", "insert", "indent"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "drop" and len(lines) > 1:
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            line = lines[i]
            lines[i] = line[: draw(st.integers(0, len(line)))]
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from([
                "x = x.transpose(1, 2)\n", "del x\n", "for _ in y:\n", "    loss.backward()\n",
                "torch.npu.synchronize()\n", "class C(nn.Module):\n", "    def forward(self, x):\n",
                "return\n", "global q\n", "lambda: (yield)\n", "x[mask] = 0\n", "@decorator\n",
            ])))
        elif op == "indent":
            lines[i] = "    " + lines[i]
    return "".join(lines)


@FUZZ_SETTINGS
@given(mutated())
def test_mutated_fixtures(source):
    lint_never_raises(source)


@FUZZ_SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes(raw):
    result = LINTER.lint_bytes(PRELUDE.encode() + raw, "fuzz.py")
    assert all(f.code for f in result.findings)


def _parsed_or_none(source: str):
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


STEPPING = [text for text in CORPUS if light_summary(text).light]  # (texts whose summary needs a tree)


@FUZZ_SETTINGS
@given(mutated(STEPPING), st.booleans())
def test_a_partial_parse_reads_the_facts_a_whole_parse_reads(source, precision):
    """The summary of a file no rule parses, read from a parse of only the functions that may hold its tree
    facts, is the summary read from the whole file's tree whenever the whole file parses."""
    light = light_summary(source, precision=precision)
    whole = _parsed_or_none(source)
    partial = summarize_text(source, light, precision, _parsed_or_none)
    if whole is not None:
        assert partial == summarize(whole, source, None, light, precision)
