"""The text pre-filter (triggers.py) never loses a finding: pruning on and off agree, presence tests
agree with `in`, and triggers follow the file's import aliases."""
from __future__ import annotations

import random
import re
import textwrap
from typing import List, Tuple

import pytest

from ascend_lint.config import Settings
from ascend_lint.engine.linter import Linter
from ascend_lint.fileio import SourceError
from ascend_lint.engine.triggers import TriggerText, alias_words, is_word, renamed_imports, renames_trigger
from conftest import REGISTRY

RULES = REGISTRY.sorted_rules()
EXAMPLES = [(r.code, kind, i, src) for r in RULES
            for kind, srcs in (("flagged", r.flagged_sources()), ("clean", r.clean)) for i, src in enumerate(srcs)]


def findings(source: str, prune: bool = True, target: str = "auto") -> List[Tuple[str, int, int, str]]:
    linter = Linter(RULES, Settings(preview=True, target=target))
    linter.prune = prune
    try:
        found = linter.check(textwrap.dedent(source), "example.py")
    except SourceError as exc:  # ASC000's own example does not parse
        return [("ASC000", exc.line, exc.col, exc.reason)]
    return [(f.code, f.line, f.col, f.message) for f in found]


@pytest.mark.parametrize("code,kind,index,src", EXAMPLES, ids=[f"{c}-{k}-{i}" for c, k, i, _ in EXAMPLES])
@pytest.mark.parametrize("target", ["auto", "npu"])
def test_pruning_never_changes_findings(code, kind, index, src, target):
    """Every rule's examples, every rule enabled: the same findings with statement pruning on and off."""
    assert findings(src, True, target) == findings(src, False, target)


# ----------------------------------------------------------------- import aliases
_FROM_IMPORT_RE = re.compile(r"^(\s*from\s+[\w.]+\s+import\s+)([A-Za-z_]\w*)\s*$", re.M)


def aliased(source: str) -> str:
    """Rewrite `from M import Name` to `from M import Name as Name_x` and every later use of `Name`."""
    source = textwrap.dedent(source)
    names = [m.group(2) for m in _FROM_IMPORT_RE.finditer(source)]
    if not names:
        return ""
    out = _FROM_IMPORT_RE.sub(lambda m: f"{m.group(1)}{m.group(2)} as {m.group(2)}_x", source)
    for name in names:
        head, sep, tail = out.partition(f"{name} as {name}_x")
        out = head + sep + re.sub(rf"(?<![\w.'\"]){name}\b", f"{name}_x", tail)
    return out


ALIASED = [(code, i, aliased(src)) for code, kind, i, src in EXAMPLES if kind == "flagged" and aliased(src)]


@pytest.mark.parametrize("code,index,src", ALIASED, ids=[f"{c}-flagged-{i}" for c, i, _ in ALIASED])
def test_aliased_imports_keep_findings(code, index, src):
    """A flagged example whose `from M import Name` is renamed `Name as Name_x` is still flagged on the
    same lines: the trigger naming `Name` follows its local alias."""
    original = next(s for c, k, i, s in EXAMPLES if c == code and k == "flagged" and i == index)
    expected = sorted((c, line) for c, line, _, _ in findings(original) if c == code)
    assert sorted((c, line) for c, line, _, _ in findings(src) if c == code) == expected


@pytest.mark.parametrize("src,code,line", [
    # the alias names the object the trigger names; its call line holds no trigger text
    ("import torch_npu\nimport torch\nfrom torch.optim import AdamW as AW\n\nmodel = torch.nn.Linear(4, 4)\n"
     "opt = AW(model.weight)\n", "ASC301", 6),
    ("import mindspore\nfrom mindspore.train import CheckpointConfig as CC\n\nconfig = CC(keep_checkpoint_max=5)\n",
     "ASC501", 4),
    ("import torch_npu\nfrom torch.distributed import init_process_group as ipg\n\nb = 'nccl'\nipg(b)\n", "ASC602", 5),
    # an import alias inside a function counts too
    ("import torch_npu\ndef setup(b='x'):\n    from torch.distributed import init_process_group as ipg\n    b = 'nccl'\n"
     "    ipg(backend=b)\n", "ASC602", 5),
    # a parenthesised import over several lines
    ("import torch_npu\nfrom torch.distributed import (\n    barrier,\n    init_process_group as start,\n)\n"
     "b = 'nccl'\nstart(b)\n", "ASC602", 7),
])
def test_alias_regressions(src, code, line):
    assert (code, line) in [(c, n) for c, n, _, _ in findings(src)]
    assert findings(src) == findings(src, prune=False)


# ----------------------------------------------------------------- TriggerText
TRIGGERS = ["torch", "Tensor(", "scale", "loss_scal", "ope_t", "sine", "ta", "x1s", "h.T", "@", "(", "_x", "1s",
            ".npu(", "'npu", "npu'", "npu:", "int(torch", "mm(", ".to(", "é", "input"]


@pytest.mark.parametrize("seed", range(30))
def test_presence_matches_plain_in(seed):
    rng = random.Random(seed)
    words = ["torch", "Tensor", "loss_scale", "x1", "état", "_", "rope_theta", "sin", "∑", "a.b", "(", "@", "\t",
             "npu", "input", "'", ":", "mm", "bmm", "to", "int", "é"]
    text = "".join(rng.choice(words) + rng.choice([" ", "\n", ".", "(", "", "'"]) for _ in range(rng.randint(0, 300)))
    scan = TriggerText(text)
    assert scan.test_all(TRIGGERS) == {t: t in text for t in TRIGGERS}
    assert [scan.occurs(t) for t in TRIGGERS] == [t in text for t in TRIGGERS]
    maybe = TriggerText(text).may_occur(TRIGGERS)
    assert all(maybe[t] for t in TRIGGERS if t in text)  # "maybe" never misses a trigger
    assert all(maybe[t] == (t in text) for t in TRIGGERS if is_word(t))  # words: exact


@pytest.mark.parametrize("seed", range(30))
def test_lines_match_a_line_by_line_look(seed):
    rng = random.Random(seed)
    pieces = ["torch", "AW", "xAW", "AW_", "é", "loss_scale", "scale", " ", "\n", "\r\n", "\r", "(", ".", "#"]
    text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 200)))
    texts, words = rng.sample(["torch", "scale", "loss_scal", "é", "(", "x"], 3), ["AW"]
    expect = [number for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1)
              if any(t in line for t in texts) or re.search(r"(?<!\w)AW(?!\w)", line)]
    assert TriggerText(text).lines(texts, words) == expect


def test_lines_and_whole_words():
    text = "a = AW(1)\nbAW = 2\nAW_x = 3\n# AW\r\nz = x @ y\ny = 'q'\n"
    scan = TriggerText(text)
    assert scan.lines(["@"]) == [5]
    assert scan.lines([], ["AW"]) == [1, 4]
    assert scan.lines(["q'"], ["AW"]) == [1, 4, 6]


def test_import_aliases_and_alias_words():
    text = "import torch.nn.functional as F\nfrom a import (\n  DataLoader as DL,\n)\ntry:\n    pass\nexcept E as e:\n  pass\n"
    aliases = TriggerText(text).import_aliases()
    assert ("torch.nn.functional", "F") in aliases and ("DataLoader", "DL") in aliases
    assert alias_words(aliases, ("DataLoader",)) == ["DL"]
    aliases = TriggerText("from a import (b,c as d, e as f)\nimport x.y as z;\nfrom q import r as s  # t\n").import_aliases()
    assert [("c", "d"), ("e", "f"), ("x.y", "z"), ("r", "s")] == aliases
    assert alias_words(aliases, (".DataLoader(",)) == []  # an attribute text: no import aliases it
    assert alias_words([("torch.nn", "nn")], ("nn",)) == []  # spelled as imported: nothing to add


@pytest.mark.parametrize("aliases", [
    [], [("torch.nn", "nn")], [("torch.optim.AdamW", "AW"), ("numpy", "np")], [("a.Adam", "Adam"), ("b.c", "Adam")],
    [("DataLoader", "DL"), ("x.y", "z")],
])
@pytest.mark.parametrize("triggers", [("Adam",), (".DataLoader(",), ("DataLoader", "zz"), ("nn",), ("y",), ()])
def test_renames_trigger_is_alias_words_found(aliases, triggers):
    assert renames_trigger(renamed_imports(aliases), triggers) is bool(alias_words(aliases, triggers))


@pytest.mark.parametrize("text, lines", [
    ("@property\ndef f(self): pass\n", []),  # decorators are not the operator
    ("@a\n@b(1, 2)  # c\n\n# x\nclass C: pass\n", []),
    ("y = (x\n     @w\n     @v)\n", [2, 3]),  # continuation lines that look like decorators
    ("y = (x\n     @w.T\n)\n", [2]),
    ("y = x \\\n    @w\ndef f(): pass\n", [2]),  # after a backslash: the operator
    ("@register(\n  'x')\ndef f(): pass\n", [1]),  # a multi-line decorator counts (cheap, never wrong)
    ("  @staticmethod\r\n  def f(): pass\r\n", []),
    ("a @= b\n@dec\ndef g(): pass\nc = d@e\n", [1, 4]),
])
def test_matmul_trigger_leaves_out_decorators(text, lines):
    scan = TriggerText(text)
    assert scan.lines(["@"]) == lines
    assert scan.may_occur(["@"])["@"] is bool(lines)


def test_a_file_whose_only_at_signs_are_decorators_is_not_parsed_for_matmul(monkeypatch):
    import ascend_lint.engine.linter as engine

    parsed = []
    monkeypatch.setattr(engine, "parse", lambda text, path: parsed.append(path) or __import__("ast").parse(text))
    from ascend_lint.registry import select_rules

    settings = Settings(preview=True, select=["ASC402"])  # (the rule that reads `@`: a preview rule)
    linter = Linter(select_rules(REGISTRY, settings)[0], settings)
    linter.check("import torch\n\n@functools.lru_cache()\ndef f(x):\n    return x\n", "a.py")
    assert parsed == []
    linter.check("import torch\n\ndef f(x, w):\n    return x @ w\n", "b.py")
    assert parsed == ["b.py"]
