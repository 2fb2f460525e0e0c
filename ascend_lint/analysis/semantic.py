"""The semantic model of one file, kept up to date by the walker and queried by rules.

What it knows: import aliases (qualified names), module constants, local classes and functions,
the enclosing class/function/loop/if/with stack, hot scopes (forward/construct/autograd methods),
step loops (steps.py), simple local dataflow (the last value bound to a name in the current function:
scopes.py), whether the file is NPU code, and what the project says about it (reasons.py, through a
questions.ProjectQuestions view). Queries that need to look ahead (is this loop a step loop?) scan only
the subtree asked about, once, and are cached.
"""
from __future__ import annotations

import ast
from typing import Callable, Dict, List, Optional, Set, Tuple

from .data import HOT_METHODS, MIGRATED_PACKAGES, MIGRATING_MODULES, framework_kind
from .imports import import_facts, optional_imports
from .nodes import (CHILD_FIELDS, FUNC_TYPES, LEAF_TYPES, LOOP_TYPES, SKIP_FIELDS,  # noqa: F401
                    call_text, child_fields, find_nodes, top_level_statements)
from .factlines import might_step
from .positions import SourcePositions
from .questions import NULL_VIEW, ProjectQuestions
from .reasons import ProjectQueries
from .records import PER_FORWARD, PER_STEP
from .scopes import Binding, Scope, ScopeQueries, project_relative  # noqa: F401  (rules import them from here)
from .steps import STEP_COUNTER_RE, TRAIN_STEP_CLASS_RE, StepLoops, is_step_call, receiver_name  # noqa: F401
from .textfacts import npu_context
from .placement import Place, Placement
# Pure AST helpers live in ascend_lint.astutil; the old names stay importable from here for one step.
from ..astutil import argument, constant, has_star_args, keyword, method_name  # noqa: F401

# Two spellings of one module: after `import torch_npu`, torch.npu is torch_npu.npu.
CANONICAL_PREFIXES: Tuple[Tuple[str, str], ...] = (
    ("torch_npu.npu.", "torch.npu."),
    ("mindspore.ops.operations.", "mindspore.ops."),
    ("mindspore.common.dtype.", "mindspore.dtype."),
    ("mindspore.train.", "mindspore."),
    ("mindspore.common.tensor.", "mindspore."),
    ("torch.nn.modules.module.", "torch.nn."),
)
# Run-time migration (modules whose import applies transfer_to_npu, packages that always run migrated) and
# the framework bases that make a class a model: catalogue data in data.py.
RUNTIME_MIGRATION_MODULES = MIGRATING_MODULES
RUNTIME_MIGRATION_PACKAGES = MIGRATED_PACKAGES
_CANONICAL_STARTS = tuple(prefix for prefix, _ in CANONICAL_PREFIXES)


def canonical(name: str) -> str:
    if not name.startswith(_CANONICAL_STARTS):  # the common case, tested in one C call
        return "torch.npu" if name == "torch_npu.npu" else name
    for prefix, repl in CANONICAL_PREFIXES:
        if name.startswith(prefix):
            return repl + name[len(prefix):]
    if name == "torch_npu.npu":
        return "torch.npu"
    return name


class FileContext(ProjectQueries, ScopeQueries, StepLoops, SourcePositions):
    """Everything a rule may ask about the file and about where the walk currently is."""

    def __init__(self, path: str, text: str, tree: ast.Module, target: str = "auto",
                 root: Optional[str] = None, occurs: Optional[Callable[[str], bool]] = None,
                 project: ProjectQuestions = NULL_VIEW, migrating_modules: Tuple[str, ...] = ()) -> None:
        """`occurs(text)`: does the file hold `text`? (the engine's pre-filter answers it for free)"""
        self._occurs = occurs if occurs is not None else text.__contains__
        self._imports_memo: Dict[Tuple[str, int], bool] = {}
        self.path = path
        self.root = root  # the project root: where the path-based "not training code" signals start
        self.text = text
        self.tree = tree
        self.target = target
        self.aliases: Dict[str, Optional[str]] = {}
        self.relative_aliases: Dict[str, str] = {}  # relative imports resolved with the module name
        self.imported_modules: Set[str] = set()
        self._import_roots: Set[str] = set()  # their first names (`imports` asks about few of them)
        self.constants: Dict[str, ast.expr] = {}
        self.local_functions: Dict[str, ast.AST] = {}
        self.local_classes: Dict[str, Optional[str]] = {}  # name -> class kind
        self.scopes: List[Scope] = [Scope(tree, "module")]
        self.loops: List[ast.AST] = []
        self.ifs: List[Tuple[ast.If, bool]] = []  # (if node, in its else branch)
        self.withs: List[ast.AST] = []
        self.stack: List[ast.AST] = []  # nodes being visited, innermost last
        self._lines: Optional[List[str]] = None
        self._lines_with_ends: Optional[List[str]] = None  # (files with `\r`: lines keeping their endings)
        self._import_facts = None  # computed on demand (import_status), only when a fix is built
        self._step_cache: Dict[object, bool] = {}
        self._step_callees: Optional[Set[str]] = None
        self._file_role: Optional[Tuple[Optional[str]]] = None
        self._mode: Optional[Tuple[Optional[str]]] = None
        self._scope_roles: Dict[int, Optional[str]] = {}
        self._role_spans: Optional[List[Tuple[int, int, str]]] = None
        self._local_calls: Optional[Set[str]] = None
        self._optional: Optional[Dict[str, Tuple[str, ...]]] = None
        self._calls: Optional[List[ast.AST]] = None
        self._placement: Optional[Placement] = None
        self._runs_steps: Optional[bool] = None
        self._has_cr: Optional[bool] = None  # does the text hold `\r` (asked once: a scan of the whole text)
        self.project = project
        self.module: Optional[str] = project.module
        self.migrating_modules = MIGRATING_MODULES + tuple(migrating_modules)
        self._facts = None
        self._prescan()
        self._own_npu = target == "npu" or npu_context(self.imported_modules, text, self._occurs)
        self.npu = self._npu_code()
        self.auto_migrated = self._migrated()

    def occurs(self, text: str) -> bool:
        """Does the file's text hold `text`? (The engine's pre-filter answers it, each text once.)"""
        return self._occurs(text)

    def attach(self, project: ProjectQuestions) -> None:
        """Answer from this project view from now on (before the walk)."""
        self.project = project
        self.module = project.module
        self._facts = None
        self.relative_aliases.clear()
        for stmt in top_level_statements(self.tree.body):
            if isinstance(stmt, ast.ImportFrom) and stmt.level:
                self.record_import(stmt)
        self.npu = self._npu_code()
        self.auto_migrated = self._migrated()

    def _migrated(self) -> bool:
        """Does this file run under torch_npu's run-time migration: it imports a migrating module, lies in
        a package that only runs migrated, or (project model) an entry that applies it imports it?"""
        if any(self.imports(m) for m in self.migrating_modules):
            return True
        if any(part in MIGRATED_PACKAGES for part in self.path.replace("\\", "/").split("/")[:-1]):
            return True
        return self.project.migrated() is not None

    def _prescan(self) -> None:
        """Imports, module constants and local functions/classes of the top level, without a walk."""
        counts: Dict[str, int] = {}
        for stmt in top_level_statements(self.tree.body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.record_import(stmt)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                counts[name] = counts.get(name, 0) + 1
                self.constants[name] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                counts[stmt.target.id] = counts.get(stmt.target.id, 0) + 1
                self.constants[stmt.target.id] = stmt.value
            elif isinstance(stmt, FUNC_TYPES):
                self.local_functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                for item in stmt.body:
                    if isinstance(item, FUNC_TYPES):
                        self.local_functions.setdefault(item.name, item)
        for name, count in counts.items():
            if count > 1:
                del self.constants[name]

    def _npu_code(self) -> bool:
        """NPU code: on its own (`npu_context`, or `--target npu`), or (project model) run by an NPU script."""
        return self._own_npu or self.project.npu() is not None

    def record_import(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self._add_module(alias.name)
                if alias.asname:
                    self.aliases[alias.asname] = canonical(alias.name)
                else:
                    root = alias.name.split(".", 1)[0]
                    self.aliases[root] = root
        elif isinstance(stmt, ast.ImportFrom):
            self._record_from_import(stmt)

    def _record_from_import(self, stmt: ast.ImportFrom) -> None:
        module = ("." * stmt.level) + (stmt.module or "")
        if not stmt.level:
            self._add_module(module)
        base = self._relative_base(stmt.level) if stmt.level else None
        source = ".".join(p for p in (base, stmt.module or "") if p) if base is not None else ""
        for alias in stmt.names:
            if alias.name == "*":
                continue
            full = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
            if not stmt.level:
                self._add_module(full)
            self.aliases[alias.asname or alias.name] = canonical(full) if not stmt.level else None
            if base is not None:
                self.relative_aliases[alias.asname or alias.name] = f"{source}.{alias.name}" if source else alias.name

    def _add_module(self, module: str) -> None:
        """Note `module` (a module, or `module.name` imported from it) as imported."""
        self.imported_modules.add(module)
        self._import_roots.add(module.partition(".")[0])

    def _relative_base(self, level: int) -> Optional[str]:
        """The package a relative import of `level` dots starts from (needs the module name)."""
        if self.module is None:
            return None
        parts = self.module.split(".") if self.module else []
        if not self.path.replace("\\", "/").endswith("/__init__.py") and self.path != "__init__.py":
            parts = parts[:-1]
        if level - 1 > len(parts):
            return None
        return ".".join(parts[: len(parts) - (level - 1)])

    def qualname(self, node: ast.AST) -> Optional[str]:
        """`F.silu` -> 'torch.nn.functional.silu' through the file's imports; None if unknown."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id)
        if base is None or self.is_local(node.id):
            return None
        if not parts:
            return base
        parts.reverse()
        return canonical(base + "." + ".".join(parts))

    def project_name(self, node: ast.AST) -> Optional[str]:
        """The absolute name of a Name/Attribute chain for the project model: through absolute imports
        (like `qualname`), relative imports, or this module's own top-level classes and functions."""
        name = self.qualname(node)
        if name is not None:
            return name
        text = call_text(node)
        if text is None:
            return None
        root, _, rest = text.partition(".")
        if self.is_local(root):
            return None
        base = self.relative_aliases.get(root)
        if base is None and self.module is not None and (
                root in self.local_classes or root in self._top_level_names()):
            base = f"{self.module}.{root}" if self.module else root
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def _top_level_names(self) -> Set[str]:
        return {s.name for s in self.tree.body if isinstance(s, (ast.ClassDef,) + FUNC_TYPES)}

    def call_name(self, call: ast.AST) -> Optional[str]:
        return self.qualname(call.func) if isinstance(call, ast.Call) else None

    def is_local(self, name: str) -> bool:
        """A name bound in an enclosing function (parameter or assignment)."""
        for scope in reversed(self.scopes):
            if scope.kind == "function" and (name in scope.params or name in scope.bindings):
                return True
        return False

    def imports(self, prefix: str) -> bool:
        """Does the file import `prefix` or a submodule/name under it?"""
        key = (prefix, len(self.imported_modules))  # (the set only grows)
        found = self._imports_memo.get(key)
        if found is None:
            dotted = prefix + "."
            found = self._imports_memo[key] = prefix.partition(".")[0] in self._import_roots and any(
                m == prefix or m.startswith(dotted) for m in self.imported_modules)
        return found

    def import_status(self, module: str) -> str:
        """How the file imports `module` (or something under it), as the fixer sees it (fix_imports):
        'module' when a statement of the module body itself imports it, so it is loaded whenever the file
        runs; 'guarded' when it is imported only under if/try/with or inside a function or class (a fix
        must not make the rest of the file depend on it); '' when the file does not import it."""
        if self._import_facts is None:
            self._import_facts = import_facts(self.tree)
        facts = self._import_facts
        return "module" if module in facts.loaded else "guarded" if module in facts.guarded else ""

    def alias_for(self, qualified: str) -> Optional[str]:
        """The local spelling the file already has for a module (`import torch_npu as tnpu` -> 'tnpu')."""
        for local, full in self.aliases.items():
            if full == qualified:
                return local
        return None

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    @property
    def function(self) -> Optional[Scope]:
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return scope
        return None

    @property
    def class_scope(self) -> Optional[Scope]:
        for scope in reversed(self.scopes):
            if scope.kind == "class":
                return scope
        return None

    @property
    def parent(self) -> Optional[ast.AST]:
        return self.stack[-2] if len(self.stack) > 1 else None

    def in_hot_method(self) -> bool:
        """Inside forward/construct of a Module/Cell, or forward/backward of an autograd Function."""
        return any(s.hot for s in self.scopes)

    def hot_method(self) -> Optional[Scope]:
        for scope in self.scopes:
            if scope.hot:
                return scope
        return None

    def class_kind(self, bases: List[ast.expr]) -> Optional[str]:
        """The kind of a class with these bases: a framework base (torch.nn, mindspore.nn, autograd), a
        well-known third-party model base, a class of this file, or (project model) of another module."""
        unresolved = False
        for base in bases:
            if isinstance(base, ast.Name) and self.local_classes.get(base.id):
                return self.local_classes[base.id]
            name = self.qualname(base)
            if name:
                kind = framework_kind(name)
                if kind is not None:
                    return kind
            unresolved = unresolved or name is not None or self.project_name(base) is not None
        return self._project_class_kind(bases) if unresolved and self.module is not None else None

    def _project_class_kind(self, bases: List[ast.expr]) -> Optional[str]:
        """A base from another module: the project model resolved this very class's hierarchy (package
        re-exports, src/ layouts, script directories)."""
        own = next((s.name for s in self.tree.body if isinstance(s, ast.ClassDef) and s.bases is bases), None)
        names = [f"{self.module}.{own}" if self.module else own] if own else [
            n for n in (self.project_name(b) for b in bases) if n]
        for name in names:
            kind = self.project.class_kind(name)
            if kind is not None:
                return kind
        return None

    def _function_qualname(self, name: str) -> Optional[str]:
        """'Class.method' / 'function' for a top-level function or a method of a top-level class."""
        scopes = self.scopes
        if len(scopes) == 1:
            return name
        if len(scopes) == 2 and scopes[1].kind == "class":
            return f"{scopes[1].name}.{name}"
        return None

    def enter_function(self, node: ast.AST) -> Scope:
        cls = self.scopes[-1] if self.scopes[-1].kind == "class" else None
        hot = any(s.hot for s in self.scopes) or bool(
            cls and cls.class_kind and node.name in HOT_METHODS[cls.class_kind]
        )
        scope = Scope(node, "function", node.name, hot=hot)
        local = self._function_qualname(node.name) if self.module is not None else None
        if local is not None:
            self._take_project_facts(scope, local, cls)
        _record_parameters(scope, node.args)
        self.scopes.append(scope)
        return scope

    def _take_project_facts(self, scope: Scope, local: str, cls: Optional[Scope]) -> None:
        """The project model's role of a function (unless it is hot here already) and why it never runs."""
        facts = self.facts()
        role = facts.roles.get(local)
        if role and not scope.hot:
            scope.hot, scope.step = role.kind == PER_FORWARD, role.kind == PER_STEP
            scope.reason = role.reason
        scope.role = role or None
        replaced = facts.replaced.get(local) or (cls and facts.replaced.get(cls.name))
        scope.replaced = replaced or None

    def optional_imports(self) -> Dict[str, Tuple[str, ...]]:
        """Names bound where an import may fail, each with the modules that block imports (see
        imports.optional_imports; computed once, only when asked)."""
        if self._optional is None:
            self._optional = optional_imports(self.tree)
        return self._optional

    def placement(self, node: Optional[ast.AST], tensor: bool = False) -> Place:
        """Where the value of `node` lives at this point of the walk: `Place.DEVICE`, `HOST`, `VALUE` (not a
        tensor), `INPUT` (an input of forward: on the device if it is a tensor) or `UNKNOWN`; with `tensor`, the
        caller knows `node` is a tensor (an INPUT is DEVICE). analysis/placement.py says how it is decided."""
        if self._placement is None:
            self._placement = Placement(self)
        return self._placement.of_tensor(node) if tensor else self._placement.of(node)

    def runs_training_steps(self) -> bool:
        """Does this module run training steps? One of its loops runs a step (`loss.backward()`,
        `optimizer.step()`, `scaler.step(opt)`, a MindSpore `train_step(...)`, through local helpers too), read
        as the project summary reads it (the same answer wherever the walk is), or (project model) a step
        loop elsewhere calls one of its functions every step. Computed once, when first asked."""
        if self._runs_steps is None:
            self._runs_steps = self._has_step_loop() or any(
                role is not None and role.kind == PER_STEP for role in self.facts().roles.values())
        return self._runs_steps

    def _has_step_loop(self) -> bool:
        if not might_step(self.text):  # (no text that may call a step: no loop to test)
            return False
        walk_scopes, self.scopes = self.scopes, [Scope(self.tree, "module")]  # (no bindings of the walk)
        try:
            return any(self.is_step_loop_unwalked(loop) for loop in find_nodes(self.tree, LOOP_TYPES))
        finally:
            self.scopes = walk_scopes

    def calls(self) -> List[ast.AST]:
        """Every call of the file, in no set order (for a rule that decides a fix from the whole file;
        computed once, only when asked)."""
        if self._calls is None:
            self._calls = find_nodes(self.tree, (ast.Call,))
        return self._calls




def _record_parameters(scope: Scope, args: ast.arguments) -> None:
    """A function's parameters, and the defaults of those that have one."""
    positional = args.posonlyargs + args.args
    for arg in positional + args.kwonlyargs:
        scope.params.add(arg.arg)
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            scope.params.add(extra.arg)
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        scope.defaults[arg.arg] = default
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is not None:
            scope.defaults[arg.arg] = default
