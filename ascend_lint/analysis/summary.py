"""Per-file summaries: the small, JSON-able facts a file gives the project model.

Two layers, one function each:
- `light_summary(text)`: from the text alone, with a few regular-expression passes (no parse): imports
  (function-level ones too), top-level classes with their bases as written and their methods,
  top-level functions and methods with the project-looking names they call, `X.attr = f` monkey-patches,
  whether the file is an entry script. Every file of the project gets this, linted or not.
- `summarize(tree, text, ctx)`: the light summary plus what needs the syntax tree, taken from the tree the
  engine already parsed: step loops and what they call, precision decisions about the models a file
  trains, configuration-class defaults. Only the parts of the file whose text can hold such facts are
  looked at.

A summary is a plain dict (see `SUMMARY_SCHEMA`); the model never sees a tree.
"""
from __future__ import annotations

import ast
import bisect
import keyword
import re
import sys
import warnings
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ..astutil import dotted_name
from .data import (GPU_TEXT_NEEDLES, GPU_TEXT_REACH, GPU_TEXT_RE, NPU_PACKAGES, NPU_TEXT_NEEDLES, NPU_TEXT_REACH,
                   NPU_TEXT_RE, PATCH_REGISTRARS, PRECISION_WORDS, STEP_NAME_RE, STEP_RECEIVER_HINTS)

SUMMARY_SCHEMA = 5  # (5: patch lines and the patch filter corrected)
Summary = Dict[str, Any]
MAX_CALLS = 200  # per function: enough for an approximate call graph, bounded for odd generated code

_DOTTED_RE = re.compile(r"[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*")
# Statement starts worth a look, found with one literal-led pattern (fast in `re`), then read one by one. The same
# match reads an import's names and a def's name: it stays on its line, so it passes over no other start (and an
# import or def line without them holds nothing to read).
_STMT_START_RE = re.compile(r"\n([ \t]*)(?:import[ \t]+([^\n#;]+)|def[ \t]+(\w+)|async[ \t]+def[ \t]+(\w+)|from[ \t]|"
                            r"class[ \t]|if[ \t]+_)")  # (an optional `async` would make every line slower)
_FROM_RE = re.compile(r"from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n#;]+))")
_CLASS_RE = re.compile(r"class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:")
_MAIN_RE = re.compile(r"if[ \t]+(?:__name__[ \t]*==[ \t]*['\"]__main__['\"]|['\"]__main__['\"][ \t]*==[ \t]*__name__)")
# Patterns over the REVERSED text: there they start with a literal, which `re` finds fast.
_PATCH_REV_RE = re.compile(r"\n[ \t]*([\w.]+)[ \t]*=[ \t]*(\w[\w.]*\.[\w.]*\w)[ \t]*(?=\n)")  # `a.b = f`
_CALL_REV_RE = re.compile(r"\([ \t]*([\w.]+)")  # `name(`
_REGISTRAR_RE = re.compile(
    r"(?:" + "|".join(map(re.escape, PATCH_REGISTRARS)) + r")\(\s*['\"](?P<target>[\w.]+)['\"]\s*,\s*(?P<value>[\w.]+)")
_NOT_CALLED = frozenset(keyword.kwlist) | {"print", "len", "range", "isinstance", "getattr", "setattr", "hasattr",
                                          "super", "int", "float", "str", "list", "dict", "tuple", "set", "type"}
_NOT_CALLED_BACKWARDS = frozenset(name[::-1] for name in _NOT_CALLED)
# Top-level modules that are never the project's own code: calls through them are not collected.
EXTERNAL_ROOTS = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "torch", "torch_npu", "numpy", "mindspore", "apex", "scipy", "einops", "triton", "deepspeed", "megatron",
    "transformers", "safetensors", "tqdm", "yaml", "PIL", "cv2", "pandas", "sklearn", "matplotlib"}
_QUOTES = ('"' * 3, "'" * 3)
_SINGLES_RE = re.compile("'" * 3)
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def _blank_strings(text: str) -> str:
    """The text with triple-quoted strings (docstrings, templates) emptied, their newlines kept."""
    double, single = _QUOTES
    found = _SINGLES_RE.search(text)  # (faster than str.find: a quote is common, three in a row rare)
    next_double, next_single = text.find(double), found.start() if found else -1
    if next_double == -1 and next_single == -1:
        return text
    pieces: List[str] = []
    pos = 0
    find = text.find
    while True:
        if next_double != -1 and next_double < pos:
            next_double = find(double, pos)
        if next_single != -1 and next_single < pos:
            next_single = find(single, pos)
        if next_double == -1 and next_single == -1:
            break
        start = next_double if next_single == -1 or (next_double != -1 and next_double < next_single) else next_single
        end = find(text[start:start + 3], start + 3)
        if end == -1:
            break
        pieces.append(text[pos:start])
        pieces.append('""' + "\n" * text.count("\n", start, end))  # (an empty string keeps a body a body)
        pos = end + 3
    pieces.append(text[pos:])
    return "".join(pieces)


def _width(indent: str) -> int:
    return len(indent.expandtabs(8)) if "\t" in indent else len(indent)


_ENDS: Dict[int, "re.Pattern[str]"] = {}


def _block_end(masked: str, start: int, width: int) -> int:
    """Offset where the block whose header line starts at `start` (indented `width`) ends."""
    pattern = _ENDS.get(width)
    if pattern is None:  # the next code line indented no deeper than the header (closing brackets excluded)
        pattern = _ENDS[width] = re.compile(r"\n(?=[ \t]{0,%d}[^ \t\n#)\]}])" % width)
    match = pattern.search(masked, start)  # (the header line holds no newline: the first candidate is its end)
    return match.start() if match else len(masked)


def _dotted(text: str) -> str:
    return "".join(text.split())


def _names(text: str) -> Iterator[Tuple[str, Optional[str]]]:
    """(name, asname) of an import's name list."""
    for part in text.replace("\\", " ").split(","):
        pieces = part.split()
        if pieces:
            yield pieces[0], (pieces[2] if len(pieces) == 3 and pieces[1] == "as" else None)


def _needle_searches(needles: Sequence[str], anchors: Sequence[str]) -> List[Callable[[str], Any]]:
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


_NPU_NEEDLE_SEARCHES = _needle_searches(NPU_TEXT_NEEDLES, ("npu", "hccl"))
# The precision words that can make a text deep when might_step finds nothing in it: `TrainOneStep` and
# `build_train_network` lie in a name holding `trainonestep` / `trainnet` (lower case, underscores dropped), which
# might_step accepts. Anchors: characters rare in code, else a short piece of the word.
_PRECISION_SEARCHES = _needle_searches([w for w in PRECISION_WORDS if w not in ("TrainOneStep", "build_train_network")],
                                       ("6", "M", "v", "z", "x", "y", "(", "_f", "ca"))


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


def light_summary(text: str, shared: Optional[Dict[Any, Any]] = None, precision: bool = True) -> Summary:
    """Imports, classes, functions and their calls, patches, the entry flag and the file's own device
    context (`npu`: NPU code on its own, `gpu`: an entry script that uses CUDA, `mode`: the MindSpore mode it
    sets), from the text alone. With `shared` (the names and records of the summaries made so far), its
    names and records are those objects when equal (see share_records); else its names are interned.
    `precision`: are precision decisions gathered (else only step loops make a text need its tree)?"""
    intern = sys.intern if shared is None else (lambda name: shared.setdefault(name, name))
    masked = "\n" + _blank_strings(text)  # (a leading newline: every statement start follows one)
    imports: List[tuple] = []  # (module, name, asname, level, line, inside a def?)
    classes: Dict[str, list] = {}  # name -> [line, [bases as written], [methods]] (tuples in the summary)
    defs: Dict[str, tuple] = {}  # qualname -> (line, end line, (names it calls))
    owners: List[Tuple[int, int, str, int]] = []  # (start, end offset, qualname, line) of functions/methods
    entry = False
    config_spans: List[Tuple[int, int]] = []  # configuration classes: their defaults are read by a small parse
    current_class: Optional[Tuple[int, str, int]] = None  # (end offset, name, method indentation or -1)
    line, pos = 0, 0
    covered = 0  # the furthest end of the def spans so far: a statement starting before it is inside a def
    count = masked.count
    tabs = "\t" in masked
    for m in _STMT_START_RE.finditer(masked):
        start = m.start() + 1
        line += count("\n", pos, start)
        pos = start
        indent, imported, name, async_name = m.groups()
        head = m.end(1)
        width = _width(indent) if tabs else head - start
        first = masked[head]
        if current_class is not None and start >= current_class[0]:
            current_class = None
        if imported is not None:
            in_func = start < covered
            for module, asname in _names(imported):
                imports.append((intern(module), None, asname and intern(asname), 0, line, in_func))
        elif first == "f":
            found = _FROM_RE.match(masked, head)
            if found:
                dots, module, bracketed, names = found.groups()
                level, in_func = len(dots), start < covered
                for name, asname in _names(names if bracketed is None else bracketed):
                    imports.append((intern(module), intern(name), asname and intern(asname), level, line, in_func))
        elif first == "c":
            found = _CLASS_RE.match(masked, head)
            if found and width == 0:
                bases = [intern(_dotted(b)) for b in (found.group(2) or "").split(",")
                         if b.strip() and "=" not in b and _DOTTED_RE.fullmatch(b.strip())]
                classes[intern(found.group(1))] = [line, bases, []]
                current_class = (_block_end(masked, start, 0), found.group(1), -1)
                if found.group(1).endswith("Config") or any(b.endswith("Config") for b in bases):
                    config_spans.append((start, current_class[0]))
        elif first == "i":
            entry = entry or (width == 0 and _MAIN_RE.match(masked, head) is not None)
        else:  # a def
            name = name or async_name
            qual = None
            if width == 0:
                qual = intern(name)
            elif current_class is not None and current_class[2] in (-1, width):
                current_class = (current_class[0], current_class[1], width)
                qual = intern(f"{current_class[1]}.{name}")
                classes[current_class[1]][2].append(intern(name))
            if qual is None and start < covered:
                continue  # nested in a def whose span is known: its own span adds nothing
            end = _block_end(masked, start, width)
            covered = max(covered, end)
            if qual is not None and qual not in defs:
                owners.append((m.end(), end, qual, line))
                defs[qual] = (line, line + count("\n", start, end), ())
    known = _known_roots(imports, classes, defs)
    reverse = (masked + "\n")[::-1]
    patches = []
    for m in _PATCH_REV_RE.finditer(reverse):
        target, value = m.group(2)[::-1], m.group(1)[::-1]
        if target.split(".", 1)[0] in known and value.split(".", 1)[0] in known and \
                not target.startswith(("self.", "cls.")) and (value[:1].isalpha() or value[:1] == "_"):
            patches.append([target, value, len(reverse) - m.end()])  # (the offset of its line's start in `masked`)
    line, done = 0, 0  # (`masked` starts with a newline: the newlines before a line's start number it)
    for record in reversed(patches):  # offsets -> lines, counting each stretch once (matches come last first)
        line += count("\n", done, record[2])
        done, record[2] = record[2], line
    if "register_patch" in masked:
        for m in _REGISTRAR_RE.finditer(masked):
            if m.group("value").split(".", 1)[0] in known:
                patches.append([m.group("target"), m.group("value"), count("\n", 0, m.start())])
    if owners:
        _collect_calls(reverse, owners, defs, known, intern)
    # "light": the syntax tree holds more (step loops, precision decisions): see summarize()
    deep = might_step(masked) or (precision and any(search(masked) for search in _PRECISION_SEARCHES))
    modules = (module + "." + name if name else module
               for module, name, _asname, level, _line, in_func in imports if not level and not in_func)
    records = {name: (line, tuple(bases), tuple(methods)) for name, (line, bases, methods) in classes.items()}
    summary = {"schema": SUMMARY_SCHEMA, "light": deep, "imports": imports, "classes": records,
               "defs": defs, "patches": patches, "entry": entry, "npu": npu_context(modules, text),
               "gpu": entry and gpu_context(text), "mode": run_mode(text)}  # (only an entry's CUDA use counts)
    config = _config_from_text(masked, config_spans)
    if config:
        summary["config"] = config
    return summary if shared is None else share_records(summary, shared)


def share_records(summary: Summary, table: Dict[Any, Any]) -> Summary:
    """A fresh text summary with its records hash-consed through `table` (the records seen so far), in place:
    a project's files repeat records (`import torch` on line 3, a call list, a base list, a line number
    above 256), and equal ones become one object. Returns the summary."""
    one = table.setdefault

    def number(value: int) -> int:
        return one(value, value) if value > 256 else value  # (smaller ints are shared by Python already)

    summary["imports"] = [one(record, record) for record in summary["imports"]]
    summary["defs"] = {qual: one(key := (number(line), number(end), one(calls, calls)), key)
                       for qual, (line, end, calls) in summary["defs"].items()}
    summary["classes"] = {name: one(key := (number(line), one(bases, bases), one(methods, methods)), key)
                          for name, (line, bases, methods) in summary["classes"].items()}
    return summary


_INIT_RE = re.compile(r"\n([ \t]+)def[ \t]+__init__[ \t]*\(")
_BODY_RE = re.compile(r"\n([ \t]+)\S")
_FIELD_RE = re.compile(r"\n([ \t]+)(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([^\n#]+?)[ \t]*(?=\n|#)")


def _config_from_text(masked: str, spans: List[Tuple[int, int]]) -> Dict[str, Dict[str, Any]]:
    """Defaults of configuration classes: class fields (`hidden_act: str = "silu"`) and `__init__` defaults,
    read with a small parse of the signature alone (a few classes per project)."""
    config: Dict[str, Dict[str, Any]] = {}
    for start, end in spans:
        header = masked[start:masked.find("\n", start + 1) if masked.find("\n", start + 1) != -1 else end]
        name = header.split()[1].split("(")[0].split(":")[0] if len(header.split()) > 1 else ""
        values: Dict[str, Any] = {}
        first = _BODY_RE.search(masked, start + 1, end)
        body_indent = first.group(1) if first else None
        for m in _FIELD_RE.finditer(masked, start, end):
            if m.group(1) != body_indent:
                continue  # an assignment inside a method
            try:
                values[m.group(2)] = ast.literal_eval(m.group(3))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
        init = _INIT_RE.search(masked, start, end)
        if init is not None:
            close = masked.find(":\n", init.end())
            signature = masked[init.start() + 1:close + 1] if close != -1 else ""
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(signature.strip() + " pass")
                func = tree.body[0]
                if isinstance(func, ast.FunctionDef):
                    args = func.args
                    positional = args.posonlyargs + args.args
                    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
                    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
                    for arg, default in pairs:
                        if isinstance(default, ast.Constant):
                            values[arg.arg] = default.value
            except (SyntaxError, ValueError, RecursionError, MemoryError, IndexError):
                pass
        values = {k: v for k, v in values.items() if isinstance(v, (str, int, float, bool)) or v is None}
        if values and name:
            config[name] = values
    return config


def _known_roots(imports: Sequence[tuple], classes: Dict[str, Any], defs: Dict[str, tuple]) -> set:
    """Names a call can start with and still reach project code: imports of modules that may be the
    project's, local functions and classes (`self` is handled apart)."""
    known = set(classes)
    known.update(q for q in defs if "." not in q)
    for module, name, asname, level, _line, _in_func in imports:
        if not level and module.split(".", 1)[0] in EXTERNAL_ROOTS:
            continue
        if asname:
            known.add(asname)
        elif name is not None:
            known.add(name)
        else:
            known.add(module.split(".", 1)[0])
    known.discard("*")
    return known


def _collect_calls(reverse: str, owners: List[Tuple[int, int, str, int]], defs: Dict[str, tuple],
                   known: set, intern: Callable[[str], str]) -> None:
    """Record, per function and method, the project-looking names it calls (`reverse`: the text reversed)."""
    findall = _CALL_REV_RE.findall
    size = len(reverse)
    roots = {name[::-1] for name in known}  # (names are tested as found: backwards)
    for start, end, qual, _line in owners:
        names = []
        for backwards in set(findall(reverse, size - end, size - start)):
            root = backwards.rpartition(".")[2]
            if (root in roots or (root == "fles" and "." in backwards)) and backwards not in _NOT_CALLED_BACKWARDS:
                names.append(intern(backwards[::-1]))
        if names:
            names.sort()
            line, end, _none = defs[qual]
            defs[qual] = (line, end, tuple(names[:MAX_CALLS]))


# ----------------------------------------------------------------------------- what needs the tree
def summarize(tree: ast.Module, text: str, ctx: Any = None, light: Optional[Summary] = None,
              precision: bool = True) -> Summary:
    """The full summary: the light summary (`light`, computed from `text` when not given) plus step loops,
    precision decisions (with `precision`) and configuration defaults read from `tree`, the tree the engine
    parsed (`ctx`: its FileContext, when there is one)."""
    summary = dict(light) if light is not None else light_summary(text, precision=precision)
    if not summary["light"]:
        return summary
    return _with_tree_facts(summary, tree, text, ctx, _fact_lines(_parser_lines(text), summary["defs"], precision))


def summarize_text(text: str, light: Optional[Summary], precision: bool,
                   parse: Callable[[str], Optional[ast.Module]]) -> Optional[Summary]:
    """`summarize` for a file no rule parses, from a parse (`parse(text)`: None when it fails) of only what
    can hold its tree facts (see `_fact_sketch`); the whole file is parsed when that part does not parse.
    None: the file does not parse."""
    summary = dict(light) if light is not None else light_summary(text, precision=precision)
    if not summary["light"]:
        return summary
    lines = _fact_lines(_parser_lines(text), summary["defs"], precision)
    sketch = _fact_sketch(text, summary["defs"], sorted(set().union(*lines)))
    tree = parse(sketch) if sketch is not None else None
    if tree is None:
        tree = parse(text)
        if tree is None:
            return None
    return _with_tree_facts(summary, tree, text, None, lines)


def _parser_lines(text: str) -> str:
    """The text with its lines ended by '\n' alone, as the parser counts them (a lone '\r' ends one too)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


FactLines = Tuple[List[int], List[int], List[int]]


def _fact_lines(text: str, defs: Dict[str, Sequence], precision: bool) -> FactLines:
    """The sorted numbers of the lines where the tree facts may lie: step calls (and the local calls that
    reach them), and the two kinds of PRECISION_WORDS (none when precision is not gathered)."""
    return (_with_local_callers(step_call_lines(text), defs, text),
            _word_lines(text, _PRECISION_LOW) if precision else [],
            _word_lines(text, _PRECISION_OTHER) if precision else [])


_DEF_LINE_RE = re.compile(r"([ \t]*)(?:async[ \t]+)?def[ \t]")


def _fact_sketch(text: str, defs: Dict[str, Sequence], lines: List[int]) -> Optional[str]:
    """The text with every top-level function and method whose lines hold none of `lines` cut down to
    `def name(): pass` on its first line, blank lines after it: a parse of the rest reads the same facts
    (line numbers, the file's local function names and its module-level statements are kept; a function
    without such a line neither steps nor makes a loop step), at a fraction of the cost. None: nothing to cut,
    or lines the text summary may count otherwise (a lone '\r')."""
    pieces: Optional[List[str]] = None
    for qual, (first, last, _calls) in defs.items():
        if last <= first or _any_within(lines, first, last):
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


def _with_tree_facts(summary: Summary, tree: ast.Module, source: str, ctx: Any, lines: FactLines) -> Summary:
    """`summary` (a copy of a text summary) with the step loops and precision decisions read from `tree`."""
    summary["light"] = False
    step_lines, low_lines, other_lines = lines
    fp_lines: Optional[List[int]] = None
    known: Optional[set] = None  # (made when a step loop or a call is found: most files have none)
    steps: List[list] = []
    models: List[list] = []
    amp_calls: List[list] = []
    for owner, node in _bodies(tree):
        if owner:
            first, last = node.lineno, node.end_lineno or node.lineno
            body = node.body
        else:  # the module's own statements (functions and classes are bodies of their own)
            first, last = 1, 1 << 30
            body = [stmt for stmt in tree.body if not isinstance(stmt, _SCOPES)]
        if _any_within(step_lines, first, last):
            loops = [stmt for stmt in _statements(body) if isinstance(stmt, _LOOPS)]
            if loops and ctx is None:  # (made for the first loop to test: most files need none)
                from .semantic import FileContext  # (semantic imports this package: import it late)

                ctx = FileContext("<summary>", source, tree)  # (it reads the source as given)
            for step in _step_loops(ctx, owner, loops):
                known = known or _call_roots(summary)
                step[2] = {n: line for n, line in step[2].items() if n.split(".", 1)[0] in known}
                if step[2]:
                    steps.append(step)
        maybe_low = _any_within(low_lines, first, last)
        if maybe_low or _any_within(other_lines, first, last):
            if not maybe_low:
                if fp_lines is None:
                    fp_lines = _word_lines(_parser_lines(source), _FP_WORDS)
                maybe_low = _any_within(fp_lines, first, last)
            Precision(owner, maybe_low, models, amp_calls).scan(body)
    if amp_calls:
        known = known or _call_roots(summary)
        amp_calls = [c for c in amp_calls if c[0].split(".", 1)[0] in known]
    if steps:
        summary["steps"] = steps
    if models:
        summary["models"] = models
    if amp_calls:
        summary["amp_calls"] = amp_calls
    return summary


def _call_roots(summary: Summary) -> set:
    """Names a call read from the tree can start with and still reach project code (`self` too)."""
    return _known_roots(summary["imports"], summary["classes"], summary["defs"]) | {"self"}


# ----------------------------------------------------------------------------- step calls in text
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
    return _line_numbers(text, _step_calls(text))


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


def _with_local_callers(lines: List[int], defs: Dict[str, Sequence], text: str) -> List[int]:
    """`lines` (sorted) plus the lines that call, by name, a function or method of the file that holds one of
    them, twice over: a loop calling a helper that steps is a step loop (FileContext looks two calls deep)."""
    searched: Set[str] = set()  # (the lines calling these are in `lines` already)
    for _depth in range(2):
        names = {qual.rpartition(".")[2] for qual, (first, last, _calls) in defs.items()
                 if _any_within(lines, first, last)} - searched
        if not names:
            break
        searched |= names
        lines = sorted(set(lines).union(_line_numbers(text, _call_offsets(text, names))))
    return lines


_CALLED_NAME_REV_RE = re.compile(r"\((\w+)")  # over the reversed text: `name(` (literal-led, fast in `re`)


def _call_offsets(text: str, names: Set[str]) -> Iterable[int]:
    """Offsets in the text of every `name(` for `names` (identifiers), found inside longer names too: for a
    few names, one search each; for many, one pass over the reversed text, testing the name before every
    `(` (a search of the whole text costs as much as ~30 names)."""
    if len(names) <= 32:
        return _word_offsets(text, [name + "(" for name in names])
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


def _word_lines(text: str, words: Sequence[str]) -> List[int]:
    """Sorted numbers of the lines (counted by '\\n' alone) that hold one of `words`."""
    return _line_numbers(text, _word_offsets(text, words))


def _word_offsets(text: str, words: Iterable[str]) -> Iterator[int]:
    """Offsets of every occurrence of each of `words` in the text."""
    find = text.find
    for word in words:
        pos = find(word)
        while pos != -1:
            yield pos
            pos = find(word, pos + 1)


def _line_numbers(text: str, offsets: Iterable[int]) -> List[int]:
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


def _any_within(lines: List[int], first: int, last: int) -> bool:
    """Does the sorted list `lines` hold a number in [first, last]?"""
    i = bisect.bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_NESTING = _LOOPS + (ast.If, ast.With, ast.AsyncWith, ast.Try) + (  # statements holding statements of the body
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()) + ((ast.Match,) if hasattr(ast, "Match") else ())
_BLOCKS = _SCOPES + _NESTING


def _bodies(tree: ast.Module) -> Iterator[Tuple[str, ast.AST]]:
    """(owner qualname, node) for the module ('') and every top-level function and method."""
    yield "", tree
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt.name, stmt
        elif isinstance(stmt, ast.ClassDef):
            for item in stmt.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{stmt.name}.{item.name}", item


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested blocks included, nested functions and classes not entered."""
    todo = list(reversed(body))
    while todo:
        stmt = todo.pop()
        yield stmt
        if not isinstance(stmt, _NESTING):
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if block:
                todo.extend(reversed(block))
        for handler in getattr(stmt, "handlers", ()) or ():
            todo.extend(reversed(handler.body))
        for case in getattr(stmt, "cases", ()) or ():
            todo.extend(reversed(case.body))


def _expressions(stmt: ast.stmt) -> List[ast.AST]:
    """The nodes of a statement that belong to it alone: a compound statement's header, or a simple
    statement whole (nested bodies are statements of their own in `_statements`)."""
    if not isinstance(stmt, _BLOCKS):
        return _walk(stmt)
    nodes: List[ast.AST] = []
    if isinstance(stmt, _SCOPES):
        return nodes
    for name in ("test", "iter", "target", "subject"):
        value = getattr(stmt, name, None)
        if value is not None:
            nodes += _walk(value)
    for item in getattr(stmt, "items", ()) or ():
        nodes += _walk(item)
    return nodes


# Fields that never hold a node a caller here looks at: contexts and operators (leaves), names and flags.
_PLAIN_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "asname", "module", "level", "kind",
                           "conversion", "is_async", "simple", "type_comment"})
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {ast.Constant: ()}  # node class -> the fields that may hold nodes


def _walk(node: ast.AST) -> List[ast.AST]:
    """ast.walk (the same order) without the leaves no caller here looks at: contexts and operators."""
    nodes = [node]
    append = nodes.append
    fields = _CHILD_FIELDS
    AST = ast.AST
    for node in nodes:  # (breadth first: the list grows while it is read)
        names = fields.get(node.__class__)
        if names is None:
            names = fields[node.__class__] = tuple(f for f in node._fields if f not in _PLAIN_FIELDS)
        for name in names:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
            elif isinstance(value, AST):
                append(value)
    return nodes


call_text = dotted_name  # `a.b.c` for a Name/Attribute chain, else None (the old name, for one step)


def _is_guard(test: ast.expr) -> bool:
    """`if step % N == 0` / `if i == 10`: a periodic or one-step guard."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return True
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops):
            return True
    return False


def _loop_calls(loop: ast.AST) -> Dict[str, int]:
    """Names called on every pass of a loop body (calls under a periodic or one-step guard excluded)."""
    calls: Dict[str, int] = {}
    todo: List[ast.AST] = list(loop.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.If) and _is_guard(node.test):
            todo.extend(node.orelse)
            todo.append(node.test)
            continue
        if isinstance(node, ast.Call):
            name = call_text(node.func)
            if name and name not in _NOT_CALLED and (name not in calls or node.lineno < calls[name]):
                calls[name] = node.lineno
        todo.extend(ast.iter_child_nodes(node))
    return calls


def _step_loops(ctx: Any, owner: str, loops: Sequence[ast.stmt]) -> Iterator[list]:
    """[owner, line, {called name: line}] for each step loop of a body's `loops` (the innermost loop that
    steps)."""
    for loop in loops:
        if ctx.is_step_loop_unwalked(loop):
            yield [owner, loop.lineno, _loop_calls(loop)]


# ----------------------------------------------------------------------------- precision
_LOW_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "fp16": "fp16", "bf16": "bf16"}
_AMP_LEVELS_LOW = ("O1", "O2", "O3", "auto")
# Any of these in a body: it may set a reduced precision somewhere, so "trained in fp32" is not concluded.
_FP_WORDS = ("float16", "bfloat16", "fp16", "bf16", "amp_level", "to_float", "mixed_precision", "half",
             "autocast", "amp.initialize", "auto_mixed_precision", "MixedPrecision", "param_dtype", "add_flags")
# PRECISION_WORDS that hold one of _FP_WORDS (a body with one may set a reduced precision), and the others.
_PRECISION_LOW = tuple(word for word in PRECISION_WORDS if any(fp in word for fp in _FP_WORDS))
_PRECISION_OTHER = tuple(word for word in PRECISION_WORDS if word not in _PRECISION_LOW)
_WRAPPERS = frozenset({"WithLossCell", "DataParallel", "DistributedDataParallel", "DDP"})
_TRAIN_CELLS = frozenset({"TrainOneStepCell", "TrainOneStepWithLossScaleCell"})


def _dtype_of(node: Optional[ast.AST]) -> Optional[str]:
    """'fp16' / 'bf16' / 'fp32' for a dtype expression (`torch.bfloat16`, `mstype.float16`, 'fp16')."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        text = node.value if isinstance(node.value, str) else ""
    else:
        text = call_text(node) or ""
    last = text.rsplit(".", 1)[-1].lower()
    if last in _LOW_DTYPES:
        return _LOW_DTYPES[last]
    if last in ("float32", "float", "fp32"):
        return "fp32"
    return None


def _kw(call: ast.Call, name: str, position: Optional[int] = None) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and position < len(call.args):
        return call.args[position]
    return None


def _last(call: ast.Call) -> str:
    name = call_text(call.func) or ""
    return name.rsplit(".", 1)[-1]


def _model_class(value: ast.AST) -> Optional[str]:
    """`Net(...)`, `models.Net(cfg).npu()`: the class constructed (a capitalised name), as written."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            not value.func.attr[:1].isupper() and isinstance(value.func.value, ast.Call):
        value = value.func.value  # `.npu()`, `.to(device)`, `.half()` chained on the construction
    if isinstance(value, ast.Call):
        name = call_text(value.func)
        if name and name.rsplit(".", 1)[-1][:1].isupper():
            return name
    return None


def _cast(call: ast.AST) -> Optional[Tuple[str, str]]:
    """A reduced-precision cast anywhere in a call chain: `Net().half()`, `.to(torch.bfloat16)`,
    `.to_float(mstype.float16)`; (dtype, how)."""
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        attr = call.func.attr
        if attr in ("half", "bfloat16") and not call.args:
            return _LOW_DTYPES[attr], f"`.{attr}()`"
        if attr == "to":
            for arg in list(call.args) + [k.value for k in call.keywords]:
                dtype = _dtype_of(arg)
                if dtype in ("fp16", "bf16"):
                    return dtype, f"`.to({call_text(arg) or dtype})`"
        if attr == "to_float" and _dtype_of(_kw(call, "dst_type", 0)) in ("fp16", "bf16"):
            return "fp16", "`.to_float(float16)`"
        call = call.func.value
    return None


def _level(call: ast.Call, name: str, position: Optional[int]) -> Optional[str]:
    value = _kw(call, name, position)
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else (
        None if value is None else "?")


class Precision:
    """Precision decisions of one body about the models it constructs: a model built (`net = Net(...)`)
    and cast or trained with or without mixed precision; functions called with such a model or under
    autocast carry that precision (`train(model, loader)`)."""

    def __init__(self, owner: str, maybe_low: bool, models: List[list], amp_calls: List[list]) -> None:
        self.owner = owner
        self.maybe_low = maybe_low  # the body mentions reduced precision: never conclude fp32
        self.models = models
        self.amp_calls = amp_calls
        self.classes: Dict[str, str] = {}  # local name -> class constructed, as written
        self.decided: Dict[str, Tuple[str, str, int]] = {}  # local name -> (dtype, how, line)
        self.trained: Dict[str, Tuple[int, str]] = {}  # local -> (line, how) of a training wrapper without amp

    def scan(self, body: Sequence[ast.stmt]) -> None:
        statements = list(_statements(body))
        for stmt in statements:
            self._bind(stmt)
            if self.classes:  # (a call decides something only about a model constructed before it)
                for node in _expressions(stmt):
                    if isinstance(node, ast.Call):
                        self._call(node)
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                self._autocast_body(stmt)
        for stmt in statements if self.decided else ():  # a model passed to a function carries its precision
            for node in _expressions(stmt):
                if isinstance(node, ast.Call) and call_text(node.func):
                    for arg in [*node.args, *(k.value for k in node.keywords)]:
                        local = self._passed_model(arg)
                        if local is not None:
                            dtype, how, _ = self.decided[local]
                            self.amp_calls.append([call_text(node.func), dtype, node.lineno, how])
                            break
        for local, cls in self.classes.items():
            if local in self.decided:
                dtype, how, line = self.decided[local]
                self.models.append([cls, dtype, line, how, self.owner])
            elif local in self.trained and not self.maybe_low:
                line, how = self.trained[local]
                self.models.append([cls, "fp32", line, how, self.owner])

    def _passed_model(self, arg: ast.AST) -> Optional[str]:
        """The decided model an argument passes: `model`, or its parameters (`model.parameters()`)."""
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and \
                arg.func.attr in ("parameters", "named_parameters") and not arg.args:
            arg = arg.func.value
        return arg.id if isinstance(arg, ast.Name) and arg.id in self.decided else None

    def _bind(self, stmt: ast.stmt) -> None:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            return
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1:
            return
        target, value = targets[0], stmt.value
        if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name) and \
                isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name):
            target = target.elts[0]  # `model, opt = amp.initialize(model, opt, ...)`
            if value.args[0].id in self.classes:
                self.classes.setdefault(target.id, self.classes[value.args[0].id])
            return
        if not isinstance(target, ast.Name):
            return
        cls = _model_class(value)
        if cls is not None:
            self.classes[target.id] = cls
        else:  # `model = model.half()`, `net = WithLossCell(net, loss)`: the same model under another name
            source = self._model_name(value.func.value if isinstance(value, ast.Call) and
                                      isinstance(value.func, ast.Attribute) else value)
            if source is None and isinstance(value, ast.Call) and _last(value) in _WRAPPERS and value.args:
                source = self._model_name(value.args[0])
            if source is not None and source != target.id:
                self.classes.setdefault(target.id, self.classes[source])
                if source in self.decided:
                    self.decided.setdefault(target.id, self.decided[source])
        cast = _cast(value)
        if cast is not None and target.id in self.classes:
            self._decide(target.id, cast[0], cast[1], stmt.lineno)

    def _model_name(self, expr: Optional[ast.AST]) -> Optional[str]:
        while isinstance(expr, ast.Call):
            if _last(expr) in _WRAPPERS and expr.args:
                expr = expr.args[0]
            elif isinstance(expr.func, ast.Attribute):
                expr = expr.func.value
            else:
                return None
        return expr.id if isinstance(expr, ast.Name) and expr.id in self.classes else None

    def _decide(self, local: Optional[str], dtype: str, how: str, line: int) -> None:
        if local is not None and local not in self.decided:
            self.decided[local] = (dtype, how, line)

    def _call(self, call: ast.Call) -> None:
        first = self._model_name(call.args[0]) if call.args else None
        receiver = self._model_name(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if first is None and receiver is None:
            return  # (a call decides only about a model it is called on or passed)
        last = _last(call)
        if receiver is not None:
            cast = _cast(call)
            if cast is not None:
                self._decide(receiver, cast[0], cast[1], call.lineno)
            elif last == "add_flags_recursive":
                flag = _kw(call, "fp16") or _kw(call, "bf16")
                if isinstance(flag, ast.Constant) and flag.value:
                    self._decide(receiver, "fp16", "`add_flags_recursive(fp16=True)`", call.lineno)
        if first is None:
            return
        if last == "initialize" and "amp" in (call_text(call.func) or ""):
            level = _level(call, "opt_level", None)
            if level != "O0":
                self._decide(first, "fp16", f'`amp.initialize(opt_level="{level or "O1"}")`', call.lineno)
        elif last in ("auto_mixed_precision", "build_train_network"):
            level = _level(call, "amp_level", 1) if last == "auto_mixed_precision" else _level(call, "level", 3)
            if level in _AMP_LEVELS_LOW:
                self._decide(first, "fp16", f'`{last}(..., "{level}")`', call.lineno)
            elif level in (None, "O0"):
                self.trained.setdefault(first, (call.lineno, f"`{last}` without mixed precision"))
        elif last == "Model":
            level = _level(call, "amp_level", None)
            if level in _AMP_LEVELS_LOW:
                self._decide(first, "fp16", f'`Model(..., amp_level="{level}")`', call.lineno)
            elif level in (None, "O0"):
                self.trained.setdefault(first, (call.lineno, "`Model(...)` without `amp_level`"))
        elif last in _TRAIN_CELLS:
            self.trained.setdefault(first, (call.lineno, f"`{last}` without a cast to float16"))
        elif last in ("FSDP", "FullyShardedDataParallel", "fully_shard"):
            policy = _kw(call, "mixed_precision") or _kw(call, "mp_policy")
            if isinstance(policy, ast.Call):
                dtype = _dtype_of(_kw(policy, "param_dtype", 0))
                if dtype in ("fp16", "bf16"):
                    self._decide(first, dtype, f"`{last}` with `param_dtype` {dtype}", call.lineno)

    def _autocast_body(self, stmt: ast.AST) -> None:
        dtype = _autocast(stmt)
        if dtype is None:
            return
        for inner in _statements(stmt.body):
            for node in _expressions(inner):
                if isinstance(node, ast.Call) and call_text(node.func):
                    self.amp_calls.append([call_text(node.func), dtype, node.lineno, "`autocast`"])


def _autocast(stmt: ast.AST) -> Optional[str]:
    """The dtype a `with autocast(...)` runs its body in (None: not autocast, or disabled)."""
    for item in stmt.items:
        expr = item.context_expr
        if isinstance(expr, ast.Call) and (call_text(expr.func) or "").endswith("autocast"):
            enabled = _kw(expr, "enabled")
            if isinstance(enabled, ast.Constant) and enabled.value is False:
                return None
            return _dtype_of(_kw(expr, "dtype")) or "fp16"
    return None


# ----------------------------------------------------------------------------- shape
def shape_of(summary: Summary) -> str:
    """A digest of everything in a summary but its line numbers: an edit that only moves lines keeps the
    shape, and the project model (whose reasons hold places, not lines) stays valid."""
    import hashlib
    import json

    shape = {
        "light": summary.get("light"), "entry": summary.get("entry"), "npu": summary.get("npu"),
        "gpu": summary.get("gpu"), "mode": summary.get("mode"),
        "imports": [r[:4] + r[5:] for r in summary.get("imports", ())],
        "classes": {k: v[1:] for k, v in summary.get("classes", {}).items()},
        "defs": {k: v[2] for k, v in summary.get("defs", {}).items()},
        "patches": [r[:2] for r in summary.get("patches", ())],
        "steps": [[r[0], sorted(r[2])] for r in summary.get("steps", ())],
        "models": [r[:2] + r[3:] for r in summary.get("models", ())],
        "amp_calls": [r[:2] + r[3:] for r in summary.get("amp_calls", ())],
        "config": summary.get("config", {}),
    }
    blob = json.dumps(shape, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha1(blob.encode("utf-8", "surrogatepass")).hexdigest()
