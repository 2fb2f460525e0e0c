"""The project model's answers, in tables of typed records (records.Role, Reason, Precision), and their
JSON-able form for the project store (`tables`, `from_tables`). The builder (builder.py) fills them; every
question of questions.QUESTIONS is a method here."""
from __future__ import annotations

from typing import AbstractSet, Any, Dict, List, Mapping, Optional, Tuple

from .data import framework_kind
from .records import SETTING, NO_FACTS, ModuleFacts, Precision, Reason, Role
from .resolver import module_id

MODEL_SCHEMA = 5  # (5: the execution model's roles; 4: typed roles, reasons and precisions)
_ALL_MIGRATED = Reason(SETTING)


class ModelTables:
    """Answers about the project (see model.py for what each means)."""

    def __init__(self) -> None:
        self.module_ids: AbstractSet[str] = set()
        self.kinds: Dict[str, str] = {}  # class qualname -> kind
        self.roles: Dict[str, Role] = {}  # function qualname -> role
        self.replaced_names: Dict[str, Reason] = {}  # qualname -> why it never runs
        self.migrated_modules: Dict[str, Reason] = {}
        self.npu_modules: Dict[str, Reason] = {}
        self.graph_modules: Dict[str, Reason] = {}
        self.class_precisions: Dict[str, Precision] = {}
        self.function_precisions: Dict[str, Precision] = {}
        self.config: Dict[str, Dict[str, Any]] = {}  # configuration class qualname -> attribute -> default
        self.aliases: Dict[str, str] = {}  # re-exported name -> defining name
        self.all_migrated = False
        self._by_module: Optional[Dict[str, ModuleFacts]] = None

    # ------------------------------------------------------------------ questions
    def module_of(self, relpath: str) -> Optional[str]:
        mid = module_id(relpath)
        return mid if mid in self.module_ids else None

    def canonical(self, qualname: str) -> str:
        return self.aliases.get(qualname, qualname)

    def class_kind(self, qualname: str) -> Optional[str]:
        qualname = self.canonical(qualname)
        return self.kinds.get(qualname) or framework_kind(qualname)

    def role(self, qualname: str) -> Optional[Role]:
        return self.roles.get(qualname)

    function_role = role  # (the question's name before the roles were typed)

    def module_facts(self, module: str) -> ModuleFacts:
        """The roles and replacements of one module's own functions, methods and classes, in one answer."""
        if self._by_module is None:
            by_module: Dict[str, Tuple[Dict[str, Role], Dict[str, Reason]]] = {}
            for index, table in enumerate((self.roles, self.replaced_names)):
                for qual, value in table.items():
                    mid, local = self._split_local(qual)
                    if mid is not None:
                        by_module.setdefault(mid, ({}, {}))[index][local] = value  # type: ignore[index]
            self._by_module = {mid: ModuleFacts(*pair) for mid, pair in by_module.items()}
        return self._by_module.get(module, NO_FACTS)

    def module_of_qualname(self, qual: str) -> Optional[str]:
        """The module id a project qualname lies in (None: none of the project's)."""
        return self._split_local(qual)[0]

    def _split_local(self, qual: str) -> Tuple[Optional[str], str]:
        """('module id', 'Class.method') of a project qualname."""
        parts = qual.split(".")
        for i in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:i])
            if head in self.module_ids:
                return head, ".".join(parts[i:])
        return ("", qual) if "" in self.module_ids else (None, qual)

    def migrated(self, module: str) -> Optional[Reason]:
        """Why a module runs under torch_npu's run-time migration (None: it does not)."""
        return _ALL_MIGRATED if self.all_migrated else self.migrated_modules.get(module)

    def npu(self, module: str) -> Optional[Reason]:
        """Why a module that is not NPU code on its own runs on the NPU (None: the project does not show it)."""
        return self.npu_modules.get(module)

    def graph_mode(self, module: str) -> Optional[Reason]:
        """Why a module that sets no MindSpore mode itself runs in GRAPH_MODE (None: not shown)."""
        return self.graph_modules.get(module)

    def replaced(self, qualname: str) -> Optional[Reason]:
        return self.replaced_names.get(qualname)

    def class_precision(self, qualname: str) -> Optional[Precision]:
        return self.class_precisions.get(self.canonical(qualname))

    def function_precision(self, qualname: str) -> Optional[Precision]:
        return self.function_precisions.get(qualname)

    def config_default(self, attr: str, cls: Optional[str] = None) -> Any:
        """The default of configuration attribute `attr` in class `cls`, or the value every configuration
        class of the project that sets it agrees on; None when unknown or they disagree."""
        if cls is not None:
            values = self.config.get(self.canonical(cls))
            if values is not None and attr in values:
                return values[attr]
        seen = {repr(v[attr]): v[attr] for v in self.config.values() if attr in v}
        return next(iter(seen.values())) if len(seen) == 1 else None

    # ------------------------------------------------------------------ JSON form
    def tables(self) -> Dict[str, Any]:
        """The model as JSON-able tables: facts per module, reasons of module contexts stored once."""
        self.module_facts("")  # (fills the per-module index)
        reasons: List[Reason] = []
        numbers: Dict[Reason, int] = {}
        for reason in (*self.migrated_modules.values(), *self.npu_modules.values(), *self.graph_modules.values()):
            if reason not in numbers:
                numbers[reason] = len(reasons)
                reasons.append(reason)
        return {"schema": MODEL_SCHEMA, "module_ids": sorted(self.module_ids), "kinds": self.kinds,
                "facts": {mid: facts.to_tuple() for mid, facts in (self._by_module or {}).items()},
                "reasons": reasons,
                "migrated": {mid: numbers[r] for mid, r in self.migrated_modules.items()},
                "npu": {mid: numbers[r] for mid, r in self.npu_modules.items()},
                "graph": {mid: numbers[r] for mid, r in self.graph_modules.items()},
                "class_precision": self.class_precisions, "function_precision": self.function_precisions,
                "config": self.config, "aliases": self.aliases, "all_migrated": self.all_migrated}

    def load_tables(self, tables: Mapping[str, Any]) -> None:
        """Fill the tables from their JSON form; raises (KeyError, TypeError, ValueError) when malformed."""
        if tables["schema"] != MODEL_SCHEMA:
            raise ValueError("foreign model")
        self.module_ids = set(tables["module_ids"])
        self.kinds = dict(tables["kinds"])
        for mid, row in tables["facts"].items():  # stored per module (see tables())
            facts = ModuleFacts.from_tuple(row)
            prefix = f"{mid}." if mid else ""
            self.roles.update((prefix + local, role) for local, role in facts.roles.items())
            self.replaced_names.update((prefix + local, why) for local, why in facts.replaced.items())
        reasons = [Reason.from_tuple(row) for row in tables["reasons"]]
        self.migrated_modules = {mid: reasons[i] for mid, i in tables["migrated"].items()}
        self.npu_modules = {mid: reasons[i] for mid, i in tables["npu"].items()}
        self.graph_modules = {mid: reasons[i] for mid, i in tables["graph"].items()}
        self.class_precisions = {q: Precision.from_tuple(row) for q, row in tables["class_precision"].items()}
        self.function_precisions = {q: Precision.from_tuple(row) for q, row in tables["function_precision"].items()}
        self.config = dict(tables["config"])
        self.aliases = dict(tables["aliases"])
        self.all_migrated = bool(tables["all_migrated"])
