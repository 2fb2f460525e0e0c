"""What a file's rules see of the project: `ProjectView`, which answers the questions of questions.QUESTIONS from
a ProjectModel and records every question with its answer (`deps`).

A lint result is valid under a model as long as every recorded question gets the same answer there
(`replay`). Answers are typed records (records.Role, Reason, Precision, ModuleFacts) whose places carry the
lines of the current summaries. With no project (a snippet linted on its own) `NULL_VIEW` answers "unknown"
to everything.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from .model import ProjectModel
from .questions import NULL_VIEW, QUESTIONS, Dep, Deps, Question
from .records import NO_FACTS, ModuleFacts, Precision, Reason, Role, Summary, SummaryOf, resolved

__all__ = ["NULL_VIEW", "ProjectView", "replay"]


class ProjectView:
    """One file's window on a ProjectModel; `module` is the file's module id (None: not in the project)."""

    def __init__(self, model: Optional[ProjectModel], module: Optional[str], path: str = "",
                 summary_of: Optional[SummaryOf] = None) -> None:
        self.model = model
        self.module = module
        self.path = path  # the file's path relative to the project root ('/'-separated)
        self.summary_of = summary_of or _no_summary  # current summaries: the lines of the places reasons name
        self._answers: Dict[Question, Any] = {}
        self._own_roles: Dict[str, Role] = {}  # roles the file's own step loops give (see learn_own)

    @property
    def deps(self) -> Deps:
        return Deps(tuple(Dep(question, answer) for question, answer in self._answers.items()))

    def learn_own(self, summary: Summary) -> None:
        """This file's summary read from the tree being linted. When the model was built from its text
        alone, the roles its own step loops give are added to this file's answers, as the model refreshed
        with them will give them; so its findings need not be linted again once the model has them (if
        the answers still differ then, the file is linted again: `replay`)."""
        if self.model is None or self.module is None or Question("module_facts", (self.module,)) in self._answers:
            return
        self._own_roles = self.model.own_step_roles(self.path, summary)
        if self._own_roles:
            base = self.summary_of
            self.summary_of = lambda rel: summary if rel == self.path else base(rel)

    def _ask(self, name: str, *args: Any) -> Any:
        question = Question(name, args)
        if question in self._answers:
            return self._answers[question]
        if self.model is None:
            answer = None
        elif self._own_roles and name in ("module_facts", "role"):
            answer = resolved(self._with_own_roles(question), self.summary_of)
        else:
            answer = _answer(self.model, question, self.summary_of)
        self._answers[question] = answer
        return answer

    def _with_own_roles(self, question: Question) -> Any:
        """The model's answer to a role question, with the roles of `learn_own` added."""
        assert self.model is not None
        qual = question.args[0]
        if question.name == "role":
            return self._own_roles.get(qual) or self.model.role(qual)
        facts = self.model.module_facts(qual)
        prefix = f"{qual}." if qual else ""
        own = {name[len(prefix):]: role for name, role in self._own_roles.items()
               if name.startswith(prefix) and self.model.module_of_qualname(name) == qual}
        return ModuleFacts({**facts.roles, **own}, facts.replaced) if own else facts

    # ---------------------------------------------------------------- questions
    def class_kind(self, qualname: str) -> Optional[str]:
        """'module' / 'cell' / 'function' / 'model' for a class (project or third-party) by absolute name."""
        return self._ask("class_kind", qualname)

    def role(self, qualname: str) -> Optional[Role]:
        """When a project function or method runs (PER_FORWARD, PER_STEP, ...) and why; None: not known."""
        return self._ask("role", qualname)

    function_role = role

    def module_facts(self) -> ModuleFacts:
        """Roles and replacements of this file's own functions, methods and classes (one question)."""
        if self.module is None:
            return NO_FACTS
        return self._ask("module_facts", self.module) or NO_FACTS

    def migrated(self) -> Optional[Reason]:
        """Why this file runs under run-time migration (None: it does not, as far as the project shows)."""
        return self._ask("migrated", self.module) if self.module is not None else None

    def npu(self) -> Optional[Reason]:
        """Why this file runs on the NPU although it is not NPU code on its own (an NPU entry script imports
        it); None: the project does not show it."""
        return self._ask("npu", self.module) if self.module is not None else None

    def graph_mode(self) -> Optional[Reason]:
        """Why this file's MindSpore cells run in GRAPH_MODE although it sets no mode itself (an entry script
        that sets it imports the file); None: the project does not show it."""
        return self._ask("graph_mode", self.module) if self.module is not None else None

    def replaced(self, qualname: str) -> Optional[Reason]:
        return self._ask("replaced", qualname)

    def class_precision(self, qualname: str) -> Optional[Precision]:
        return self._ask("class_precision", qualname)

    def function_precision(self, qualname: str) -> Optional[Precision]:
        return self._ask("function_precision", qualname)

    def config_default(self, attr: str, cls: Optional[str] = None) -> Any:
        return self._ask("config_default", attr, cls)


def _no_summary(path: str) -> Optional[Summary]:
    return None


def _answer(model: ProjectModel, question: Question, summary_of: SummaryOf) -> Any:
    """The model's answer to a question, with the lines of its places from `summary_of`."""
    return resolved(getattr(model, question.name)(*question.args), summary_of)


def replay(model: Optional[ProjectModel], deps: Any, summary_of: Optional[SummaryOf] = None) -> bool:
    """Do the recorded questions (Deps, or their tuple form as the result cache keeps it) get the same answers
    from `model` (places read from `summary_of`)? False on malformed or foreign deps."""
    loaded = Deps.load(deps)
    if loaded is None:
        return False
    for dep in loaded.items:
        question = dep.question
        if question.name not in QUESTIONS:
            return False
        try:
            fresh = _answer(model, question, summary_of or _no_summary) if model is not None else None
        except TypeError:  # wrong arity
            return False
        if fresh != dep.answer:
            return False
    return True
