"""The project model's roles of functions: PER_FORWARD for what the forwards of model classes call and for
functions assigned as a forward, PER_STEP for what step loops call, each to CALL_DEPTH calls deep, with the
reason (records.Reason) that a message quotes. A part of the builder (builder.py), which provides `r` (the
resolver), `model` (the tables filled), `summary(mid)`, `path(mid)`, `is_test`, `function` and `calls_of`.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Container, Dict, Iterable, List, Optional, Tuple

from .data import HOT_METHODS
from .records import (CALLED, DEF, PER_FORWARD, PER_STEP, STEP_CALL, STEP_LOOP, Place, Reason, Role, Summary)
from .resolver import module_id

CALL_DEPTH = 3  # calls followed from a hot method or a step loop
Root = Tuple[str, int]  # (function qualname, its depth)


class RoleWalks:
    """Roles found by walking the approximate call graph breadth first from the roots (forwards, step loops)."""

    r: Any
    model: Any
    hot_roles: Optional[Dict[str, Role]]
    assigned_forwards: Dict[str, Reason]

    def hot_methods(self) -> Iterable[Tuple[str, str]]:
        """(method qualname, class qualname) of every forward/construct of a model class (not in tests)."""
        for qual, kind in self.model.kinds.items():
            mid, _, name = qual.rpartition(".")
            if self.is_test(mid):  # type: ignore[attr-defined]
                continue
            methods = self.summary(mid).classes[name].methods  # type: ignore[attr-defined]
            for method in HOT_METHODS[kind]:
                if method in methods:
                    yield f"{qual}.{method}", qual

    def _called_by(self, qual: str) -> Reason:
        """Why a function that `qual` calls runs when `qual` does: "`Class.method` in `path:line` calls it"."""
        split = self.r.split(qual)
        if split is None:
            return Reason(CALLED, (qual,), None, via=qual)
        mid, owner = split
        return Reason(CALLED, (owner,), Place(self.path(mid), DEF, owner), via=qual)  # type: ignore[attr-defined]

    def _roles(self, hot_roles: Optional[Dict[str, Role]] = None) -> None:
        """PER_FORWARD for what the forwards of model classes call, PER_STEP for what step loops call (to
        CALL_DEPTH). `hot_roles`: the per-forward part as this builder found it before (a refresh: only tree
        facts changed, and the per-forward part reads none)."""
        if hot_roles is None:
            self._find_hot_roles()
            self.hot_roles = dict(self.model.roles)
        else:
            self.model.roles.update(hot_roles)
        step_roots: List[Root] = []
        for mid in sorted(self.r.by_id):
            step_roots += self._step_roots(mid, self.summary(mid), self.model.roles, ())  # type: ignore[attr-defined]
        self._propagate_from(step_roots, PER_STEP)

    def _find_hot_roles(self) -> None:
        self.hot_set = {q for q, _ in self.hot_methods()}
        for qual, reason in sorted(self.assigned_forwards.items()):  # forwards assigned by a monkey-patch
            self.model.roles[qual] = Role(PER_FORWARD, reason)
        roots = [(q, 0) for q in sorted(self.hot_set)] + [(q, 0) for q in sorted(self.assigned_forwards)]
        self._propagate_from(roots, PER_FORWARD)

    def _step_roots(self, mid: str, summary: Summary, roles: Dict[str, Role], known: Container[str]) -> List[Root]:
        """Give the project functions that a module's step loops call the role PER_STEP (in `roles`, unless
        `known` or `roles` has them); the roots to propagate from."""
        roots: List[Root] = []
        for number, (owner, _line, calls) in enumerate(summary.steps):
            if self.is_test(mid, owner):  # type: ignore[attr-defined]
                continue
            reason = Reason(STEP_CALL, (), Place(self.path(mid), STEP_LOOP, number))  # type: ignore[attr-defined]
            for name in sorted(calls):
                callee = self.function(mid, name, owner)  # type: ignore[attr-defined]
                if callee is not None and callee not in self.hot_set and callee not in known and callee not in roles:
                    roles[callee] = Role(PER_STEP, reason)
                    roots.append((callee, 1))
        return roots

    def own_step_roles(self, rel: str, summary: Summary) -> Dict[str, Role]:
        """See ProjectModel.own_step_roles: `_roles`' step part for one file's loops, on top of the roles
        the model has."""
        mid = module_id(rel)
        if self.r.by_id.get(mid) != rel or not summary.steps:
            return {}
        found: Dict[str, Role] = {}
        known = self.model.roles
        self._propagate_from(self._step_roots(mid, summary, found, known), PER_STEP, found, known)
        return found

    def _propagate_from(self, roots: List[Root], role: str, roles: Optional[Dict[str, Role]] = None,
                        known: Container[str] = ()) -> None:
        """Give the functions called from `roots` (to CALL_DEPTH) the `role`, in `roles` (default: the
        model's), unless `known` or `roles` has them."""
        roles = self.model.roles if roles is None else roles
        queue = deque(roots)
        while queue:
            qual, depth = queue.popleft()
            if depth >= CALL_DEPTH:
                continue
            reason = None
            for callee, _name in self.calls_of(qual):  # type: ignore[attr-defined]
                if callee in roles or callee in known or callee in self.hot_set:
                    continue
                reason = reason or Role(role, self._called_by(qual))
                roles[callee] = reason
                queue.append((callee, depth + 1))
