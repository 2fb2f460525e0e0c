"""What a file's rules see of the project: `ProjectView`, which records every question and its answer.

A lint result is valid under a model as long as every recorded question gets the same answer there
(`deps`). With no project (a snippet linted on its own) `NULL_VIEW` answers "unknown" to everything.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from .model import ProjectModel, format_places
from .summary import Summary

SummaryOf = Callable[[str], Optional[Summary]]

Deps = List[list]  # [[query, args..., answer], ...] in the order first asked


class ProjectView:
    """One file's window on a ProjectModel; `module` is the file's module id (None: not in the project)."""

    def __init__(self, model: Optional[ProjectModel], module: Optional[str], path: str = "",
                 summary_of: Optional[SummaryOf] = None) -> None:
        self.model = model
        self.module = module
        self.path = path  # the file's path relative to the project root ('/'-separated)
        self.summary_of = summary_of  # current summaries: the lines of the places that reasons name
        self._answers: Dict[tuple, Any] = {}
        self._own_roles: Dict[str, List[str]] = {}  # roles the file's own step loops give (see learn_own)

    @property
    def deps(self) -> Deps:
        return [list(key) + [answer] for key, answer in self._answers.items()]

    def learn_own(self, summary: Summary) -> None:
        """This file's summary read from the tree being linted. When the model was built from its text
        alone, the roles its own step loops give are added to this file's answers, as the model refreshed
        with them will give them; so its findings need not be linted again once the model has them (if
        the answers still differ then, the file is linted again: `replay`)."""
        if self.model is None or self.module is None or ("module_facts", self.module) in self._answers:
            return
        self._own_roles = self.model.own_step_roles(self.path, summary)
        if self._own_roles:
            base = self.summary_of or _no_summary
            self.summary_of = lambda rel: summary if rel == self.path else base(rel)

    def _ask(self, key: tuple) -> Any:
        if key in self._answers:
            return self._answers[key]
        if self.model is None:
            answer = None
        elif self._own_roles and key[0] in ("module_facts", "function_role"):
            answer = _plain(format_places(self._with_own_roles(key), self.summary_of or _no_summary))
        else:
            answer = _answer(self.model, key, self.summary_of)
        self._answers[key] = answer
        return answer

    def _with_own_roles(self, key: tuple) -> Any:
        """The model's raw answer to a role question, with the roles of `learn_own` added."""
        if key[0] == "function_role":
            return self._own_roles.get(key[1]) or self.model.function_role(key[1])
        facts = self.model.module_facts(key[1])
        prefix = f"{key[1]}." if key[1] else ""
        own = {qual[len(prefix):]: role for qual, role in self._own_roles.items()
               if qual.startswith(prefix) and self.model.module_of_qualname(qual) == key[1]}
        return {"roles": {**facts["roles"], **own}, "replaced": facts["replaced"]} if own else facts

    # ---------------------------------------------------------------- questions
    def class_kind(self, qualname: str) -> Optional[str]:
        """'module' / 'cell' / 'function' / 'model' for a class (project or third-party) by absolute name."""
        return self._ask(("class_kind", qualname))

    def function_role(self, qualname: str) -> Optional[List[str]]:
        """['hot' | 'step', reason] for a project function or method called from a hot path."""
        return self._ask(("function_role", qualname))

    def module_facts(self) -> Dict[str, Any]:
        """Roles and replacements of this file's own functions, methods and classes (one question)."""
        if self.module is None:
            return _NO_FACTS
        return self._ask(("module_facts", self.module)) or _NO_FACTS

    def migrated(self) -> Optional[str]:
        """Why this file runs under run-time migration (None: it does not, as far as the project shows)."""
        return self._ask(("migrated", self.module)) if self.module is not None else None

    def npu(self) -> Optional[str]:
        """Why this file runs on the NPU although it is not NPU code on its own (an NPU entry script imports
        it); None: the project does not show it."""
        return self._ask(("npu", self.module)) if self.module is not None else None

    def graph_mode(self) -> Optional[str]:
        """Why this file's MindSpore cells run in GRAPH_MODE although it sets no mode itself (an entry script
        that sets it imports the file); None: the project does not show it."""
        return self._ask(("graph_mode", self.module)) if self.module is not None else None

    def replaced(self, qualname: str) -> Optional[str]:
        return self._ask(("replaced", qualname))

    def class_precision(self, qualname: str) -> Optional[List[str]]:
        return self._ask(("class_precision", qualname))

    def function_precision(self, qualname: str) -> Optional[List[str]]:
        return self._ask(("function_precision", qualname))

    def config_default(self, attr: str, cls: Optional[str] = None) -> Any:
        return self._ask(("config_default", attr, cls))


_NO_FACTS: Dict[str, Any] = {"roles": {}, "replaced": {}}
_QUERIES = {"class_kind", "function_role", "module_facts", "migrated", "npu", "graph_mode", "replaced",
            "class_precision",
            "function_precision",
            "config_default"}


def _no_summary(path: str) -> Optional[Summary]:
    return None


def _answer(model: ProjectModel, key: tuple, summary_of: Optional[SummaryOf] = None) -> Any:
    return _plain(format_places(getattr(model, key[0])(*key[1:]), summary_of or _no_summary))


def replay(model: Optional[ProjectModel], deps: Any, summary_of: Optional[SummaryOf] = None) -> bool:
    """Do the recorded questions get the same answers from `model` (places read from `summary_of`)?
    False on malformed deps."""
    if not isinstance(deps, list):
        return False
    for dep in deps:
        if not isinstance(dep, list) or len(dep) < 2 or dep[0] not in _QUERIES:
            return False
        key, answer = tuple(dep[:-1]), dep[-1]
        try:
            fresh = _answer(model, key, summary_of) if model is not None else None
        except TypeError:  # wrong arity: written by another version
            return False
        if _plain(fresh) != answer:
            return False
    return True


def _plain(value: Any) -> Any:
    """JSON's view of a value (tuples are lists), so answers compare equal after a cache round trip."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


NULL_VIEW = ProjectView(None, None)
