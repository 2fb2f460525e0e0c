"""How the project's modules run, as its entry scripts and imports decide: torch_npu's run-time migration, the
NPU and MindSpore's GRAPH_MODE for modules that do not say so themselves, the precision models are trained in,
the defaults of configuration classes. A part of the builder (builder.py), which provides `r` (the resolver),
`model` (the tables filled), `summary(mid)`, `path(mid)`, `function`, `constructor`, `project_class`,
`is_class` and the settings `runtime_migration`, `extra` and `migrating_roots`.

Every walk over the import graph is iterative (`first_reason`, queues): an import chain is as long as the
project is large (issue #30).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .data import migrating_module
from .records import (AMP, APPLIES, ENTRY_RUNS, GRAPH_ENTRY, IMPORT, IMPORTS, MODEL, NPU_ENTRY, PACKAGE, TRAINED,
                      Place, Precision, Reason)

PRECISION_DEPTH = 4  # sub-models followed from a trained model class (`self.attn = Attention(...)`)
Frame = Tuple[str, Iterator[str]]


def first_reason(start: str, own: Callable[[str], Optional[Any]], children: Callable[[str], Iterable[str]],
                 memo: Dict[str, Optional[Any]]) -> Optional[Any]:
    """`own(start)`, else the first of `children(start)` (in order) whose own walk finds a reason, transitively:
    a depth-first walk with an explicit stack (an import chain of 20,000 modules is 20,000 modules deep).
    `memo` keeps every node's answer across calls; a node whose walk is under way counts as reasonless (an
    import cycle ends there), as in the recursive definition this replaces (tests/test_graph_walks.py)."""
    if start in memo:
        return memo[start]
    memo[start] = found = own(start)
    if found is not None:
        return found
    stack = [(start, iter(children(start)))]
    while stack:
        node, others = stack[-1]
        if not found:  # (else the walk just finished below found it: so does this node)
            found, entered = _next_found(others, own, children, memo)
            if entered is not None:
                stack.append(entered)
                continue
        memo[node] = found or None
        stack.pop()
    return memo[start]


def _next_found(others: Iterator[str], own: Callable[[str], Optional[Any]], children: Callable[[str], Iterable[str]],
                memo: Dict[str, Optional[Any]]) -> Tuple[Optional[Any], Optional[Frame]]:
    """(the first reason found among the rest of `others`, None) or (None, the frame of a node to walk first)."""
    for other in others:
        if other in memo:
            found = memo[other]
        else:
            memo[other] = found = own(other)
            if found is None:
                return None, (other, iter(children(other)))
        if found:
            return found, None
    return None, None


class ModuleContexts:
    """Migration, entry-script contexts, training precision and configuration defaults."""

    r: Any
    model: Any
    runtime_migration: Any
    extra: Tuple[str, ...]
    migrating_roots: Set[str]
    _imports_memo: Tuple[Dict[str, Tuple[str, ...]], ...]
    _parent_memo: Dict[str, Tuple[str, ...]]

    # --------------------------------------------------------------- the import graph
    def imported_modules(self, mid: str, function_level: bool) -> Tuple[str, ...]:
        """The project modules that importing `mid` (and running its functions) imports, each once."""
        memo = self._imports_memo[function_level]
        found = memo.get(mid)
        if found is None:
            ids = self.r.ids
            found = memo[mid] = tuple({ids[m]: None for m in self._find_imported(mid, function_level)})
        return found

    def _find_imported(self, mid: str, function_level: bool) -> Iterable[str]:
        by_id = self.r.by_id
        for module, name, _asname, level, _line, in_func in self.summary(mid).imports:  # type: ignore[attr-defined]
            if in_func and not function_level:
                continue
            if level:
                base = self.r.relative_base(mid, level)
                if base is None:
                    continue
                full = f"{base}.{module}" if base and module else (base or module)
                for candidate in (full, f"{full}.{name}") if name and name != "*" else (full,):
                    if candidate in by_id:
                        yield candidate
                        yield from self.parents(candidate)
                continue
            found = self.r.find_module(module, mid)
            if found is not None:
                yield found
                yield from self.parents(found)
                if name and name != "*":
                    sub = self.r.find_module(f"{module}.{name}", mid)
                    if sub is not None:
                        yield sub

    def parents(self, mid: str) -> Tuple[str, ...]:
        """The package `__init__` modules that importing `mid` runs first."""
        parents = self._parent_memo.get(mid)
        if parents is None:
            parts = mid.split(".")
            parents = self._parent_memo[mid] = tuple(
                self.r.ids[p] for p in (".".join(parts[:i]) for i in range(1, len(parts)))
                if p in self.r.by_id and self.r.by_id[p].endswith("__init__.py"))
        return parents

    # --------------------------------------------------------------- migration
    def _direct_migration(self, mid: str, function_level: bool) -> Optional[Reason]:
        roots = self.migrating_roots
        for number, (module, name, _asname, level, _line, in_func) in enumerate(
                self.summary(mid).imports):  # type: ignore[attr-defined]
            if level or (in_func and not function_level) or module.partition(".")[0] not in roots:
                continue
            full = f"{module}.{name}" if name and name != "*" else module
            known = migrating_module(full, self.extra) or migrating_module(module, self.extra)
            if known:
                return Reason(IMPORTS, (known,), Place(self.path(mid), IMPORT, number))  # type: ignore[attr-defined]
        return None

    def _applies_at_import(self, mid: str, memo: Dict[str, Optional[Reason]]) -> Optional[Reason]:
        """Why importing `mid` applies the migration (module-level imports, transitively), or None."""
        return first_reason(mid, lambda m: self._direct_migration(m, False),
                            lambda m: self.imported_modules(m, False), memo)

    def _entry_migration(self, mid: str, memo: Dict[str, Optional[Reason]]) -> Optional[Reason]:
        """How an entry script applies the migration: itself, or through a module it imports."""
        reason = self._direct_migration(mid, True)
        if reason is None:
            for other in self.imported_modules(mid, True):
                if self._applies_at_import(other, memo):
                    return memo[other]
        return reason

    def _migration(self) -> None:
        setting = self.runtime_migration
        if setting is True:
            self.model.all_migrated = True
            return
        if setting is False:
            return
        memo: Dict[str, Optional[Reason]] = {}
        migrated = self.model.migrated_modules
        queue: deque = deque()
        for mid in sorted(self.r.by_id):
            if not self.summary(mid).entry:  # type: ignore[attr-defined]
                continue
            reason = self._entry_migration(mid, memo)
            if reason is not None:
                migrated.setdefault(mid, Reason(APPLIES, cause=reason))
                queue.append((mid, Reason(ENTRY_RUNS, (self.path(mid),), cause=reason)))  # type: ignore[attr-defined]
        while queue:
            mid, reason = queue.popleft()
            for other in self.imported_modules(mid, True):
                if other not in migrated:
                    migrated[other] = reason
                    queue.append((other, reason))
        for mid in self.r.by_id:  # importing a module runs its packages' __init__ first
            if mid in migrated:
                continue
            for parent in self.parents(mid):
                why = self._applies_at_import(parent, memo)
                if why:
                    migrated[mid] = Reason(PACKAGE, (parent,), cause=why)
                    break

    # --------------------------------------------------------------- what entry scripts decide
    def _entry_contexts(self) -> None:
        """How entry scripts run the modules they import. NPU: an entry that is NPU code and uses no CUDA
        device runs its imports on the NPU (an entry that uses both is multi-backend and decides nothing);
        a GPU entry (CUDA, no NPU context) shares what it imports with GPU code. MindSpore GRAPH_MODE: an
        entry that sets it compiles the cells it imports; one that sets PyNative (or a configurable mode)
        shares them with PyNative runs."""
        npu: List[str] = []
        gpu: List[str] = []
        graph: List[str] = []
        eager: List[str] = []
        for mid in sorted(self.r.by_id):
            summary = self.summary(mid)  # type: ignore[attr-defined]
            if not summary.entry:
                continue
            if summary.npu != summary.gpu:
                (npu if summary.npu else gpu).append(mid)
            if summary.mode is not None:
                (graph if summary.mode == "graph" else eager).append(mid)
        self._spread(npu, gpu, "npu", NPU_ENTRY, self.model.npu_modules)
        self._spread(graph, eager, "mode", GRAPH_ENTRY, self.model.graph_modules)

    def _spread(self, givers: List[str], blockers: List[str], own: str, kind: str, table: Dict[str, Reason]) -> None:
        """Record in `table`, for each module reached by imports (module- and function-level, transitively)
        from a `givers` entry but from no `blockers` entry, the reason (of `kind`, naming the entry), unless
        the module decides for itself (its summary's `own` field)."""
        if not givers:
            return
        shared = self._reached(blockers)
        seen = set(givers)
        queue = deque((mid, Reason(kind, (self.path(mid),))) for mid in givers)  # type: ignore[attr-defined]
        while queue:
            mid, reason = queue.popleft()
            for other in self.imported_modules(mid, True):
                if other in seen or other in shared:
                    continue
                seen.add(other)
                if not getattr(self.summary(other), own):  # type: ignore[attr-defined]
                    table[other] = reason
                queue.append((other, reason))

    def _reached(self, starts: List[str]) -> Set[str]:
        """Modules reached by imports (module- and function-level, transitively) from `starts`."""
        seen = set(starts)
        todo = list(starts)
        while todo:
            for other in self.imported_modules(todo.pop(), True):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    # --------------------------------------------------------------- precision
    def _precision(self) -> None:
        by_class: Dict[str, List[Precision]] = {}
        for mid in sorted(self.r.by_id):
            summary = self.summary(mid)  # type: ignore[attr-defined]
            for number, decision in enumerate(summary.models):
                trained = self.project_class(mid, decision.cls)  # type: ignore[attr-defined]
                if trained is not None:
                    reason = Reason(TRAINED, (decision.how,), Place(self.path(mid), MODEL, number))  # type: ignore
                    self._precision_down(trained, Precision(decision.dtype, reason), by_class)
            for number, call in enumerate(summary.amp_calls):
                self._amp_call(mid, number, call)
        for qual, decisions in by_class.items():
            low = [d for d in decisions if d.dtype != "fp32"]
            self.model.class_precisions[qual] = low[0] if low else decisions[0]

    def _amp_call(self, mid: str, number: int, call: Any) -> None:
        """A project function called with a model of a reduced precision (or under autocast) runs in it."""
        target = self.function(mid, call.callee) or self.constructor(mid, call.callee)  # type: ignore[attr-defined]
        known = self.model.function_precisions.get(target) if target is not None else None
        if target is not None and (known is None or (call.dtype == "bf16" and known.dtype != "bf16")):
            # (bf16 wins: what only fp32/fp16 accept, such as the fused optimizers, must know it)
            reason = Reason(TRAINED, (call.how,), Place(self.path(mid), AMP, number))  # type: ignore[attr-defined]
            self.model.function_precisions[target] = Precision(call.dtype, reason)

    def _precision_down(self, top: str, precision: Precision, by_class: Dict[str, List[Precision]]) -> None:
        """A trained model class and the sub-model classes it constructs (to PRECISION_DEPTH) run in the same
        precision: depth first from `top`, each class once."""
        seen: Set[str] = set()
        stack = [(top, 0)]
        while stack:
            qual, depth = stack.pop()
            if qual in seen or depth > PRECISION_DEPTH:
                continue
            seen.add(qual)
            by_class.setdefault(qual, []).append(precision)
            stack.extend((sub, depth + 1) for sub in reversed(list(self._sub_models(qual))))

    def _sub_models(self, qual: str) -> Iterator[str]:
        """The project classes a class constructs in `__init__` / `build` / `_build`."""
        split = self.r.split(qual)
        if split is None:
            return
        mid, cls = split
        defs = self.summary(mid).defs  # type: ignore[attr-defined]
        for method in ("__init__", "build", "_build"):
            info = defs.get(f"{cls}.{method}")
            for name in (info.calls if info else ()):
                resolved = self.r.resolve(mid, name)
                if resolved is None or not resolved[1]:
                    continue
                sub = self.r.split(resolved[0])
                if sub and sub[1] and "." not in sub[1] and self.is_class(f"{sub[0]}.{sub[1]}"):  # type: ignore
                    yield f"{sub[0]}.{sub[1]}"

    # --------------------------------------------------------------- configuration
    def _config(self) -> None:
        for mid in sorted(self.r.by_id):
            for cls, values in self.summary(mid).config.items():  # type: ignore[attr-defined]
                self.model.config[f"{mid}.{cls}"] = values
