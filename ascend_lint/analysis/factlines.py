"""Where in a file's text the facts that need its syntax tree may lie, found without a parse.

A training step (`step_call_lines`, `might_step`: a superset, from the text, of the calls the semantic model
takes for steps), the words of precision decisions (`word_lines`), and the local calls that reach a step
(`with_local_callers`); `fact_lines` puts them together and `fact_sketch` cuts a text down to the functions
that hold such lines, for a parse of only what can hold tree facts (summary.summarize_text).
"""
from __future__ import annotations

import bisect
import re
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from .data import FP_WORDS, PRECISION_WORDS, STEP_NAME_RE, STEP_RECEIVER_HINTS

# PRECISION_WORDS that hold one of FP_WORDS (a body with one may set a reduced precision), and the others.
PRECISION_LOW = tuple(word for word in PRECISION_WORDS if any(fp in word for fp in FP_WORDS))
PRECISION_OTHER = tuple(word for word in PRECISION_WORDS if word not in PRECISION_LOW)
FactLines = Tuple[List[int], List[int], List[int]]


def fact_lines(text: str, defs: Dict[str, Sequence], precision: bool) -> FactLines:
    """The sorted numbers of the lines where the tree facts may lie: step calls (and the local calls that
    reach them), and the two kinds of PRECISION_WORDS (none when precision is not gathered). `text`: with
    the parser's line ends (parser_lines)."""
    return (with_local_callers(step_call_lines(text), defs, text),
            word_lines(text, PRECISION_LOW) if precision else [],
            word_lines(text, PRECISION_OTHER) if precision else [])


def parser_lines(text: str) -> str:
    """The text with its lines ended by '\n' alone, as the parser counts them (a lone '\r' ends one too)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


_DEF_LINE_RE = re.compile(r"([ \t]*)(?:async[ \t]+)?def[ \t]")


def fact_sketch(text: str, defs: Dict[str, Sequence], lines: List[int]) -> Optional[str]:
    """The text with every top-level function and method whose lines hold none of `lines` cut down to
    `def name(): pass` on its first line, blank lines after it: a parse of the rest reads the same facts
    (line numbers, the file's local function names and its module-level statements are kept; a function
    without such a line neither steps nor makes a loop step), at a fraction of the cost. None: nothing to cut,
    or lines the text summary may count otherwise (a lone '\r')."""
    pieces: Optional[List[str]] = None
    for qual, (first, last, _calls) in defs.items():
        if last <= first or any_within(lines, first, last):
            continue
        if pieces is None:
            if "\r" in text:
                text = text.replace("\r\n", "\n")
                if "\r" in text:
                    return None
            pieces = text.split("\n")
        head = pieces[first - 1] if first <= len(pieces) else ""
        found = _DEF_LINE_RE.match(head)
        if found is None:
            return None  # (not the line the text summary read the function on: parse it all)
        pieces[first - 1] = found.group(1) + "def " + qual.rpartition(".")[2] + "(): pass"
        pieces[first:last] = [""] * (min(last, len(pieces)) - first)
    return "\n".join(pieces) if pieces is not None else None


_BACKWARD_RE = re.compile(r"backward\s*\(")
_STEP_CALL_RE = re.compile(r"step\s*\(")
# Literal-led patterns for the rest (fast in `re`; a case-insensitive one is ~10x slower), each hit then
# read as the whole name around it (lower case, underscores dropped, as the semantic layer compares names):
# `train_one_step`, `TrainOneStepCell`; `optimizer(`, `opt(`, `Opt(`.
_NAME_PIECES = (re.compile(r"rain\w*"), re.compile(r"RAIN\w*"))
_CALLED_PIECES = (re.compile(r"ptim\w*(?=\s*\()"), re.compile(r"PTIM\w*(?=\s*\()"), re.compile(r"pt_*(?=\s*\()"),
                  re.compile(r"PT_*(?=\s*\()"))


def step_call_lines(text: str) -> List[int]:
    """Sorted numbers of the lines (counted by '\\n' alone) that may call a training step."""
    return line_numbers(text, _step_calls(text))


def might_step(text: str) -> bool:
    """Could the text call a training step?"""
    return next(_step_calls(text), None) is not None


def _step_calls(text: str) -> Iterator[int]:
    """Offsets where the text may call a training step: a superset, from the text alone, of the calls that
    `semantic.is_step_call` and FileContext's MindSpore step test accept: `.backward(`, `.step(` on a receiver
    that may be an optimizer or a grad scaler (not a scheduler's: diffusers pipelines call
    `self.scheduler.step(` in every denoising loop), a call named like a step (`train_one_step(`,
    `_train_one_batch(`, a `TrainOneStepCell`), `optimizer(grads)`, `opt(grads)`."""
    for m in _BACKWARD_RE.finditer(text):
        yield m.start()
    for m in _STEP_CALL_RE.finditer(text):
        if _may_step_on(text, m.start()):
            yield m.start()
    for pattern in _NAME_PIECES:
        for m in pattern.finditer(text):
            name = _bare_name(text, m.start(), m.end())
            if STEP_NAME_RE.search(name) or "trainnet" in name:
                yield m.start()
    for pattern in _CALLED_PIECES:
        for m in pattern.finditer(text):
            name = _bare_name(text, m.start(), m.end())
            if name.startswith("optim") or name == "opt" or ("optim" in name and _grad_first(text, m.end())):
                yield m.start()


_FIRST_ARG_RE = re.compile(r"\s*\(\s*(\w*)")


def _grad_first(text: str, end: int) -> bool:
    """Is the first argument of the call whose name ends at `end` a name holding `grad`?"""
    m = _FIRST_ARG_RE.match(text, end)
    return m is not None and "grad" in m.group(1).lower()


def _bare_name(text: str, start: int, end: int) -> str:
    """The name (lower case, underscores dropped) of the identifier run that ends at `end` and holds `start`."""
    return text[_word_start(text, start):end].lower().replace("_", "")


def _word_start(text: str, pos: int) -> int:
    """Where the identifier run holding offset `pos` (or ending just before it) starts."""
    while pos and (text[pos - 1].isalnum() or text[pos - 1] == "_"):
        pos -= 1
    return pos


def with_local_callers(lines: List[int], defs: Dict[str, Sequence], text: str) -> List[int]:
    """`lines` (sorted) plus the lines that call, by name, a function or method of the file that holds one of
    them, twice over: a loop calling a helper that steps is a step loop (FileContext looks two calls deep)."""
    searched: Set[str] = set()  # (the lines calling these are in `lines` already)
    for _depth in range(2):
        names = {qual.rpartition(".")[2] for qual, (first, last, _calls) in defs.items()
                 if any_within(lines, first, last)} - searched
        if not names:
            break
        searched |= names
        lines = sorted(set(lines).union(line_numbers(text, call_offsets(text, names))))
    return lines


_CALLED_NAME_REV_RE = re.compile(r"\((\w+)")  # over the reversed text: `name(` (literal-led, fast in `re`)


def call_offsets(text: str, names: Set[str]) -> Iterable[int]:
    """Offsets in the text of every `name(` for `names` (identifiers), found inside longer names too: for a
    few names, one search each; for many, one pass over the reversed text, testing the name before every
    `(` (a search of the whole text costs as much as ~30 names)."""
    if len(names) <= 32:
        return word_offsets(text, [name + "(" for name in names])
    backwards = {name[::-1] for name in names}
    sizes = sorted({len(name) for name in names})
    last = len(text) - 1
    offsets: List[int] = []
    for m in _CALLED_NAME_REV_RE.finditer(text[::-1]):
        run = m.group(1)  # (the name before a `(`, backwards: a called name ends it, so starts `run`)
        for size in sizes:
            if size > len(run):
                break
            if run[:size] in backwards:
                offsets.append(last - m.start())  # (the `(`: on the line the name starts)
                break
    return offsets


def _may_step_on(text: str, step: int) -> bool:
    """Could the `step(` at `step` be `.step(` on an optimizer or a scaler? Its receiver's name decides; a
    receiver read off a subscript (`opts[i].step(`) or a literal has no name and never steps; anything else
    may."""
    i = step - 1
    while i >= 0 and text[i] in " \t\r\n\\":
        i -= 1
    if i < 0 or text[i] != ".":
        return False
    i -= 1
    while i >= 0 and text[i] in " \t\r\n\\":
        i -= 1
    if i < 0 or not (text[i].isalnum() or text[i] == "_"):
        return i < 0 or text[i] not in "]'\""  # (`(opt).step(`, a call's result: maybe)
    name = text[_word_start(text, i):i + 1].lower()
    return "sched" not in name and any(h in name for h in STEP_RECEIVER_HINTS)


def word_lines(text: str, words: Sequence[str]) -> List[int]:
    """Sorted numbers of the lines (counted by '\\n' alone) that hold one of `words`."""
    return line_numbers(text, word_offsets(text, words))


def word_offsets(text: str, words: Iterable[str]) -> Iterator[int]:
    """Offsets of every occurrence of each of `words` in the text."""
    find = text.find
    for word in words:
        pos = find(word)
        while pos != -1:
            yield pos
            pos = find(word, pos + 1)


def line_numbers(text: str, offsets: Iterable[int]) -> List[int]:
    """Sorted numbers of the lines (counted by '\\n' alone) that hold `offsets`: the text counted once."""
    lines: List[int] = []
    count = text.count
    line, done = 1, 0
    for pos in sorted(set(offsets)):
        line += count("\n", done, pos)
        done = pos
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def any_within(lines: List[int], first: int, last: int) -> bool:
    """Does the sorted list `lines` hold a number in [first, last]?"""
    i = bisect.bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last
