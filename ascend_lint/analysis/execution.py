"""The execution model (issue #29): when each function of the project runs, and why.

A part of the builder (builder.py), like roles.py. From the summaries' text facts it finds:

- the **entry points**: scripts (an `if __name__ == "__main__":` guard; a module no other module imports
  whose own code calls project functions, or that defines `main`), found from text facts alone (a model
  built before the step loops are read decides the same); functions holding a step loop are ONCE roots;
- the **modules they reach** through imports (module- and function-level, transitively; a package
  `__init__` that imports lazily, through `importlib` or a `_LazyModule`, reaches the modules below it);
- the **edges** of the call graph: direct calls, `self.m()`, methods of objects an attribute holds
  (`self.x = Cls(...)`, or a parameter annotated `x: Cls`), constructors (`Cls(...)` runs `Cls.__init__`),
  and project functions passed as arguments (`partial(loss_func, ...)`, `run_steps(loss_fn=my_loss)`);
- **roots** from the framework tables (frameworks.py): hooks of framework base classes, functions passed to
  framework calls, functions whose name says when they run.

Roles are given tier by tier, hottest first (per_forward and per_step in roles.py, then load, setup, once,
offline), each tier a breadth-first walk with an explicit queue over the edges, each function once: the
first tier that reaches a function decides its role, at any depth, in time linear in the edges walked.
A project with entry points gives the rest `unreached`: the functions and methods of modules no entry
reaches, and the top-level functions nothing in the project names. A project without entry points (a
library) leaves them unknown.
"""
from __future__ import annotations

import re
from collections import deque
from typing import Any, Container, Deque, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from . import frameworks
from .records import (STEP_CALL, STEP_LOOP, BUILDS, CALLED, DEF, ENTRY, FRAMEWORK, LOAD, MODULE, NAMED, NO_CALLER, NO_ENTRY, OFFLINE,
                      OFFLINE_CODE, ONCE, PASS, PASSED, PER_FORWARD, PER_STEP, SETUP, UNREACHED, Place, Reason,
                      Role, Summary)
from .training_code import path_reason

HIERARCHY_LIMIT = 12  # base classes followed to find a framework base
Edge = Tuple[str, Reason, bool]  # (callee qualname, why, is it a constructor)
Root = Tuple[str, Reason]
_LAZY_NAMES = ("_LazyModule", "import_module", "importlib")
# functions that a once-run caller runs to set the run up (a constructor is set-up code too)
_SETUP_NAME = re.compile(r"^_*(?:build|create|make|setup|set_up|init|initiali[sz]e|configure|register|apply_patch"
                         r"|get_\w*(?:cls|class|model|optimizer|scheduler|dataloader))", re.IGNORECASE)
_HOOK_METHODS = frozenset(m for hook_set in frameworks.HOOKS for m in hook_set.methods)
_PASSED_BY_LAST: Dict[str, List[frameworks.PassedFunction]] = {}
for _record in frameworks.PASSED_FUNCTIONS:
    for _pattern in _record.calls:
        _PASSED_BY_LAST.setdefault(_pattern.rpartition(".")[2], []).append(_record)
_NAMED: Dict[str, frameworks.NamedRole] = {name: record for record in frameworks.NAMED_ROLES
                                           for name in record.names}


class Settled:
    """The roles a file's own step loops cannot change: all but UNREACHED (a new root may reach those)."""

    def __init__(self, roles: Dict[str, Role]) -> None:
        self.roles = roles

    def __contains__(self, qual: object) -> bool:
        role = self.roles.get(qual)  # type: ignore[call-overload]
        return role is not None and role.kind != UNREACHED


class ExecutionWalks:
    """Entry points, reached modules, edges and the roles past per_forward/per_step (see the module doc)."""

    r: Any
    model: Any
    reached_modules: Optional[Set[str]] = None  # None: the project has no entry point (all count as reached)
    entry_roots: List[Root]

    # ------------------------------------------------------------------ entry points and reached modules
    def _find_entries(self) -> None:
        """The entry modules, their roots (module code, `main`) and the modules they reach."""
        self._edge_memo: Dict[str, List[Edge]] = {}
        self._target_memo: Dict[tuple, Optional[Tuple[str, Optional[str]]]] = {}
        self._offline: Dict[str, Optional[str]] = {}
        self._text_named: Optional[Set[str]] = None  # (`_named_anywhere`'s text-fact part: a refresh keeps it)
        self.entry_roots = []
        candidates = [mid for mid in sorted(self.r.by_id) if self._script_like(mid)]
        if not candidates:
            self.reached_modules = None
            return
        imported: Set[str] = set()
        for mid in self.r.by_id:
            imported.update(self.imported_modules(mid, True))  # type: ignore[attr-defined]
        entries = [mid for mid in candidates if self.summary(mid).entry or mid not in imported]  # type: ignore
        npu_entries = any(self.summary(mid).npu for mid in entries)  # type: ignore[attr-defined]
        for mid in entries:
            if npu_entries and self.summary(mid).gpu and not self.summary(mid).npu:  # type: ignore
                self._offline[mid] = "a GPU-only script beside the NPU entry points"
            else:
                self.entry_roots += self._entry_roots(mid)
        entries = [mid for mid in entries if self._offline.get(mid) is None]
        self.reached_modules = self._by_strings(self._lazy_packages(self._reached(entries))) if entries else None  # type: ignore

    def _script_like(self, mid: str) -> bool:
        summary: Summary = self.summary(mid)  # type: ignore[attr-defined]
        if self.offline_reason(mid) is not None:
            return False
        return summary.entry or bool(summary.module_calls) or "main" in summary.defs  # (text facts only)

    def _entry_roots(self, mid: str) -> List[Root]:
        """What an entry script runs: the functions its own code calls, and `main`."""
        summary: Summary = self.summary(mid)  # type: ignore[attr-defined]
        path = self.path(mid)  # type: ignore[attr-defined]
        reason = Reason(ENTRY, (), Place(path, MODULE, ""))
        roots = [(callee, reason) for callee, _why, _ctor in self._resolve_calls(mid, "", summary.module_calls)]
        if "main" in summary.defs:  # (functions holding a step loop are roots of their own: _step_owner_roots)
            roots.append((f"{mid}.main" if mid else "main", reason))
        return roots

    def _lazy_packages(self, reached: Set[str]) -> Set[str]:
        """`reached` with every module below a reached package `__init__` that imports lazily."""
        lazy = [mid for mid in reached if self.path(mid).endswith("__init__.py")  # type: ignore[attr-defined]
                and any(name in _LAZY_NAMES or module in _LAZY_NAMES
                        for module, name, *_rest in self.summary(mid).imports)]  # type: ignore[attr-defined]
        if not lazy:
            return reached
        prefixes = tuple(f"{mid}." for mid in lazy if mid)
        if "" in lazy:
            return set(self.r.by_id)
        return reached | {mid for mid in self.r.by_id if mid.startswith(prefixes)}

    def _by_strings(self, reached: Set[str]) -> Set[str]:
        """`reached` with the modules that reached modules name in strings (`"pkg.mod.func"`), and what those
        import, until no new module is named."""
        todo = list(reached)
        while todo:
            named = []
            for mid in todo:
                for text in self.summary(mid).dotted_strings:  # type: ignore[attr-defined]
                    found = self._module_named(text)
                    if found is not None and found not in reached:
                        named.append(found)
            todo = [m for m in self._reached(named) if m not in reached] if named else []  # type: ignore
            reached.update(todo)
        return reached

    def _module_named(self, text: str) -> Optional[str]:
        """The project module a dotted string names (`pkg.mod` or `pkg.mod.attr`), if any."""
        by_id = self.r.by_id
        if text in by_id:
            return text
        head = text.rpartition(".")[0]
        return head if head in by_id else None

    def is_reached_module(self, mid: str) -> bool:
        return self.reached_modules is None or mid in self.reached_modules

    def offline_reason(self, mid: str) -> Optional[str]:
        """Why a module is offline code (tests, benchmarks, tools: training_code.path_reason), else None."""
        memo = self._offline
        if mid not in memo:
            memo[mid] = path_reason(self.path(mid))  # type: ignore[attr-defined]
        return memo[mid]

    # ------------------------------------------------------------------ edges
    def edges(self, qual: str) -> List[Edge]:
        """What running `qual` runs (memoised): its calls resolved through `self`, attributes, constructors,
        and the project functions it passes to other calls."""
        found = self._edge_memo.get(qual)
        if found is None:
            found = self._edge_memo[qual] = self._find_edges(qual)
        return found

    def _find_edges(self, qual: str) -> List[Edge]:
        split = self.r.split(qual)
        if split is None:
            return []
        mid, owner = split
        summary: Summary = self.summary(mid)  # type: ignore[attr-defined]
        info = summary.defs.get(owner)
        if info is None:
            return []
        edges = [e for e in self._resolve_calls(mid, owner, info.calls) if e[0] != qual]
        for index, passed in enumerate(summary.passes):
            if passed.owner == owner and not self._framework_pass(passed.callee) and not self._step_runner(
                    mid, passed.callee):
                callee = self._passed_function(mid, owner, passed.name)
                if callee is not None and callee != qual:
                    place = Place(self.path(mid), PASS, index)  # type: ignore[attr-defined]
                    edges.append((callee, Reason(PASSED, (f"it is passed to `{passed.callee}`",), place, via=qual),
                                  False))
        return edges

    def _resolve_calls(self, mid: str, owner: str, calls: Iterable[str]) -> Iterator[Edge]:
        qual = f"{mid}.{owner}" if mid and owner else (owner or mid)
        called = None
        for text in calls:
            target = self._call_target(mid, owner, text)
            if target is None:
                continue
            callee, cls = target
            if cls is None:
                if called is None:
                    called = self._called_by(qual) if owner else Reason(  # type: ignore[attr-defined]
                        ENTRY, (), Place(self.path(mid), MODULE, ""))  # type: ignore[attr-defined]
                yield callee, called, False
            else:
                place = Place(self.path(mid), DEF, owner) if owner else Place(self.path(mid), MODULE, "")  # type: ignore
                yield callee, Reason(BUILDS, (cls.rpartition(".")[2],), place, via=qual if owner else None), True

    def _call_target(self, mid: str, owner: str, text: str) -> Optional[Tuple[str, Optional[str]]]:
        """(the function a call runs, the class it builds or None), memoised per module and call text (and
        class, for `self.` calls)."""
        key = (mid, text, owner.partition(".")[0]) if text.startswith("self.") else (mid, text)
        memo = self._target_memo
        if key in memo:
            return memo[key]
        found: Optional[Tuple[str, Optional[str]]] = None
        callee = self.function(mid, text, owner)  # type: ignore[attr-defined]
        if callee is None and text.startswith("self.") and text.count(".") == 2:
            callee = self._attribute_method(mid, owner, text)
        if callee is not None:
            found = (callee, None)
        elif not text.startswith("self."):
            cls = self.project_class(mid, text)  # type: ignore[attr-defined]
            init = self.method(cls, "__init__") if cls is not None else None  # type: ignore[attr-defined]
            found = (init, cls) if init is not None else None
        memo[key] = found
        return found

    def _attribute_method(self, mid: str, owner: str, text: str) -> Optional[str]:
        """`self.x.m` in a method of a class whose `self.x` holds a project class: that class's `m`."""
        _self, attr, name = text.split(".")
        held = self.summary(mid).attributes.get(owner.split(".", 1)[0], {}).get(attr)  # type: ignore[attr-defined]
        cls = self.project_class(mid, held) if held else None  # type: ignore[attr-defined]
        return self.method(cls, name) if cls is not None else None  # type: ignore[attr-defined]

    def _passed_function(self, mid: str, owner: str, name: str) -> Optional[str]:
        if name.startswith("self."):
            return self.function(mid, name, owner) if name.count(".") == 1 else None  # type: ignore[attr-defined]
        return self.function(mid, name, owner)  # type: ignore[attr-defined]

    def _step_runner(self, mid: str, callee: str) -> Optional[str]:
        """The project function `callee` names if it holds a step loop (it runs what it is passed per step)."""
        if callee == "return":
            return None
        qual = self.function(mid, callee)  # type: ignore[attr-defined]
        split = self.r.split(qual) if qual is not None else None
        if split is None or not any(loop.owner == split[1] for loop in self.summary(split[0]).steps):  # type: ignore
            return None
        return qual

    def _framework_pass(self, callee: str) -> bool:
        return callee.rpartition(".")[2] in _PASSED_BY_LAST and any(
            True for _ in frameworks.passed_function_roles(callee))

    # ------------------------------------------------------------------ roots from the framework tables
    def framework_roots(self, kinds: Tuple[str, ...]) -> List[Tuple[str, str, Reason]]:
        """(qualname, role, reason) of hooks, passed functions and named functions whose role is in `kinds`, in
        reached, non-offline modules (found once per set of reached modules: text facts only)."""
        cache = getattr(self, "_framework_cache", None)
        if cache is None or cache[0] is not self.reached_modules:
            cache = self._framework_cache = (self.reached_modules, self._all_framework_roots())
        return [root for root in cache[1] if root[1] in kinds]

    def _all_framework_roots(self) -> List[Tuple[str, str, Reason]]:
        found: List[Tuple[str, str, Reason]] = []
        for mid in sorted(self.r.by_id):
            if not self.is_reached_module(mid) or self.offline_reason(mid) is not None:
                continue
            summary: Summary = self.summary(mid)  # type: ignore[attr-defined]
            found += self._hook_roots(mid, summary)
            found += self._passed_roots(mid, summary)
            found += self._named_roots(mid, summary)
        return found

    def _hook_roots(self, mid: str, summary: Summary) -> Iterator[Tuple[str, str, Reason]]:
        path = self.path(mid)  # type: ignore[attr-defined]
        for name, info in summary.classes.items():
            if not info.bases or _HOOK_METHODS.isdisjoint(info.methods):
                continue
            qual = f"{mid}.{name}" if mid else name
            for base in self.framework_bases(qual):
                for method in info.methods:
                    found = frameworks.hook_role(base, method)
                    if found is not None:
                        role, words = found
                        yield f"{qual}.{method}", role, Reason(FRAMEWORK, (words,), Place(path, DEF, f"{name}.{method}"))

    def _passed_roots(self, mid: str, summary: Summary) -> Iterator[Tuple[str, str, Reason]]:
        path = self.path(mid)  # type: ignore[attr-defined]
        for index, passed in enumerate(summary.passes):
            records = _passed_records(self.r, mid, passed.callee)
            for record in records:
                if any(passed.keyword == key or (not passed.keyword and passed.position == position)
                       for key, position in record.arguments):
                    callee = self._passed_function(mid, passed.owner, passed.name)
                    if callee is not None:
                        words = record.reason.format(name=passed.name, base=passed.callee)
                        yield callee, record.role, Reason(PASSED, (words,), Place(path, PASS, index))
            runner = None if records else self._step_runner(mid, passed.callee)
            callee = self._passed_function(mid, passed.owner, passed.name) if runner else None
            if callee is not None:
                words = f"it is passed to `{passed.callee}`, whose step loop runs it"
                yield callee, PER_STEP, Reason(PASSED, (words,), Place(path, PASS, index))

    def _named_roots(self, mid: str, summary: Summary) -> List[Tuple[str, str, Reason]]:
        found = []
        for owner in summary.defs:
            record = _NAMED.get(owner.rpartition(".")[2])
            if record is not None:
                words = record.reason.format(name=owner.rpartition(".")[2])
                found.append((f"{mid}.{owner}" if mid else owner, record.role, Reason(NAMED, (words,))))
        return found

    def framework_bases(self, qual: str) -> List[str]:
        """The framework (non-project) bases, qualified, of a project class and its project bases."""
        out: List[str] = []
        todo: List[Tuple[str, int]] = [(qual, 0)]
        seen = {qual}
        while todo:
            current, depth = todo.pop()
            mid, _, name = current.rpartition(".")
            info = self.summary(mid).classes.get(name) if mid in self.r.by_id else None  # type: ignore
            for base in (info.bases if info is not None and depth < HIERARCHY_LIMIT else ()):
                resolved = self.r.resolve(mid, base)
                if resolved is None:
                    continue
                project = self.project_class(mid, base) if resolved[1] else None  # type: ignore[attr-defined]
                if project is None and not resolved[1]:
                    out.append(resolved[0])
                elif project is not None and project not in seen:
                    seen.add(project)
                    todo.append((project, depth + 1))
        return out

    # ------------------------------------------------------------------ the tiers past per_step
    def _execution_roles(self) -> None:
        """LOAD, SETUP, ONCE from the framework tables and the entry points, OFFLINE for tests and tools,
        UNREACHED for the rest (when the project has entry points)."""
        roles: Dict[str, Role] = self.model.roles
        tables = self.framework_roots((LOAD, SETUP, ONCE))
        for kind in (LOAD, SETUP, ONCE):
            roots = [(q, reason) for q, role, reason in tables if role == kind]
            if kind == SETUP:
                roots += self._constructor_roots()
            if kind == ONCE:
                roots += self.entry_roots + self._step_owner_roots()
            self.walk_tier(roots, kind, roles)
        self.walk_tier(self._offline_roots(), OFFLINE, roles)
        if self.reached_modules is not None:
            self._unreached(roles)

    def walk_tier(self, roots: List[Root], kind: str, roles: Dict[str, Role],
                  known: Optional[Container[str]] = None) -> None:
        """Give `roots` and what they run the role `kind` (a constructor run from ONCE code is SETUP), breadth
        first, unless `roles` (or `known`) has them already."""
        queue: Deque[str] = deque()
        for qual, reason in roots:
            if qual not in roles and (known is None or qual not in known) and self.r.split(qual) is not None:
                roles[qual] = Role(kind, reason)
                queue.append(qual)
        while queue:
            qual = queue.popleft()
            here = roles[qual].kind
            for callee, reason, constructor in self.edges(qual):
                if callee in roles or (known is not None and callee in known):
                    continue
                setup = here == ONCE and (constructor or _SETUP_NAME.match(callee.rpartition(".")[2]) is not None)
                roles[callee] = Role(SETUP if setup else here, reason)
                queue.append(callee)

    def _constructor_roots(self) -> List[Root]:
        """`__init__` of the classes of reached modules: set-up code whoever builds them."""
        roots = []
        for mid in sorted(self.r.by_id):
            if self.is_reached_module(mid) and self.offline_reason(mid) is None:
                path = self.path(mid)  # type: ignore[attr-defined]
                roots += [(f"{mid}.{owner}" if mid else owner, Reason(BUILDS, (owner.partition(".")[0],), Place(
                    path, DEF, owner))) for owner in self.summary(mid).defs if owner.endswith(".__init__")]  # type: ignore
        return roots

    def _step_owner_roots(self) -> List[Root]:
        """The functions and methods holding a step loop, in reached modules: each runs the training once."""
        roots = []
        for mid in sorted(self.r.by_id):
            if self.is_reached_module(mid) and self.offline_reason(mid) is None:
                roots += self.step_owner_roots(mid, self.summary(mid))  # type: ignore[attr-defined]
        return roots

    def step_owner_roots(self, mid: str, summary: Summary) -> List[Root]:
        path = self.path(mid)  # type: ignore[attr-defined]
        return [(f"{mid}.{loop.owner}" if mid else loop.owner, Reason(STEP_CALL, (), Place(path, STEP_LOOP, number)))
                for number, loop in enumerate(summary.steps) if loop.owner]

    def _offline_roots(self) -> List[Root]:
        roots = []
        for mid in sorted(self.r.by_id):
            why = self.offline_reason(mid)
            if why is not None:
                reason = Reason(OFFLINE_CODE, (why,))
                roots += [(f"{mid}.{owner}" if mid else owner, reason) for owner in self.summary(mid).defs]  # type: ignore
        return roots

    def _unreached(self, roles: Dict[str, Role]) -> None:
        """UNREACHED for the functions of modules no entry reaches, and the top-level functions of reached
        modules that nothing in the project names (called, passed, imported or patched)."""
        named = self._named_anywhere()
        for mid in self.r.by_id:
            reached = self.is_reached_module(mid)
            why = None if reached else Reason(NO_ENTRY, (self.path(mid),))  # type: ignore[attr-defined]
            for owner in self.summary(mid).defs:  # type: ignore[attr-defined]
                qual = f"{mid}.{owner}" if mid else owner
                if qual in roles:
                    continue
                if why is not None:
                    roles[qual] = Role(UNREACHED, why)
                elif "." not in owner and owner not in named:
                    roles[qual] = Role(UNREACHED, Reason(NO_CALLER))

    def _named_anywhere(self) -> Set[str]:
        """The last names of everything the project calls, passes, imports, patches in or names in a string."""
        if self._text_named is None:
            self._text_named = self._named_in_text_facts()
        named = set(self._text_named)
        for rel in self.r.by_id.values():
            for loop in self.r.files[rel].steps:  # (tree facts: a refresh changes them)
                named.update(text.rpartition(".")[2] for text in loop.calls)
        return named

    def _named_in_text_facts(self) -> Set[str]:
        named: Set[str] = set()
        for rel in self.r.by_id.values():
            summary: Summary = self.r.files[rel]
            for info in summary.defs.values():
                named.update(text.rpartition(".")[2] for text in info.calls)
            named.update(text.rpartition(".")[2] for text in summary.module_calls)
            named.update(p.name.rpartition(".")[2] for p in summary.passes)
            named.update(imp.name or "" for imp in summary.imports)
            named.update(p.value.rpartition(".")[2] for p in summary.patches)
            named.update(text.rpartition(".")[2] for text in summary.dotted_strings)
        return named


def _passed_records(resolver: Any, mid: str, callee: str) -> Set[frameworks.PassedFunction]:
    """The framework records of a call (as written in `mid`, or as its imports resolve it)."""
    if callee.rpartition(".")[2] not in _PASSED_BY_LAST:
        return set()
    resolved = resolver.resolve(mid, callee)
    names = {callee, resolved[0]} if resolved is not None else {callee}
    return {r for name in names for r in frameworks.passed_function_roles(name)}


__all__ = ["ExecutionWalks", "CALLED"]
