"""The project model: facts that live in other files, built from every file's summary.

`ProjectModel.build(summaries, settings)` resolves modules, imports, class hierarchies and an approximate
call graph once (builder.py), and keeps only the answers rules ask for, in tables of typed records
(tables.py; cached whole in the project store, and answers compared between runs):

- `class_kind(qualname)`: "module" / "cell" / "function" / "model" for classes deriving, in any module or
  through a well-known third-party base, from a framework base;
- `role(qualname)`: a records.Role: PER_FORWARD for functions run from a hot method (to `CALL_DEPTH` calls
  deep) or assigned as a `forward`/`construct`, PER_STEP for functions run on every training step (called,
  to `CALL_DEPTH`, from a step loop); `module_facts(module)`: the roles and replacements of one module's
  own functions and classes, in one answer;
- `migrated(module)`: why a module runs under torch_npu's run-time migration (None: it does not);
- `npu(module)` / `graph_mode(module)`: why a module that does not say so itself runs on the NPU / in
  MindSpore's GRAPH_MODE (an entry script that does imports it);
- `replaced(qualname)`: why a function, method or class never runs (it is monkey-patched);
- `class_precision(qualname)` / `function_precision(qualname)`: the records.Precision of the training that
  uses a model class or calls a training function;
- `config_default(attr, cls)`: the default of a configuration attribute.

Qualified names are `<module>.<Class>.<method>` with the module named by its path from the project root
(`pkg/sub/mod.py` -> `pkg.sub.mod`), so every file has one name even in trees of scripts.
Reasons are records.Reason values that name places (a file and a record of its summary), not lines: an edit
that only moves lines keeps the model valid; docs/analysis.md describes them.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional

from .builder import HIERARCHY_DEPTH, Builder
from .contexts import PRECISION_DEPTH, first_reason
from .records import Role, Summary
from .resolver import ALIAS_DEPTH, Resolver, module_id
from .roles import CALL_DEPTH
from .tables import MODEL_SCHEMA, ModelTables

__all__ = ["ALIAS_DEPTH", "CALL_DEPTH", "HIERARCHY_DEPTH", "MODEL_SCHEMA", "PRECISION_DEPTH", "ProjectModel",
           "Resolver", "first_reason", "module_id"]


class ProjectModel(ModelTables):
    """Answers about the project (see the module docstring)."""

    def __init__(self, tables: Optional[Mapping[str, Any]] = None) -> None:
        """An empty model, or the model of these stored tables (ModelTables.tables; raises when malformed)."""
        super().__init__()
        self.builder: Optional[Builder] = None  # set by build(): what with_tree_facts() reuses
        if tables is not None:
            self.load_tables(tables)

    @classmethod
    def load(cls, tables: Any) -> Optional["ProjectModel"]:
        """The model of stored tables; None when they are malformed or of another schema (a miss)."""
        try:
            return cls(tables)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return None

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, files: Mapping[str, Summary], runtime_migration: Any = "auto",
              migrating_modules: Iterable[str] = (), previous: Optional["ProjectModel"] = None) -> "ProjectModel":
        """The model of a project whose files (paths relative to the root, '/'-separated) have these summaries.
        `previous`: a model built here before for the same files, whose lookups (module names, imports) are
        reused where the summaries they came from did not change (a run's final model after its provisional
        one); `previous` gives its builder up (its own_step_roles and with_tree_facts answer nothing then)."""
        reuse = previous.builder if previous is not None else None
        if previous is not None:
            previous.builder = None
        builder = Builder(files, runtime_migration, tuple(migrating_modules), cls, reuse)
        del reuse  # (what the new builder did not take goes now, not after the build)
        return builder.build()  # type: ignore[return-value]

    @classmethod
    def prepare(cls, rels: Iterable[str], runtime_migration: Any = "auto",
                migrating_modules: Iterable[str] = ()) -> "ProjectModel":
        """An empty model whose builder knows the project's files by name only, to `learn` their summaries
        one by one (while waiting for the rest) and serve as `previous` to the build that follows."""
        placeholder = Summary.empty()
        model = cls()
        model.builder = Builder(dict.fromkeys(rels, placeholder), runtime_migration, tuple(migrating_modules), cls)
        return model

    def learn(self, rel: str, summary: Summary) -> None:
        """Make the lookups that depend on one file's summary alone (its imports' bindings and the modules
        they load), for a model made by `prepare`."""
        builder = self.builder
        if builder is not None and rel in builder.r.files:
            builder.learn(rel, summary)

    def own_step_roles(self, rel: str, summary: Summary) -> Dict[str, Role]:
        """The roles (qualname -> Role) that the step loops of one file (`summary`, read from its tree) give,
        for a model built while only its text was known: what `with_tree_facts` would add if no other file
        changed. {} when this model was not built here (loaded from the store)."""
        builder = self.builder
        return builder.own_step_roles(rel, summary) if builder is not None else {}

    def with_tree_facts(self, changed: Mapping[str, Summary]) -> Optional["ProjectModel"]:
        """The model once `changed` files gained only the facts that need a syntax tree (step loops,
        precision decisions): classes, patches, migration and configuration stand, roles and precisions
        are worked out again. None when this model was not built here (loaded from the store)."""
        builder = self.builder
        return builder.refresh(changed) if builder is not None else None  # type: ignore[return-value]
