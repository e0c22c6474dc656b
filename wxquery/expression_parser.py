"""Expressions of the WXQuery parser: the top of the grammar, which ties the layers together.

An expression is a sequence, a FLWR, an if, a direct constructor, a path or a number, so this
layer dispatches to the FLWR, condition, path and constructor layers it inherits, and supplies
the expression entry points those layers declare as abstract. ``ExpressionParser`` is the
complete parser; ``wxquery.parser.parse`` is its public front.
"""

from __future__ import annotations

from . import ast
from .constructor_parser import ConstructorParser
from .flwr_parser import FlwrParser
from .refused_constructs import REFUSED_EXPRESSION_KEYWORDS, SUPPORTED, unexpected_after_expression


class ExpressionParser(FlwrParser, ConstructorParser):
    """The recursive-descent parser of a whole WXQuery subscription."""

    def parse_query(self) -> ast.Expr:
        """The whole text as one expression; anything left over is explained, not ignored."""
        self.parse_prolog()
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.error("empty query: " + SUPPORTED)
        body = self.parse_expr()
        self.skip_ws()
        if self.pos < len(self.text):
            raise unexpected_after_expression(self)
        return body

    def parse_expr(self) -> ast.Expr:
        """Comma-separated expressions; one alone is itself, not a sequence of one."""
        start = self.pos
        items = [self.parse_expr_single()]
        while self.accept(","):
            items.append(self.parse_expr_single())
        if len(items) == 1:
            return items[0]
        return ast.SequenceExpr(tuple(items), self.position(start))

    def parse_expr_single(self) -> ast.Expr:
        """FLWR, if, or a primary; keywords of full XQuery constructs are refused by name."""
        self.skip_ws()
        start = self.pos
        self.enter(start)
        try:
            name = self.peek_name()
            if name in ("for", "let") and self.after_ws_is(self.pos + len(name), "$"):
                return self.parse_flwr()
            if name == "for" and self.peek_following_name(len(name)) in ("tumbling", "sliding"):
                raise self.error("XQuery 3 window clauses are not supported; write the window after "
                                 "the path: for $w in stream(\"s\")/r/i |count 10 step 5|")
            if name == "if" and (self.after_ws_is(self.pos + 2, "(") or self.after_ws_is(self.pos + 2, "$")):
                return self.parse_if()
            if name in REFUSED_EXPRESSION_KEYWORDS and (
                    self.after_ws_is(self.pos + len(name), "(") or self.after_ws_is(self.pos + len(name), "{")
                    or self.after_ws_is(self.pos + len(name), "$")
                    or name in ("declare", "import", "module", "xquery")):
                raise self.error(REFUSED_EXPRESSION_KEYWORDS[name])
            expr = self.parse_primary()
            self.pos = max(self.pos, start)
            return expr
        finally:
            self.depth -= 1

    def parse_if(self) -> ast.IfExpr:
        """``if (condition) then e1 else e2``; the condition is a conjunction of comparisons."""
        start = self.pos
        self.expect_keyword("if")
        if self.peek("(") and not self.peek("(:"):
            self.expect("(")
            cond = self.parse_conjunction(in_predicate=False)
            self.skip_ws()
            if not self.accept(")"):
                raise self.expected("')' closing the if condition")
        else:
            cond = self.parse_conjunction(in_predicate=False)
        self.expect_keyword_with_hint("then", "'then'")
        then = self.parse_expr_single()
        if not self.accept_keyword("else"):
            raise self.expected("'else' (an if expression needs both branches; use else () for none)")
        otherwise = self.parse_expr_single()
        return ast.IfExpr(cond, then, otherwise, self.position(start))

    def parse_primary(self) -> ast.Expr:
        """Constructors, parenthesized expressions, variable paths, numbers and calls; says why
        for everything else a primary expression could be in XQuery."""
        self.skip_ws()
        start = self.pos
        text = self.text
        if start >= len(text):
            raise self.expected("an expression")
        c = text[start]
        if c == "<":
            if text.startswith("<!--", start):
                raise self.error("XML comments in constructors are not supported")
            if text.startswith("<?", start) or text.startswith("<!", start):
                raise self.error("processing instructions and declarations are not supported")
            return self.parse_constructor()
        if c == "(":
            self.pos += 1
            if self.accept(")"):
                return ast.SequenceExpr((), self.position(start))
            inner = self.parse_expr()
            if not self.accept(")"):
                raise self.expected("')'")
            if isinstance(inner, ast.PathExpr) and self.peek("/"):
                raise self.error("a path cannot continue after a parenthesized expression")
            return inner
        if c == "$":
            name, _ = self.parse_variable_name()
            root = ast.VarRef(name, self.position(start))
            return self.parse_steps(root, start, in_condition=False)
        if c == "/":
            raise self.error("absolute paths are not supported: start a path at stream(\"name\") "
                             "or at a variable")
        if c in "\"'":
            raise self.error("string literals are only allowed as the argument of stream(\"name\")")
        if c == "." and not self.at_number():
            raise self.error("the context item '.' is only allowed inside a path predicate [...]")
        if self.at_number() and c not in "+":
            number = self.read_number()
            return ast.NumberLiteral(number, self.position(start))
        if c in "-+":
            raise self.error("arithmetic is not supported outside comparisons")
        if c == "@":
            raise self.error("an attribute is reached from an element: start at a variable, e.g. $p/@id")
        if c == "*":
            raise self.error("wildcards ('*') are not supported")
        name = self.peek_name()
        if name is None:
            raise self.expected("an expression")
        after = start + len(name)
        if self.after_ws_is(after, "("):
            return self.parse_function_call(name, start)
        if name in ("or", "and", "return", "where", "then", "else", "in", "satisfies"):
            raise self.expected("an expression")
        raise self.error(f"a path cannot start with '{name}': start it at stream(\"name\") or at a "
                         "variable, e.g. $p/" + name)

    def parse_function_call(self, name: str, start: int) -> ast.Expr:
        """``stream("name")/...`` or an aggregate of a path: the only functions there are."""
        self.pos = start + len(name)
        self.expect("(")
        if name == "stream":
            self.skip_ws()
            if self.pos < len(self.text) and self.text[self.pos] not in "\"'":
                raise self.expected("a stream name in quotes, e.g. stream(\"photons\")")
            stream_name = self.read_string()
            if not stream_name:
                raise self.error("stream name must not be empty", start)
            if not self.accept(")"):
                raise self.expected("')' after the stream name")
            root = ast.StreamCall(stream_name, self.position(start))
            self.stream_steps = 2  # (the root and the items may be in a namespace)
            try:
                return self.parse_steps(root, start, in_condition=False)
            finally:
                self.stream_steps = 0
        if name in ast.AGGREGATE_FUNCTIONS:
            self.skip_ws()
            at = self.pos
            arg = self.parse_expr_single()
            if not isinstance(arg, ast.PathExpr):
                raise self.error(f"the argument of {name}() must be a path, e.g. {name}($w/en)", at)
            if self.peek(","):
                raise self.error(f"{name}() takes exactly one argument")
            if not self.accept(")"):
                raise self.expected(f"')' closing {name}(")
            if self.peek("/"):
                raise self.error(f"a path cannot continue after {name}(...)")
            return ast.AggregateCall(name, arg, self.position(start))
        if name in ("doc", "document", "collection"):
            raise self.error(f"{name}() is not supported: inputs are data streams, use stream(\"name\")", start)
        if name in ("if",):
            raise self.expected("an expression")
        if name in ("not", "exists", "empty", "boolean", "true", "false"):
            raise self.error(f"function {name}() is not supported: conditions are conjunctions of "
                             "comparisons", start)
        raise self.error(f"function {name}() is not supported: the only functions are stream() and "
                         "the aggregates min, max, sum, count and avg", start)
