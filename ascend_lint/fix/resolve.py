"""From a rule's edit to a libcst node: the resolved operation (`Op`), the resolver mapping spans to the
nodes of a parsed chunk, and the parse of the edit texts.

Imported only when a fix is applied (libcst is slow to import)."""
from __future__ import annotations

import ast
import functools
import textwrap
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

with warnings.catch_warnings():  # libcst.metadata warns about its own typing imports
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst as cst
    import libcst.helpers  # noqa: F401  (get_full_name_for_node)
    from libcst.metadata import MetadataWrapper, PositionProvider

from ..rule import Edit

Range = Tuple[Tuple[int, int], Tuple[int, int]]


@dataclass
class Op:
    """One resolved edit: `kind` is expr | kw | remove | replace_small | replace_line | after | body_end."""

    kind: str
    node: Any  # the libcst node (of the tree being transformed) the edit attaches to
    payload: Any = None
    dest: Optional[Range] = None  # the source range it destroys
    anchor: Optional[Range] = None  # the range of the node it needs intact
    key: Optional[tuple] = None  # exclusive per key (one keyword setting per call and name)
    noop: bool = False


class ChunkParse:
    """The libcst parse of one chunk's text and its node positions, in lines counted from the chunk's first
    (read-only: kept in the cache below, shared by every Resolver of that text wherever it stands)."""

    def __init__(self, wrapper: Any) -> None:
        self.module = wrapper.module
        self.line_of: Dict[int, Any] = {}  # small statement -> its SimpleStatementLine/Suite
        self.ranges: Dict[int, Range] = {}
        self.by_span: Dict[Range, List[Any]] = {}
        self.statements: List[Any] = []
        self.has_blocks = False
        for node, pos in wrapper.resolve(PositionProvider).items():
            rng = ((pos.start.line, pos.start.column), (pos.end.line, pos.end.column))
            self.ranges[id(node)] = rng
            self.by_span.setdefault(rng, []).append(node)
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                self.statements.append(node)
            elif isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    self.line_of[id(small)] = node
            elif isinstance(node, cst.IndentedBlock):
                self.has_blocks = True


class Resolver:
    """Maps rule spans to libcst nodes and parses the edit texts."""

    def __init__(self, parsed: ChunkParse, offset: int = 0) -> None:
        """`offset`: lines before the parsed chunk; ranges are given in the file's line numbers."""
        self.parsed = parsed
        self.offset = offset
        self.module = parsed.module
        self.line_of = parsed.line_of
        self.statements = parsed.statements
        self.has_blocks = parsed.has_blocks

    # ---------------------------------------------------------------- lookups
    def range(self, node: Any) -> Range:
        return self.shifted(self.parsed.ranges[id(node)])

    def range_of(self, node: Any) -> Optional[Range]:
        rng = self.parsed.ranges.get(id(node))
        return None if rng is None else self.shifted(rng)

    def shifted(self, rng: Range) -> Range:
        (line, col), (end_line, end_col) = rng
        return (line + self.offset, col), (end_line + self.offset, end_col)

    def exact(self, span: Any, kinds: tuple) -> Optional[Any]:
        key = ((span.line - self.offset, span.col), (span.end_line - self.offset, span.end_col))
        return next((n for n in self.parsed.by_span.get(key, ()) if isinstance(n, kinds)), None)

    def containing(self, span: Any, kinds: tuple) -> Optional[Any]:
        """The innermost statement of `kinds` whose range holds `span`."""
        target = ((span.line, span.col), (span.end_line, span.end_col))
        best, best_rng = None, None
        for node in self.statements:
            rng = self.range(node)
            if isinstance(node, kinds) and rng[0] <= target[0] and target[1] <= rng[1]:
                if best_rng is None or (best_rng[0] <= rng[0] and rng[1] <= best_rng[1]):
                    best, best_rng = node, rng
        return best

    def source(self, node: Any) -> str:
        return self.module.code_for_node(node)

    # ---------------------------------------------------------------- texts
    def expression(self, text: str, renames: Dict[str, str]) -> Any:
        node = _parse_expression(text.strip())
        return _rename(node, renames) if renames else node

    def statements_of(self, text: str, renames: Dict[str, str]) -> List[Any]:
        src = textwrap.dedent(text)
        blank = len(src) - len(src.lstrip("\n"))
        module = cst.parse_module(src.strip("\n") + "\n")
        body = list(module.body)
        if not body:
            raise ValueError("no statement in the fix text")
        lead = [cst.EmptyLine(indent=False)] * blank + list(module.header) + list(body[0].leading_lines)
        body[0] = body[0].with_changes(leading_lines=lead)
        return [_rename(s, renames) for s in body] if renames else body

    def same_code(self, node: Any, text: str) -> bool:
        """Is `text` the code already at `node` (up to whitespace and layout)?"""
        old = self.source(node)
        if "".join(old.split()) != "".join(text.split()):
            return False
        return _expression_dump(old) == _expression_dump(text)

    # ---------------------------------------------------------------- edits
    def resolve(self, edit: Edit, renames: Dict[str, str]) -> Op:
        """One edit as an Op; raises LookupError (no target) or ValueError (bad text)."""
        handler = _HANDLERS.get(edit.op)
        if handler is None:
            raise ValueError(f"unknown edit operation {edit.op!r}")
        return handler(self, edit, renames)

    def _not_found(self, edit: Edit) -> LookupError:
        return LookupError(f"the {edit.op} target was not found in the source")

    def _replace(self, edit: Edit, renames: Dict[str, str]) -> Op:
        try:
            expr = self.expression(edit.text, renames)
        except Exception:
            expr = None
        node = self.exact(edit.span, (cst.BaseExpression,)) if expr is not None else None
        if node is not None:
            rng = self.range(node)
            return Op("expr", node, expr, rng, rng, noop=self.same_code(node, edit.text))
        node = self.exact(edit.span, _STATEMENTS)
        if node is None:
            raise self._not_found(edit)
        stmts = self._parse_statements(edit.text, renames)
        small = isinstance(node, cst.BaseSmallStatement)
        if small and len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine):
            rng = self.range(node)
            return Op("replace_small", node, list(stmts[0].body), rng, rng)
        if small:
            parent = self.line_of.get(id(node))
            if not (isinstance(parent, cst.SimpleStatementLine) and len(parent.body) == 1):
                raise LookupError("several statements cannot replace one of several on a line")
            node = parent
        rng = self.range(node)
        return Op("replace_line", node, stmts, rng, rng)

    def _set_keyword(self, edit: Edit, renames: Dict[str, str]) -> Op:
        call = self.exact(edit.span, (cst.Call,))
        if call is None or not edit.name:
            raise self._not_found(edit)
        value = self._parse_expression(edit.text, renames)
        existing = next((a for a in call.args if a.keyword is not None and a.keyword.value == edit.name), None)
        dest = self.range(existing.value) if existing is not None else None
        noop = existing is not None and self.same_code(existing.value, edit.text)
        return Op("kw", call, (edit.name, value), dest, self.range(call), key=("kw", id(call), edit.name),
                  noop=noop)

    def _remove_statement(self, edit: Edit, renames: Dict[str, str]) -> Op:
        node = self.exact(edit.span, _STATEMENTS) or self.containing(edit.span, (cst.BaseSmallStatement,))
        if node is None:
            raise self._not_found(edit)
        rng = self.range(node)
        return Op("remove", node, None, rng, rng)

    def _insert_after(self, edit: Edit, renames: Dict[str, str]) -> Op:
        node = self.exact(edit.span, _STATEMENTS) or self.containing(edit.span, _STATEMENTS)
        if node is None:
            raise self._not_found(edit)
        if isinstance(node, cst.BaseSmallStatement):
            node = self.line_of.get(id(node))
            if not isinstance(node, cst.SimpleStatementLine):
                raise LookupError("cannot insert after a statement on its compound statement's line")
        return Op("after", node, self._parse_statements(edit.text, renames), None, self.range(node))

    def _insert_body_end(self, edit: Edit, renames: Dict[str, str]) -> Op:
        compound = (cst.BaseCompoundStatement,)
        node = self.exact(edit.span, compound) or self.containing(edit.span, compound)
        if node is None or not isinstance(getattr(node, "body", None), cst.IndentedBlock):
            raise self._not_found(edit)
        return Op("body_end", node, self._parse_statements(edit.text, renames), None, self.range(node))

    def _parse_expression(self, text: str, renames: Dict[str, str]) -> Any:
        try:
            return self.expression(text, renames)
        except Exception as exc:
            raise ValueError(f"fix text is not an expression: {text!r}") from exc

    def _parse_statements(self, text: str, renames: Dict[str, str]) -> List[Any]:
        try:
            return self.statements_of(text, renames)
        except Exception as exc:
            raise ValueError(f"fix text is not a statement: {text!r}") from exc


@functools.lru_cache(maxsize=256)
def _parse_expression(text: str) -> Any:
    """libcst nodes are immutable: one parse per distinct fix text is enough."""
    return cst.parse_expression(text)


@functools.lru_cache(maxsize=256)
def _expression_dump(text: str) -> Optional[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.dump(ast.parse("(" + text.strip() + ")", mode="eval"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _rename(node: Any, renames: Dict[str, str]) -> Any:
    """Spell module `M` as its alias `A` (from `import M as A`) inside a fix's new code."""

    class Renamer(cst.CSTTransformer):
        def leave_Attribute(self, original: Any, updated: Any) -> Any:
            updated = updated.with_changes(attr=original.attr)
            return self._swap(original, updated)

        def leave_Name(self, original: Any, updated: Any) -> Any:
            return self._swap(original, updated)

        def leave_Arg(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(keyword=original.keyword)

        def _swap(self, original: Any, updated: Any) -> Any:
            dotted = cst.helpers.get_full_name_for_node(original)
            if dotted in renames:
                alias = cst.parse_expression(renames[dotted])
                return alias.with_changes(lpar=updated.lpar, rpar=updated.rpar)
            return updated

    return node.visit(Renamer())


ATOMS = ("Name", "Attribute", "Call", "Subscript", "SimpleString", "ConcatenatedString", "FormattedString",
         "Integer", "Float", "Imaginary", "List", "Dict", "Set", "ListComp", "SetComp", "DictComp",
         "GeneratorExp", "Ellipsis")


_PARSES: "OrderedDict[str, Tuple[Optional[ChunkParse], str]]" = OrderedDict()
RESOLVER_CACHE = 4  # chunk texts kept parsed: fixes applied one at a time (editors) reuse them (the language
# server keeps more: a document is fixed again after each edit, and its unchanged statements' parses are reused)
PARSES = [0]  # libcst parses of a chunk so far (tests count them)


def chunk_resolver(source: str, first: int) -> Tuple[Optional[Resolver], str]:
    """(resolver, error) for the chunk `source` starting at line `first`; the parse of a text is read-only,
    so the last few are kept, wherever the text stands: the libcst parse and its positions are most of a
    fix's cost."""
    found = _PARSES.get(source)
    if found is not None:
        _PARSES.move_to_end(source)
    else:
        try:
            PARSES[0] += 1
            module = cst.parse_module(source)
            found = (ChunkParse(MetadataWrapper(module, unsafe_skip_copy=True)), "")
        except Exception as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            found = (None, message)
        _PARSES[source] = found
        while len(_PARSES) > RESOLVER_CACHE:
            _PARSES.popitem(last=False)
    parsed, message = found
    if parsed is None:
        return None, f"libcst could not parse the statement at line {first}: {message}"
    return Resolver(parsed, first - 1), ""


_STATEMENTS = (cst.BaseSmallStatement, cst.BaseCompoundStatement)
_HANDLERS = {"replace": Resolver._replace, "set_keyword": Resolver._set_keyword,
             "remove_statement": Resolver._remove_statement, "insert_after": Resolver._insert_after,
             "insert_body_end": Resolver._insert_body_end}
