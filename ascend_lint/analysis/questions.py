"""The questions a file's rules may ask about the project, and the deps that record them.

`QUESTIONS` names every question with the decoder of its answer's tuple form: a question is asked of the
project model by name (`ProjectModel.<name>(*args)`), and its answer is one of the typed records of
`records` (or a plain value). A lint result is valid as long as every recorded question (`Dep`) gets the
same answer; `Deps` carries them, with a schema version, to the result cache and back (`to_tuple`,
`load`: a malformed or foreign-version entry loads as None, a miss).

`ProjectQuestions` is what the semantic model (FileContext) asks of the project; `NULL_VIEW` answers
"unknown" to everything (a snippet linted on its own, or no project at all).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Protocol, Sequence, Tuple

from .records import NO_FACTS, ModuleFacts, Precision, Reason, Role, Summary

_SCALARS = (str, int, float, bool)


def _optional(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else decode(value)


def _text(value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise ValueError("malformed answer")
    return value


def _scalar(value: Any) -> Any:
    if value is not None and not isinstance(value, _SCALARS):
        raise ValueError("malformed answer")
    return value


# question name -> (its number of arguments, the decoder of its answer's tuple form)
QUESTIONS: Dict[str, Tuple[int, Callable[[Any], Any]]] = {
    "class_kind": (1, _text),  # (qualname) -> 'module' / 'cell' / 'function' / 'model' / None
    "role": (1, _optional(Role.from_tuple)),  # (qualname) -> Role / None
    "module_facts": (1, ModuleFacts.from_tuple),  # (module) -> ModuleFacts
    "migrated": (1, _optional(Reason.from_tuple)),  # (module) -> Reason / None
    "npu": (1, _optional(Reason.from_tuple)),  # (module) -> Reason / None
    "graph_mode": (1, _optional(Reason.from_tuple)),  # (module) -> Reason / None
    "replaced": (1, _optional(Reason.from_tuple)),  # (qualname) -> Reason / None
    "class_precision": (1, _optional(Precision.from_tuple)),  # (qualname) -> Precision / None
    "function_precision": (1, _optional(Precision.from_tuple)),  # (qualname) -> Precision / None
    "config_default": (2, _scalar),  # (attribute, class qualname or None) -> a scalar / None
}


class Question(NamedTuple):
    name: str  # one of QUESTIONS
    args: Tuple[Any, ...]


class Dep(NamedTuple):
    """A question a file's rules asked, and the answer they got (lines of its places resolved)."""

    question: Question
    answer: Any


class Deps(NamedTuple):
    """The questions one lint result depends on, in the order first asked."""

    items: Tuple[Dep, ...] = ()
    SCHEMA = 1

    def to_tuple(self) -> list:
        """[SCHEMA, [question, [args...], answer], ...]: JSON-able (records are tuples)."""
        return [self.SCHEMA] + [[dep.question.name, list(dep.question.args), dep.answer] for dep in self.items]

    @classmethod
    def from_tuple(cls, data: Sequence[Any]) -> "Deps":
        """Raises ValueError or TypeError on a malformed or foreign-version tuple form; [] is no questions."""
        if not data:
            return cls()
        if data[0] != cls.SCHEMA or type(data[0]) is not int:
            raise ValueError("foreign deps")
        items = []
        for name, args, answer in data[1:]:
            arity, decode = QUESTIONS[name]
            if len(args) != arity or not all(a is None or isinstance(a, str) for a in args):
                raise ValueError("malformed question")
            items.append(Dep(Question(name, tuple(args)), decode(answer)))
        return cls(tuple(items))

    @classmethod
    def load(cls, data: Any) -> Optional["Deps"]:
        """The deps of a tuple form read back (a cache entry), or a Deps as it is; None when malformed."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, (list, tuple)):
            return None
        try:
            return cls.from_tuple(data)
        except (KeyError, TypeError, ValueError, IndexError):
            return None


class ProjectQuestions(Protocol):
    """What the semantic model asks of the project (see view.ProjectView, which answers from the model)."""

    module: Optional[str]  # the file's module id; None: not in the project

    def class_kind(self, qualname: str) -> Optional[str]: ...
    def role(self, qualname: str) -> Optional[Role]: ...
    def module_facts(self) -> ModuleFacts: ...
    def migrated(self) -> Optional[Reason]: ...
    def npu(self) -> Optional[Reason]: ...
    def graph_mode(self) -> Optional[Reason]: ...
    def replaced(self, qualname: str) -> Optional[Reason]: ...
    def class_precision(self, qualname: str) -> Optional[Precision]: ...
    def function_precision(self, qualname: str) -> Optional[Precision]: ...
    def config_default(self, attr: str, cls: Optional[str] = None) -> Any: ...


class NullView:
    """The project view of a file that is in no project: every answer is "unknown", nothing is recorded."""

    module: Optional[str] = None
    path = ""
    model = None
    deps = Deps()

    def learn_own(self, summary: Summary) -> None:
        """(Nothing to learn: no model.)"""

    def class_kind(self, qualname: str) -> Optional[str]:
        return None

    def role(self, qualname: str) -> Optional[Role]:
        return None

    function_role = role

    def module_facts(self) -> ModuleFacts:
        return NO_FACTS

    def migrated(self) -> Optional[Reason]:
        return None

    def npu(self) -> Optional[Reason]:
        return None

    def graph_mode(self) -> Optional[Reason]:
        return None

    def replaced(self, qualname: str) -> Optional[Reason]:
        return None

    def class_precision(self, qualname: str) -> Optional[Precision]:
        return None

    def function_precision(self, qualname: str) -> Optional[Precision]:
        return None

    def config_default(self, attr: str, cls: Optional[str] = None) -> Any:
        return None


NULL_VIEW = NullView()
