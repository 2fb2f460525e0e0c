"""The text pre-filter: which rule trigger texts occur in a file, and on which lines.

A rule declares `triggers`, the texts its handlers need to see. The engine parses a file only if
some enabled rule has a trigger in it, and the walker descends only into statements whose lines
hold a trigger. Both questions are answered here, each trigger text tested once per file:

- presence is tested on the file's distinct identifier runs joined together (a fraction of the
  text), built once per file that passes the file gate: a word trigger (letters, digits, `_`) is
  looked for there only; any other text only if its identifier piece is there as a run;
- import aliases are followed: after `from torch.optim import AdamW as AW`, the rule whose trigger
  `Adam` names the imported object also sees the lines holding the word `AW`;
- an operator trigger stands for the operator only: `@` is matrix multiplication, so a line that is
  certainly a decorator (`@name` or `@name(...)` alone on its line, in a run of such lines that a `def`
  or `class` line follows) does not hold it. A file whose only `@` are decorators is not parsed for it.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

# Bytes that cannot be part of an identifier become spaces (non-ASCII bytes are kept: they only
# merge runs, and a run still holds every ASCII trigger it held).
_NOT_WORD = bytes(c if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95 or c >= 128) else 32
                  for c in range(256))
_PIECE_RE = re.compile(r"[A-Za-z0-9_]{2,}")
_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
_NAME_RE = re.compile(r"[A-Za-z_][\w.]*")
OPERATORS = frozenset({"@"})  # triggers matched as operators (see `operator_lines`)
_DECORATOR_RE = re.compile(r"[ \t]*@[A-Za-z_][\w.]*(?:\(.*\))?[ \t\r]*(?:#.*)?")
_DECORATED_RE = re.compile(r"[ \t]*(?:def|async|class)[ \t]")


def is_word(trigger: str) -> bool:
    """A trigger made of identifier characters only (ASCII)."""
    return trigger.isascii() and trigger.replace("_", "a").isalnum()


class TriggerText:
    """One file's text, asked which trigger texts it holds and where."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._present: Dict[str, bool] = {}
        self._maybe: Dict[str, bool] = {}
        self._words: Optional[str] = None
        self._operators: Dict[str, List[int]] = {}

    def occurs(self, trigger: str) -> bool:
        """Does `trigger` occur anywhere in the text? (Each text is tested once.)"""
        found = self._present.get(trigger)
        if found is None:
            self.test_all((trigger,))
            found = self._present[trigger]
        return found

    def occurs_plainly(self, trigger: str) -> bool:
        """`occurs`, tested on the text itself: for the few tests made before it is known whether
        the file needs the identifier index at all (the file gate)."""
        found = self._present.get(trigger)
        if found is None:
            found = self._present[trigger] = trigger in self.text
        return found

    def test_all(self, triggers: Sequence[str]) -> Dict[str, bool]:
        """Test every trigger not tested yet, in one loop; returns trigger -> occurs."""
        present = self._present
        maybe = self.may_occur(triggers)
        text = self.text
        for trigger, piece in _plan(tuple(triggers)):
            if trigger not in present:
                present[trigger] = maybe[trigger] and (piece is None or trigger in text)
        return present

    def may_occur(self, triggers: Sequence[str]) -> Dict[str, bool]:
        """trigger -> False if it certainly does not occur: a word is looked for among the identifier
        runs (exact); any other text only as far as its identifier piece is a run with the same
        boundaries (`'npu` needs a run starting `npu`), without scanning the text: the line scan
        that follows finds (or misses) it anyway."""
        maybe = self._maybe
        words = None
        for trigger in triggers:
            if trigger not in maybe:
                if trigger in OPERATORS:
                    maybe[trigger] = bool(self.operator_lines(trigger))
                    continue
                if words is None:
                    words = self._word_runs()
                piece = _PLAN.get(trigger, 0)
                if piece == 0:
                    piece = _plan((trigger,))[0][1]
                    _PLAN[trigger] = piece
                maybe[trigger] = (trigger if piece is None else piece) in words
        return maybe

    def operator_lines(self, trigger: str) -> List[int]:
        """Lines holding the operator `trigger` (`@`: decorator lines left out)."""
        found = self._operators.get(trigger)
        if found is None:
            found = self._operators[trigger] = _matmul_lines(self.text) if trigger == "@" else []
        return found

    def _word_runs(self) -> str:
        """The distinct identifier runs of the text, each between spaces."""
        if self._words is None:
            runs = self.text.encode("utf-8", "surrogatepass").translate(_NOT_WORD).split()
            self._words = " " + b" ".join(dict.fromkeys(runs)).decode("utf-8", "surrogatepass") + " "
        return self._words

    def import_aliases(self) -> List[Tuple[str, str]]:
        """(imported name, local name) of every `NAME as LOCAL` in the text: import aliases, plus
        harmless extras (`except E as e`). Found from the text, so function-level imports count too
        (the `as` keyword between single spaces, as every formatter writes it)."""
        text = self.text
        out: List[Tuple[str, str]] = []
        find = text.find
        pos = find(" as ")
        while pos != -1:
            before = text[max(0, pos - 200):pos].rsplit(None, 1)
            after = text[pos + 4:pos + 84].split(None, 1)
            if before and after:
                name = before[-1].rpartition(",")[2].rpartition("(")[2]
                local = after[0].rstrip(",)\\;:")
                if local.isidentifier() and name and _NAME_RE.fullmatch(name):
                    out.append((name, local))
            pos = find(" as ", pos + 4)
        return out

    def lines(self, triggers: Iterable[str], words: Iterable[str] = ()) -> List[int]:
        """Sorted numbers of the lines holding one of `triggers` (anywhere) or one of `words` (as a
        whole identifier)."""
        text = self.text
        if "\r" in text:  # CRLF and lone CR end lines too: count them as "\n" (line numbers are kept)
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        hits: Set[int] = set()
        starts: Set[int] = set()  # where the lines holding a text start
        for trigger in triggers:
            if trigger in OPERATORS:
                hits.update(self.operator_lines(trigger))
            else:
                _add_line_starts(text, trigger, starts, False)
        for word in words:
            _add_line_starts(text, word, starts, True)
        line, counted, count = 1, 0, text.count  # (the text's newlines counted once, whatever the texts)
        for start in sorted(starts):
            line += count("\n", counted, start)
            counted = start
            hits.add(line)
        return sorted(hits)


def _add_line_starts(text: str, needle: str, starts: Set[int], whole_word: bool) -> None:
    """Add the start offsets of the lines of `text` holding `needle` (as a whole identifier: `whole_word`)."""
    find = text.find
    size = len(needle)
    pos = find(needle)
    while pos != -1:
        if whole_word and (_word_char(text, pos - 1) or _word_char(text, pos + size)):
            pos = find(needle, pos + 1)
            continue
        starts.add(text.rfind("\n", 0, pos) + 1)
        end = find("\n", pos)  # one hit per line is enough: go on after this line
        if end == -1:
            break
        pos = find(needle, end + 1)


def _matmul_lines(text: str) -> List[int]:
    """Lines holding an `@` that may be the matrix-multiplication operator: every line with an `@` but
    the decorators (a run of `@name` / `@name(...)` lines, comments and blank lines between them, that a
    `def`, `async def` or `class` line follows). A multi-line decorator call counts as a hit."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    find = text.find
    out: List[int] = []
    pos = find("@")
    line, counted = 1, 0
    decided: Dict[int, bool] = {}  # line start offset -> is a decorator
    while pos != -1:
        line += text.count("\n", counted, pos)
        start = text.rfind("\n", 0, pos) + 1
        end = find("\n", pos)
        end = len(text) if end == -1 else end
        counted = start
        if not _decorator_at(text, start, end, decided):
            out.append(line)
        pos = find("@", end)
    return out


def _decorator_at(text: str, start: int, end: int, decided: Dict[int, bool]) -> bool:
    """Is the line text[start:end] one of a run of decorator lines that a `def` or `class` line follows?
    (Not after a line ending in a backslash: that `@` continues an expression.)"""
    if start in decided:
        return decided[start]
    run: List[int] = []  # the decorator lines' starts
    verdict = False
    while _DECORATOR_RE.fullmatch(text, start, end) and not (start >= 2 and text[start - 2] == "\\"):
        run.append(start)
        start, end = _next_code_line(text, end + 1)
        if start == -1:
            break
        if start in decided:
            verdict = decided[start]
            break
        if _DECORATED_RE.match(text, start, end):
            verdict = True
            break
    for line_start in run:
        decided[line_start] = verdict
    return verdict and bool(run)


def _next_code_line(text: str, start: int) -> Tuple[int, int]:
    """(start, end) of the first line from offset `start` that is neither blank nor a comment; (-1, -1)."""
    size = len(text)
    while start < size:
        end = text.find("\n", start)
        end = size if end == -1 else end
        stripped = text[start:end].strip()
        if stripped and stripped[0] != "#":
            return start, end
        start = end + 1
    return -1, -1


def _word_char(text: str, index: int) -> bool:
    if index < 0 or index >= len(text):
        return False
    char = text[index]
    return char == "_" or char.isalnum()


def alias_words(aliases: Sequence[Tuple[str, str]], triggers: Iterable[str]) -> List[str]:
    """Local names that stand for something a trigger names: `AW` after `import AdamW as AW` for
    the trigger `Adam`. A trigger starting with `.` names an attribute, which no import aliases."""
    pieces = _pieces(tuple(triggers))
    found: List[str] = []
    for name, local in aliases:
        if local not in found and local != name.rsplit(".", 1)[-1] and any(p in name for p in pieces):
            found.append(local)
    return found


def renamed_imports(aliases: Sequence[Tuple[str, str]]) -> str:
    """The imported names that an alias names otherwise, between spaces (for `renames_trigger`)."""
    return " ".join(name for name, local in aliases if local != name.rsplit(".", 1)[-1])


def renames_trigger(renamed: str, triggers: Iterable[str]) -> bool:
    """Would `alias_words` find a local name for one of `triggers`? (`renamed`: from `renamed_imports`)"""
    return any(piece in renamed for piece in _pieces(tuple(triggers)))


_PLAN: Dict[str, Optional[str]] = {}  # trigger -> its `_plan` piece


@lru_cache(maxsize=None)
def _plan(triggers: Tuple[str, ...]) -> Tuple[Tuple[str, Optional[str]], ...]:
    """(trigger, None) for a word; for any other text (trigger, what the identifier runs must hold):
    its longest identifier piece, with a space on the side where the trigger has a non-identifier
    character next to it (`.npu(` needs the run `npu` exactly: ` npu `); "" if it has no piece."""
    plan = []
    for trigger in triggers:
        if is_word(trigger):
            plan.append((trigger, None))
            continue
        pieces = list(_WORD_RE.finditer(trigger))
        if not pieces:
            plan.append((trigger, ""))
            continue
        best = max(pieces, key=lambda m: len(m.group()))
        before = " " if best.start() > 0 else ""
        after = " " if best.end() < len(trigger) else ""
        plan.append((trigger, before + best.group() + after))
    return tuple(plan)


@lru_cache(maxsize=None)
def _pieces(triggers: Tuple[str, ...]) -> Tuple[str, ...]:
    """The identifier pieces of the triggers that may name an importable object."""
    return tuple(p for t in triggers if not t.startswith(".") for p in _PIECE_RE.findall(t))
