"""FLWR expressions of the WXQuery parser, with the window clauses that make them continuous.

A subscription's for clauses are where streams enter and where windows ``|count N step M|`` and
``|path diff N step M|`` cut them into finite pieces; its let clauses bind aggregates of those
pieces. This layer parses the clause structure and the windows; the return expression, the
sources and the aggregate calls are expressions, which the subclass ``ExpressionParser``
supplies through the abstract ``parse_expr_single`` and ``parse_primary``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

from . import ast
from .condition_parser import ConditionParser
from .errors import WXQueryStaticError
from .operators.definitions import MAX_KEY_PATHS
from .refused_constructs import ordering_refused


class FlwrParser(ConditionParser):
    """Parses for/let/where/return and the windows of for clauses."""

    @abstractmethod
    def parse_expr_single(self) -> ast.Expr:
        """One expression without a top-level comma (see ``ExpressionParser``)."""

    @abstractmethod
    def parse_primary(self) -> ast.Expr:
        """A path, call, constructor, literal or parenthesized expression (see
        ``ExpressionParser``)."""

    def parse_flwr(self) -> ast.FLWR:
        """for/let clauses, at most one where, then return; refuses XQuery 3 clauses by name.
        Each binding counts as a level of nesting (``parse_binding``)."""
        start = self.pos
        clauses: list[ast.Clause] = []
        while True:
            if self.accept_keyword("for"):
                clauses.append(self.parse_binding(self.parse_for_binding))
                while self.accept(","):
                    clauses.append(self.parse_binding(self.parse_for_binding))
            elif self.accept_keyword("let"):
                clauses.append(self.parse_binding(self.parse_let_binding))
                while self.accept(","):
                    clauses.append(self.parse_binding(self.parse_let_binding))
            else:
                break
        where = None
        if self.accept_keyword("where"):
            where = self.parse_conjunction(in_predicate=False)
        name = self.peek_name()
        if name in ("order", "group", "stable"):
            raise self.error(ordering_refused(name))
        if name == "count" and self.after_ws_is(self.pos + 5, "$"):
            raise self.error("the XQuery 3 'count' clause is not supported")
        if name == "where" and where is not None:
            raise self.error("only one where clause is allowed; join the conditions with 'and'")
        if name in ("for", "let"):
            raise self.error(f"'{name}' after 'where' is not supported: put all for/let clauses "
                             "before the where clause")
        self.expect_keyword_with_hint("return", "'return' (or 'where', 'for', 'let')")
        ret = self.parse_expr_single()
        self.depth -= len(clauses)
        return ast.FLWR(tuple(clauses), where, ret, self.position(start))

    def parse_binding(self, parse: Callable[[], ast.Clause]) -> ast.Clause:
        """A for or let binding, one level deeper than the previous one: each is a loop (or
        binding) around everything after it, and the evaluator nests them so."""
        self.skip_ws()
        self.enter(self.pos)
        return parse()

    def parse_for_binding(self) -> ast.ForClause:
        """``$v in path`` with an optional window ``|...|`` after the path."""
        var, start = self.parse_variable_name()
        if self.peek_keyword("at"):
            raise self.error("positional variables ('at $i') are not supported")
        if self.peek_keyword("as"):
            raise self.error("type declarations ('as ...') are not supported")
        self.expect_keyword_with_hint("in", "'in'")
        source = self.parse_source_path()
        window = self.parse_window() if self.peek("|") and not self.peek("||") else None
        return ast.ForClause(var, source, window, self.position(start))

    def parse_source_path(self) -> ast.PathExpr:
        """What a for clause iterates over: a path from stream("name") or from a variable."""
        self.skip_ws()
        at = self.pos
        expr = self.parse_primary()
        if not isinstance(expr, ast.PathExpr):
            raise self.error("a for clause iterates over a path starting at stream(\"name\") or a "
                             "variable", at)
        return expr

    def parse_let_binding(self) -> ast.LetClause:
        """``$a := agg(path)``: a let clause binds nothing but an aggregate."""
        var, start = self.parse_variable_name()
        if self.peek_keyword("as"):
            raise self.error("type declarations ('as ...') are not supported")
        self.expect(":=", "':='")
        self.skip_ws()
        at = self.pos
        name = self.peek_name()
        if name not in ast.AGGREGATE_FUNCTIONS or not self.after_ws_is(at + len(name), "("):
            raise self.error("a let clause binds an aggregate: min, max, sum, count or avg of a "
                             "path, e.g. let $a := avg($w/en)", at)
        call = self.parse_primary()
        assert isinstance(call, ast.AggregateCall)
        return ast.LetClause(var, call, self.position(start))

    def parse_window(self) -> ast.Window:
        """``|count N step M by K|`` or ``|ref/path diff N step M by K|``; without step, tumbling;
        with ``by``, partitioned by key path K."""
        start = self.expect("|")
        self.skip_ws()
        name = self.peek_name()
        if name == "count" and self.peek_following_is_number(5):
            self.pos += 5
            size = self.read_window_number("the window size", integer=True)
            step = size
            if self.accept_keyword("step"):
                step = self.read_window_number("the step size", integer=True)
            by = self.parse_window_key(step is size)
            return ast.CountWindow(int(size.value), int(step.value), self.position(start), by)
        if name is None and not self.peek("@"):  # (a reference may be an attribute: |@t diff 10|)
            raise self.expected("'count N' or 'path diff N' in the window")
        ref = self.parse_relative_names()
        if not self.accept_keyword("diff"):
            raise self.expected("'diff' after the window's reference path (or 'count N')")
        size = self.read_window_number("the window size", integer=False)
        step = size
        if self.accept_keyword("step"):
            step = self.read_window_number("the step size", integer=False)
        by = self.parse_window_key(step is size)
        return ast.TimeWindow(ref, size, step, self.position(start), by)

    def parse_window_key(self, may_step: bool) -> tuple[tuple[str, ...], ...]:
        """``by path, path… |``, the keys a window is partitioned by (CQL's PARTITION BY), or
        just the closing ``|``. Each key is a relative path without predicates, named once."""
        if not self.accept_keyword("by"):
            self.expect("|", "'|' closing the window (or 'step', 'by')" if may_step
                        else "'|' closing the window (or 'by')")
            return ()
        keys: list[tuple[str, ...]] = []
        while True:
            self.skip_ws()
            at = self.pos
            if len(keys) == MAX_KEY_PATHS:
                raise WXQueryStaticError(f"a window is partitioned by at most {MAX_KEY_PATHS} key paths",
                                         self.position(at))
            if self.peek_name() is None and not self.peek("@"):
                if keys:
                    raise self.expected("a key path after ',', e.g. |count 10 by chip, @src|")
                raise self.expected("the key path after 'by', e.g. |count 10 by chip|")
            names = self.parse_relative_names()
            self.skip_ws()
            if self.peek("["):
                raise self.error("a window's key is a path without predicates; filter the items before "
                                 "the window instead, e.g. stream(\"s\")/s/item[...] |count 10 by key|")
            if names in keys:
                raise WXQueryStaticError(f"the key path {'/'.join(names)} is named twice in the window's "
                                         f"keys; name each key once, e.g. |count 10 by chip, @src|",
                                         self.position(at))
            keys.append(names)
            if not self.peek(","):
                break
            self.pos += 1
        self.expect("|", "',' and another key path or '|' closing the window")
        return tuple(keys)

    def read_window_number(self, what: str, integer: bool) -> ast.Number:
        """A window size or step: positive, and whole for count windows. Wrong values are
        static errors (the text parses, but the window is meaningless)."""
        self.skip_ws()
        at = self.pos
        number = self.read_number(what)
        if number.value <= 0:
            raise WXQueryStaticError(f"{what} must be positive, got {number.text}", self.position(at))
        if integer and number.value.denominator != 1:
            raise WXQueryStaticError(f"{what} of a count window must be a whole number of items, "
                                     f"got {number.text}", self.position(at))
        return number
