"""Recursive-descent parser for WXQuery (Definition 2.1 of the StreamGlobe paper).

The parser works directly on the characters, because XQuery's direct element constructors
switch between expression and XML-content lexing. It accepts exactly the fragment and refuses
everything else *by name* (``or``, ``//``, ``order by``, unsupported functions, ...) with the
line and column of the offending construct — it never guesses what an unsupported construct
means. It raises only ``WXQueryError`` subclasses, whatever the input.
"""

from __future__ import annotations

import bisect
import re
from fractions import Fraction

from . import ast
from .errors import Position, WXQueryError, WXQueryStaticError, WXQuerySyntaxError

_NAME_START = r"A-Za-z_\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD"
_NAME_RE = re.compile(rf"[{_NAME_START}][{_NAME_START}\-.0-9\u00B7\u0300-\u036F\u203F-\u2040]*")
_NUMBER_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_MIRROR = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_VALUE_COMPARISONS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}

SUPPORTED = (
    "WXQuery supports element constructors, for/let/where/return, windows |count N step M| and "
    "|path diff N step M|, min/max/sum/count/avg, conjunctions of comparisons, if-then-else, "
    "sequences and stream(\"name\")"
)

# Keywords of full XQuery that start constructs outside the fragment, with the reason we give.
_REFUSED_EXPRESSION_KEYWORDS = {
    "some": "quantified expressions ('some ... satisfies') are not supported",
    "every": "quantified expressions ('every ... satisfies') are not supported",
    "typeswitch": "'typeswitch' is not supported",
    "switch": "'switch' is not supported",
    "declare": "prolog declarations ('declare ...') are not supported",
    "import": "module imports are not supported",
    "module": "library modules are not supported",
    "xquery": "version declarations are not supported",
    "try": "'try/catch' is not supported",
    "element": "computed element constructors are not supported; use a direct constructor <name>...</name>",
    "attribute": "attributes are not supported: WXQuery deals with elements only",
    "document": "computed document constructors are not supported",
    "text": "computed text constructors are not supported",
    "comment": "computed comment constructors are not supported",
    "function": "inline functions are not supported",
    "validate": "'validate' is not supported",
    "ordered": "'ordered' expressions are not supported",
    "unordered": "'unordered' expressions are not supported",
}


def parse(text: str) -> ast.Query:
    """Parse a WXQuery subscription into a typed AST (syntax only; see ``static_checks``)."""
    parser = _Parser(text)
    try:
        body = parser.parse_query()
    except WXQueryError:
        raise
    except RecursionError:
        raise WXQuerySyntaxError("query is nested too deeply", parser.position()) from None
    return ast.Query(body=body, source=text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\n|\r", text)]

    # ------------------------------------------------------------------ position & errors

    def position(self, at: int | None = None) -> Position:
        at = self.pos if at is None else at
        line = bisect.bisect_right(self.line_starts, at) - 1
        return Position(line + 1, at - self.line_starts[line] + 1)

    def error(self, message: str, at: int | None = None) -> WXQuerySyntaxError:
        return WXQuerySyntaxError(message, self.position(at))

    def describe_here(self) -> str:
        if self.pos >= len(self.text):
            return "end of query"
        m = _NAME_RE.match(self.text, self.pos)
        if m:
            return f"'{m.group()}'"
        return f"'{self.text[self.pos]}'"

    def expected(self, what: str) -> WXQuerySyntaxError:
        return self.error(f"expected {what}, found {self.describe_here()}")

    # ------------------------------------------------------------------ lexical helpers

    def skip_ws(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif text.startswith("(:", self.pos):
                self.skip_comment()
            else:
                break

    def skip_comment(self) -> None:
        start = self.pos
        depth = 0
        while self.pos < len(self.text):
            if self.text.startswith("(:", self.pos):
                depth += 1
                self.pos += 2
            elif self.text.startswith(":)", self.pos):
                depth -= 1
                self.pos += 2
                if depth == 0:
                    return
            else:
                self.pos += 1
        raise self.error("unterminated comment '(: ... :)'", start)

    def peek(self, s: str) -> bool:
        self.skip_ws()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> int:
        self.skip_ws()
        if not self.text.startswith(s, self.pos):
            raise self.expected(what or f"'{s}'")
        start = self.pos
        self.pos += len(s)
        return start

    def peek_name(self) -> str | None:
        self.skip_ws()
        m = _NAME_RE.match(self.text, self.pos)
        return m.group() if m else None

    def peek_keyword(self, word: str) -> bool:
        """A keyword is a name that is not followed by more name characters."""
        return self.peek_name() == word

    def accept_keyword(self, word: str) -> bool:
        if self.peek_keyword(word):
            self.pos += len(word)
            return True
        return False

    def expect_keyword(self, word: str) -> None:
        if not self.accept_keyword(word):
            raise self.expected(f"'{word}'")

    def read_name(self, what: str = "a name") -> tuple[str, int]:
        name = self.peek_name()
        if name is None:
            raise self.expected(what)
        if ":" in self.text[self.pos + len(name): self.pos + len(name) + 1] and not \
                self.text.startswith(":=", self.pos + len(name)):
            raise self.error("namespace prefixes are not supported", self.pos + len(name))
        start = self.pos
        self.pos += len(name)
        return name, start

    def after_ws_is(self, at: int, s: str) -> bool:
        """Whether ``s`` follows position ``at`` after white space (without consuming)."""
        saved = self.pos
        self.pos = at
        try:
            return self.peek(s)
        finally:
            self.pos = saved

    def read_number(self, what: str = "a number") -> ast.Number:
        self.skip_ws()
        start = self.pos
        sign = ""
        if self.text.startswith(("-", "+"), self.pos):
            sign = "-" if self.text[self.pos] == "-" else ""
            self.pos += 1
            self.skip_ws()
        m = _NUMBER_RE.match(self.text, self.pos)
        if not m:
            self.pos = start
            raise self.expected(what)
        self.pos = m.end()
        if self.pos < len(self.text) and _NAME_RE.match(self.text, self.pos):
            raise self.error(f"malformed number '{self.text[start:self.pos + 1]}'", start)
        literal = sign + m.group()
        return ast.Number(Fraction(m.group()) * (-1 if sign else 1), literal)

    def at_number(self) -> bool:
        self.skip_ws()
        i = self.pos
        if self.text.startswith(("-", "+"), i):
            i += 1
            while i < len(self.text) and self.text[i] in " \t\r\n":
                i += 1
        return bool(_NUMBER_RE.match(self.text, i))

    def read_string(self) -> str:
        self.skip_ws()
        quote = self.text[self.pos: self.pos + 1]
        if quote not in ('"', "'"):
            raise self.expected("a string literal")
        start = self.pos
        self.pos += 1
        out = []
        while True:
            end = self.text.find(quote, self.pos)
            if end < 0:
                raise self.error("unterminated string literal", start)
            out.append(self.text[self.pos:end])
            self.pos = end + 1
            if self.text.startswith(quote, self.pos):  # doubled quote escapes itself
                out.append(quote)
                self.pos += 1
            else:
                return "".join(out)

    # ------------------------------------------------------------------ expressions

    def parse_query(self) -> ast.Expr:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.error("empty query: " + SUPPORTED)
        body = self.parse_expr()
        self.skip_ws()
        if self.pos < len(self.text):
            raise self.unexpected_after_expression()
        return body

    def unexpected_after_expression(self) -> WXQuerySyntaxError:
        """Explain what is wrong with a token that cannot continue an expression."""
        self.skip_ws()
        name = self.peek_name()
        t = self.text[self.pos:]
        if name in ("or", "and"):
            return self.error(f"'{name}' is only allowed between comparisons in a where clause, "
                              "a predicate or an if condition" if name == "and" else
                              "'or' is not supported: conditions are conjunctions joined by 'and'")
        if name in ("div", "idiv", "mod"):
            return self.error(f"arithmetic ('{name}') is not supported outside comparisons")
        if name in ("union", "intersect", "except"):
            return self.error(f"'{name}' is not supported")
        if name in ("order", "group", "stable"):
            return self.error(f"'{name} by' is not supported: streams keep their arrival order")
        if t.startswith(("=", "<", ">", "!=")):
            return self.error("comparisons are only allowed in where clauses, predicates and if "
                              "conditions")
        if t.startswith(("+", "-", "*")):
            return self.error(f"arithmetic ('{t[0]}') is not supported outside comparisons")
        if t.startswith("|"):
            return self.error("'|' (union) is not supported; a window |...| must follow the path "
                              "of a for clause")
        if t.startswith("!"):
            return self.error("the simple map operator '!' is not supported")
        if t.startswith("||"):
            return self.error("string concatenation '||' is not supported")
        return self.error(f"unexpected {self.describe_here()}")

    def parse_expr(self) -> ast.Expr:
        start = self.pos
        items = [self.parse_expr_single()]
        while self.accept(","):
            items.append(self.parse_expr_single())
        if len(items) == 1:
            return items[0]
        return ast.SequenceExpr(tuple(items), self.position(start))

    def parse_expr_single(self) -> ast.Expr:
        self.skip_ws()
        start = self.pos
        name = self.peek_name()
        if name in ("for", "let") and self.after_ws_is(self.pos + len(name), "$"):
            return self.parse_flwr()
        if name == "for" and self.peek_following_name(len(name)) in ("tumbling", "sliding"):
            raise self.error("XQuery 3 window clauses are not supported; write the window after "
                             "the path: for $w in stream(\"s\")/r/i |count 10 step 5|")
        if name == "if" and (self.after_ws_is(self.pos + 2, "(") or self.after_ws_is(self.pos + 2, "$")):
            return self.parse_if()
        if name in _REFUSED_EXPRESSION_KEYWORDS and (
                self.after_ws_is(self.pos + len(name), "(") or self.after_ws_is(self.pos + len(name), "{")
                or self.after_ws_is(self.pos + len(name), "$")
                or name in ("declare", "import", "module", "xquery")):
            raise self.error(_REFUSED_EXPRESSION_KEYWORDS[name])
        expr = self.parse_primary()
        self.pos = max(self.pos, start)
        return expr

    def peek_following_name(self, offset: int) -> str | None:
        saved = self.pos
        self.pos += offset
        try:
            return self.peek_name()
        finally:
            self.pos = saved

    def parse_flwr(self) -> ast.FLWR:
        start = self.pos
        clauses: list[ast.Clause] = []
        while True:
            if self.accept_keyword("for"):
                clauses.append(self.parse_for_binding())
                while self.accept(","):
                    clauses.append(self.parse_for_binding())
            elif self.accept_keyword("let"):
                clauses.append(self.parse_let_binding())
                while self.accept(","):
                    clauses.append(self.parse_let_binding())
            else:
                break
        where = None
        if self.accept_keyword("where"):
            where = self.parse_conjunction(in_predicate=False)
        name = self.peek_name()
        if name in ("order", "group", "stable"):
            raise self.error(f"'{name} by' is not supported: streams keep their arrival order")
        if name == "count" and self.after_ws_is(self.pos + 5, "$"):
            raise self.error("the XQuery 3 'count' clause is not supported")
        if name == "where" and where is not None:
            raise self.error("only one where clause is allowed; join the conditions with 'and'")
        if name in ("for", "let"):
            raise self.error(f"'{name}' after 'where' is not supported: put all for/let clauses "
                             "before the where clause")
        self.expect_keyword_with_hint("return", "'return' (or 'where', 'for', 'let')")
        ret = self.parse_expr_single()
        return ast.FLWR(tuple(clauses), where, ret, self.position(start))

    def expect_keyword_with_hint(self, word: str, what: str) -> None:
        if not self.accept_keyword(word):
            self.skip_ws()
            if self.text.startswith(("or", "OR"), self.pos) and self.peek_name() == "or":
                raise self.error("'or' is not supported: conditions are conjunctions joined by 'and'")
            if self.text.startswith("!=", self.pos):
                raise self.error("'!=' is not supported; use =, <, <=, > or >=")
            raise self.expected(what)

    def parse_variable_name(self) -> tuple[str, int]:
        start = self.expect("$", "a variable '$name'")
        name, _ = self.read_name("a variable name after '$'")
        return name, start

    def parse_for_binding(self) -> ast.ForClause:
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
        self.skip_ws()
        at = self.pos
        expr = self.parse_primary()
        if not isinstance(expr, ast.PathExpr):
            raise self.error("a for clause iterates over a path starting at stream(\"name\") or a "
                             "variable", at)
        return expr

    def parse_let_binding(self) -> ast.LetClause:
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
        start = self.expect("|")
        self.skip_ws()
        name = self.peek_name()
        if name == "count" and self.peek_following_is_number(5):
            self.pos += 5
            size = self.read_window_number("the window size", integer=True)
            step = size
            if self.accept_keyword("step"):
                step = self.read_window_number("the step size", integer=True)
            self.expect("|", "'|' closing the window (or 'step')")
            return ast.CountWindow(int(size.value), int(step.value), self.position(start))
        if name is None:
            raise self.expected("'count N' or 'path diff N' in the window")
        ref = self.parse_relative_names()
        if not self.accept_keyword("diff"):
            raise self.expected("'diff' after the window's reference path (or 'count N')")
        size = self.read_window_number("the window size", integer=False)
        step = size
        if self.accept_keyword("step"):
            step = self.read_window_number("the step size", integer=False)
        self.expect("|", "'|' closing the window (or 'step')")
        return ast.TimeWindow(ref, size, step, self.position(start))

    def peek_following_is_number(self, offset: int) -> bool:
        saved = self.pos
        self.pos += offset
        try:
            return self.at_number()
        finally:
            self.pos = saved

    def read_window_number(self, what: str, integer: bool) -> ast.Number:
        self.skip_ws()
        at = self.pos
        number = self.read_number(what)
        if number.value <= 0:
            raise WXQueryStaticError(f"{what} must be positive, got {number.text}", self.position(at))
        if integer and number.value.denominator != 1:
            raise WXQueryStaticError(f"{what} of a count window must be a whole number of items, "
                                     f"got {number.text}", self.position(at))
        return number

    def parse_relative_names(self) -> tuple[str, ...]:
        names = [self.read_step_name()[0]]
        while self.peek("/"):
            if self.peek("//"):
                raise self.error("the descendant axis '//' is not supported; use child steps '/'")
            self.pos += 1
            names.append(self.read_step_name()[0])
        return tuple(names)

    def parse_if(self) -> ast.IfExpr:
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
            raise self.error("attributes ('@') are not supported: WXQuery deals with elements only")
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
            return self.parse_steps(root, start, in_condition=False)
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

    def read_step_name(self) -> tuple[str, int]:
        self.skip_ws()
        at = self.pos
        text = self.text
        if text.startswith("@", at):
            raise self.error("attributes ('@') are not supported: WXQuery deals with elements only")
        if text.startswith("*", at):
            raise self.error("wildcards ('*') are not supported: name each element")
        if text.startswith("..", at):
            raise self.error("the parent axis '..' is not supported")
        if text.startswith(".", at):
            raise self.error("'.' is not supported inside a path")
        name = self.peek_name()
        if name is None:
            raise self.expected("an element name")
        if text.startswith("::", at + len(name)):
            raise self.error(f"axis '{name}::' is not supported; WXQuery paths use the child axis '/'")
        if self.after_ws_is(at + len(name), "("):
            raise self.error(f"'{name}()' is not supported in a path: steps are element names")
        return self.read_name("an element name")

    def parse_steps(self, root: ast.PathRoot, start: int, in_condition: bool,
                    first_name: str | None = None, first_at: int | None = None) -> ast.PathExpr:
        steps: list[ast.Step] = []
        if first_name is not None:
            steps.append(self.finish_step(first_name, first_at, in_condition))
        elif not in_condition and self.peek("["):
            raise self.error("predicates are only supported on path steps, e.g. $p/en[. > 1]")
        while True:
            self.skip_ws()
            if self.text.startswith("//", self.pos):
                raise self.error("the descendant axis '//' is not supported; use child steps '/'")
            if not self.text.startswith("/", self.pos):
                break
            self.pos += 1
            name, at = self.read_step_name()
            steps.append(self.finish_step(name, at, in_condition))
        return ast.PathExpr(root, tuple(steps), self.position(start))

    def finish_step(self, name: str, at: int, in_condition: bool) -> ast.Step:
        predicates = []
        while self.peek("["):
            bracket = self.pos
            if in_condition:
                raise self.error("predicates inside a condition's path are not supported", bracket)
            self.pos += 1
            self.skip_ws()
            if self.at_number() and self.after_number_is("]"):
                raise self.error("positional predicates ([1], [last()]) are not supported")
            predicates.append(self.parse_conjunction(in_predicate=True))
            if not self.accept("]"):
                raise self.unexpected_in_condition("']' closing the predicate")
        return ast.Step(name, tuple(predicates), self.position(at))

    def after_number_is(self, s: str) -> bool:
        saved = self.pos
        try:
            self.read_number()
            return self.peek(s)
        except WXQueryError:
            return False
        finally:
            self.pos = saved

    # ------------------------------------------------------------------ conditions

    def parse_conjunction(self, in_predicate: bool) -> ast.Conjunction:
        self.skip_ws()
        start = self.pos
        atoms: list[ast.Comparison] = []
        while True:
            atoms.extend(self.parse_condition_term(in_predicate))
            if not self.accept_keyword("and"):
                break
        name = self.peek_name()
        if name == "or":
            raise self.error("'or' is not supported: conditions are conjunctions joined by 'and'")
        return ast.Conjunction(tuple(atoms), self.position(start))

    def parse_condition_term(self, in_predicate: bool) -> list[ast.Comparison]:
        self.skip_ws()
        if self.text.startswith("(", self.pos) and not self.text.startswith("(:", self.pos):
            self.pos += 1
            inner = self.parse_conjunction(in_predicate)
            if not self.accept(")"):
                raise self.unexpected_in_condition("')'")
            return list(inner.atoms)
        return [self.parse_comparison(in_predicate)]

    def unexpected_in_condition(self, what: str) -> WXQuerySyntaxError:
        self.skip_ws()
        if self.peek_name() == "or":
            return self.error("'or' is not supported: conditions are conjunctions joined by 'and'")
        if self.text.startswith("!=", self.pos):
            return self.error("'!=' is not supported; use =, <, <=, > or >=")
        return self.expected(what)

    def parse_comparison(self, in_predicate: bool) -> ast.Comparison:
        self.skip_ws()
        start = self.pos
        left_number = None
        left_path = None
        if self.at_number():
            left_number = self.read_number()
        else:
            left_path = self.parse_operand_path(in_predicate)
        self.skip_ws()
        op_at = self.pos
        op = self.read_comparison_operator()
        self.skip_ws()
        right_at = self.pos
        if self.at_number():
            right_number = self.read_number()
            if left_number is not None:
                raise self.error("a comparison must involve a path; both sides are constants", start)
            self.refuse_trailing_arithmetic()
            assert left_path is not None
            return ast.Comparison(left_path, op, None, right_number, self.position(op_at))
        right_path = self.parse_operand_path(in_predicate)
        if left_number is not None:
            # c θ $v is $v θ' c: mirroring the operator is exact.
            self.refuse_trailing_arithmetic()
            return ast.Comparison(right_path, _MIRROR[op], None, left_number, self.position(op_at))
        constant = ast.Number(Fraction(0), "0")
        self.skip_ws()
        if self.text.startswith(("+", "-"), self.pos):
            sign_at = self.pos
            sign = self.text[self.pos]
            self.pos += 1
            self.skip_ws()
            if not self.at_number() or self.text.startswith(("-", "+"), self.pos):
                raise self.error("only a constant may be added to or subtracted from the right-hand "
                                 "path: $v θ $w + c", sign_at)
            number = self.read_number()
            value = number.value if sign == "+" else -number.value
            constant = ast.Number(value, ("-" if sign == "-" else "") + number.text)
            self.refuse_trailing_arithmetic()
        elif self.text.startswith("*", self.pos) or self.peek_name() in ("div", "mod", "idiv"):
            raise self.error("only '+ c' or '- c' is supported on the right-hand side of a comparison")
        del right_at
        assert left_path is not None
        return ast.Comparison(left_path, op, right_path, constant, self.position(op_at))

    def refuse_trailing_arithmetic(self) -> None:
        self.skip_ws()
        t = self.text[self.pos: self.pos + 1]
        if t in ("+", "-", "*") or self.peek_name() in ("div", "mod", "idiv"):
            raise self.error("arithmetic on constants is not supported; write the constant's value")

    def read_comparison_operator(self) -> str:
        text = self.text
        for op in ("<=", ">=", "!=", "=", "<", ">"):
            if text.startswith(op, self.pos):
                if op == "!=":
                    raise self.error("'!=' is not supported; use =, <, <=, > or >=")
                self.pos += len(op)
                return op
        name = self.peek_name()
        if name in _VALUE_COMPARISONS:
            raise self.error(f"value comparison '{name}' is not supported; use the general "
                             f"comparison '{_VALUE_COMPARISONS[name]}'")
        if name in ("is",):
            raise self.error("node comparisons ('is', '<<', '>>') are not supported")
        if text.startswith(("+", "-"), self.pos):
            raise self.error("arithmetic is only supported on the right-hand side: $v θ $w + c")
        raise self.expected("a comparison operator (=, <, <=, >, >=)")

    def parse_operand_path(self, in_predicate: bool) -> ast.PathExpr:
        self.skip_ws()
        start = self.pos
        text = self.text
        if text.startswith("$", start):
            name, _ = self.parse_variable_name()
            return self.parse_steps(ast.VarRef(name, self.position(start)), start, in_condition=True)
        if text.startswith("(", start):
            raise self.error("parenthesized operands are not supported in comparisons")
        if text.startswith(".", start) and not text.startswith("..", start):
            if not in_predicate:
                raise self.error("the context item '.' is only allowed inside a path predicate [...]")
            self.pos += 1
            return self.parse_steps(ast.ContextItem(self.position(start)), start, in_condition=True)
        if text.startswith(("\"", "'"), start):
            raise self.error("string comparisons are not supported: values compare as numbers")
        name = self.peek_name()
        if name is not None and self.after_ws_is(start + len(name), "("):
            if name in ast.AGGREGATE_FUNCTIONS:
                raise self.error(f"aggregates cannot appear in conditions; bind them first: let $a "
                                 f":= {name}(...) where $a ...")
            if name == "stream":
                raise self.error("stream() cannot appear in a condition")
            raise self.error(f"function {name}() is not supported in conditions: conditions compare "
                             "paths and numbers")
        if name is not None and name not in ("and", "or"):
            if not in_predicate:
                raise self.error(f"a path in a condition must start at a variable, e.g. $p/{name}")
            name, at = self.read_step_name()
            return self.parse_steps(ast.ContextItem(self.position(start)), start, in_condition=True,
                                    first_name=name, first_at=at)
        if text.startswith(("@", "*", "/"), start):
            self.read_step_name()  # raises the specific message
            raise self.error("absolute paths are not supported")  # pragma: no cover
        raise self.expected("a path or a number in the comparison")

    # ------------------------------------------------------------------ constructors

    def parse_constructor(self) -> ast.ElementConstructor:
        start = self.pos
        self.pos += 1  # '<'
        m = _NAME_RE.match(self.text, self.pos)
        if not m:
            raise self.expected("an element name after '<'")
        name = m.group()
        self.pos = m.end()
        if self.text.startswith(":", self.pos):
            raise self.error("namespace prefixes are not supported")
        self.skip_xml_ws()
        if self.text.startswith("/>", self.pos):
            self.pos += 2
            return ast.ElementConstructor(name, (), self.position(start))
        if not self.text.startswith(">", self.pos):
            if _NAME_RE.match(self.text, self.pos):
                raise self.error("attributes are not supported: WXQuery deals with elements only")
            raise self.expected(f"'>' or '/>' to close the start tag <{name}")
        self.pos += 1
        content: list = []
        text_buf: list[str] = []
        text_start = self.pos
        literal = False  # whether the pending text holds a character/entity reference

        def flush() -> None:
            nonlocal literal
            chunk = "".join(text_buf)
            if chunk and (literal or chunk.strip()):
                content.append(ast.Text(chunk, self.position(text_start)))
            text_buf.clear()
            literal = False

        while True:
            if self.pos >= len(self.text):
                raise self.error(f"element <{name}> is not closed: expected </{name}>", start)
            c = self.text[self.pos]
            if self.text.startswith("</", self.pos):
                flush()
                end_at = self.pos
                self.pos += 2
                m = _NAME_RE.match(self.text, self.pos)
                if not m or m.group() != name:
                    got = m.group() if m else self.describe_here()
                    raise self.error(f"end tag </{got}> does not match start tag <{name}>", end_at)
                self.pos = m.end()
                self.skip_xml_ws()
                if not self.text.startswith(">", self.pos):
                    raise self.expected(f"'>' closing </{name}")
                self.pos += 1
                return ast.ElementConstructor(name, tuple(content), self.position(start))
            if self.text.startswith("<!--", self.pos):
                raise self.error("XML comments in constructors are not supported")
            if self.text.startswith("<![CDATA[", self.pos):
                end = self.text.find("]]>", self.pos)
                if end < 0:
                    raise self.error("unterminated CDATA section")
                if not text_buf:
                    text_start = self.pos
                text_buf.append(self.text[self.pos + 9:end])
                literal = True
                self.pos = end + 3
                continue
            if c == "<":
                flush()
                content.append(self.parse_constructor())
                text_start = self.pos
                continue
            if self.text.startswith("{{", self.pos) or self.text.startswith("}}", self.pos):
                if not text_buf:
                    text_start = self.pos
                text_buf.append(c)
                literal = True
                self.pos += 2
                continue
            if c == "{":
                flush()
                brace = self.pos
                self.pos += 1
                self.skip_ws()
                if self.text.startswith("}", self.pos):
                    self.pos += 1
                    text_start = self.pos
                    continue
                expr = self.parse_expr()
                self.skip_ws()
                if not self.text.startswith("}", self.pos):
                    if self.pos < len(self.text) and not self.text.startswith(("}",), self.pos):
                        raise self.unexpected_after_expression() if self.text[self.pos] not in "<" \
                            else self.expected("'}' closing the enclosed expression")
                    raise self.error("enclosed expression '{' is not closed", brace)
                self.pos += 1
                content.append(ast.Enclosed(expr, self.position(brace)))
                text_start = self.pos
                continue
            if c == "}":
                raise self.error("'}' in element content must be written '}}'")
            if c == "&":
                if not text_buf:
                    text_start = self.pos
                text_buf.append(self.read_reference())
                literal = True
                continue
            if not text_buf:
                text_start = self.pos
            text_buf.append(c)
            self.pos += 1

    def skip_xml_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def read_reference(self) -> str:
        start = self.pos
        end = self.text.find(";", self.pos)
        if end < 0 or end - start > 12:
            raise self.error("malformed character reference: expected '&name;' or '&#N;'", start)
        body = self.text[start + 1:end]
        self.pos = end + 1
        try:
            if body.startswith("#x"):
                return chr(int(body[2:], 16))
            if body.startswith("#"):
                return chr(int(body[1:]))
        except (ValueError, OverflowError):
            raise self.error(f"malformed character reference '&{body};'", start) from None
        if body in _ENTITIES:
            return _ENTITIES[body]
        raise self.error(f"unknown entity '&{body};' (only lt, gt, amp, quot, apos)", start)
