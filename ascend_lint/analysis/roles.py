"""The project model's roles of functions: PER_FORWARD for what the forwards of model classes call and for
functions assigned as a forward, PER_STEP for what step loops, per-step framework hooks and functions passed to
framework step functions run, at any depth (the execution model's edges and tier walk: execution.py), with the
reason (records.Reason) that a message quotes. A part of the builder (builder.py), which provides `r` (the
resolver), `model` (the tables filled), `summary(mid)`, `path(mid)`, `is_test`, `function`, `edges` and
`walk_tier`. Only modules an entry point reaches count (all, in a project without entry points).
"""
from __future__ import annotations

from typing import Any, Container, Dict, Iterable, List, Optional, Tuple

from .data import HOT_METHODS
from .execution import Settled
from .records import (CALLED, DEF, ONCE, PER_FORWARD, PER_STEP, STEP_CALL, STEP_LOOP, Place, Reason, Role, Summary)
from .resolver import module_id

CALL_DEPTH = None  # calls followed from a hot method or a step loop: no limit (was 3)
Root = Tuple[str, Reason]  # (function qualname, why it has the role)


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
            if self.is_test(mid) or not self.is_reached_module(mid):  # type: ignore[attr-defined]
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
            if self.is_reached_module(mid):  # type: ignore[attr-defined]
                step_roots += self._step_roots(mid, self.summary(mid), self.model.roles, ())  # type: ignore
        step_roots += [(q, why) for q, _kind, why in self.framework_roots((PER_STEP,))]  # type: ignore
        self._propagate_from(step_roots, PER_STEP)

    def _find_hot_roles(self) -> None:
        self.hot_set = {q for q, _ in self.hot_methods()}
        self.hot_set -= {q for q, _kind, _why in self.framework_roots((PER_STEP,))}  # type: ignore[attr-defined]
        roots: List[Root] = sorted(self.assigned_forwards.items())  # forwards assigned by a monkey-patch
        roots += [(q, None) for q in sorted(self.hot_set)]  # type: ignore[misc]  # (a forward: no reason)
        roots += [(q, why) for q, _kind, why in self.framework_roots((PER_FORWARD,))]  # type: ignore
        self._propagate_from(roots, PER_FORWARD)

    def _step_roots(self, mid: str, summary: Summary, roles: Dict[str, Role], known: Container[str]) -> List[Root]:
        """Give the project functions that a module's step loops call the role PER_STEP (in `roles`, unless
        `known` or `roles` has them); the roots to propagate from."""
        roots: List[Root] = []
        for number, (owner, _line, calls) in enumerate(summary.steps):
            if self.is_test(mid, owner):  # type: ignore[attr-defined]
                continue
            reason = Reason(STEP_CALL, (), Place(self.path(mid), STEP_LOOP, number))  # type: ignore[attr-defined]
            for callee, _why, _ctor in self._resolve_calls(mid, owner, sorted(calls)):  # type: ignore[attr-defined]
                if callee not in self.hot_set and callee not in known and callee not in roles:
                    roots.append((callee, reason))
        return roots

    def own_step_roles(self, rel: str, summary: Summary) -> Dict[str, Role]:
        """See ProjectModel.own_step_roles: `_roles`' step part for one file's loops, on top of the roles
        the model has."""
        mid = module_id(rel)
        if self.r.by_id.get(mid) != rel or not summary.steps:
            return {}
        found: Dict[str, Role] = {}
        known = Settled(self.model.roles)
        self._propagate_from(self._step_roots(mid, summary, found, known), PER_STEP, found, known)
        if self.is_reached_module(mid) and self.offline_reason(mid) is None:  # type: ignore[attr-defined]
            owners = self.step_owner_roots(mid, summary)  # type: ignore[attr-defined]
            self.walk_tier(owners, ONCE, found, known)  # type: ignore[attr-defined]
        return found

    def _propagate_from(self, roots: List[Root], role: str, roles: Optional[Dict[str, Role]] = None,
                        known: Optional[Container[str]] = None) -> None:
        """Give `roots` and what they run (at any depth) the `role`, in `roles` (default: the model's), unless
        `known` or `roles` has them."""
        self.walk_tier(roots, role, self.model.roles if roles is None else roles, known)  # type: ignore[attr-defined]
