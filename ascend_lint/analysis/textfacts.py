"""What a file's text says about where it runs, read without a parse: NPU code on its own (`npu_context`), a CUDA
user (`gpu_context`), the MindSpore mode it sets (`run_mode`); and `needle_searches`, fast tests for words."""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from .data import (GPU_TEXT_NEEDLES, GPU_TEXT_REACH, GPU_TEXT_RE, NPU_PACKAGES, NPU_TEXT_NEEDLES, NPU_TEXT_REACH,
                   NPU_TEXT_RE)


def needle_searches(needles: Sequence[str], anchors: Sequence[str]) -> List[Callable[[str], Any]]:
    """Searches that together find what `any(needle in text for needle in needles)` finds: one per anchor, for the
    needles holding it (the first anchor that fits; a needle without one is its own), each needle written as its
    rest after the anchor and a look back at the whole. `re` finds a literal prefix faster than `in` finds a
    word, the more so for a rare one, and one search rules out every needle holding its anchor."""
    groups: Dict[str, List[str]] = {}
    for needle in needles:
        groups.setdefault(next((a for a in anchors if a in needle), needle), []).append(needle)
    return [re.compile(re.escape(anchor) + "(?:" + "|".join(
        re.escape(n[n.index(anchor) + len(anchor):]) + ("" if n.startswith(anchor) else "(?<=" + re.escape(n) + ")")
        for n in group) + ")").search for anchor, group in groups.items()]


_NPU_NEEDLE_SEARCHES = needle_searches(NPU_TEXT_NEEDLES, ("npu", "hccl"))


def npu_context(modules: Iterable[str], text: str, occurs: Optional[Callable[[str], bool]] = None) -> bool:
    """Is a file NPU code on its own? It imports an NPU package (`modules`: its imports as dotted names,
    `from a import b` as 'a.b') or an Apex `Npu*` class, or its text uses an `npu` device, the `hccl` backend
    or a `torch.npu.*` API (`occurs(needle)`: does the text hold it, when the caller knows faster)."""
    for module in modules:
        if module.split(".", 1)[0] in NPU_PACKAGES or (
                module.startswith("apex.") and module.rsplit(".", 1)[-1].startswith("Npu")):
            return True
    needles = any(map(occurs, NPU_TEXT_NEEDLES)) if occurs is not None else \
        any(search(text) for search in _NPU_NEEDLE_SEARCHES)
    return needles and search_near(NPU_TEXT_RE, text, ("npu", "hccl"), NPU_TEXT_REACH)


def gpu_context(text: str) -> bool:
    """Does a file use a CUDA device, a `torch.cuda.*` API or the NCCL backend?"""
    return any(needle in text for needle in GPU_TEXT_NEEDLES) and \
        search_near(GPU_TEXT_RE, text, GPU_TEXT_NEEDLES, GPU_TEXT_REACH)


def search_near(pattern: "re.Pattern[str]", text: str, anchors: Sequence[str], reach: int) -> bool:
    """`pattern.search(text)`, for a one-line pattern whose every match holds one of `anchors` at most
    `reach` characters after the match starts: tried only on the lines around each anchor (a whole-text
    search of a pattern without a literal prefix tries every position)."""
    find = text.find
    for anchor in anchors:
        at = find(anchor)
        while at != -1:
            end = find("\n", at)
            if pattern.search(text, max(at - reach, 0), end if end != -1 else len(text)):
                return True
            at = find(anchor, at + 1)
    return False


_SET_CONTEXT_RE = re.compile(r"set_context[ \t]*\(")
_MODE_ARG_RE = re.compile(r"\bmode[ \t]*=[ \t]*([\w.]+)[ \t\n]*([,)]?)")
_MODES = {"GRAPH_MODE": "graph", "0": "graph", "PYNATIVE_MODE": "pynative", "1": "pynative"}


def run_mode(text: str) -> Optional[str]:
    """The MindSpore execution mode a file sets with `set_context(mode=...)`: 'graph', 'pynative', '?' (set
    from a variable, or both ways), None (not set). Commented-out calls do not count."""
    if "set_context" not in text:
        return None
    modes = set()
    for m in _SET_CONTEXT_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "#" in text[line_start:m.start()]:
            continue
        close, depth = m.end(), 0  # the call's arguments: up to its closing bracket
        while close < len(text) and close - m.end() < 500:
            char = text[close]
            if char in "([{":
                depth += 1
            elif char in ")]}":
                if depth == 0:
                    break
                depth -= 1
            close += 1
        found = _MODE_ARG_RE.search(text, m.end(), close + 1)
        if found is not None:
            value = found.group(1).rsplit(".", 1)[-1]
            modes.add(_MODES.get(value, "?") if found.group(2) else "?")  # (`mode=A if c else B`: '?')
    if not modes:
        return None
    return modes.pop() if len(modes) == 1 else "?"
