"""A file's summary from its text alone, with a few regular-expression passes (no parse): `text_rows`.

Imports (function-level ones too), top-level classes with their bases as written and their methods, top-level
functions and methods with the project-looking names they call, `X.attr = f` monkey-patches, whether the file
is an entry script, its own device context, configuration-class defaults; and whether the text may hold
facts that need the syntax tree (`light`). The result is the summary's tuple form (records.Summary): plain
tuples, which marshal carries from worker processes; `summary.light_summary` makes the typed record.
"""
from __future__ import annotations

import ast
import keyword
import re
import sys
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .data import PATCH_REGISTRARS, PRECISION_WORDS
from .factlines import might_step
from .records import Summary
from .textfacts import gpu_context, needle_searches, npu_context, run_mode

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
NOT_CALLED = frozenset(keyword.kwlist) | {"print", "len", "range", "isinstance", "getattr", "setattr", "hasattr",
                                         "super", "int", "float", "str", "list", "dict", "tuple", "set", "type"}
_NOT_CALLED_BACKWARDS = frozenset(name[::-1] for name in NOT_CALLED)
# Top-level modules that are never the project's own code: calls through them are not collected.
EXTERNAL_ROOTS = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "torch", "torch_npu", "numpy", "mindspore", "apex", "scipy", "einops", "triton", "deepspeed", "megatron",
    "transformers", "safetensors", "tqdm", "yaml", "PIL", "cv2", "pandas", "sklearn", "matplotlib"}
_QUOTES = ('"' * 3, "'" * 3)
_SINGLES_RE = re.compile("'" * 3)
# The precision words that can make a text deep when might_step finds nothing in it: `TrainOneStep` and
# `build_train_network` lie in a name holding `trainonestep` / `trainnet` (lower case, underscores dropped), which
# might_step accepts. Anchors: characters rare in code, else a short piece of the word.
_PRECISION_SEARCHES = needle_searches([w for w in PRECISION_WORDS if w not in ("TrainOneStep", "build_train_network")],
                                      ("6", "M", "v", "z", "x", "y", "(", "_f", "ca"))

Owner = Tuple[int, int, str, int]  # (start, end offset, qualname, line) of a function or method


def text_rows(text: str, shared: Optional[Dict[Any, Any]] = None, precision: bool = True) -> tuple:
    """The summary's tuple form (records.Summary.to_tuple) from the text alone (no tree facts). With `shared`
    (the names of the summaries made so far), its names are those objects when equal; else they are interned
    (records are shared by share_rows or Summary.from_tuple). `precision`: are precision decisions gathered
    (else only step loops make a text need its tree)?"""
    intern = sys.intern if shared is None else (lambda name: shared.setdefault(name, name))
    masked = "\n" + _blank_strings(text)  # (a leading newline: every statement start follows one)
    found = _Statements(masked, intern)
    found.scan()
    known = known_roots(found.imports, found.classes, found.defs)
    reverse = (masked + "\n")[::-1]
    patches = _patches(masked, reverse, known)
    if found.owners:
        _collect_calls(reverse, found.owners, found.defs, known, intern)
    module_calls = _module_calls(reverse, found.owners, known, intern)
    passes = _passes(masked, found.owners, _function_names(found.imports, found.defs), intern)
    attributes = _attributes(masked, found.owners, known, intern) if "self." in masked else {}
    # "light": the syntax tree holds more (step loops, precision decisions): see summary.summarize()
    deep = might_step(masked) or (precision and any(search(masked) for search in _PRECISION_SEARCHES))
    modules = (module + "." + name if name else module
               for module, name, _asname, level, _line, in_func in found.imports if not level and not in_func)
    classes = {name: (line, tuple(bases), tuple(methods)) for name, (line, bases, methods) in found.classes.items()}
    rows = (Summary.SCHEMA, deep, found.imports, classes, found.defs, patches, found.entry, npu_context(modules, text),
            found.entry and gpu_context(text), run_mode(text),  # (only an entry's CUDA use counts)
            _config_from_text(masked, found.config_spans), (), (), (), module_calls, passes, attributes,
            _dotted_strings(masked, intern))
    return rows


class _Statements:
    """The statement starts of a masked text (strings blanked, a leading newline), read in one pass: imports,
    top-level classes (bases as written, methods), top-level functions and methods with their spans, the
    entry guard, the spans of configuration classes."""

    def __init__(self, masked: str, intern: Callable[[str], str]) -> None:
        self.masked = masked
        self.intern = intern
        self.imports: List[tuple] = []  # (module, name, asname, level, line, inside a def?)
        self.classes: Dict[str, list] = {}  # name -> [line, [bases as written], [methods]]
        self.defs: Dict[str, tuple] = {}  # qualname -> (line, end line, (names it calls))
        self.owners: List[Owner] = []
        self.entry = False
        self.config_spans: List[Tuple[int, int]] = []  # configuration classes: their defaults are read apart
        self.current_class: Optional[Tuple[int, str, int]] = None  # (end offset, name, method indentation or -1)
        self.covered = 0  # the furthest end of the def spans so far: a statement starting before it is in a def

    def scan(self) -> None:
        masked, intern, imports = self.masked, self.intern, self.imports
        line, pos = 0, 0
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
            if self.current_class is not None and start >= self.current_class[0]:
                self.current_class = None
            if imported is not None:
                in_func = start < self.covered
                for module, asname in _names(imported):
                    imports.append((intern(module), None, asname and intern(asname), 0, line, in_func))
            elif first == "f":
                self._from_import(head, start, line)
            elif first == "c":
                if width == 0:
                    self._class(head, start, line)
            elif first == "i":
                self.entry = self.entry or (width == 0 and _MAIN_RE.match(masked, head) is not None)
            else:
                self._def(name or async_name, m.end(), start, width, line)

    def _from_import(self, head: int, start: int, line: int) -> None:
        found = _FROM_RE.match(self.masked, head)
        if found:
            intern = self.intern
            dots, module, bracketed, names = found.groups()
            level, in_func = len(dots), start < self.covered
            for name, asname in _names(names if bracketed is None else bracketed):
                self.imports.append((intern(module), intern(name), asname and intern(asname), level, line, in_func))

    def _class(self, head: int, start: int, line: int) -> None:
        found = _CLASS_RE.match(self.masked, head)
        if found is None:
            return
        intern = self.intern
        bases = [intern(_dotted(b)) for b in (found.group(2) or "").split(",")
                 if b.strip() and "=" not in b and _DOTTED_RE.fullmatch(b.strip())]
        self.classes[intern(found.group(1))] = [line, bases, []]
        self.current_class = (_block_end(self.masked, start, 0), found.group(1), -1)
        if found.group(1).endswith("Config") or any(b.endswith("Config") for b in bases):
            self.config_spans.append((start, self.current_class[0]))

    def _def(self, name: str, header_end: int, start: int, width: int, line: int) -> None:
        qual = None
        current = self.current_class
        if width == 0:
            qual = self.intern(name)
        elif current is not None and current[2] in (-1, width):
            self.current_class = (current[0], current[1], width)
            qual = self.intern(f"{current[1]}.{name}")
            self.classes[current[1]][2].append(self.intern(name))
        if qual is None and start < self.covered:
            return  # nested in a def whose span is known: its own span adds nothing
        end = _block_end(self.masked, start, width)
        self.covered = max(self.covered, end)
        if qual is not None and qual not in self.defs:
            self.owners.append((header_end, end, qual, line))
            self.defs[qual] = (line, line + self.masked.count("\n", start, end), ())


def _patches(masked: str, reverse: str, known: set) -> List[tuple]:
    """(target, value, line) of the `X.attr = f` assignments (either side starting with a known root) and of
    the `register_patch("target", value)` calls of a masked text (`reverse`: it reversed, a newline added)."""
    found = []
    for m in _PATCH_REV_RE.finditer(reverse):
        target, value = m.group(2)[::-1], m.group(1)[::-1]
        if target.split(".", 1)[0] in known and value.split(".", 1)[0] in known and \
                not target.startswith(("self.", "cls.")) and (value[:1].isalpha() or value[:1] == "_"):
            found.append((target, value, len(reverse) - m.end()))  # (the offset of its line's start in `masked`)
    count = masked.count
    patches = []
    line, done = 0, 0  # (`masked` starts with a newline: the newlines before a line's start number it)
    for target, value, offset in reversed(found):  # offsets -> lines, counting each stretch once (last first)
        line += count("\n", done, offset)
        done = offset
        patches.append((target, value, line))
    patches.reverse()
    if "register_patch" in masked:
        for m in _REGISTRAR_RE.finditer(masked):
            if m.group("value").split(".", 1)[0] in known:
                patches.append((m.group("target"), m.group("value"), count("\n", 0, m.start())))
    return patches


def share_rows(rows: tuple, table: Dict[Any, Any]) -> tuple:
    """A fresh tuple form with its records hash-consed through `table` (the records seen so far): a project's
    files repeat records (`import torch` on line 3, a call list, a base list, a line number above 256), and
    equal ones become one object (marshal keeps them one). Returns the tuple form."""
    one = table.setdefault

    def number(value: int) -> int:
        return one(value, value) if value > 256 else value  # (smaller ints are shared by Python already)

    imports = [one(record, record) for record in rows[2]]
    defs = {qual: one(key := (number(line), number(end), one(calls, calls)), key)
            for qual, (line, end, calls) in rows[4].items()}
    classes = {name: one(key := (number(line), one(bases, bases), one(methods, methods)), key)
               for name, (line, bases, methods) in rows[3].items()}
    return rows[:2] + (imports, classes, defs) + rows[5:]


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
        values = {**_class_fields(masked, start, end), **_init_defaults(masked, start, end)}
        values = {k: v for k, v in values.items() if isinstance(v, (str, int, float, bool)) or v is None}
        if values and name:
            config[name] = values
    return config


def _class_fields(masked: str, start: int, end: int) -> Dict[str, Any]:
    """`name = literal` / `name: type = literal` at the class body's own indentation."""
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
    return values


def _init_defaults(masked: str, start: int, end: int) -> Dict[str, Any]:
    """The constant defaults of the class's `__init__` parameters, from a parse of its signature."""
    init = _INIT_RE.search(masked, start, end)
    if init is None:
        return {}
    close = masked.find(":\n", init.end())
    signature = masked[init.start() + 1:close + 1] if close != -1 else ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            func = ast.parse(signature.strip() + " pass").body[0]
    except (SyntaxError, ValueError, RecursionError, MemoryError, IndexError):
        return {}
    if not isinstance(func, ast.FunctionDef):
        return {}
    args = func.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {arg.arg: default.value for arg, default in pairs if isinstance(default, ast.Constant)}


def known_roots(imports: Sequence[tuple], classes: Dict[str, Any], defs: Dict[str, Any]) -> set:
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


def _collect_calls(reverse: str, owners: List[Owner], defs: Dict[str, tuple], known: set,
                   intern: Callable[[str], str]) -> None:
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


# ----------------------------------------------------------------------------- execution-model facts
# `self.x = Cls(` / `self.x = name` (a parameter whose annotation names the class)
_SELF_ATTR_RE = re.compile(r"\n[ \t]+self\.(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([A-Za-z_][\w.]*)[ \t]*(\(|(?=\n))")
_MODULE_CALL_REV_RE = re.compile(r"\([ \t]*([\w.]+)(?![\w.]*[ \t]+ssalc\b)")  # (not a `class X(` header)
_BRACKET_RE = re.compile(r"[()\[\]{},]")
_OPEN_SCAN = 1200  # characters looked back for the call an argument belongs to


def _owner_at(owners: List[Owner], offset: int) -> Tuple[str, int]:
    """(qualname, header end) of the function or method whose span holds `offset` ('' at module level)."""
    import bisect
    index = bisect.bisect_right(owners, (offset, 1 << 62)) - 1
    if index >= 0 and owners[index][0] <= offset < owners[index][1]:
        return owners[index][2], owners[index][0]
    # (a method's span lies inside no other owner's: owners are top-level functions and methods only)
    return "", 0


def _module_calls(reverse: str, owners: List[Owner], known: set, intern: Callable[[str], str]) -> Tuple[str, ...]:
    """The project-looking names that module-level code (class bodies too) calls."""
    size = len(reverse)
    roots = {name[::-1] for name in known}
    names = set()
    start = 0
    for begin, end in sorted((o[0], o[1]) for o in owners) + [(size, size)]:
        if begin > start:
            for backwards in _MODULE_CALL_REV_RE.findall(reverse, size - begin, size - start):
                root = backwards.rpartition(".")[2]
                if root in roots and backwards not in _NOT_CALLED_BACKWARDS:
                    names.add(backwards[::-1])
        start = max(start, end)
    return tuple(sorted(intern(n) for n in names)[:MAX_CALLS])


def _call_before(masked: str, offset: int) -> Tuple[str, int]:
    """The call whose argument list holds `offset` (as written, '' if none) and the argument's position."""
    depth, commas = 0, 0
    low = max(0, offset - _OPEN_SCAN)
    for m in reversed(list(_BRACKET_RE.finditer(masked, low, offset))):
        char = m.group()
        if char in ")]}":
            depth += 1
        elif char == ",":
            commas += depth == 0
        elif depth:
            depth -= 1
        elif char != "(":
            return "", -1
        else:
            return _callee_before(masked, m.start()), commas
    return "", -1


def _callee_before(masked: str, paren: int) -> str:
    """The dotted name written right before the `(` at `paren` ('' for none, or a `class X(` header)."""
    end = paren
    while end > 0 and masked[end - 1] in " \t":
        end -= 1
    start = end
    while start > 0 and (masked[start - 1].isalnum() or masked[start - 1] in "_."):
        start -= 1
    name = masked[start:end]
    if not name or name[0].isdigit() or masked[max(0, start - 6):start] == "class ":
        return ""
    return name


def _passes(masked: str, owners: List[Owner], candidates: set, intern: Callable[[str], str]) -> Tuple[tuple, ...]:
    """(owner, callee, name, keyword, position, line) of the `candidates` (names that may be project functions:
    local top-level defs, names imported from project-looking modules) passed as arguments or returned. Each
    name is looked up with `str.find` (a few names per file): a scan of every argument costs 3x more."""
    found = []
    ordered = sorted(owners)
    find = masked.find
    for name in sorted(candidates):
        at = find(name)
        while at != -1:
            end = at + len(name)
            if (masked[at - 1] in _ARG_BEFORE or masked[at - 1].isspace()) and not _word(masked[end:end + 1]):
                row = _passed_at(masked, ordered, name, at, end)
                if row is not None:
                    found.append((intern(row[0]), intern(row[1]), intern(name)) + row[2:])
            at = find(name, end)
    found.sort(key=lambda row: row[-1])
    return tuple(found)


_ARG_BEFORE = "(,="
_AFTER_RE = re.compile(r"[ \t\n]*[,)]")
_KEYWORD_RE = re.compile(r"([(,])[ \t\n]*(\w+)[ \t]*=$")


def _word(char: str) -> bool:
    return char.isalnum() or char in "_.("


def _passed_at(masked: str, owners: List[Owner], name: str, at: int, end: int) -> Optional[tuple]:
    """(owner, callee, keyword, position, line) when `name` at `at` is an argument or a returned name."""
    head = masked[max(0, at - 80):at].rstrip()
    last = head[-1:]
    keyword = ""
    if last == "=":
        word = _KEYWORD_RE.search(head)
        if word is None:
            return None
        keyword, last = word.group(2), word.group(1)
    elif head.endswith("return") and not _word(head[-7:-6]):
        owner = _owner_at(owners, at)[0]
        line = masked.count("\n", 0, at)
        return (owner, "return", "", -1, line) if owner and masked[end:end + 1] in "\n \t" else None
    if last not in ("(", ",") or _AFTER_RE.match(masked, end) is None:
        return None
    callee, position = _call_before(masked, at)
    if not callee or callee.rpartition(".")[2] in NOT_CALLED:
        return None
    return _owner_at(owners, at)[0], callee, keyword, -1 if keyword else position, masked.count("\n", 0, at)


def _function_names(imports: Sequence[tuple], defs: Dict[str, Any]) -> set:
    """Names that may be project functions: top-level defs, names imported from project-looking modules (not
    capitalised: a class or a constant)."""
    names = {q for q in defs if "." not in q}
    for module, name, asname, level, _line, _in_func in imports:
        if name is not None and name != "*" and (level or module.split(".", 1)[0] not in EXTERNAL_ROOTS):
            names.add(asname or name)
    return {name for name in names if not name[:1].isupper()}  # (a class, a constant: not a function)


def _attributes(masked: str, owners: List[Owner], known: set,
                intern: Callable[[str], str]) -> Dict[str, Dict[str, str]]:
    """Class -> `self.x` -> the project-looking class it holds: `self.x = Cls(...)`, or `self.x = param` where
    the method's signature annotates `param: Cls`."""
    ordered = sorted(owners)
    out: Dict[str, Dict[str, str]] = {}
    for m in _SELF_ATTR_RE.finditer(masked):
        attr, value, after = m.groups()
        owner, header = _owner_at(ordered, m.start() + 1)
        if "." not in owner:
            continue
        if not after:
            value = _annotation(masked[header:min(m.start(), header + 800)], value)
            if value is None:
                continue
        if value.split(".", 1)[0] in known:
            out.setdefault(intern(owner.split(".", 1)[0]), {})[intern(attr)] = intern(value)
    return out


_ANNOTATION_RE = re.compile(r"[ \t]*:[ \t]*([A-Za-z_][\w.]*)")


def _annotation(signature: str, param: str) -> Optional[str]:
    """The class a parameter's annotation names in a def's text (`param: Cls`), else None."""
    at = signature.find(param)
    while at != -1:
        if signature[at - 1:at] in ("(", ",", " ", "\n", "\t"):
            found = _ANNOTATION_RE.match(signature, at + len(param))
            if found is not None:
                return found.group(1)
        at = signature.find(param, at + len(param))
    return None


# One pattern per opening quote: each starts with a literal, which `re` finds ~3x faster than a `["']` class.
_DOTTED_STRING_RES = tuple(re.compile(quote + r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)[\"']") for quote in ("\"", "'"))


def _dotted_strings(masked: str, intern: Callable[[str], str]) -> Tuple[str, ...]:
    """Dotted names written as strings (`"pkg.mod.func"`: patch tables, registries, `importlib` paths): the
    leftmost non-overlapping matches of `["'](name(.name)+)["']`, found as the earlier of the next match of
    each quote's pattern."""
    names = set()
    double, single = (pattern.search for pattern in _DOTTED_STRING_RES)
    next_double, next_single = double(masked), single(masked)
    while next_double is not None or next_single is not None:
        found = next_double if next_single is None or (
            next_double is not None and next_double.start() < next_single.start()) else next_single
        names.add(intern(found.group(1)))
        end = found.end()
        if next_double is not None and next_double.start() < end:
            next_double = double(masked, end)
        if next_single is not None and next_single.start() < end:
            next_single = single(masked, end)
    return tuple(sorted(names))[:MAX_CALLS]
