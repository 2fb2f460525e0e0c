"""The semantic model of one file, kept up to date by the walker and queried by rules.

What it knows: import aliases (qualified names), module constants, local classes and functions,
the enclosing class/function/loop/if/with stack, hot scopes (forward/construct/autograd methods),
step loops, simple local dataflow (the last value bound to a name in the current function), and
whether the file is NPU code. Queries that need to look ahead (is this loop a step loop?) scan only
the subtree asked about, once, and are cached.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set, Tuple

from . import training_code
from ..fileio import split_lines
from .placement import Place, Placement
from .data import (HOT_METHODS, MIGRATED_PACKAGES, MIGRATING_MODULES, STEP_CALL_NAMES, STEP_NAME_RE,
                           STEP_RECEIVER_HINTS, framework_kind)
from .summary import call_text, might_step, npu_context, run_mode
# Pure AST helpers live in ascend_lint.astutil; the old names stay importable from here for one step.
from ..astutil import argument, constant, has_star_args, keyword, method_name, receiver_name  # noqa: F401
from ..astutil import contains as _contains
from .view import NULL_VIEW, ProjectView
from ..rule import Span

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
# the framework bases that make a class a model: catalogue data in project/data.py.
RUNTIME_MIGRATION_MODULES = MIGRATING_MODULES
RUNTIME_MIGRATION_PACKAGES = MIGRATED_PACKAGES
STEP_COUNTER_RE = re.compile(r"(?:^|_)(?:step|steps|iter|iters|iteration)$", re.IGNORECASE)
# MindSpore training steps by name: STEP_NAME_RE (`train_step(x, y)`, `_train_one_batch(b)`, `train_iter(...)`);
# and the cells that run one (`nn.TrainOneStepCell`, `TrainStepWrap`).
TRAIN_STEP_CLASS_RE = re.compile(r"(?i)train_?(?:one_?)?step")
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


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


@dataclass
class Binding:
    """The value last bound to a local name: `value` (or its `index`-th unpacked element)."""

    value: Optional[ast.expr]
    index: Optional[int] = None
    stmt: Optional[ast.stmt] = None
    previous: Optional["Binding"] = None  # the binding this one replaced (`x = f(x)` history)


@dataclass
class Scope:
    node: ast.AST
    kind: str  # "module", "class", "function"
    name: str = ""
    class_kind: Optional[str] = None  # for classes: "module" | "cell" | "function" | None
    hot: bool = False  # forward/construct/autograd method (or nested in one)
    reason: Optional[str] = None  # why a function is hot or per-step when the reason is in another place
    step: bool = False  # a function the project model says runs on every training step
    replaced: Optional[str] = None  # why the function never runs (monkey-patched away)
    bindings: Dict[str, Optional[Binding]] = field(default_factory=dict)
    params: Set[str] = field(default_factory=set)
    defaults: Dict[str, ast.expr] = field(default_factory=dict)
    attributes: Dict[str, ast.expr] = field(default_factory=dict)  # for classes: self.X = value


class FileContext:
    """Everything a rule may ask about the file and about where the walk currently is."""

    def __init__(self, path: str, text: str, tree: ast.Module, target: str = "auto",
                 root: Optional[str] = None, occurs: Optional[Callable[[str], bool]] = None,
                 project: ProjectView = NULL_VIEW, migrating_modules: Tuple[str, ...] = ()) -> None:
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
        self._has_cr: Optional[bool] = None  # does the text hold `\r` (asked once: a scan of the whole text)
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
        self.project = project
        self.module: Optional[str] = project.module
        self.migrating_modules = MIGRATING_MODULES + tuple(migrating_modules)
        self._facts: Optional[Dict[str, Dict[str, object]]] = None
        self._prescan()
        self._own_npu = target == "npu" or npu_context(self.imported_modules, text, self._occurs)
        self.npu = self._npu_code()
        self.auto_migrated = self._migrated()

    def occurs(self, text: str) -> bool:
        """Does the file's text hold `text`? (The engine's pre-filter answers it, each text once.)"""
        return self._occurs(text)

    def attach(self, project: ProjectView) -> None:
        """Answer from this project view from now on (before the walk)."""
        self.project = project
        self.module = project.module
        self._facts = None
        self.relative_aliases.clear()
        for stmt in _top_level_statements(self.tree.body):
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

    def migration_reason(self) -> Optional[str]:
        """Why the file runs migrated when the reason is in another file (None otherwise)."""
        return self.project.migrated()

    # ------------------------------------------------------------------ set-up
    def _prescan(self) -> None:
        """Imports, module constants and local functions/classes of the top level, without a walk."""
        counts: Dict[str, int] = {}
        for stmt in _top_level_statements(self.tree.body):
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

    def graph_mode(self) -> Optional[str]:
        """Why the file's MindSpore cells run compiled in GRAPH_MODE (constants folded into the graph): the
        file sets it with `set_context(mode=GRAPH_MODE)`, or (project model) an entry script that sets it
        imports the file. None when the file sets another or a configurable mode, or nothing shows it."""
        if self._mode is None:
            self._mode = (run_mode(self.text),)
        own = self._mode[0]
        if own is not None:
            return "it sets `set_context(mode=GRAPH_MODE)`" if own == "graph" else None
        return self.project.graph_mode()

    def npu_reason(self) -> Optional[str]:
        """Why the file is NPU code when the reason is in another file (None otherwise)."""
        return None if self._own_npu else self.project.npu()

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
            module = ("." * stmt.level) + (stmt.module or "")
            if not stmt.level:
                self._add_module(module)
            base = self._relative_base(stmt.level) if stmt.level else None
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                full = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
                if not stmt.level:
                    self._add_module(full)
                self.aliases[alias.asname or alias.name] = canonical(full) if not stmt.level else None
                if base is not None:
                    source = ".".join(p for p in (base, stmt.module or "") if p)
                    self.relative_aliases[alias.asname or alias.name] = f"{source}.{alias.name}" if source \
                        else alias.name

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

    # ----------------------------------------------------------------- names
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
            from ..fix.imports import import_facts

            self._import_facts = import_facts(self.tree)
        facts = self._import_facts
        return "module" if module in facts.loaded else "guarded" if module in facts.guarded else ""

    def alias_for(self, qualified: str) -> Optional[str]:
        """The local spelling the file already has for a module (`import torch_npu as tnpu` -> 'tnpu')."""
        for local, full in self.aliases.items():
            if full == qualified:
                return local
        return None

    # --------------------------------------------------------------- scopes
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
        if unresolved and self.module is not None:
            # a base from another module: the project model resolved this very class's hierarchy
            # (package re-exports, src/ layouts, script directories)
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

    def facts(self) -> Dict[str, Dict[str, object]]:
        if self._facts is None:
            self._facts = self.project.module_facts()
        return self._facts

    def hot_reason(self) -> Optional[str]:
        """Why the current code is hot when the reason is elsewhere ("`Attention.forward` in `model.py:40`
        calls it"); None inside a forward/construct itself."""
        for scope in self.scopes:
            if scope.hot:
                return scope.reason
        return None

    def hot_label(self) -> str:
        """How a message names the hot scope: "`forward`", or, when the reason is elsewhere,
        "`helper` (a hot path: `Attention.forward` in `model.py:40` calls it)"."""
        scope = self.hot_method()
        if scope is None:
            return "`forward`"
        return f"`{scope.name}`" + (f" (a hot path: {scope.reason})" if scope.reason else "")

    def step_note(self) -> Optional[str]:
        """"`log_loss` runs every step: the step loop in `train.py:88` calls it" when a step loop in
        another place makes the current function per-step; None otherwise."""
        for scope in self.scopes:
            if scope.step:
                return f"`{scope.name}` runs every step: {scope.reason}"
        return None

    def step_reason(self) -> Optional[str]:
        """Why the current function runs every step when a step loop elsewhere calls it."""
        for scope in self.scopes:
            if scope.step:
                return scope.reason
        return None

    def replaced_by(self) -> Optional[str]:
        """Why the current function (or its class) never runs: it is monkey-patched away at run time."""
        for scope in self.scopes:
            if scope.replaced:
                return scope.replaced
        return None

    def training_precision(self, class_name: Optional[str] = None) -> Optional[List[str]]:
        """[dtype, reason] a model class (default: the current class) is trained in, per the project."""
        if self.module is None:
            return None
        if class_name is None:
            cls = self.class_scope
            if cls is None:
                return None
            class_name = cls.name
        prefix = f"{self.module}." if self.module else ""
        return self.project.class_precision(prefix + class_name)

    def caller_precision(self) -> Optional[List[str]]:
        """[dtype, reason] of the mixed precision the callers of the current top-level function run it with."""
        if self.module is None:
            return None
        for scope in self.scopes[1:]:
            if scope.kind == "function":
                qual = self._qual_of(scope)
                return self.project.function_precision(qual) if qual else None
        return None

    def _qual_of(self, scope: Scope) -> Optional[str]:
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
        cls = self.project_name(config_class) if config_class is not None else None
        return self.project.config_default(attr, cls)

    def enter_function(self, node: ast.AST) -> Scope:
        args = node.args
        cls = self.scopes[-1] if self.scopes[-1].kind == "class" else None
        hot = any(s.hot for s in self.scopes) or bool(
            cls and cls.class_kind and node.name in HOT_METHODS[cls.class_kind]
        )
        scope = Scope(node, "function", node.name, hot=hot)
        local = self._function_qualname(node.name) if self.module is not None else None
        if local is not None:
            facts = self.facts()
            role = facts["roles"].get(local)
            if role and not hot:
                scope.hot, scope.step = role[0] == "hot", role[0] == "step"
                scope.reason = role[1]
            replaced = facts["replaced"].get(local) or (cls and facts["replaced"].get(cls.name))
            scope.replaced = replaced or None
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
        self.scopes.append(scope)
        return scope

    # ------------------------------------------------------------- dataflow
    def bind_target(self, target: ast.AST, value: Optional[ast.expr], stmt: Optional[ast.stmt]) -> None:
        """Record that `target` now holds `value` (None: unknown)."""
        scope = self.scopes[-1]
        if isinstance(target, ast.Name):
            self.bind_name(target.id, value, stmt)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name) and scope.kind != "class":
                    previous = scope.bindings.get(element.id)
                    scope.bindings[element.id] = (Binding(value, index, stmt, previous)
                                                  if value is not None else None)
                else:
                    self.bind_target(element, None, stmt)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, None, stmt)
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
              and target.value.id == "self" and value is not None):
            cls = self.class_scope
            if cls is not None:
                cls.attributes.setdefault(target.attr, value)

    def bind_name(self, name: str, value: Optional[ast.expr], stmt: Optional[ast.AST]) -> None:
        """Record that the name `name` now holds `value` (None: unknown)."""
        scope = self.scopes[-1]
        if scope.kind != "class":
            scope.bindings[name] = Binding(value, None, stmt, scope.bindings.get(name)) if value is not None else None
        if scope.kind == "module" and name in self.aliases:
            self.aliases[name] = None  # a module-level name shadows an import

    def binding(self, name: str) -> Optional[Binding]:
        """What `name` was last bound to in the enclosing function, if known."""
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                if name in scope.bindings:
                    return scope.bindings[name]
                if name in scope.params:
                    return None
        return self.scopes[0].bindings.get(name)

    def binding_before(self, name: str, node: ast.AST) -> Optional[Binding]:
        """The binding of `name` in effect where `node` starts: a binding made by a statement that
        ends after `node` (the `x` inside `x = f(x)`) is skipped for the one it replaced."""
        bound = self.binding(name)
        start = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        while bound is not None and bound.stmt is not None and (
                (getattr(bound.stmt, "end_lineno", 0) or 0, getattr(bound.stmt, "end_col_offset", 0) or 0) > start):
            bound = bound.previous
        return bound

    def resolve(self, node: ast.expr, depth: int = 4) -> ast.expr:
        """Follow local names to the expression they were bound to (unpacking excluded)."""
        while depth and isinstance(node, ast.Name):
            bound = self.binding(node.id)
            if bound is None or bound.index is not None or bound.value is None:
                break
            node = bound.value
            depth -= 1
        return node

    def int_value(self, node: Optional[ast.expr]) -> Optional[int]:
        """An int read from a literal, a local binding, a parameter default or a module constant."""
        for _ in range(4):
            if node is None:
                return None
            if isinstance(node, ast.Constant):
                value = node.value
                return value if isinstance(value, int) and not isinstance(value, bool) else None
            if not isinstance(node, ast.Name):
                return None
            name = node.id
            node = None
            for scope in reversed(self.scopes):
                if scope.kind != "function":
                    continue
                if name in scope.bindings:
                    bound = scope.bindings[name]
                    node = bound.value if bound and bound.index is None else None
                    break
                if name in scope.defaults:
                    node = scope.defaults[name]
                    break
                if name in scope.params:
                    return None
            else:
                node = self.constants.get(name)
        return None

    # ------------------------------------------------------------- loops
    def in_step_loop(self, called_only: bool = False) -> bool:
        """Inside the innermost step loop of the current function (or a per-step function).

        With `called_only`, a per-step function outside any loop counts only when a step loop of this
        file calls it (directly or through one more local function): a test or benchmark function that
        runs one `.backward()` is not a step loop body.
        """
        loop = self.current_loop()
        if loop is not None and self.is_step_loop(loop):
            return True
        if any(s.step for s in self.scopes):  # a step loop elsewhere calls this function
            return True
        if loop is not None:
            return False
        func = self.function
        if func is None or not self.is_step_loop(func.node):  # (the cached _performs_step)
            return False
        return not called_only or func.name in self.step_loop_callees()

    # ------------------------------------------------------ optional imports
    def optional_imports(self) -> Dict[str, Tuple[str, ...]]:
        """Names bound where an import may fail, each with the modules that block imports: names imported
        in a module-level `try:` whose handler catches ImportError (or Exception, or anything), the names
        that `try`/`except` assigns (`HAS_FLASH = True`, `FusedAdam = None`), and names bound under a
        module-level `if is_<x>_available():`. Rules decide which of those packages matter to them."""
        if self._optional is None:
            self._optional = {}
            for stmt in _top_level_statements(self.tree.body):
                if isinstance(stmt, ast.Try) and _guards_import(stmt):
                    parts = [stmt.body] + [h.body for h in stmt.handlers] + [stmt.orelse]
                elif isinstance(stmt, ast.If) and _availability_test(stmt.test):
                    parts = [stmt.body]  # `if is_fp8_available(): import transformer_engine...`
                else:
                    continue
                inner = [s for part in parts for s in _top_level_statements(part)]
                modules = tuple(m for s in inner for m in _imported_modules(s))
                for stmt_inner in inner:
                    for name in _bound_names(stmt_inner):
                        self._optional[name] = self._optional.get(name, ()) + modules
        return self._optional

    def placement(self, node: Optional[ast.AST], tensor: bool = False) -> Place:
        """Where the value of `node` lives at this point of the walk: `Place.DEVICE`, `HOST`, `VALUE` (not a
        tensor), `INPUT` (an input of forward: on the device if it is a tensor) or `UNKNOWN`; with `tensor`, the
        caller knows `node` is a tensor (an INPUT is DEVICE). analysis/placement.py says how it is decided."""
        if self._placement is None:
            self._placement = Placement(self)
        return self._placement.of_tensor(node) if tensor else self._placement.of(node)

    def calls(self) -> List[ast.AST]:
        """Every call of the file, in no set order (for a rule that decides a fix from the whole file;
        computed once, only when asked)."""
        if self._calls is None:
            self._calls = find_nodes(self.tree, (ast.Call,))
        return self._calls

    # ------------------------------------------------------ not training code
    def non_training_reason(self, node: Optional[ast.AST] = None) -> Optional[str]:
        """Why the code at `node` (default: where the walk is) is not training code -- 'test code', 'a
        benchmark', 'weight initialisation', ... (see `training_code`) -- or None for training code."""
        if self._file_role is None:
            self._file_role = (training_code.path_reason(project_relative(self.path, self.root)),)
        if self._file_role[0] is not None:
            return self._file_role[0]
        innermost = self.scopes[-1].node
        if node is None or (len(self.scopes) > 1 and _contains(innermost, node)):
            for scope in self.scopes[1:]:
                reason = self._scope_role(scope)
                if reason is not None:
                    return reason
            return None
        return self._role_at(node)

    def in_non_training_code(self, node: Optional[ast.AST] = None) -> bool:
        """Tests, benchmarks, offline tools, weight init/loading, data collation: not training code."""
        return self.non_training_reason(node) is not None

    def _scope_role(self, scope: Scope) -> Optional[str]:
        key = id(scope.node)
        if key not in self._scope_roles:
            self._scope_roles[key] = self._def_role(scope.node)
        return self._scope_roles[key]

    def _def_role(self, node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.ClassDef):
            return training_code.class_reason(
                node.name, [self.qualname(b) or (b.id if isinstance(b, ast.Name) else None) for b in node.bases])
        if isinstance(node, FUNC_TYPES):
            reason = training_code.function_reason(node.name)
            if reason == "test code" and node.name in self._called_names():
                return None  # pytest never runs a test its own file calls: `main()` calling `test_train(cfg)` trains
            return reason
        return None

    def _called_names(self) -> Set[str]:
        """Names this file calls as `f(...)` / `self.f(...)` outside its `if __name__ == "__main__":` block
        (a script running its own tests there is still running tests); computed once, only when asked."""
        if self._local_calls is None:
            self._local_calls = set()
            for stmt in self.tree.body:
                if not _is_main_guard(stmt):
                    self._local_calls.update(_called_local_names(stmt))
        return self._local_calls

    def _role_at(self, node: ast.AST) -> Optional[str]:
        """The reason of the outermost function/class that contains `node`, by position (after the walk)."""
        if self._role_spans is None:
            self._role_spans = []
            todo: List[ast.AST] = list(self.tree.body)
            while todo:
                item = todo.pop()
                if isinstance(item, (ast.ClassDef,) + FUNC_TYPES):
                    reason = self._def_role(item)
                    if reason is not None:
                        self._role_spans.append((item.lineno, item.end_lineno or item.lineno, reason))
                        continue
                for name in _BODY_FIELDS.get(item.__class__, ()):  # (its child statements, in ast's order)
                    todo.extend(getattr(item, name))
        line = getattr(node, "lineno", 0)
        for first, last, reason in self._role_spans:
            if first <= line <= last:
                return reason
        return None

    def step_loop_callees(self) -> Set[str]:
        """Names of local functions/methods called from a step loop of this file (computed once)."""
        if self._step_callees is None:
            names: Set[str] = set()
            for node in ast.walk(self.tree):
                if isinstance(node, LOOP_TYPES) and self.is_step_loop(node):
                    names.update(_called_local_names(node))
            for name in list(names):  # one level further: the step function's own helpers
                target = self.local_functions.get(name)
                if target is not None:
                    names.update(_called_local_names(target))
            self._step_callees = names
        return self._step_callees

    def runs_training_steps(self) -> bool:
        """Does this module run training steps? One of its loops runs a step (`loss.backward()`,
        `optimizer.step()`, `scaler.step(opt)`, a MindSpore `train_step(...)`, through local helpers too), read
        as the project summary reads it (the same answer wherever the walk is), or (project model) a step
        loop elsewhere calls one of its functions every step. Computed once, when first asked."""
        if self._runs_steps is None:
            self._runs_steps = self._has_step_loop() or any(
                role and role[0] == "step" for role in self.facts()["roles"].values())
        return self._runs_steps

    def _has_step_loop(self) -> bool:
        if not might_step(self.text):  # (no text that may call a step: no loop to test)
            return False
        walk_scopes, self.scopes = self.scopes, [Scope(self.tree, "module")]  # (no bindings of the walk)
        try:
            return any(self.is_step_loop_unwalked(loop) for loop in find_nodes(self.tree, LOOP_TYPES))
        finally:
            self.scopes = walk_scopes

    def current_loop(self) -> Optional[ast.AST]:
        """The innermost enclosing loop of the current function."""
        func = self.function
        for loop in reversed(self.loops):
            if func is None or _contains(func.node, loop):
                return loop
        return None

    def is_step_loop(self, loop: ast.AST) -> bool:
        key = id(loop)
        if key not in self._step_cache:
            self._step_cache[key] = self._performs_step(loop)
        return self._step_cache[key]

    def is_step_loop_unwalked(self, loop: ast.AST) -> bool:
        """`is_step_loop` asked before the walk (the project summary): names are not bound yet, so the
        answer may differ from the walk's and nothing is kept in the cache the walk reads."""
        kept, self._step_cache = self._step_cache, {}
        try:
            return self._performs_step(loop)
        finally:
            self._step_cache = kept

    def _callee_steps(self, target: ast.AST, depth: int) -> bool:
        """_performs_step of a called local function, cached (many loops call the same helpers)."""
        key = (id(target), depth)
        if key not in self._step_cache:
            self._step_cache[key] = self._performs_step(target, depth)
        return self._step_cache[key]

    def _performs_step(self, root: ast.AST, depth: int = 0) -> bool:
        """Does `root` run a training step itself (not inside a nested loop or function)?"""
        todo = _child_nodes(root)
        while todo:
            node = todo.pop()
            if isinstance(node, _STEP_BARRIERS):
                continue
            if isinstance(node, ast.Call):
                if is_step_call(node) or self._mindspore_step(node):
                    return True
                callee = _local_callee(node)
                if callee and depth < 2 and callee in self.local_functions:
                    target = self.local_functions[callee]
                    if target is not root and self._callee_steps(target, depth + 1):
                        return True
            todo.extend(_child_nodes(node))
        return False

    def _mindspore_step(self, call: ast.Call) -> bool:
        """A MindSpore training step that `is_step_call` cannot see from the call alone: a call named like a
        step (`train_step(x, y)`, `self._train_one_batch(b)`), an instance of a `TrainOneStep*` cell
        (`trainer = nn.TrainOneStepCell(net, opt)`; `trainer(x, y)`), or `optimizer(out[1])`."""
        raw = receiver_name(call.func)
        name = raw.lower().replace("_", "")
        if STEP_NAME_RE.search(name):
            return not raw[:1].isupper()  # `nn.TrainOneStepCell(net, opt)` builds the cell, it runs no step
        if (name.startswith("optim") or name == "opt") and len(call.args) == 1 and not call.keywords \
                and not isinstance(call.args[0], ast.Call):
            return True
        if isinstance(call.func, ast.Name):
            bound = self.binding(call.func.id)
            value = bound.value if bound is not None and bound.index is None else None
            return isinstance(value, ast.Call) and TRAIN_STEP_CLASS_RE.search(receiver_name(value.func)) is not None
        return False

    def guarded(self, modulo_only: bool = True) -> bool:
        """Is the current node under an `if` inside the current loop (an `if step % N == 0` guard)?"""
        loop = self.current_loop()
        for if_node, in_else in reversed(self.ifs):
            if loop is not None and not _contains(loop, if_node):
                break
            if not modulo_only:
                return True
            for test in self._guard_tests(if_node.test):
                if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)):
                    return True
                if not in_else and self._single_step_test(test):
                    return True
        return False

    def _guard_tests(self, test: ast.expr) -> List[ast.expr]:
        """The test, and the values of the local names it reads (`is_log_step = step % n == 0`, then
        `if is_log_step:`): a guard held in a variable is a guard."""
        tests = [test]
        for node in ast.walk(test):
            if isinstance(node, ast.Name):
                bound = self.binding(node.id)
                if bound is not None and bound.value is not None and bound.index is None:
                    tests.append(bound.value)
        return tests

    def _single_step_test(self, test: ast.expr) -> bool:
        """`if i == 10:` / `if self.global_step == max_steps:`: a step counter compared for equality
        (the current loop's target, or a name ending in `step`/`iter`)."""
        loop = self.current_loop()
        counters: Set[str] = set()
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            counters.update(n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name))
        for node in ast.walk(test):
            if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops):
                for side in [node.left] + node.comparators:
                    for sub in ast.walk(side):
                        name = receiver_name(sub)
                        if name in counters or STEP_COUNTER_RE.search(name):
                            return True
        return False

    # ------------------------------------------------------------- positions
    @property
    def lines(self) -> List[str]:
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    def segment(self, node: ast.AST) -> Optional[str]:
        """The source text of `node`, as `ast.get_source_segment` gives it, cut from the lines the
        file was split into once (get_source_segment splits the whole file on every call)."""
        try:
            first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return None
        if last is None or end_col is None:
            return None
        if self._has_cr is None:
            self._has_cr = "\r" in self.text
        if self._has_cr:  # keep the file's own line endings inside the segment
            if self._lines_with_ends is None:
                self._lines_with_ends = _LINE_WITH_END.findall(self.text)  # (ast's own line splitting)
            lines, joiner = self._lines_with_ends, ""
        else:
            lines, joiner = self.lines, "\n"
        if not 0 < first <= last <= len(lines):
            return None
        if first == last:
            return _byte_slice(lines[first - 1], col, end_col)
        return joiner.join([_byte_slice(lines[first - 1], col, None)] + lines[first:last - 1]
                           + [_byte_slice(lines[last - 1], 0, end_col)])

    def char_col(self, line: int, byte_col: int) -> int:
        if not 0 < line <= len(self.lines):
            return byte_col
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = col
        return Span(line, self.char_col(line, col), end_line, self.char_col(end_line, end_col))


def project_relative(path: str, root: Optional[str]) -> str:
    """`path` relative to the project `root` when it lies below it, else `path` as given."""
    if root:
        absolute = os.path.abspath(path)
        below = root if root.endswith(os.sep) else root + os.sep
        if absolute.startswith(below):  # (what relpath gives, without its work)
            rel = absolute[len(below):]
        else:
            try:
                rel = os.path.relpath(absolute, root)
            except ValueError:
                return path
        if not rel.startswith(".."):
            return rel
    return path


_LINE_WITH_END = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # lines as `ast` numbers them, ends kept


def _byte_slice(line: str, start: int, end: Optional[int]) -> str:
    """`line[start:end]` with UTF-8 byte offsets (as the ast gives columns)."""
    if line.isascii():
        return line[start:end]
    return line.encode("utf-8")[start:end].decode("utf-8", "replace")


def _top_level_statements(body: List[ast.stmt]):
    """Module statements, looking into top-level if/try/with blocks (guarded imports)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for name in ("body", "orelse", "finalbody"):
                yield from _top_level_statements(getattr(stmt, name, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                yield from _top_level_statements(handler.body)


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError"})


def _guards_import(node: ast.Try) -> bool:
    """A `try:` around an import whose handler catches the import failing."""
    if not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body):
        return False
    for handler in node.handlers:
        caught = handler.type
        names = [caught] if caught is None or not isinstance(caught, ast.Tuple) else caught.elts
        for name in names:
            if name is None or (isinstance(name, ast.Name) and name.id in IMPORT_ERRORS) or (
                    isinstance(name, ast.Attribute) and name.attr in IMPORT_ERRORS):
                return True
    return False


def _availability_test(test: ast.expr) -> bool:
    """`is_fp8_available()`, `is_flash_attn_available() and x`: a test that an optional package is there."""
    return any(isinstance(n, ast.Call) and "available" in receiver_name(n.func) for n in ast.walk(test))


def _imported_modules(stmt: ast.stmt) -> List[str]:
    """`import a.b` -> ['a.b']; `from a.b import c` -> ['a.b.c']."""
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
        return [f"{stmt.module}.{a.name}" for a in stmt.names]
    return []


def _bound_names(stmt: ast.stmt) -> Set[str]:
    """Names a simple statement binds: imports and assignment targets."""
    names: Set[str] = set()
    if isinstance(stmt, ast.Import):
        names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    elif isinstance(stmt, ast.ImportFrom):
        names.update(a.asname or a.name for a in stmt.names if a.name != "*")
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


_STATEMENT_LISTS = ("body", "orelse", "finalbody")
# statement type -> its fields that hold statements (for the types that have any)
_BODY_FIELDS = {cls: tuple(f for f in _STATEMENT_LISTS if f in cls._fields) for cls in vars(ast).values()
                if isinstance(cls, type) and issubclass(cls, ast.stmt) and set(_STATEMENT_LISTS) & set(cls._fields)}
_STEP_BARRIERS = LOOP_TYPES + FUNC_TYPES + (ast.ClassDef, ast.Lambda)
SKIP_FIELDS = frozenset({"ctx", "type_comment", "kind"})
# Fields that only ever hold strings, numbers or None (never a node): not looked into.
_SCALAR_FIELDS = frozenset({
    ("Name", "id"), ("Constant", "value"), ("Attribute", "attr"), ("keyword", "arg"), ("arg", "arg"),
    ("alias", "name"), ("alias", "asname"), ("ImportFrom", "module"), ("ImportFrom", "level"),
    ("Global", "names"), ("Nonlocal", "names"), ("FormattedValue", "conversion"), ("comprehension", "is_async"),
    ("FunctionDef", "name"), ("AsyncFunctionDef", "name"), ("ClassDef", "name"), ("ExceptHandler", "name"),
    ("MatchAs", "name"), ("MatchStar", "name"), ("MatchMapping", "rest"), ("MatchClass", "kwd_attrs"),
    ("TypeIgnore", "lineno"), ("TypeIgnore", "tag"),
})
CHILD_FIELDS: Dict[type, tuple] = {}  # node type -> the fields that may hold a node (child_fields)


def child_fields(cls: type) -> tuple:
    """The fields of a node type that may hold a node (computed once per type)."""
    fields = CHILD_FIELDS.get(cls)
    if fields is None:
        fields = CHILD_FIELDS[cls] = tuple(f for f in cls._fields
                                           if f not in SKIP_FIELDS and (cls.__name__, f) not in _SCALAR_FIELDS)
    return fields


# Node types that can have no child node (Name, Constant, operators, ...): nothing to look into.
LEAF_TYPES = frozenset(
    cls for cls in vars(ast).values()
    if isinstance(cls, type) and issubclass(cls, ast.AST) and getattr(cls, "_fields", None) is not None
    and not child_fields(cls)
)


def find_nodes(root: ast.AST, types: Tuple[type, ...]) -> List[ast.AST]:
    """The nodes of exactly these `types` under `root` (itself included), in no set order: ast.walk without
    looking into leaves and the fields that never hold a node (~3x faster on whole modules)."""
    found: List[ast.AST] = []
    todo = [root]
    pop, push, leaves, node_type = todo.pop, todo.append, LEAF_TYPES, ast.AST
    while todo:
        node = pop()
        cls = node.__class__
        if cls in types:
            found.append(node)
        for name in CHILD_FIELDS.get(cls) or child_fields(cls):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if item.__class__ not in leaves and isinstance(item, node_type):
                        push(item)
            elif value.__class__ not in leaves and isinstance(value, node_type):
                push(value)
    return found


def _child_nodes(node: ast.AST) -> List[ast.AST]:
    """ast.iter_child_nodes as a list, without the leaves (names, constants, operators: they hold no call,
    loop or function) and the fields that never hold a node (for the boolean step scans)."""
    out: List[ast.AST] = []
    cls = node.__class__
    for name in CHILD_FIELDS.get(cls) or child_fields(cls):
        value = getattr(node, name, None)
        if value.__class__ is list:
            out.extend(v for v in value if v.__class__ not in LEAF_TYPES and isinstance(v, ast.AST))
        elif value.__class__ not in LEAF_TYPES and isinstance(value, ast.AST):
            out.append(value)
    return out


def _called_local_names(root: ast.AST) -> Set[str]:
    """`f(...)` / `self.f(...)` names called anywhere under `root`."""
    names: Set[str] = set()
    for node in find_nodes(root, (ast.Call,)):
        name = _local_callee(node)
        if name:
            names.add(name)
    return names


def _local_callee(call: ast.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return func.attr
    return None


def is_step_call(call: ast.Call) -> bool:
    """`loss.backward()`, `optimizer.step()`, `scaler.step(opt)`, `*.train_one_step(...)`, `optimizer(grads)`."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            return True
        if func.attr == "step":
            name = receiver_name(func.value).lower()
            return "sched" not in name and any(h in name for h in STEP_RECEIVER_HINTS)
        if func.attr in ("train_one_step", "train_step"):
            return True
    name = receiver_name(func).lower()
    if name in STEP_CALL_NAMES:
        return True
    if "optim" in name and call.args and not call.keywords and isinstance(func, (ast.Name, ast.Attribute)):
        first = call.args[0]
        return isinstance(first, ast.Name) and "grad" in first.id.lower()
    return False
