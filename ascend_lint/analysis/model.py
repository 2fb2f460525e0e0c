"""The project model: facts that live in other files, built from every file's summary.

`ProjectModel.build(summaries, settings)` resolves modules, imports, class hierarchies and an approximate
call graph once, and keeps only the answers rules ask for, in plain tables (so the model can be cached
whole and answers compared between runs):

- `class_kind(qualname)`: "module" / "cell" / "function" / "model" for classes deriving, in any module or
  through a well-known third-party base, from a framework base;
- `function_role(qualname)`: ["hot", reason] for functions run from a hot method (to `CALL_DEPTH` calls
  deep) or assigned as a `forward`/`construct`, ["step", reason] for functions run on every training
  step (called, to `CALL_DEPTH`, from a step loop);
- `migrated(module)`: why a module runs under torch_npu's run-time migration (None: it does not);
- `npu(module)` / `graph_mode(module)`: why a module that does not say so itself runs on the NPU / in
  MindSpore's GRAPH_MODE (an entry script that does imports it);
- `replaced(qualname)`: why a function, method or class never runs (it is monkey-patched);
- `class_precision(qualname)` / `function_precision(qualname)`: [dtype, reason] of the training that
  uses a model class or calls a training function;
- `config_default(attr, cls)`: the default of a configuration attribute.

Qualified names are `<module>.<Class>.<method>` with the module named by its path from the project root
(`pkg/sub/mod.py` -> `pkg.sub.mod`), so every file has one name even in trees of scripts.
Reasons are short phrases that name the other file and line, for messages.
"""
from __future__ import annotations

import re
import sys
from collections import deque
from typing import AbstractSet, Any, Callable, Container, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from .data import HOT_METHODS, MIGRATING_MODULES, framework_kind, migrating_module
from .summary import Summary

CALL_DEPTH = 3  # calls followed from a hot method or a step loop
ALIAS_DEPTH = 6  # re-exports followed (`from .impl import X` in a package __init__)
HIERARCHY_DEPTH = 12  # base classes followed
PRECISION_DEPTH = 4  # sub-models followed from a trained model class (`self.attn = Attention(...)`)
MODEL_SCHEMA = 3
TEST_PREFIXES = ("test", "bench")  # as FileContext.in_test_code

Reason = str
_UNSET: Any = object()  # (a memo's "not looked up yet": None is an answer)


def _dirname(rel: str) -> str:
    """posixpath.dirname for the model's relative paths (no trailing or doubled slashes), without its overhead."""
    return rel.rpartition("/")[0]


def _basename(rel: str) -> str:
    return rel.rpartition("/")[2]


def module_id(relpath: str) -> str:
    """`pkg/sub/mod.py` -> 'pkg.sub.mod'; `pkg/__init__.py` -> 'pkg'."""
    stem = relpath[:-4] if relpath.endswith(".pyi") else relpath[:-3] if relpath.endswith(".py") else relpath
    parts = [p for p in stem.split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# Reasons name a place as `path:line`; the model keeps a token instead of the line, filled in from the
# current summaries when a question is answered, so an edit that only moves lines keeps the model valid.
PLACE_RE = re.compile("\x00([^\x00\x01]*)\x01(\\w)\x01([^\x00]*)\x00")
_LINE_FIELDS = {"d": ("defs", 0), "s": ("steps", 1), "p": ("patches", 2), "i": ("imports", 4), "m": ("models", 2),
                "a": ("amp_calls", 2)}


def _where(path: str, kind: str, key: Any) -> str:
    """A place in a reason: `kind` names the summary record ('d' def, 's' step loop, 'p' patch, 'i' import,
    'm' model decision, 'a' amp call) and `key` the record (a def's qualname or a list index)."""
    return f"`\x00{path}\x01{kind}\x01{key}\x00`"


def line_of(summary: Optional[Summary], kind: str, key: str) -> Optional[int]:
    """The line of a place token's record in a file's current summary."""
    if summary is None or kind not in _LINE_FIELDS:
        return None
    field, position = _LINE_FIELDS[kind]
    records = summary.get(field)
    try:
        record = records[key] if isinstance(records, dict) else records[int(key)]
        return int(record[position])
    except (KeyError, IndexError, ValueError, TypeError):
        return None


def format_places(value: Any, summary_of: Callable[[str], Optional[Summary]]) -> Any:
    """An answer with its place tokens turned into `path:line` (lines from `summary_of(path)`)."""
    if isinstance(value, str):
        if "\x00" not in value:
            return value

        def place(m: "re.Match[str]") -> str:
            line = line_of(summary_of(m.group(1)), m.group(2), m.group(3))
            return f"{m.group(1)}:{line}" if line is not None else m.group(1)

        return PLACE_RE.sub(place, value)
    if isinstance(value, list):
        return [format_places(v, summary_of) for v in value]
    if isinstance(value, dict):
        return {k: format_places(v, summary_of) for k, v in value.items()}
    return value


class _Resolver:
    """Module names and import bindings of the project's files (used while building only)."""

    def __init__(self, files: Mapping[str, Summary]) -> None:
        self.files = dict(files)  # relpath -> summary
        self.by_id: Dict[str, str] = {}  # module id -> relpath
        for rel in sorted(self.files):
            mid = module_id(rel)
            if mid and (mid not in self.by_id or rel.endswith(".py")):
                self.by_id[mid] = rel
        packages = {_dirname(rel) for rel in self.files if _basename(rel) == "__init__.py"}
        self.package_dirs = packages
        self.aliases: Dict[str, List[str]] = {}  # package-chain name -> module ids
        self.path_dirs: Dict[str, str] = {}  # aliased module id -> the directory its chain name is relative to
        for mid, rel in self.by_id.items():
            chain, directory = self._chain_name(rel)
            if chain != mid:
                self.aliases.setdefault(chain, []).append(mid)
                self.path_dirs[mid] = sys.intern(directory)
        self.ids = {mid: mid for mid in self.by_id}  # (one string per module id: the memos share them)
        self._bindings: Dict[str, Dict[str, Tuple[str, bool]]] = {}
        self._pairs: Dict[Tuple[str, bool], Tuple[str, bool]] = {}  # one copy of each binding's target
        self._splits: Dict[str, Optional[Tuple[str, str]]] = {}
        self._found: Dict[Tuple[str, bool], Dict[str, Optional[str]]] = {}  # (directory, package?) -> name -> id
        # importer -> (its relpath, its directory, what imports from there find)
        self._homes: Dict[Optional[str], Tuple[str, str, Dict[str, Optional[str]]]] = {}

    def take(self, files: Mapping[str, Summary]) -> Set[str]:
        """Use these summaries of the same files from now on (`put` for each that changed). The changed
        module ids."""
        changed = set()
        for rel, summary in files.items():
            if self.files[rel] is not summary:
                self.put(rel, summary)
                changed.add(module_id(rel))
        return changed

    def put(self, rel: str, summary: Summary) -> None:
        """One file's new summary: the lookups made from its old one (its module's bindings, every `split`)
        are dropped."""
        self.files[rel] = summary
        self._bindings.pop(module_id(rel), None)
        self._splits.clear()

    def _chain_name(self, rel: str) -> Tuple[str, str]:
        """The name Python gives the module when the directory holding its outermost package is on sys.path,
        and that directory."""
        directory, _, base = rel.rpartition("/")
        parts: List[str] = []
        stem = base.rsplit(".", 1)[0]
        if stem != "__init__":
            parts.append(stem)
        while directory and directory in self.package_dirs:
            directory, _, name = directory.rpartition("/")
            parts.append(name)
        return ".".join(reversed(parts)), directory

    # --------------------------------------------------------------- modules
    def find_module(self, name: str, importer: Optional[str] = None) -> Optional[str]:
        """The module id an absolute import of `name` from module `importer` loads, if it is the project's."""
        if not name:
            return None
        home = self._homes.get(importer)
        if home is None:
            rel = self.by_id.get(importer, "") if importer is not None else ""
            directory = _dirname(rel)
            memo = self._found.setdefault((directory, rel.endswith("__init__.py")), {})
            home = self._homes[importer] = (rel, sys.intern(directory), memo)  # (one string per directory)
        rel, directory, memo = home
        found = memo.get(name, _UNSET)
        if found is _UNSET:
            found = self._find_module(name, importer, rel, directory)
            found = memo[name] = self.ids[found] if found is not None else None
        return found

    def _find_module(self, name: str, importer: Optional[str], rel: str, directory: str) -> Optional[str]:
        if importer is not None:  # a script's own directory comes first on sys.path
            if directory and directory not in self.package_dirs:
                local = f"{directory.replace('/', '.')}.{name}"
                if local in self.by_id:
                    return local
            elif not directory and name in self.by_id:
                return name
        candidates = self.aliases.get(name)
        if candidates and importer is not None:
            candidates = [c for c in candidates if self._visible(c, rel)]
        if candidates:
            if len(candidates) == 1:
                return candidates[0]
            if importer is not None:  # the one closest to the importer
                return max(candidates, key=lambda c: _common_prefix(c, importer))
            return None
        if name in self.by_id:
            return name
        if importer is not None and directory:  # a script run from inside a package directory
            local = f"{directory.replace('/', '.')}.{name}"
            if local in self.by_id:
                return local
        return None

    def _visible(self, mid: str, importer_rel: str) -> bool:
        """Can the importer see the module under its package-chain name? The directory that name starts from
        holds the importer (a script tree of its own; for a `src/` layout, the directory above `src/`), lies
        in the importer's directory (a library vendored and installed next to the script that uses it), or is
        the project root or a directory right below it (what a project installs). A package inside a sibling tree (another model's
        directory in a model zoo, a library vendored there) is not on the importer's path."""
        directory = self.path_dirs.get(mid, "")
        parent, _, last = directory.rpartition("/")
        if last == "src":  # a src/ layout: installed, seen from its whole project
            directory = parent
        if "/" not in directory or importer_rel.startswith(directory + "/"):
            return True
        home = _dirname(importer_rel)
        return not home or directory.startswith(home + "/")

    def relative_base(self, importer: str, level: int) -> Optional[str]:
        """The package a relative import of `level` dots in module `importer` starts from (not memoised: each
        module's imports are read once per build)."""
        rel = self.by_id.get(importer)
        if rel is None:
            return None
        parts = importer.split(".") if importer else []
        if _basename(rel) != "__init__.py":
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else None
        if parts is None:
            return None
        base = ".".join(parts)
        return self.ids.get(base, base)

    def bindings(self, mid: str) -> Dict[str, Tuple[str, bool]]:
        """Local name -> (absolute dotted target, is it a project target) for a module's imports (its own
        classes and functions are looked up in its summary: see `resolve`)."""
        found = self._bindings.get(mid)
        if found is not None:
            return found
        found = {}
        shared = self._pairs
        summary = self.files.get(self.by_id.get(mid, ""), {})
        for module, name, asname, level, _line, _in_func in summary.get("imports", ()):
            if name is None:  # `import a.b` binds a; `import a.b as c` binds c to a.b
                if asname:
                    local, target = asname, module
                else:
                    local = target = sys.intern(module.partition(".")[0])
                found_mid = self.find_module(target, mid)
                pair = (found_mid, True) if found_mid else (target, False)
            elif name == "*":
                continue
            else:
                local = asname or name
                if level:
                    base = self.relative_base(mid, level)
                    if base is None:
                        continue
                    source: Optional[str] = f"{base}.{module}" if base and module else (base or module)
                else:
                    source = self.find_module(module, mid)
                if source is None:
                    pair = (f"{module}.{name}", False)
                else:
                    target = f"{source}.{name}" if source else name
                    pair = (self.ids.get(target, target), True)  # (a module's own id string when it names one)
            if local not in found:  # (the first import of a name binds it; modules share their targets)
                found[local] = shared.setdefault(pair, pair)
        self._bindings[mid] = found
        return found

    def resolve(self, mid: str, dotted: str) -> Optional[Tuple[str, bool]]:
        """(absolute name, is it the project's) of a dotted name as written in module `mid`: its own class or
        top-level function, else what an import bound."""
        root, _, rest = dotted.partition(".")
        summary = self.files.get(self.by_id.get(mid, ""), {})
        if root in summary.get("classes", ()) or root in summary.get("defs", ()):
            target = f"{mid}.{root}" if mid else root
            return (f"{target}.{rest}" if rest else target), True
        bound = self.bindings(mid).get(root)
        if bound is None:
            return None
        target, project = bound
        return (f"{target}.{rest}" if rest else target), project

    def split(self, name: str) -> Optional[Tuple[str, str]]:
        """('module id', 'attr.path') for an absolute project name; follows re-exports. Remembered until a
        summary changes (`take`, `put`): it reads the classes, functions and imports of the modules it passes."""
        found = self._splits.get(name, _UNSET)
        if found is _UNSET:
            found = self._splits[name] = self._split(name)
        return found

    def _split(self, name: str) -> Optional[Tuple[str, str]]:
        for _ in range(ALIAS_DEPTH):
            end = len(name)  # the longest prefix that names a module first
            while end != -1:
                mid = self.ids.get(name[:end])  # (one string per module id: the memo holds many)
                if mid is None:
                    aliased = self.aliases.get(name[:end])
                    if not aliased or len(aliased) != 1:
                        end = name.rfind(".", 0, end)
                        continue
                    mid = aliased[0]
                rest = sys.intern(name[end + 1:])
                if not rest:
                    return mid, ""
                summary = self.files[self.by_id[mid]]
                head, _, tail = rest.partition(".")
                if head in summary.get("classes", ()) or head in summary.get("defs", ()):
                    return mid, rest
                bound = self.bindings(mid).get(head)
                if bound is not None and bound[1] and bound[0] != f"{mid}.{head}":
                    name = bound[0] + ("." + tail if tail else "")
                    break  # follow the re-export
                return mid, rest
            else:
                return None
        return None


def _numbered(table: Mapping[str, Any], reasons: List[str]) -> Dict[str, str]:
    """{module: reason} from a stored {module: index into reasons}."""
    return {mid: reasons[i] for mid, i in table.items() if isinstance(i, int) and 0 <= i < len(reasons)}


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        n += 1
    return n


class ProjectModel:
    """Answers about the project, in plain tables (see the module docstring)."""

    def __init__(self, tables: Optional[Dict[str, Any]] = None) -> None:
        tables = tables or {}
        self.module_ids: AbstractSet[str] = set(tables.get("module_ids", ()))
        self.kinds: Dict[str, str] = tables.get("kinds", {})
        self.roles: Dict[str, List[str]] = {}
        self.replaced_names: Dict[str, str] = {}
        self._by_module: Optional[Dict[str, Dict[str, Any]]] = None
        for mid, facts in tables.get("facts", {}).items():  # stored per module (see tables())
            prefix = f"{mid}." if mid else ""
            self.roles.update((prefix + local, role) for local, role in facts.get("roles", {}).items())
            self.replaced_names.update((prefix + local, why) for local, why in facts.get("replaced", {}).items())
        reasons = tables.get("reasons", [])
        self.migrated_modules: Dict[str, str] = _numbered(tables.get("migrated", {}), reasons)
        self.npu_modules: Dict[str, str] = _numbered(tables.get("npu", {}), reasons)
        self.graph_modules: Dict[str, str] = _numbered(tables.get("graph", {}), reasons)
        self.class_precisions: Dict[str, List[str]] = tables.get("class_precision", {})
        self.function_precisions: Dict[str, List[str]] = tables.get("function_precision", {})
        self.config: Dict[str, Dict[str, Any]] = tables.get("config", {})
        self.aliases: Dict[str, str] = tables.get("aliases", {})  # re-exported name -> defining name
        self.all_migrated: bool = tables.get("all_migrated", False)
        self.builder: Optional["_Builder"] = None  # set by build(): what with_tree_facts() reuses

    # ------------------------------------------------------------------ queries
    def module_of(self, relpath: str) -> Optional[str]:
        mid = module_id(relpath)
        return mid if mid in self.module_ids else None

    def canonical(self, qualname: str) -> str:
        return self.aliases.get(qualname, qualname)

    def class_kind(self, qualname: str) -> Optional[str]:
        qualname = self.canonical(qualname)
        return self.kinds.get(qualname) or framework_kind(qualname)

    def function_role(self, qualname: str) -> Optional[List[str]]:
        return self.roles.get(qualname)

    def module_facts(self, module: str) -> Dict[str, Any]:
        """What the project says about one module's own functions and classes, in one answer:
        {"roles": {local qualname: [role, reason]}, "replaced": {local qualname: reason}}."""
        if self._by_module is None:
            self._by_module = {}
            for table, key in ((self.roles, "roles"), (self.replaced_names, "replaced")):
                for qual, value in table.items():
                    mid, local = self._split_local(qual)
                    if mid is not None:
                        self._by_module.setdefault(mid, {"roles": {}, "replaced": {}})[key][local] = value
        return self._by_module.get(module, {"roles": {}, "replaced": {}})

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

    def migrated(self, module: str) -> Optional[str]:
        if self.all_migrated:
            return "`runtime-migration = true` in the configuration"
        return self.migrated_modules.get(module)

    def npu(self, module: str) -> Optional[str]:
        """Why a module that is not NPU code on its own runs on the NPU (None: the project does not show it)."""
        return self.npu_modules.get(module)

    def graph_mode(self, module: str) -> Optional[str]:
        """Why a module that sets no MindSpore mode itself runs in GRAPH_MODE (None: not shown)."""
        return self.graph_modules.get(module)

    def replaced(self, qualname: str) -> Optional[str]:
        return self.replaced_names.get(qualname)

    def class_precision(self, qualname: str) -> Optional[List[str]]:
        return self.class_precisions.get(self.canonical(qualname))

    def function_precision(self, qualname: str) -> Optional[List[str]]:
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

    def tables(self) -> Dict[str, Any]:
        """The model as plain JSON-able tables: facts per module, reasons of module contexts stored once."""
        self.module_facts("")  # (fills the per-module index)
        reasons: List[str] = []
        numbers: Dict[str, int] = {}
        for reason in (*self.migrated_modules.values(), *self.npu_modules.values(), *self.graph_modules.values()):
            if reason not in numbers:
                numbers[reason] = len(reasons)
                reasons.append(reason)
        return {"schema": MODEL_SCHEMA, "module_ids": sorted(self.module_ids), "kinds": self.kinds,
                "facts": self._by_module, "reasons": reasons,
                "migrated": {mid: numbers[r] for mid, r in self.migrated_modules.items()},
                "npu": {mid: numbers[r] for mid, r in self.npu_modules.items()},
                "graph": {mid: numbers[r] for mid, r in self.graph_modules.items()},
                "class_precision": self.class_precisions, "function_precision": self.function_precisions,
                "config": self.config, "aliases": self.aliases, "all_migrated": self.all_migrated}

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
        builder = _Builder(files, runtime_migration, tuple(migrating_modules), reuse)
        del reuse  # (what the new builder did not take goes now, not after the build)
        return builder.build()

    @classmethod
    def prepare(cls, rels: Iterable[str], runtime_migration: Any = "auto",
                migrating_modules: Iterable[str] = ()) -> "ProjectModel":
        """An empty model whose builder knows the project's files by name only, to `learn` their summaries
        one by one (while waiting for the rest) and serve as `previous` to the build that follows."""
        placeholder: Summary = {}
        model = cls()
        model.builder = _Builder(dict.fromkeys(rels, placeholder), runtime_migration, tuple(migrating_modules))
        return model

    def learn(self, rel: str, summary: Summary) -> None:
        """Make the lookups that depend on one file's summary alone (its imports' bindings and the modules
        they load), for a model made by `prepare`."""
        builder = self.builder
        if builder is not None and rel in builder.r.files:
            builder.learn(rel, summary)

    def own_step_roles(self, rel: str, summary: Summary) -> Dict[str, Any]:
        """The roles (qualname -> [role, reason]) that the step loops of one file (`summary`, read from its
        tree) give, for a model built while only its text was known: what `with_tree_facts` would add if no
        other file changed. {} when this model was not built here (loaded from the store)."""
        builder = self.builder
        return builder.own_step_roles(rel, summary) if builder is not None else {}

    def with_tree_facts(self, changed: Mapping[str, Summary]) -> Optional["ProjectModel"]:
        """The model once `changed` files gained only the facts that need a syntax tree (step loops,
        precision decisions): classes, patches, migration and configuration stand, roles and precisions
        are worked out again. None when this model was not built here (loaded from the store)."""
        builder = self.builder
        return builder.refresh(changed) if builder is not None else None


class _Builder:
    """Builds a ProjectModel; kept by it (with its lookups) for refreshes and the next build of a run."""

    def __init__(self, files: Mapping[str, Summary], runtime_migration: Any, extra: Tuple[str, ...],
                 reuse: Optional["_Builder"] = None) -> None:
        self.runtime_migration = runtime_migration
        self.extra = extra
        self.migrating_roots = {known.partition(".")[0] for known in MIGRATING_MODULES + extra}
        self.model = ProjectModel()
        self.kinds: Dict[str, Optional[str]] = {}
        # module id -> what importing it imports: without its functions' imports ([0]), with them ([1])
        self._imports_memo: Tuple[Dict[str, Tuple[str, ...]], ...] = ({}, {})
        self._parent_memo: Dict[str, Tuple[str, ...]] = {}
        self.hot_roles: Optional[Dict[str, List[str]]] = None  # the hot part of the roles, once found
        if (reuse is not None and (reuse.runtime_migration, reuse.extra) == (runtime_migration, extra)
                and reuse.r.files.keys() == files.keys()):
            self.r = reuse.r  # the same files: module names and import lookups stand
            changed = self.r.take(files)
            self._imports_memo = tuple({mid: found for mid, found in memo.items() if mid not in changed}
                                       for memo in reuse._imports_memo)
            self._parent_memo = reuse._parent_memo
        else:
            self.r = _Resolver(files)

    def summary(self, mid: str) -> Summary:
        return self.r.files[self.r.by_id[mid]]

    def learn(self, rel: str, summary: Summary) -> None:
        """See ProjectModel.learn."""
        self.r.put(rel, summary)
        mid = module_id(rel)
        if self.r.by_id.get(mid) == rel:
            self.r.bindings(mid)
            self._imported_modules(mid, True)
            self._imported_modules(mid, False)

    def path(self, mid: str) -> str:
        return self.r.by_id.get(mid, mid)

    def build(self) -> ProjectModel:
        m = self.model
        m.module_ids = self.r.by_id.keys()  # (a set-like view: no copy of 20,000 names)
        for mid in self.r.by_id:
            for name in self.summary(mid).get("classes", ()):
                qual = f"{mid}.{name}"
                kind = self.class_kind(qual)
                if kind:
                    m.kinds[qual] = kind
        self.kinds = {}  # (a memo for the hierarchy walk above: every class of the project, mostly None)
        self._patches()
        self._roles()
        self._migration()
        self._entry_contexts()
        self._precision()
        self._config()
        m.builder = self
        return m

    def refresh(self, changed: Mapping[str, Summary]) -> ProjectModel:
        """See ProjectModel.with_tree_facts: the parts that do not use tree facts are kept."""
        self.r.files.update(changed)  # (only tree facts differ: the resolver's lookups stand)
        old = self.model
        m = self.model = ProjectModel()
        m.module_ids, m.kinds, m.replaced_names, m.aliases = old.module_ids, old.kinds, old.replaced_names, old.aliases
        m.migrated_modules, m.all_migrated, m.config = old.migrated_modules, old.all_migrated, old.config
        m.npu_modules, m.graph_modules = old.npu_modules, old.graph_modules  # (entry contexts: text facts)
        self._roles(self.hot_roles)
        self._precision()
        m.builder = self
        old.builder = None
        return m

    # --------------------------------------------------------------- classes
    def class_kind(self, qual: str, depth: int = 0) -> Optional[str]:
        if qual in self.kinds:
            return self.kinds[qual]
        self.kinds[qual] = None  # a cycle in the hierarchy ends here
        kind = None
        mid, _, name = qual.rpartition(".")
        mid = self.r.ids.get(mid, mid)  # (the memos that follow keep one string per module id)
        info = self.summary(mid).get("classes", {}).get(name) if mid in self.r.by_id else None
        if info is not None and depth < HIERARCHY_DEPTH:
            for base in info[1]:
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
        if project:
            split = self.r.split(name)
            if split is None:
                return None
            target_mid, attr = split
            if attr and "." not in attr:
                full = f"{target_mid}.{attr}"
                if full != name:
                    self.model.aliases[name] = full
                return self.class_kind(full, depth + 1)
            return None
        return framework_kind(name)

    def is_test(self, mid: str, owner: str = "") -> bool:
        """Test or benchmark code (`test_*.py` / `*_test.py`, functions named `test*` / `bench*`): it makes
        no function of the project hot or per-step."""
        base = _basename(self.path(mid))
        if base.startswith("test_") or base.endswith("_test.py"):
            return True
        return any(part.lower().startswith(TEST_PREFIXES) for part in owner.split(".")[-1:] if part)

    def hot_methods(self) -> Iterable[Tuple[str, str]]:
        """(method qualname, class qualname) of every forward/construct of a model class (not in tests)."""
        for qual, kind in self.model.kinds.items():
            mid, _, name = qual.rpartition(".")
            if self.is_test(mid):
                continue
            methods = self.summary(mid)["classes"][name][2]
            for method in HOT_METHODS[kind]:
                if method in methods:
                    yield f"{qual}.{method}", qual

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
        summary = self.summary(target_mid)
        if attr in summary.get("defs", ()):
            return f"{target_mid}.{attr}"
        return None

    def constructor(self, mid: str, dotted: str) -> Optional[str]:
        """The `__init__` (qualname) that a call of a project class `dotted` in `mid` runs."""
        resolved = self.r.resolve(mid, dotted)
        if resolved is None or not resolved[1]:
            return None
        split = self.r.split(resolved[0])
        if split is None or not split[1] or "." in split[1] or not self._is_class(f"{split[0]}.{split[1]}"):
            return None
        return self.method(f"{split[0]}.{split[1]}", "__init__")

    def method(self, cls_qual: str, name: str, depth: int = 0) -> Optional[str]:
        """`cls.name` looked up through the project's base classes."""
        mid, _, cls = cls_qual.rpartition(".")
        if mid not in self.r.by_id or depth > HIERARCHY_DEPTH:
            return None
        summary = self.summary(mid)
        if f"{cls}.{name}" in summary.get("defs", ()):
            return f"{cls_qual}.{name}"
        info = summary.get("classes", {}).get(cls)
        for base in (info[1] if info else ()):
            resolved = self.r.resolve(mid, base)
            if resolved is None or not resolved[1]:
                continue
            split = self.r.split(resolved[0])
            if split and split[1] and "." not in split[1]:
                found = self.method(f"{split[0]}.{split[1]}", name, depth + 1)
                if found:
                    return found
        return None

    def calls_of(self, qual: str) -> List[Tuple[str, str]]:
        """(callee qualname, call text) of a project function."""
        split = self.r.split(qual)
        if split is None:
            return []
        mid, owner = split
        info = self.summary(mid).get("defs", {}).get(owner)
        if info is None:
            return []
        out = []
        for name in info[2]:
            callee = self.function(mid, name, owner)
            if callee is not None and callee != qual:
                out.append((callee, name))
        return out

    def _label(self, qual: str) -> str:
        split = self.r.split(qual)
        if split is None:
            return qual
        mid, owner = split
        return f"`{owner}` in {_where(self.path(mid), 'd', owner)}"

    def _roles(self, hot_roles: Optional[Dict[str, List[str]]] = None) -> None:
        """"hot" for what the forwards of model classes call, "step" for what step loops call (to CALL_DEPTH).
        `hot_roles`: the hot part as this builder found it before (a refresh: only tree facts changed, and
        the hot part reads none)."""
        if hot_roles is None:
            self._find_hot_roles()
            self.hot_roles = dict(self.model.roles)
        else:
            self.model.roles.update(hot_roles)
        step_roots: List[Tuple[str, str, int]] = []
        for mid in sorted(self.r.by_id):
            step_roots += self._step_roots(mid, self.summary(mid), self.model.roles, ())
        self._propagate_from(step_roots, "step")

    def _find_hot_roles(self) -> None:
        self.hot_set = {q for q, _ in self.hot_methods()}
        hot_roots = [(q, "", 0) for q in sorted(self.hot_set)]
        # forwards assigned by a monkey-patch are hot methods too
        hot_roots += [(q, reason, 0) for q, reason in sorted(self.assigned_forwards.items())]
        for qual, reason, _ in hot_roots:
            if reason:
                self.model.roles[qual] = ["hot", reason]
        queue_roots: List[Tuple[str, str, int]] = []
        for qual, _, _ in hot_roots:
            queue_roots.append((qual, "", 0))
        self._propagate_from(queue_roots, "hot")

    def _step_roots(self, mid: str, summary: Summary, roles: Dict[str, List[str]],
                    known: Container[str]) -> List[Tuple[str, str, int]]:
        """Give the project functions that a module's step loops call the role "step" (in `roles`, unless
        `known` or `roles` has them); the roots to propagate from."""
        roots: List[Tuple[str, str, int]] = []
        for number, (owner, _line, calls) in enumerate(summary.get("steps", ())):
            if self.is_test(mid, owner):
                continue
            where = _where(self.path(mid), "s", number)
            for name in sorted(calls):
                callee = self.function(mid, name, owner)
                if callee is not None and callee not in self.hot_set and callee not in known and callee not in roles:
                    roles[callee] = ["step", f"the step loop in {where} calls it"]
                    roots.append((callee, "", 1))
        return roots

    def own_step_roles(self, rel: str, summary: Summary) -> Dict[str, List[str]]:
        """See ProjectModel.own_step_roles: `_roles`' step part for one file's loops, on top of the roles
        the model has."""
        mid = module_id(rel)
        if self.r.by_id.get(mid) != rel or not summary.get("steps"):
            return {}
        found: Dict[str, List[str]] = {}
        known = self.model.roles
        self._propagate_from(self._step_roots(mid, summary, found, known), "step", found, known)
        return found

    def _propagate_from(self, roots: List[Tuple[str, str, int]], role: str,
                        roles: Optional[Dict[str, List[str]]] = None, known: Container[str] = ()) -> None:
        """Give the functions called from `roots` (to CALL_DEPTH) the `role`, in `roles` (default: the
        model's), unless `known` or `roles` has them."""
        roles = self.model.roles if roles is None else roles
        queue = deque(roots)
        while queue:
            qual, _reason, depth = queue.popleft()
            if depth >= CALL_DEPTH:
                continue
            caller = None
            for callee, _name in self.calls_of(qual):
                if callee in roles or callee in known or callee in self.hot_set:
                    continue
                caller = caller or self._label(qual)
                roles[callee] = [role, f"{caller} calls it"]
                queue.append((callee, "", depth + 1))

    # --------------------------------------------------------------- monkey-patches
    def _patches(self) -> None:
        self.assigned_forwards: Dict[str, str] = {}
        replaced = self.model.replaced_names
        for mid in sorted(self.r.by_id):
            for number, (target, value, _line) in enumerate(self.summary(mid).get("patches", ())):
                where = _where(self.path(mid), "p", number)
                head, _, attr = target.rpartition(".")
                owner = self._patched_owner(mid, head)
                new = self.function(mid, value)
                if attr in ("forward", "construct") and new is not None:
                    self.assigned_forwards[new] = f"it is assigned as `{target}` in {where}"
                if owner is not None:
                    original = f"{owner}.{attr}"
                    if self.r.split(original) is not None and (
                            self._is_def(original) or self._is_class(original)):
                        replaced.setdefault(original, f"`{target}` is replaced by `{value}` in {where}")

    def _patched_owner(self, mid: str, head: str) -> Optional[str]:
        """The project class or module a patch target's head names (`Qwen3RMSNorm`, `modeling.mod`)."""
        resolved = self.r.resolve(mid, head)
        if resolved is None:  # a string target ('pkg.mod.Class.forward')
            found = self.r.split(head)
            if found is None:
                return None
            return f"{found[0]}.{found[1]}" if found[1] else found[0]
        if not resolved[1]:
            return None
        split = self.r.split(resolved[0])
        if split is None:
            return None
        return f"{split[0]}.{split[1]}" if split[1] else split[0]

    def _is_def(self, qual: str) -> bool:
        split = self.r.split(qual)
        return split is not None and split[1] in self.summary(split[0]).get("defs", ())

    def _is_class(self, qual: str) -> bool:
        split = self.r.split(qual)
        return split is not None and split[1] in self.summary(split[0]).get("classes", ())

    # --------------------------------------------------------------- migration
    def _imported_modules(self, mid: str, function_level: bool) -> Tuple[str, ...]:
        """The project modules that importing `mid` (and running its functions) imports, each once."""
        memo = self._imports_memo[function_level]
        found = memo.get(mid)
        if found is None:
            ids = self.r.ids
            found = memo[mid] = tuple({ids[m]: None for m in self._find_imported(mid, function_level)})
        return found

    def _find_imported(self, mid: str, function_level: bool) -> Iterable[str]:
        for module, name, _asname, level, _line, in_func in self.summary(mid).get("imports", ()):
            if in_func and not function_level:
                continue
            if level:
                base = self.r.relative_base(mid, level)
                if base is None:
                    continue
                full = f"{base}.{module}" if base and module else (base or module)
                candidates = [full] + ([f"{full}.{name}"] if name and name != "*" else [])
                for candidate in candidates:
                    if candidate in self.r.by_id:
                        yield candidate
                        yield from self._parents(candidate)
            else:
                found = self.r.find_module(module, mid)
                if found is not None:
                    yield found
                    yield from self._parents(found)
                    if name and name != "*":
                        sub = self.r.find_module(f"{module}.{name}", mid)
                        if sub is not None:
                            yield sub

    def _parents(self, mid: str) -> Tuple[str, ...]:
        """The package `__init__` modules that importing `mid` runs first."""
        parents = self._parent_memo.get(mid)
        if parents is None:
            parts = mid.split(".")
            parents = self._parent_memo[mid] = tuple(
                self.r.ids[p] for p in (".".join(parts[:i]) for i in range(1, len(parts)))
                if p in self.r.by_id and self.r.by_id[p].endswith("__init__.py"))
        return parents

    def _direct_migration(self, mid: str, function_level: bool) -> Optional[str]:
        roots = self.migrating_roots
        for number, (module, name, _asname, level, _line, in_func) in enumerate(self.summary(mid).get("imports", ())):
            if level or (in_func and not function_level) or module.partition(".")[0] not in roots:
                continue
            full = f"{module}.{name}" if name and name != "*" else module
            known = migrating_module(full, self.extra) or migrating_module(module, self.extra)
            if known:
                return f"{_where(self.path(mid), 'i', number)} imports `{known}`"
        return None

    def _applies_at_import(self, mid: str, memo: Dict[str, Optional[str]]) -> Optional[str]:
        """Why importing `mid` applies the migration (module-level imports, transitively), or None. A depth-first
        walk with its own stack (an import chain may be far longer than Python's recursion limit): a module's
        reason is its own import of the migration, else the first of its imports that has one."""
        if mid in memo:
            return memo[mid]
        memo[mid] = self._direct_migration(mid, False)  # (None while walked: circular imports end there)
        if memo[mid] is not None:
            return memo[mid]
        done = object()
        stack = [iter(self._imported_modules(mid, False))]
        path = [mid]
        while stack:
            other = next(stack[-1], done)
            if other is done:  # no import of path[-1] applies it
                stack.pop()
                path.pop()
                continue
            if other not in memo:
                memo[other] = self._direct_migration(other, False)
                if memo[other] is None:
                    stack.append(iter(self._imported_modules(other, False)))
                    path.append(other)
                    continue
            why = memo[other]
            if why:
                for walked in path:  # each module on the path imports the next one, which applies it
                    memo[walked] = why
                break
        return memo[mid]

    def _migration(self) -> None:
        setting = self.runtime_migration
        if setting is True:
            self.model.all_migrated = True
            return
        if setting is False:
            return
        memo: Dict[str, Optional[str]] = {}
        migrated = self.model.migrated_modules
        queue: deque = deque()
        for mid in sorted(self.r.by_id):
            summary = self.summary(mid)
            if not summary.get("entry"):
                continue
            reason = self._direct_migration(mid, True)
            if reason is None:
                for other in self._imported_modules(mid, True):
                    if self._applies_at_import(other, memo):
                        reason = memo[other]
                        break
            if reason is not None:
                entry = self.path(mid)
                migrated.setdefault(mid, f"it applies it: {reason}")
                queue.append((mid, f"the entry script `{entry}` runs it after {reason}"))
        while queue:
            mid, reason = queue.popleft()
            for other in self._imported_modules(mid, True):
                if other not in migrated:
                    migrated[other] = reason
                    queue.append((other, reason))
        for mid in self.r.by_id:  # importing a module runs its packages' __init__ first
            if mid in migrated:
                continue
            for parent in self._parents(mid):
                why = self._applies_at_import(parent, memo)
                if why:
                    migrated[mid] = f"its package `{parent}` applies it ({why})"
                    break

    # --------------------------------------------------------------- what entry scripts decide
    def _entry_contexts(self) -> None:
        """How entry scripts run the modules they import. NPU: an entry that is NPU code and uses no CUDA
        device runs its imports on the NPU (an entry that uses both is multi-backend and decides nothing);
        a GPU entry (CUDA, no NPU context) shares what it imports with GPU code. MindSpore GRAPH_MODE: an
        entry that sets it compiles the cells it imports; one that sets PyNative (or a configurable mode)
        shares them with PyNative runs."""
        npu, gpu, graph, eager = [], [], [], []
        for mid in sorted(self.r.by_id):
            summary = self.summary(mid)
            if not summary.get("entry"):
                continue
            if summary.get("npu") and not summary.get("gpu"):
                npu.append(mid)
            elif summary.get("gpu") and not summary.get("npu"):
                gpu.append(mid)
            mode = summary.get("mode")
            if mode == "graph":
                graph.append(mid)
            elif mode is not None:
                eager.append(mid)
        self._spread(npu, gpu, "npu", "the NPU entry script `{}` imports it", self.model.npu_modules)
        self._spread(graph, eager, "mode", "the entry script `{}` sets GRAPH_MODE and imports it",
                     self.model.graph_modules)

    def _spread(self, givers: List[str], blockers: List[str], own: str, why: str, table: Dict[str, str]) -> None:
        """Record in `table`, for each module reached by imports (module- and function-level, transitively)
        from a `givers` entry but from no `blockers` entry, the reason `why` (formatted with the entry's path),
        unless the module decides for itself (its summary's `own` field)."""
        if not givers:
            return
        shared = self._reached(blockers)
        seen = set(givers)
        queue = deque((mid, why.format(self.path(mid))) for mid in givers)
        while queue:
            mid, reason = queue.popleft()
            for other in self._imported_modules(mid, True):
                if other in seen or other in shared:
                    continue
                seen.add(other)
                if not self.summary(other).get(own):
                    table[other] = reason
                queue.append((other, reason))

    def _reached(self, starts: List[str]) -> Set[str]:
        """Modules reached by imports (module- and function-level, transitively) from `starts`."""
        seen = set(starts)
        todo = list(starts)
        while todo:
            for other in self._imported_modules(todo.pop(), True):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    # --------------------------------------------------------------- precision
    def _precision(self) -> None:
        by_class: Dict[str, List[Tuple[str, str]]] = {}
        for mid in sorted(self.r.by_id):
            summary = self.summary(mid)
            for number, (cls_text, dtype, _line, how, _owner) in enumerate(summary.get("models", ())):
                resolved = self.r.resolve(mid, cls_text)
                if resolved is None or not resolved[1]:
                    continue
                split = self.r.split(resolved[0])
                if split is None or not split[1] or "." in split[1]:
                    continue
                reason = f"{how} in {_where(self.path(mid), 'm', number)}"
                self._precision_down(f"{split[0]}.{split[1]}", dtype, reason, by_class, 0, set())
            for number, (callee, dtype, _line, how) in enumerate(summary.get("amp_calls", ())):
                target = self.function(mid, callee) or self.constructor(mid, callee)
                known = self.model.function_precisions.get(target) if target is not None else None
                if target is not None and (known is None or (dtype == "bf16" and known[0] != "bf16")):
                    # (bf16 wins: what only fp32/fp16 accept, such as the fused optimizers, must know it)
                    self.model.function_precisions[target] = [dtype, f"{how} in {_where(self.path(mid), 'a', number)}"]
        for qual, decisions in by_class.items():
            low = [d for d in decisions if d[0] != "fp32"]
            self.model.class_precisions[qual] = list(low[0] if low else decisions[0])

    def _precision_down(self, qual: str, dtype: str, reason: str, by_class: Dict[str, List[Tuple[str, str]]],
                        depth: int, seen: Set[str]) -> None:
        """A trained model class and the sub-model classes it constructs run in the same precision."""
        if qual in seen or depth > PRECISION_DEPTH:
            return
        seen.add(qual)
        by_class.setdefault(qual, []).append((dtype, reason))
        split = self.r.split(qual)
        if split is None:
            return
        mid, cls = split
        defs = self.summary(mid).get("defs", {})
        for method in ("__init__", "build", "_build"):
            info = defs.get(f"{cls}.{method}")
            for name in (info[2] if info else ()):
                resolved = self.r.resolve(mid, name)
                if resolved is None or not resolved[1]:
                    continue
                sub = self.r.split(resolved[0])
                if sub and sub[1] and "." not in sub[1] and self._is_class(f"{sub[0]}.{sub[1]}"):
                    self._precision_down(f"{sub[0]}.{sub[1]}", dtype, reason, by_class, depth + 1, seen)

    # --------------------------------------------------------------- configuration
    def _config(self) -> None:
        for mid in sorted(self.r.by_id):
            for cls, values in self.summary(mid).get("config", {}).items():
                self.model.config[f"{mid}.{cls}"] = values
