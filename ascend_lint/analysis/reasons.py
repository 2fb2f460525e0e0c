"""What the project says about where the walk is, as typed values (records.Role, Reason, Precision): the roles
of the current function (run on every forward, on every step), why the file runs migrated, on the NPU or in
GRAPH_MODE, why the current code never runs, the precision models are trained in. A facet of FileContext
(semantic.py), which provides `project` (questions.ProjectQuestions), `module`, `scopes`, `class_scope`,
`hot_method()`, `project_name()`, `text` and `_own_npu`.

Rules quote these reasons through `Role.describe()` / `Reason.describe()`: the one place that words them.
"""
from __future__ import annotations

import ast
from typing import Any, List, Optional

from .records import NO_FACTS, PER_FORWARD, PER_STEP, SETS_MODE, ModuleFacts, Precision, Reason, Role
from .textfacts import run_mode

_SETS_GRAPH_MODE = Reason(SETS_MODE)


class ProjectQueries:
    """FileContext's questions whose answers come from the project model."""

    project: Any
    module: Optional[str]
    scopes: List[Any]
    text: str
    _own_npu: bool
    _facts: Optional[ModuleFacts]
    _mode: Optional[tuple]

    def facts(self) -> ModuleFacts:
        """Roles and replacements of this file's own functions and classes (one question, asked once)."""
        if self._facts is None:
            self._facts = self.project.module_facts() if self.module is not None else NO_FACTS
        return self._facts

    # ------------------------------------------------------------------ roles of the current code
    def role(self) -> Optional[Role]:
        """The project model's role of the innermost enclosing function that has one (any kind: per-step,
        per-forward, ... see records.ROLES), named as the function; None: the project gives none."""
        for scope in reversed(self.scopes):
            if scope.role is not None:
                return scope.role._replace(name=scope.name)
        return None

    def hot_role(self) -> Optional[Role]:
        """The role of the outermost hot scope: a forward/construct itself (no reason), or a function a hot
        path elsewhere calls (`role.describe()`: "`helper` (a hot path: `Attention.forward` in `model.py:40`
        calls it)"); None outside hot code."""
        scope = self.hot_method()  # type: ignore[attr-defined]
        return Role(PER_FORWARD, scope.reason, scope.name) if scope is not None else None

    def step_role(self) -> Optional[Role]:
        """The role of the function a step loop in another place makes per-step (`role.describe()`:
        "`log_loss` runs every step: the step loop in `train.py:88` calls it"); None otherwise."""
        for scope in self.scopes:
            if scope.step:
                return Role(PER_STEP, scope.reason, scope.name)
        return None

    def hot_reason(self) -> Optional[Reason]:
        """Why the current code is hot when the reason is elsewhere; None inside a forward/construct itself."""
        role = self.hot_role()
        return role.reason if role is not None else None

    def hot_label(self) -> str:
        """`hot_role().describe()`, "`forward`" outside hot code."""
        role = self.hot_role()
        return role.describe() if role is not None else "`forward`"

    def step_note(self) -> Optional[str]:
        """`step_role().describe()`, None when the current function is not made per-step elsewhere."""
        role = self.step_role()
        return role.describe() if role is not None else None

    def step_reason(self) -> Optional[Reason]:
        """Why the current function runs every step when a step loop elsewhere calls it."""
        role = self.step_role()
        return role.reason if role is not None else None

    def replaced_by(self) -> Optional[Reason]:
        """Why the current function (or its class) never runs: it is monkey-patched away at run time."""
        for scope in self.scopes:
            if scope.replaced:
                return scope.replaced
        return None

    # ------------------------------------------------------------------ how the file runs
    def migration_reason(self) -> Optional[Reason]:
        """Why the file runs migrated when the reason is in another file (None otherwise)."""
        return self.project.migrated()

    def npu_reason(self) -> Optional[Reason]:
        """Why the file is NPU code when the reason is in another file (None otherwise)."""
        return None if self._own_npu else self.project.npu()

    def run_mode(self) -> Optional[str]:
        """The MindSpore run mode this file sets itself ('graph', 'pynative'; None: it sets none, or one that is
        configurable). Computed once, when first asked."""
        if self._mode is None:
            self._mode = (run_mode(self.text),)
        return self._mode[0]

    def graph_mode(self) -> Optional[Reason]:
        """Why the file's MindSpore cells run compiled in GRAPH_MODE (constants folded into the graph): the
        file sets it with `set_context(mode=GRAPH_MODE)`, or (project model) an entry script that sets it
        imports the file. None when the file sets another or a configurable mode, or nothing shows it."""
        own = self.run_mode()
        if own is not None:
            return _SETS_GRAPH_MODE if own == "graph" else None
        return self.project.graph_mode()

    # ------------------------------------------------------------------ training
    def training_precision(self, class_name: Optional[str] = None) -> Optional[Precision]:
        """The precision a model class (default: the current class) is trained in, per the project."""
        if self.module is None:
            return None
        if class_name is None:
            cls = self.class_scope  # type: ignore[attr-defined]
            if cls is None:
                return None
            class_name = cls.name
        prefix = f"{self.module}." if self.module else ""
        return self.project.class_precision(prefix + class_name)

    def caller_precision(self) -> Optional[Precision]:
        """The mixed precision the callers of the current top-level function run it with."""
        if self.module is None:
            return None
        for scope in self.scopes[1:]:
            if scope.kind == "function":
                qual = self._qual_of(scope)
                return self.project.function_precision(qual) if qual else None
        return None

    def _qual_of(self, scope: Any) -> Optional[str]:
        index = self.scopes.index(scope)
        prefix = f"{self.module}." if self.module else ""
        if index == 1:
            return prefix + scope.name
        if index == 2 and self.scopes[1].kind == "class":
            return f"{prefix}{self.scopes[1].name}.{scope.name}"
        return None

    def config_default(self, attr: str, config_class: Optional[ast.AST] = None) -> object:
        """The default of a configuration attribute (`config.hidden_act`) in the project's configuration
        classes: of `config_class` (an annotation naming the class) when given and known, else the value
        every configuration class agrees on."""
        if self.project.model is None:
            return None
        cls = self.project_name(config_class) if config_class is not None else None  # type: ignore[attr-defined]
        return self.project.config_default(attr, cls)
