"""The rule API: `Rule` base class, `Finding`, `Fix`, `Edit`, `Severity`, `Applicability`.

A rule is one small class. Its metadata are class attributes; its behaviour is a few
`visit_<AstNodeType>` handlers that the engine calls during its single walk of the file, plus two
optional hooks: `start_file` (per-file state, before the walk) and `end_file` (file-level decisions,
after it). Rules never walk the tree themselves: they query the file's semantic model (`self.ctx`,
docs/rule-api.md) and call `self.report(...)`; `ascend_lint.astutil` holds the shared AST helpers.
"""
from __future__ import annotations

import ast
import enum
import textwrap
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, Iterable, List, Optional, Tuple, Type

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.semantic import FileContext


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Applicability(str, enum.Enum):
    """How trustworthy a fix is (ruff's terms)."""

    SAFE = "safe"  # applied by --fix
    UNSAFE = "unsafe"  # applied only with --fix --unsafe-fixes
    DISPLAY = "display"  # shown, never applied


@dataclass(frozen=True)
class Span:
    """A source range: 1-based lines, 0-based *character* columns (end exclusive)."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Edit:
    """One structural edit, applied by the fixer with libcst (rules never import libcst).

    Operations (`op`):
    - ``replace``: replace the expression or statement at `span` with the source `text`.
    - ``set_keyword``: on the call at `span`, set keyword argument `name` to `text` (add it when
      missing, replace its value otherwise).
    - ``remove_statement``: delete the simple statement at `span` (a block left empty gets `pass`).
    - ``insert_after``: insert the statement(s) `text` after the statement at `span`, same indent.
    - ``insert_body_end``: append the statement(s) `text` at the end of the body of the compound
      statement (function, class) at `span`.
    - ``replace_text``: replace the characters of one line at `span` with `text` as it is (no
      newline): for what libcst does not model as code, such as a comment.
    """

    op: str
    span: Span
    text: str = ""
    name: str = ""


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    description: str
    edits: Tuple[Edit, ...]
    imports: Tuple[str, ...] = ()  # module names to import (``"torch_npu"``) if missing


@dataclass(frozen=True)
class MeasuredCost:
    """What a finding's lines cost per profiled step in the profile of `check --profile` (microseconds):
    the device time of the operators they issued and the host time spent waiting for the NPU there.
    `lines`: (line, device_us, wait_us) of each line that cost something (the summary counts a line once)."""

    device_us: float
    wait_us: float
    host_us: float = 0.0
    steps: int = 0  # profiled steps in which the lines ran
    step_us: float = 0.0  # a profiled step's mean duration (host clock)
    lines: Tuple[Tuple[int, float, float], ...] = ()

    @property
    def total_us(self) -> float:
        return self.device_us + self.wait_us

    def to_dict(self) -> Dict[str, Any]:
        return {"device_us": round(self.device_us, 3), "wait_us": round(self.wait_us, 3),
                "host_us": round(self.host_us, 3), "total_us": round(self.total_us, 3), "steps": self.steps}


@dataclass
class Finding:
    path: str
    line: int  # 1-based
    col: int  # 1-based, in characters
    end_line: int
    end_col: int  # 1-based, exclusive
    code: str
    name: str
    message: str
    severity: Severity = Severity.WARNING
    fix: Optional[Fix] = None
    cost: Optional[MeasuredCost] = None  # measured in a profile (`check --profile`); None: no profile

    def sort_key(self) -> Tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.code)

    def to_dict(self) -> Dict[str, Any]:
        fix = None
        if self.fix is not None:
            fix = {"applicability": self.fix.applicability.value, "message": self.fix.description}
        row: Dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity.value,
            "filename": self.path,
            "location": {"row": self.line, "column": self.col},
            "end_location": {"row": self.end_line, "column": self.end_col},
            "fix": fix,
        }
        if self.cost is not None:  # (only with a profile: the fields are otherwise unchanged)
            row["cost"] = self.cost.to_dict()
        return row


@dataclass(frozen=True)
class Case:
    """An example with its output pinned (Fixit's `Invalid`): linted alone, with `--preview`, the rule
    reports a finding on `line` whose message holds `message_contains`; with `fixed`, that finding's fix
    applied alone gives exactly `fixed`. `code` and `fixed` are dedented, and a newline right after the
    opening quotes is dropped, so `line` counts from the first line of code."""

    code: str
    line: int
    message_contains: str
    fixed: Optional[str] = None

    @property
    def source(self) -> str:
        return _dedent(self.code)

    @property
    def fixed_source(self) -> Optional[str]:
        return None if self.fixed is None else _dedent(self.fixed)


def _dedent(text: str) -> str:
    return textwrap.dedent(text[1:] if text.startswith("\n") else text)


@dataclass
class Docs:
    """Rule documentation in ruff's sections, and a one-sentence `summary` (SARIF, editors, listings)."""

    what: str
    why: str
    summary: str = ""  # one sentence, at most ~120 characters; derived from `what` when empty
    example: str = ""
    use_instead: str = ""
    fix_safety: str = "No fix is offered."
    known_problems: str = ""
    source: str = ""


class Rule:
    """Base class of every rule. Subclasses set the class attributes and define handlers."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    message: ClassVar[str] = ""  # a str.format template filled by report(**fields)
    severity: ClassVar[Severity] = Severity.WARNING
    pack: ClassVar[str] = ""  # set by the registry from the entry point name
    preview: ClassVar[bool] = False
    npu_context: ClassVar[bool] = False  # silent in files without NPU context
    silent_when_auto_migrated: ClassVar[bool] = False  # silent where transfer_to_npu is imported
    # Silent in code that is not training code (tests, benchmarks, offline tools, weight init/loading,
    # data collation: `FileContext.non_training_reason`); whole files of it are not even parsed for it.
    training_code_only: ClassVar[bool] = True
    # Silent in code the execution model finds never runs in training (role `unreached`; `offline` too with
    # training_code_only): engine/roles.py. False for rules not about run-time cost (environment, names).
    silent_where_unreached: ClassVar[bool] = True
    fix_applicability: ClassVar[Optional[Applicability]] = None  # the best fix it can offer
    options: ClassVar[Dict[str, Any]] = {}
    # Cheap pre-filters. A file is checked only if it contains one of `file_triggers` (by default the
    # framework names: code that mentions neither torch nor mindspore nor apex cannot match) AND one of
    # `triggers`; inside it, a statement is descended into only if its lines contain one of `triggers`
    # of some enabled rule. List every text the handlers need to see.
    file_triggers: ClassVar[Tuple[str, ...]] = ("torch", "mindspore", "mindformers", "apex")
    triggers: ClassVar[Tuple[str, ...]] = ()
    docs: ClassVar[Docs] = Docs(what="", why="")
    cases: ClassVar[Tuple["Case", ...]] = ()  # examples that must report `code` at a pinned line, message, fix
    flagged: ClassVar[Tuple[str, ...]] = ()  # inline examples that must report `code` (anywhere)
    clean: ClassVar[Tuple[str, ...]] = ()  # inline examples that must not
    # Project facts that cost a run extra work, gathered only when an enabled rule names them here:
    # "precision" (how scripts train the models: `ctx.training_precision()`, `ctx.caller_precision()`).
    project_facts: ClassVar[FrozenSet[str]] = frozenset()
    # Handlers that only look for some names (`{"visit_Name": ("npu_rms_norm",)}`): the engine calls such a
    # handler only in files whose text holds one of them (or is not ASCII: a name may be spelled otherwise).
    handler_triggers: ClassVar[Dict[str, Tuple[str, ...]]] = {}
    # A rule that reports what a profile measured (`check --profile`), not what the code shows: the engine
    # never walks it; the run pipeline turns the profile's observations of its `code` into its findings.
    profile_only: ClassVar[bool] = False

    def __init__(self, ctx: "FileContext", options: Optional[Dict[str, Any]] = None) -> None:
        """The engine makes one instance per file; a rule keeps its per-file state in `start_file`."""
        self.ctx = ctx
        self.opts: Dict[str, Any] = dict(self.options)
        if options:
            self.opts.update(options)
        self.findings: List[Finding] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            warnings.warn(f"{cls.__module__}.{cls.__name__} overrides Rule.__init__: keep per-file state in "
                          "start_file() (the engine calls it before the walk)", DeprecationWarning, stacklevel=2)

    @classmethod
    def handler_names(cls) -> List[str]:
        return [n for n in dir(cls) if n.startswith("visit_") and callable(getattr(cls, n))]

    @classmethod
    def flagged_sources(cls) -> Tuple[str, ...]:
        """Every snippet that must report the rule: `flagged`, then the code of each of `cases`."""
        return tuple(cls.flagged) + tuple(case.source for case in cls.cases)

    def report(
        self,
        node: ast.AST,
        message: Optional[str] = None,
        fix: Optional[Fix] = None,
        **fields: Any,
    ) -> None:
        """Report a finding at `node` (its first line is where `# noqa` is honoured); nothing is reported
        in code that is not training code, unless the rule says it applies there."""
        if self.training_code_only and self.ctx.in_non_training_code(node):
            return
        text = message if message is not None else self.message.format(**fields)
        span = self.ctx.span(node)
        self.findings.append(
            Finding(
                path=self.ctx.path,
                line=span.line,
                col=span.col + 1,
                end_line=span.end_line,
                end_col=span.end_col + 1,
                code=self.code,
                name=self.name,
                message=text,
                severity=self.severity,
                fix=fix,
            )
        )

    def start_file(self) -> None:
        """Called once before the walk: set the per-file state here (`self.ctx` is the file's context,
        `self.opts` the rule's options). A rule extending a rule base that has one calls
        `super().start_file()` first."""

    def end_file(self) -> None:
        """Called once after the walk; rules that decide per file report here."""


def wants_precision(rules: Iterable[Type[Rule]]) -> bool:
    """Does one of these rules read the training precision the project model gathers (`project_facts`)?"""
    return any("precision" in rule.project_facts for rule in rules)
