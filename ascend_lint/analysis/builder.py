"""Builds the project model's tables from every file's summary: class kinds through the project's hierarchies,
the functions a call reaches, monkey-patches; roles (roles.RoleWalks) and module contexts, precision and
configuration (contexts.ModuleContexts). A model built here keeps its builder (with its lookups) for
refreshes and the next build of a run."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .contexts import ModuleContexts
from .execution import ExecutionWalks
from .data import MIGRATING_MODULES, framework_kind
from .records import ASSIGNED, PATCH, PATCHED, Place, Reason, Role, Summary
from .resolver import Resolver, module_id
from .roles import RoleWalks
from .tables import ModelTables

HIERARCHY_DEPTH = 12  # base classes followed
TEST_PREFIXES = ("test", "bench")  # as FileContext.in_test_code


class Builder(RoleWalks, ExecutionWalks, ModuleContexts):
    """Fills a model (`new_model()`: an empty ModelTables) from the summaries of a project's files."""

    def __init__(self, files: Mapping[str, Summary], runtime_migration: Any, extra: Tuple[str, ...],
                 new_model: Callable[[], ModelTables], reuse: Optional["Builder"] = None) -> None:
        self.runtime_migration = runtime_migration
        self.extra = extra
        self.migrating_roots = {known.partition(".")[0] for known in MIGRATING_MODULES + extra}
        self.new_model = new_model
        self.model = new_model()
        self.kinds: Dict[str, Optional[str]] = {}
        # module id -> what importing it imports: without its functions' imports ([0]), with them ([1])
        self._imports_memo: Tuple[Dict[str, Tuple[str, ...]], ...] = ({}, {})
        self._parent_memo: Dict[str, Tuple[str, ...]] = {}
        self.hot_roles: Optional[Dict[str, Role]] = None  # the per-forward part of the roles, once found
        self.hot_set: set = set()
        self.assigned_forwards: Dict[str, Reason] = {}
        if (reuse is not None and (reuse.runtime_migration, reuse.extra) == (runtime_migration, extra)
                and reuse.r.files.keys() == files.keys()):
            self.r = reuse.r  # the same files: module names and import lookups stand
            changed = self.r.take(files)
            self._imports_memo = tuple({mid: found for mid, found in memo.items() if mid not in changed}
                                       for memo in reuse._imports_memo)
            self._parent_memo = reuse._parent_memo
        else:
            self.r = Resolver(files)

    def summary(self, mid: str) -> Summary:
        return self.r.files[self.r.by_id[mid]]

    def learn(self, rel: str, summary: Summary) -> None:
        """See ProjectModel.learn."""
        self.r.put(rel, summary)
        mid = module_id(rel)
        if self.r.by_id.get(mid) == rel:
            self.r.bindings(mid)
            self.imported_modules(mid, True)
            self.imported_modules(mid, False)

    def path(self, mid: str) -> str:
        return self.r.by_id.get(mid, mid)

    def build(self) -> ModelTables:
        m = self.model
        m.module_ids = self.r.by_id.keys()  # (a set-like view: no copy of 20,000 names)
        for mid in self.r.by_id:
            for name in self.summary(mid).classes:
                qual = f"{mid}.{name}"
                kind = self.class_kind(qual)
                if kind:
                    m.kinds[qual] = kind
        self.kinds = {}  # (a memo for the hierarchy walk above: every class of the project, mostly None)
        self._patches()
        self._find_entries()
        self._roles()
        self._execution_roles()
        self._migration()
        self._entry_contexts()
        self._precision()
        self._config()
        m.builder = self
        return m

    def refresh(self, changed: Mapping[str, Summary]) -> ModelTables:
        """See ProjectModel.with_tree_facts: the parts that do not use tree facts are kept."""
        self.r.files.update(changed)  # (only tree facts differ: the resolver's lookups stand)
        old = self.model
        m = self.model = self.new_model()
        m.module_ids, m.kinds, m.replaced_names, m.aliases = old.module_ids, old.kinds, old.replaced_names, old.aliases
        m.migrated_modules, m.all_migrated, m.config = old.migrated_modules, old.all_migrated, old.config
        m.npu_modules, m.graph_modules = old.npu_modules, old.graph_modules  # (entry contexts: text facts)
        self._framework_cache = None  # (passes to a project step runner depend on its step loops: tree facts)
        self._roles(self.hot_roles)  # (entry points and reached modules come from text facts: they stand)
        self._execution_roles()
        self._precision()
        m.builder = self
        old.builder = None
        return m

    def is_test(self, mid: str, owner: str = "") -> bool:
        """Test or benchmark code (`test_*.py` / `*_test.py`, functions named `test*` / `bench*`): it makes
        no function of the project hot or per-step."""
        base = self.path(mid).rpartition("/")[2]
        if base.startswith("test_") or base.endswith("_test.py"):
            return True
        return any(part.lower().startswith(TEST_PREFIXES) for part in owner.split(".")[-1:] if part)

    # --------------------------------------------------------------- classes
    def class_kind(self, qual: str, depth: int = 0) -> Optional[str]:
        """The kind of a project class through its bases (to HIERARCHY_DEPTH; a cycle ends the walk)."""
        if qual in self.kinds:
            return self.kinds[qual]
        self.kinds[qual] = None  # a cycle in the hierarchy ends here
        kind = None
        mid, _, name = qual.rpartition(".")
        mid = self.r.ids.get(mid, mid)  # (the memos that follow keep one string per module id)
        info = self.summary(mid).classes.get(name) if mid in self.r.by_id else None
        if info is not None and depth < HIERARCHY_DEPTH:
            for base in info.bases:
                kind = self.base_kind(mid, base, depth)
                if kind:
                    break
        self.kinds[qual] = kind
        return kind

    def base_kind(self, mid: str, base: str, depth: int) -> Optional[str]:
        resolved = self.r.resolve(mid, base)
        if resolved is None:
            return None
        name, project = resolved
        if not project:
            return framework_kind(name)
        split = self.r.split(name)
        if split is None or not split[1] or "." in split[1]:
            return None
        full = f"{split[0]}.{split[1]}"
        if full != name:
            self.model.aliases[name] = full
        return self.class_kind(full, depth + 1)

    def project_class(self, mid: str, dotted: str) -> Optional[str]:
        """The project class (qualname) a dotted name written in `mid` names, if any."""
        resolved = self.r.resolve(mid, dotted)
        if resolved is None or not resolved[1]:
            return None
        split = self.r.split(resolved[0])
        if split is None or not split[1] or "." in split[1]:
            return None
        return f"{split[0]}.{split[1]}"

    def is_def(self, qual: str) -> bool:
        split = self.r.split(qual)
        return split is not None and split[1] in self.summary(split[0]).defs

    def is_class(self, qual: str) -> bool:
        split = self.r.split(qual)
        return split is not None and split[1] in self.summary(split[0]).classes

    # --------------------------------------------------------------- functions
    def function(self, mid: str, dotted: str, owner: str = "") -> Optional[str]:
        """The project function or method (qualname) a call to `dotted` in `mid` (inside `owner`) reaches."""
        if dotted.startswith("self."):
            cls = owner.split(".", 1)[0] if "." in owner else None
            if cls is None or dotted.count(".") != 1:
                return None
            return self.method(f"{mid}.{cls}", dotted[5:])
        resolved = self.r.resolve(mid, dotted)
        if resolved is None or not resolved[1]:
            return None
        split = self.r.split(resolved[0])
        if split is None or not split[1]:
            return None
        target_mid, attr = split
        return f"{target_mid}.{attr}" if attr in self.summary(target_mid).defs else None

    def constructor(self, mid: str, dotted: str) -> Optional[str]:
        """The `__init__` (qualname) that a call of a project class `dotted` in `mid` runs."""
        cls = self.project_class(mid, dotted)
        if cls is None or not self.is_class(cls):
            return None
        return self.method(cls, "__init__")

    def method(self, cls_qual: str, name: str, depth: int = 0) -> Optional[str]:
        """`cls.name` looked up through the project's base classes (depth first; a recursion bounded by
        HIERARCHY_DEPTH, which also ends a cycle of bases)."""
        mid, _, cls = cls_qual.rpartition(".")
        if mid not in self.r.by_id or depth > HIERARCHY_DEPTH:
            return None
        summary = self.summary(mid)
        if f"{cls}.{name}" in summary.defs:
            return f"{cls_qual}.{name}"
        info = summary.classes.get(cls)
        for base in (info.bases if info else ()):
            base_qual = self.project_class(mid, base)
            found = self.method(base_qual, name, depth + 1) if base_qual is not None else None
            if found:
                return found
        return None

    def calls_of(self, qual: str) -> List[Tuple[str, str]]:
        """(callee qualname, call text) of a project function."""
        split = self.r.split(qual)
        if split is None:
            return []
        mid, owner = split
        info = self.summary(mid).defs.get(owner)
        if info is None:
            return []
        out = []
        for name in info.calls:
            callee = self.function(mid, name, owner)
            if callee is not None and callee != qual:
                out.append((callee, name))
        return out

    # --------------------------------------------------------------- monkey-patches
    def _patches(self) -> None:
        self.assigned_forwards = {}
        replaced = self.model.replaced_names
        for mid in sorted(self.r.by_id):
            for number, (target, value, _line) in enumerate(self.summary(mid).patches):
                place = Place(self.path(mid), PATCH, number)
                head, _, attr = target.rpartition(".")
                owner = self._patched_owner(mid, head)
                new = self.function(mid, value)
                if attr in ("forward", "construct") and new is not None:
                    self.assigned_forwards[new] = Reason(ASSIGNED, (target,), place)
                if owner is not None:
                    original = f"{owner}.{attr}"
                    if self.r.split(original) is not None and (self.is_def(original) or self.is_class(original)):
                        replaced.setdefault(original, Reason(PATCHED, (target, value), place))

    def _patched_owner(self, mid: str, head: str) -> Optional[str]:
        """The project class or module a patch target's head names (`Qwen3RMSNorm`, `modeling.mod`)."""
        resolved = self.r.resolve(mid, head)
        if resolved is None:  # a string target ('pkg.mod.Class.forward')
            found = self.r.split(head)
        elif not resolved[1]:
            return None
        else:
            found = self.r.split(resolved[0])
        if found is None:
            return None
        return f"{found[0]}.{found[1]}" if found[1] else found[0]
