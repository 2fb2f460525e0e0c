"""The libcst transformer that applies a chunk's accepted edits in one pass, and the layout helpers it
uses (blank lines around removed statements, a keyword added in the call's own layout).

Imported only when a fix is applied (libcst is slow to import)."""
from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .resolve import ATOMS, Op, Resolver, cst  # (libcst, imported there without its warnings)


def _edited_lines(ops: Sequence[Op]) -> List[int]:
    """Lines holding an edit, as prefix counts: a node is entered only if its lines hold one."""
    last = max((op.anchor[1][0] for op in ops if op.anchor), default=0)
    marks = [0] * (last + 2)
    for op in ops:
        if op.anchor:
            for line in range(op.anchor[0][0], op.anchor[1][0] + 1):
                marks[line] = 1
    return list(itertools.accumulate(marks))


class Transformer(cst.CSTTransformer):
    """Applies the accepted ops of one chunk; `blank_before`: the line before the chunk is blank."""

    def __init__(self, resolver: Resolver, ops: Sequence[Op]) -> None:
        super().__init__()
        self.expr: Dict[int, Any] = {}
        self.kw: Dict[int, List[Tuple[str, Any]]] = {}
        self.remove_lines: set = set()
        self.remove_small: set = set()
        self.replace_small: Dict[int, List[Any]] = {}
        self.replace_line: Dict[int, List[Any]] = {}
        self.after: Dict[int, List[Any]] = {}
        self.body_end: Dict[int, List[Any]] = {}
        self.ranges = resolver.parsed.ranges  # (in the chunk's lines: `offset` lines before it)
        self.offset = resolver.offset
        self.edited = _edited_lines(ops)
        self.blank_before = False  # the line before the chunk is blank (set by the engine)
        removed: Dict[int, set] = {}
        parents: Dict[int, Any] = {}
        for op in ops:
            if op.kind == "remove":
                self._remove(resolver, op, removed, parents)
            else:
                self._keep(op)
        for line_id, small in removed.items():
            if len(small) == len(parents[line_id].body):
                self.remove_lines.add(line_id)
            else:
                self.remove_small.update(small)

    def _keep(self, op: Op) -> None:
        """Record an op other than `remove` by the id of its node."""
        key = id(op.node)
        if op.kind in ("expr", "replace_small", "replace_line"):
            getattr(self, op.kind)[key] = op.payload
        elif op.kind == "kw":
            self.kw.setdefault(key, []).append(op.payload)
        else:  # after, body_end
            getattr(self, op.kind).setdefault(key, []).extend(op.payload)

    def _remove(self, resolver: Resolver, op: Op, removed: Dict[int, set], parents: Dict[int, Any]) -> None:
        """A removed small statement on a line of several is removed alone; the line goes when all go."""
        parent = resolver.line_of.get(id(op.node))
        if isinstance(op.node, cst.BaseSmallStatement) and isinstance(parent, cst.SimpleStatementLine):
            removed.setdefault(id(parent), set()).add(id(op.node))
            parents[id(parent)] = parent
        elif isinstance(op.node, cst.BaseSmallStatement):
            self.remove_small.add(id(op.node))
        else:
            self.remove_lines.add(id(op.node))

    # ------------------------------------------------------------ dispatch
    def on_visit(self, node: Any) -> bool:
        """Descend only into nodes that hold an edit."""
        rng = self.ranges.get(id(node))
        if rng is None:
            return True
        edited, offset = self.edited, self.offset
        first, last = min(rng[0][0] + offset, len(edited) - 1), min(rng[1][0] + offset, len(edited) - 1)
        return edited[last] - (edited[first - 1] if first > 0 else 0) > 0

    def on_leave(self, original: Any, updated: Any) -> Any:
        key = id(original)
        if key in self.expr:
            return replaced_expression(updated, self.expr[key])
        if key in self.kw:
            for name, value in self.kw[key]:
                updated = set_keyword(updated, name, value)
        if isinstance(original, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            updated = self._smalls(original, updated)
        elif isinstance(original, (cst.IndentedBlock, cst.Module)):
            updated = self._block(original, updated)
        if key in self.body_end:
            block = updated.body
            updated = updated.with_changes(body=block.with_changes(body=list(block.body) + self.body_end[key]))
        return updated

    def _smalls(self, original: Any, updated: Any) -> Any:
        if not any(id(s) in self.remove_small or id(s) in self.replace_small for s in original.body):
            return updated
        out: List[Any] = []
        for orig, upd in zip(original.body, updated.body):
            if id(orig) in self.remove_small:
                continue
            if id(orig) in self.replace_small:
                new = list(self.replace_small[id(orig)])
                new[-1] = new[-1].with_changes(semicolon=upd.semicolon)
                out.extend(new)
            else:
                out.append(upd)
        if not out:
            out = [cst.Pass()]
        fixed = []
        for i, stmt in enumerate(out):
            last = i == len(out) - 1
            if not last and not isinstance(stmt.semicolon, cst.Semicolon):
                stmt = stmt.with_changes(semicolon=cst.Semicolon(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" ")))
            elif last and stmt is not updated.body[-1]:
                stmt = stmt.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            fixed.append(stmt)
        return updated.with_changes(body=fixed)

    def _block(self, original: Any, updated: Any) -> Any:
        """A block (or the module) with its removed, replaced and inserted statements."""
        if not any(id(s) in self.remove_lines or id(s) in self.replace_line or id(s) in self.after
                   for s in original.body):
            return updated
        is_module = isinstance(original, cst.Module)
        out: List[Any] = []
        carry: List[Any] = []  # the leading lines of removed statements, for the next one kept
        for orig, upd in zip(original.body, updated.body):
            key = id(orig)
            if key in self.remove_lines:
                carry.extend(upd.leading_lines)
            elif key in self.replace_line:
                out.extend(self._replacement(upd, key, carry))
            else:
                if carry:
                    upd = upd.with_changes(leading_lines=_join_leading(carry, upd.leading_lines))
                elif is_module and not out and self.blank_before and orig is not original.body[0]:
                    # the chunk's first statements were removed, a blank line precedes the chunk
                    upd = upd.with_changes(leading_lines=_drop_one_blank(upd.leading_lines))
                out.append(upd)
            if key not in self.remove_lines:
                carry = []
            inserted = list(self.after.get(key, ()))
            if inserted and carry:
                inserted[0] = inserted[0].with_changes(leading_lines=carry + list(inserted[0].leading_lines))
                carry = []
            out.extend(inserted)
        if not out and not is_module:
            out = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carry)]
            carry = []
        comments = [line for line in carry if line.comment is not None]
        return updated.with_changes(body=out, footer=comments + list(updated.footer))

    def _replacement(self, upd: Any, key: int, carry: List[Any]) -> List[Any]:
        """The statements replacing `upd`, with its leading lines (and those carried from removed ones)."""
        new = list(self.replace_line[key])
        new[0] = new[0].with_changes(leading_lines=carry + list(upd.leading_lines) + list(new[0].leading_lines))
        if len(new) == 1 and isinstance(upd, cst.SimpleStatementLine) and isinstance(new[0], cst.SimpleStatementLine):
            new[0] = new[0].with_changes(trailing_whitespace=upd.trailing_whitespace)
        return new


def replaced_expression(old: Any, new: Any) -> Any:
    """`new` in place of `old`: keeps `old`'s parentheses, adds some where `new` binds less tightly."""
    if getattr(old, "lpar", None) and not new.lpar:
        return new.with_changes(lpar=old.lpar, rpar=old.rpar)
    if not getattr(old, "lpar", None) and type(new).__name__ not in ATOMS and type(new) is not type(old):
        return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return new


def _drop_one_blank(own: Sequence[Any]) -> List[Any]:
    """`own` with one blank line fewer when it has two or more (the blank line before the removed
    statements already separates): no new run of 3 blank lines (E303), and 2 stay before a `def`."""
    lines = list(own)
    blanks = [i for i, line in enumerate(lines) if line.comment is None]
    if len(blanks) >= 2:
        del lines[blanks[0]]
    return lines


def _join_leading(carried: Sequence[Any], own: Sequence[Any]) -> List[Any]:
    """The leading lines of a statement that follows removed ones: the removed statements' comments are
    kept, their blank lines only where the statement has none of its own (no run of 3 blank lines, E303)."""
    if any(line.comment is None for line in own):
        carried = [line for line in carried if line.comment is not None]
    return list(carried) + list(own)


def set_keyword(call: Any, name: str, value: Any) -> Any:
    """Set keyword `name` on `call`: replace its value, or append it in the call's own layout."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value=value, keyword=cst.Name(name),
                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace("")))
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    trailing = isinstance(last.comma, cst.Comma)
    end = last.comma.whitespace_after if trailing else last.whitespace_after_arg
    prev = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) \
        else call.whitespace_before_args
    if isinstance(end, cst.ParenthesizedWhitespace) and isinstance(prev, cst.ParenthesizedWhitespace):
        # one argument per line: the new one goes on its own line, comments stay where they were
        sep = end.with_changes(last_line=prev.last_line)
        tail = end.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    else:
        sep, tail = cst.SimpleWhitespace(" "), end
    if trailing:
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=sep))
        new = new.with_changes(comma=last.comma.with_changes(whitespace_after=tail))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=sep),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=tail)
    return call.with_changes(args=args + [new])


def local_edits(ops: Sequence[Op]) -> Optional[Dict[int, Tuple[Op, Any]]]:
    """id(node) -> (an op on it, the node with all its ops applied), for ops that each replace an expression
    or set a keyword of a call, none inside another (so each node's code can be printed where it stands);
    None otherwise (the transformer's job)."""
    edited: Dict[int, Tuple[Op, Any]] = {}
    for op in ops:
        if op.kind not in ("expr", "kw") or (op.kind == "expr" and id(op.node) in edited) or not op.anchor:
            return None
        node = edited[id(op.node)][1] if id(op.node) in edited else op.node
        edited[id(op.node)] = (op, replaced_expression(node, op.payload) if op.kind == "expr"
                               else set_keyword(node, *op.payload))
    anchors = sorted(op.anchor for op, _ in edited.values())  # type: ignore[type-var]
    if any(a[1] > b[0] for a, b in zip(anchors, anchors[1:])):  # nested or overlapping
        return None
    return edited
