"""Typed, versioned records: what a file gives the project model (`Summary` and its parts) and what the project
model answers (`Role`, `Reason`, `Place`, `Precision`, `ModuleFacts`). docs/analysis.md describes them.

Every record has a compact tuple form for transport and storage: `to_tuple()` (JSON-able; marshal-able for
the summary's parts as the text scanner makes them) and `from_tuple()`, which accepts lists as JSON gives them
back and raises ValueError or TypeError on anything malformed. The summary's tuple form starts with its schema
version (`Summary.SCHEMA`): a tuple of another version is malformed. Records are never changed in place.

A `Reason` names a place as a `Place` (a file and one record of its summary: a def, a step loop, an import...),
not a line: the model stays valid when an edit only moves lines, and a question's answer gets its lines from
the current summaries (`resolved`). Message text is made in one place, `Reason.describe` / `Role.describe`.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, ClassVar, Dict, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..compat import slotted_dataclass

# ----------------------------------------------------------------------------- roles of functions
PER_STEP = "per_step"  # runs on every training step (a step loop calls it, directly or a few calls deep)
PER_FORWARD = "per_forward"  # runs on every forward/construct of a model (a hot path)
SETUP = "setup"  # the roles below are the execution model's (issue #29): none is given yet
LOAD = "load"
ONCE = "once"
OFFLINE = "offline"
UNREACHED = "unreached"
ROLES = (PER_STEP, PER_FORWARD, SETUP, LOAD, ONCE, OFFLINE, UNREACHED)

# ----------------------------------------------------------------------------- places
# The summary record a place names, with the field of the record that holds its line.
DEF, STEP_LOOP, PATCH, IMPORT, MODEL, AMP = "def", "step", "patch", "import", "model", "amp"
PASS, MODULE = "pass", "module"  # a passed name (key: its index); a module's own code (key: ''; no line)
Key = Union[str, int]  # a def's qualname; else the record's index in its list
SummaryOf = Callable[[str], Optional["Summary"]]


class Place(NamedTuple):
    """A record of the summary of the file at `path` (relative to the project root, '/'-separated): `kind`
    names the list (DEF, STEP_LOOP, PATCH, IMPORT, MODEL, AMP) and `key` the record. `line`: where the record is
    in the current summary (None in the model; filled in by `resolved`)."""

    path: str
    kind: str
    key: Key
    line: Optional[int] = None

    def resolved(self, summary_of: SummaryOf) -> "Place":
        summary = summary_of(self.path)
        line = summary.line_of(self.kind, self.key) if summary is not None else None
        return self if line == self.line else Place(self.path, self.kind, self.key, line)

    def describe(self) -> str:
        return f"`{self.path}:{self.line}`" if self.line is not None else f"`{self.path}`"

    def to_tuple(self) -> tuple:
        return tuple(self)

    @classmethod
    def from_tuple(cls, row: Sequence[Any]) -> "Place":
        path, kind, key, line = row
        _check(isinstance(path, str) and kind in _LINE_FIELDS and isinstance(key, (str, int))
               and (line is None or type(line) is int))
        return cls(path, kind, key, line)


# ----------------------------------------------------------------------------- reasons
CALLED = "called"  # names: (the caller,); place: its def (no place: the caller's qualname as is)
STEP_CALL = "step_loop"  # place: the step loop that calls the function
ASSIGNED = "assigned"  # names: (the attribute a function is assigned to as a forward,); place: the patch
PATCHED = "patched"  # names: (the replaced target, the replacement); place: the patch
IMPORTS = "imports"  # names: (the migrating module,); place: the import
APPLIES = "applies"  # an entry script applies the migration itself; cause: the import that does
ENTRY_RUNS = "entry_runs"  # names: (the entry script,); cause: how it applies the migration
PACKAGE = "package"  # names: (the package whose __init__ applies it,); cause: how
SETTING = "setting"  # `runtime-migration = true`
NPU_ENTRY = "npu_entry"  # names: (the NPU entry script that imports the module,)
GRAPH_ENTRY = "graph_entry"  # names: (the entry script that sets GRAPH_MODE and imports the module,)
SETS_MODE = "sets_mode"  # the file itself sets GRAPH_MODE
TRAINED = "trained"  # names: (how the precision is decided, as code,); place: the decision
# the execution model's reasons (issue #29)
FRAMEWORK = "framework"  # names: (the framework table's words: "`Trainer.compute_loss` override, ..."); place: def
PASSED = "passed"  # names: (the table's words, or the call it is passed to,); place: the pass
ENTRY = "entry"  # place: the entry script's own code (MODULE) or its `main` (DEF)
BUILDS = "builds"  # names: (the class built,); via: the function that builds it
NAMED = "named"  # names: (the table's words: "`weight_loader` runs when the engine loads weights",)
NO_CALLER = "no_caller"  # reached from nothing: nothing calls it
NO_ENTRY = "no_entry"  # names: (the module,): no entry point imports its module
OFFLINE_CODE = "offline_code"  # names: (why the file or function is offline, as training_code says,)

_TEMPLATES: Dict[str, str] = {  # the one place where a reason becomes text
    CALLED: "`{0}` in {place} calls it",
    STEP_CALL: "the step loop in {place} calls it",
    ASSIGNED: "it is assigned as `{0}` in {place}",
    PATCHED: "`{0}` is replaced by `{1}` in {place}",
    IMPORTS: "{place} imports `{0}`",
    APPLIES: "it applies it: {cause}",
    ENTRY_RUNS: "the entry script `{0}` runs it after {cause}",
    PACKAGE: "its package `{0}` applies it ({cause})",
    SETTING: "`runtime-migration = true` in the configuration",
    NPU_ENTRY: "the NPU entry script `{0}` imports it",
    GRAPH_ENTRY: "the entry script `{0}` sets GRAPH_MODE and imports it",
    SETS_MODE: "it sets `set_context(mode=GRAPH_MODE)`",
    TRAINED: "{0} in {place}",
    FRAMEWORK: "{0}",
    PASSED: "{0} in {place}",
    ENTRY: "the entry script {place} runs it",
    BUILDS: "`{0}` is built in {place}",
    NAMED: "{0}",
    NO_CALLER: "nothing calls it",
    NO_ENTRY: "no entry point imports `{0}`",
    OFFLINE_CODE: "{0}",
}
_PLACELESS: Dict[str, str] = {CALLED: "{0} calls it", BUILDS: "`{0}` is built"}  # (a caller the model could not place)


class Reason(NamedTuple):
    """Why a fact holds: `kind` (CALLED, STEP_CALL, PATCHED, ...), the `names` the message quotes, the `place`
    it happens, the reason behind it that the message quotes too (`cause`), and `via`: the function (qualname)
    whose own role continues the chain (a caller; not quoted)."""

    kind: str
    names: Tuple[str, ...] = ()
    place: Optional[Place] = None
    cause: Optional["Reason"] = None
    via: Optional[str] = None

    def describe(self) -> str:
        """The reason as a message says it ("the step loop in `train.py:88` calls it")."""
        place, cause = self.place, self.cause
        template = _TEMPLATES[self.kind] if place is not None or self.kind not in _PLACELESS \
            else _PLACELESS[self.kind]
        return template.format(*self.names, place=place.describe() if place is not None else "",
                               cause=cause.describe() if cause is not None else "")

    def resolved(self, summary_of: SummaryOf) -> "Reason":
        """The reason with the lines of its places read from the current summaries."""
        place = self.place.resolved(summary_of) if self.place is not None else None
        cause = self.cause.resolved(summary_of) if self.cause is not None else None
        return self if place is self.place and cause is self.cause else self._replace(place=place, cause=cause)

    def to_tuple(self) -> tuple:
        return tuple(self)

    @classmethod
    def from_tuple(cls, row: Sequence[Any]) -> "Reason":
        kind, names, place, cause, via = row
        _check(kind in _TEMPLATES and isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)
               and (via is None or isinstance(via, str)))
        return cls(kind, tuple(names), Place.from_tuple(place) if place is not None else None,
                   cls.from_tuple(cause) if cause is not None else None, via)


class Role(NamedTuple):
    """When a function runs (`kind`: PER_STEP, PER_FORWARD, ... see ROLES) and why (`reason`; None: it is a
    root itself, a forward). `name`: the function as a message names it (filled in by the FileContext)."""

    kind: str
    reason: Optional[Reason] = None
    name: str = ""

    def describe(self) -> str:
        """"`log_loss` runs every step: the step loop in `train.py:88` calls it", "`helper` (a hot path:
        `Attention.forward` in `model.py:40` calls it)", "`forward`"."""
        why = self.reason.describe() if self.reason is not None else ""
        if self.kind == PER_STEP:
            return f"`{self.name}` runs every step" + (f": {why}" if why else "")
        if self.kind == PER_FORWARD:
            return f"`{self.name}`" + (f" (a hot path: {why})" if why else "")
        return f"`{self.name}` ({self.kind}" + (f": {why})" if why else ")")

    def resolved(self, summary_of: SummaryOf) -> "Role":
        reason = self.reason.resolved(summary_of) if self.reason is not None else None
        return self if reason is self.reason else self._replace(reason=reason)

    def to_tuple(self) -> tuple:
        return tuple(self)

    @classmethod
    def from_tuple(cls, row: Sequence[Any]) -> "Role":
        kind, reason, name = row
        _check(kind in ROLES and isinstance(name, str))
        return cls(kind, Reason.from_tuple(reason) if reason is not None else None, name)


class Precision(NamedTuple):
    """The precision a model class is trained in, or a training function is called with: 'fp16' / 'bf16' /
    'fp32', and why."""

    dtype: str
    reason: Reason

    def resolved(self, summary_of: SummaryOf) -> "Precision":
        reason = self.reason.resolved(summary_of)
        return self if reason is self.reason else Precision(self.dtype, reason)

    def to_tuple(self) -> tuple:
        return tuple(self)

    @classmethod
    def from_tuple(cls, row: Sequence[Any]) -> "Precision":
        dtype, reason = row
        _check(isinstance(dtype, str))
        return cls(dtype, Reason.from_tuple(reason))


class ModuleFacts(NamedTuple):
    """What the project says about one module's own functions, methods and classes (local qualnames):
    their roles, and why the ones that never run are replaced (monkey-patched)."""

    roles: Mapping[str, Role]
    replaced: Mapping[str, Reason]

    def resolved(self, summary_of: SummaryOf) -> "ModuleFacts":
        return ModuleFacts({k: r.resolved(summary_of) for k, r in self.roles.items()},
                           {k: r.resolved(summary_of) for k, r in self.replaced.items()})

    def to_tuple(self) -> tuple:
        return (dict(self.roles), dict(self.replaced))

    @classmethod
    def from_tuple(cls, row: Sequence[Any]) -> "ModuleFacts":
        roles, replaced = row
        _check(isinstance(roles, dict) and isinstance(replaced, dict))
        return cls({k: Role.from_tuple(v) for k, v in roles.items()},
                   {k: Reason.from_tuple(v) for k, v in replaced.items()})


NO_FACTS = ModuleFacts({}, {})


def resolved(answer: Any, summary_of: SummaryOf) -> Any:
    """An answer with the lines of its places read from the current summaries (plain values as they are)."""
    method = getattr(answer, "resolved", None)
    return method(summary_of) if method is not None else answer


def _check(condition: bool) -> None:
    if not condition:
        raise ValueError("malformed record")


# ----------------------------------------------------------------------------- a file's summary
class Import(NamedTuple):
    """`import module [as asname]` (name None) or `from [.level]module import name [as asname]`."""

    module: str
    name: Optional[str]
    asname: Optional[str]
    level: int
    line: int
    in_function: bool  # inside a def: it runs when the function runs


class Class(NamedTuple):
    """A top-level class: its bases as written (dotted names) and its methods."""

    line: int
    bases: Tuple[str, ...]
    methods: Tuple[str, ...]


NAME, SELF_METHOD, SELF_ATTRIBUTE, DOTTED = "name", "self_method", "self_attribute", "dotted"


class Call(NamedTuple):
    """A call a function makes, as written, and its receiver: NAME (`helper()`), SELF_METHOD (`self.m()`),
    SELF_ATTRIBUTE (`self.head.m()`: an object an attribute holds), DOTTED (`mod.f()`, `obj.m()`)."""

    text: str
    receiver: str

    @classmethod
    def of(cls, text: str) -> "Call":
        head, _, rest = text.partition(".")
        if not rest:
            return cls(text, NAME)
        if head == "self":
            return cls(text, SELF_ATTRIBUTE if "." in rest else SELF_METHOD)
        return cls(text, DOTTED)


class Function(NamedTuple):
    """A top-level function or a method of a top-level class (`Class.method`): its lines and the
    project-looking names it calls (sorted, at most MAX_CALLS: an approximate call graph)."""

    line: int
    end: int
    calls: Tuple[str, ...]

    def call_sites(self) -> Tuple[Call, ...]:
        return tuple(Call.of(text) for text in self.calls)


class Patch(NamedTuple):
    """`target = value` on a module or class attribute (a monkey-patch), or `register_patch("target", value)`."""

    target: str
    value: str
    line: int


class Pass(NamedTuple):
    """A project-looking name passed as an argument (`pretrain(..., forward_step)`, `partial(loss_func, x)`,
    `register_forward_hook(self._hook)`) in function `owner` ('' at module level): the call (`callee`, as
    written), the argument's `keyword` ('' when positional) and `position` (-1 when a keyword)."""

    owner: str
    callee: str
    name: str
    keyword: str
    position: int
    line: int


class StepLoop(NamedTuple):
    """A loop that runs a training step, in function `owner` ('' at module level): the project-looking names
    called on every pass, each with the line of its first call."""

    owner: str
    line: int
    calls: Mapping[str, int]


class ModelDecision(NamedTuple):
    """A model class (`cls`, as written) constructed in `owner` and trained in `dtype`, decided by `how` on
    `line`."""

    cls: str
    dtype: str
    line: int
    how: str
    owner: str


class AmpCall(NamedTuple):
    """A call made with a model of a reduced precision, or under autocast: the callee runs in `dtype`."""

    callee: str
    dtype: str
    line: int
    how: str


_LINE_FIELDS = {DEF: ("defs", 0), STEP_LOOP: ("steps", 1), PATCH: ("patches", 2), IMPORT: ("imports", 4),
                MODEL: ("models", 2), AMP: ("amp_calls", 2), PASS: ("passes", 5), MODULE: None}
_new = tuple.__new__


@slotted_dataclass
class Summary:
    """What one file gives the project model (docs/analysis.md). `light`: made from the text alone, and the
    text may hold facts that need the tree (steps, models, amp_calls: see summary.summarize)."""

    SCHEMA: ClassVar[int] = 7  # (7: module calls, passed functions, attribute classes; 6: typed records)

    light: bool = False
    imports: Tuple[Import, ...] = ()
    classes: Dict[str, Class] = field(default_factory=dict)
    defs: Dict[str, Function] = field(default_factory=dict)
    patches: Tuple[Patch, ...] = ()
    entry: bool = False  # an entry script (`if __name__ == "__main__":`)
    npu: bool = False  # NPU code on its own (textfacts.npu_context)
    gpu: bool = False  # an entry script that uses CUDA
    mode: Optional[str] = None  # the MindSpore mode it sets (textfacts.run_mode)
    config: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # configuration class -> attribute defaults
    steps: Tuple[StepLoop, ...] = ()
    models: Tuple[ModelDecision, ...] = ()
    amp_calls: Tuple[AmpCall, ...] = ()
    # execution-model facts, from the text (issue #29)
    module_calls: Tuple[str, ...] = ()  # project-looking names called by module-level code (class bodies too)
    passes: Tuple[Pass, ...] = ()  # project-looking names passed as arguments
    attributes: Dict[str, Dict[str, str]] = field(default_factory=dict)  # class -> `self.x` -> class as written
    dotted_strings: Tuple[str, ...] = ()  # dotted names written in strings ("pkg.mod.func"): dynamic references

    # ------------------------------------------------------------------ tuple form
    def to_tuple(self) -> tuple:
        """(SCHEMA, light, imports, classes, defs, patches, entry, npu, gpu, mode, config, steps, models,
        amp_calls, module_calls, passes, attributes, dotted_strings), records as tuples: what the project store writes as JSON."""
        return (self.SCHEMA, self.light, self.imports, self.classes, self.defs, self.patches, self.entry, self.npu,
                self.gpu, self.mode, self.config, self.steps, self.models, self.amp_calls, self.module_calls,
                self.passes, self.attributes, self.dotted_strings)

    @classmethod
    def from_tuple(cls, row: Sequence[Any], shared: Optional[Dict[Any, Any]] = None) -> "Summary":
        """The summary of a tuple form (JSON's lists accepted). `shared`: records (and the line numbers and
        tuples of names in them) equal to one made before through the same table become that object: a
        project's files repeat records (`import torch` on line 3, a call list, a base list)."""
        if len(row) != 18 or row[0] != cls.SCHEMA:
            raise ValueError("foreign summary")
        _, light, imports, classes, defs, patches, entry, npu, gpu, mode, config, steps, models, amps = row[:14]
        module_calls, passes, attributes, dotted_strings = row[14:]
        if light.__class__ is not bool or not (classes.__class__ is defs.__class__ is config.__class__ is dict) or (
                mode is not None and mode.__class__ is not str) or attributes.__class__ is not dict or not all(
                    isinstance(v, dict) for v in attributes.values()):
            raise ValueError("malformed summary")
        imports, classes, defs = _typed(imports, classes, defs) if shared is None else \
            _typed_shared(imports, classes, defs, shared)
        return cls(light, imports, classes, defs, _records(Patch, patches, 3), bool(entry), bool(npu), bool(gpu),
                   mode, config, _records(StepLoop, steps, 3), _records(ModelDecision, models, 5),
                   _records(AmpCall, amps, 4), _names_of(module_calls), _records(Pass, passes, 6), attributes,
                   _names_of(dotted_strings))

    @classmethod
    def empty(cls) -> "Summary":
        """The summary of a file that gives no facts (unreadable, or it does not parse)."""
        return cls()

    # ------------------------------------------------------------------ reading
    def line_of(self, kind: str, key: Key) -> Optional[int]:
        """The line of the record a Place names (None: no such record)."""
        field = _LINE_FIELDS.get(kind)
        if field is None:  # (a module's own code has no line)
            return None
        records = getattr(self, field[0])
        try:
            record = records[key] if isinstance(records, dict) else records[int(key)]
            return int(record[field[1]])
        except (KeyError, IndexError, ValueError, TypeError):
            return None

    def with_tree_facts(self, steps: Iterable[StepLoop], models: Iterable[ModelDecision],
                        amp_calls: Iterable[AmpCall]) -> "Summary":
        """This text summary completed with the facts read from the syntax tree."""
        return Summary(False, self.imports, self.classes, self.defs, self.patches, self.entry, self.npu, self.gpu,
                       self.mode, self.config, tuple(steps), tuple(models), tuple(amp_calls), self.module_calls,
                       self.passes, self.attributes, self.dotted_strings)

    def gained_only_tree_facts(self, new: "Summary") -> bool:
        """Did this text summary become `new` by gaining only the facts read from the tree?"""
        return self.light and self._text_facts() == new._text_facts()

    def _text_facts(self) -> tuple:
        return (self.imports, self.classes, self.defs, self.patches, self.entry, self.npu, self.gpu, self.mode,
                self.config, self.module_calls, self.passes, self.attributes, self.dotted_strings)

    def shape(self) -> str:
        """A digest of everything in the summary but its line numbers: an edit that only moves lines keeps the
        shape, and the project model (whose reasons hold places, not lines) stays valid."""
        import hashlib
        import json

        shape = {
            "light": self.light, "entry": self.entry, "npu": self.npu, "gpu": self.gpu, "mode": self.mode,
            "imports": [r[:4] + r[5:] for r in self.imports],
            "classes": {k: v[1:] for k, v in self.classes.items()},
            "defs": {k: v[2] for k, v in self.defs.items()},
            "patches": [r[:2] for r in self.patches],
            "steps": [[r[0], sorted(r[2])] for r in self.steps],
            "models": [r[:2] + r[3:] for r in self.models],
            "amp_calls": [r[:2] + r[3:] for r in self.amp_calls],
            "config": self.config,
            "module_calls": self.module_calls,
            "passes": [r[:5] for r in self.passes],
            "attributes": self.attributes,
            "dotted_strings": self.dotted_strings,
        }
        blob = json.dumps(shape, sort_keys=True, separators=(",", ":"), default=repr)
        return hashlib.sha1(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _typed(imports: Sequence[Sequence[Any]], classes: Dict[str, Sequence[Any]],
           defs: Dict[str, Sequence[Any]]) -> tuple:
    """The records of a summary's imports, classes and functions (rows of JSON's lists accepted)."""
    typed_imports = tuple([_new(Import, r) for r in imports])
    typed_classes = {name: _new(Class, (r[0], tuple(r[1]), tuple(r[2]))) for name, r in classes.items()}
    typed_defs = {qual: _new(Function, (r[0], r[1], tuple(r[2]))) for qual, r in defs.items()}
    if not (_sized(typed_imports, 6) and _sized(typed_classes.values(), 3) and _sized(typed_defs.values(), 3)):
        raise ValueError("malformed summary")
    return typed_imports, typed_classes, typed_defs


def _typed_shared(imports: Sequence[tuple], classes: Dict[str, tuple], defs: Dict[str, tuple],
                  shared: Dict[Any, Any]) -> tuple:
    """`_typed` for rows of tuples (the text scanner's, marshal's), through the `shared` table."""
    one = shared.setdefault
    typed_imports = tuple([_shared(Import, r, shared) for r in imports])
    typed_classes = {name: _shared(Class, (_number(line, one), one(bases, bases), one(methods, methods)), shared)
                     for name, (line, bases, methods) in classes.items()}
    typed_defs = {qual: _shared(Function, (_number(line, one), _number(end, one), one(calls, calls)), shared)
                  for qual, (line, end, calls) in defs.items()}
    if not _sized(typed_imports, 6):
        raise ValueError("malformed summary")
    return typed_imports, typed_classes, typed_defs


def _shared(record: type, row: tuple, shared: Dict[Any, Any]) -> Any:
    """The record of `row`, one object per distinct value through `shared` (which also holds names, numbers
    and tuples of names: those are never equal to a record's row)."""
    found = shared.get(row)
    if found is None or found.__class__ is not record:
        found = shared[row] = _new(record, row)
    return found


def _number(value: int, one: Callable[[Any, Any], Any]) -> int:
    return one(value, value) if value > 256 else value  # (smaller ints are shared by Python already)


def _records(record: type, rows: Sequence[Any], size: int) -> tuple:
    if not rows:
        return ()
    typed = tuple([_new(record, r) for r in rows])
    if not _sized(typed, size):
        raise ValueError("malformed summary")
    return typed


def _names_of(names: Sequence[Any]) -> Tuple[str, ...]:
    if not all(isinstance(name, str) for name in names):
        raise ValueError("malformed summary")
    return tuple(names)


def _sized(records: Iterable[tuple], size: int) -> bool:
    return not records or set(map(len, records)) == {size}
