"""Conditions of the WXQuery parser: comparisons joined by 'and', 'or' and 'not()'.

Where clauses, path predicates and if conditions share one grammar of comparisons, each between
a path and a number, between a path and a string literal (compared as strings; ``!=`` too), or
between two paths with an optional ``± c`` (two paths compare as strings, as XQuery compares two
untyped values; ``± c`` makes the right side a number, and so both). The comparisons joined by
'and' at the top of a condition are what keeps subscriptions comparable for sharing; 'or' and
'not()' (in where clauses and if conditions, not in path predicates) join them as *terms*
evaluated where the results are made (``ast.Conjunction``). Everything else a condition could
hold in XQuery ('!=' on numbers, value comparisons, arithmetic, other function calls) is refused
here with a reason.
"""

from __future__ import annotations

from . import ast
from .operators.comparisons import (
    MIRRORED,  # (c θ $v is $v θ' c)
    STRING_FUNCTIONS,  # (functions on strings that make an atom)
)
from .path_parser import PathParser
from .refused_constructs import (
    NOT_EQUAL_REFUSED,
    NOT_IN_PREDICATE_REFUSED,
    OR_IN_PREDICATE_REFUSED,
    unexpected_in_condition,
)

# XQuery's value comparisons, with the general comparison WXQuery offers instead.
VALUE_COMPARISONS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class ConditionParser(PathParser):
    """Parses conjunctions of comparisons and their path operands."""

    def parse_conjunction(self, in_predicate: bool) -> ast.Conjunction:
        """A condition: conjunctions joined by 'or' ('and' binds tighter, as in XQuery). Inside
        a path predicate only comparisons joined by 'and' (the predicate filters the items
        upstream, and a disjunction there would change what every window and operator after
        it reads)."""
        self.skip_ws()
        start = self.pos
        first = self.parse_and(in_predicate)
        if self.peek_name() != "or":
            return first
        if in_predicate:
            raise self.error(OR_IN_PREDICATE_REFUSED)
        alternatives = [first]
        while self.accept_keyword("or"):
            alternatives.append(self.parse_and(in_predicate))
        position = self.position(start)
        return ast.Conjunction((), position, (ast.Disjunction(tuple(alternatives), position),))

    def parse_and(self, in_predicate: bool) -> ast.Conjunction:
        """Terms joined by 'and'; parentheses only group (a conjunction inside is flattened)."""
        self.skip_ws()
        start = self.pos
        atoms: list[ast.Comparison] = []
        terms: list[ast.Disjunction | ast.Negation] = []
        while True:
            more_atoms, more_terms = self.parse_condition_term(in_predicate)
            atoms.extend(more_atoms)
            terms.extend(more_terms)
            if not self.accept_keyword("and"):
                break
        return ast.Conjunction(tuple(atoms), self.position(start), tuple(terms))

    def parse_condition_term(self, in_predicate: bool
                             ) -> tuple[list[ast.Comparison], list[ast.Disjunction | ast.Negation]]:
        self.skip_ws()
        if self.text.startswith("(", self.pos) and not self.text.startswith("(:", self.pos):
            self.enter(self.pos)
            self.pos += 1
            inner = self.parse_conjunction(in_predicate)
            if not self.accept(")"):
                raise unexpected_in_condition(self, "')'")
            self.depth -= 1
            return list(inner.atoms), list(inner.terms)
        if self.peek_name() == "not" and self.after_ws_is(self.pos + 3, "("):
            return [], [self.parse_negation(in_predicate)]
        if self.peek_name() == "not" and self.after_ws_is(self.pos + 3, "$"):
            raise self.error("not is a function: write not(condition)")
        return [self.parse_comparison(in_predicate)], []

    def parse_negation(self, in_predicate: bool) -> ast.Negation:
        """``not(condition)``, evaluated where the results are made (see ``ast.Conjunction``)."""
        start = self.pos
        if in_predicate:
            raise self.error(NOT_IN_PREDICATE_REFUSED)
        self.expect_keyword("not")
        self.skip_ws()
        self.enter(self.pos)
        self.expect("(")
        inner = self.parse_conjunction(in_predicate)
        if not self.accept(")"):
            raise unexpected_in_condition(self, "')' closing not(")
        self.depth -= 1
        return ast.Negation(inner, self.position(start))

    def parse_comparison(self, in_predicate: bool) -> ast.Comparison:
        """``path θ c``, ``c θ path`` (mirrored) or ``path θ path ± c``: the atoms the
        predicate reasoning of the sharing layer can decide exactly."""
        self.skip_ws()
        start = self.pos
        self.count_comparison(start)
        name = self.peek_name()
        if name in STRING_FUNCTIONS and self.after_ws_is(start + len(name), "("):
            return self.string_function(name, in_predicate)
        left_number = None
        left_path = None
        left_string = None
        if self.at_number():
            left_number = self.read_number()
        elif self.at_string():
            left_string = ast.String(self.read_string())
        else:
            left_path = self.parse_operand_path(in_predicate)
        self.skip_ws()
        op_at = self.pos
        op = self.read_comparison_operator()
        self.skip_ws()
        right_at = self.pos
        if self.at_string() or left_string is not None:
            return self.string_comparison(left_path, left_number, left_string, op, op_at, start, in_predicate)
        if op == "!=" and (left_path is None or self.at_number()):
            raise self.error(NOT_EQUAL_REFUSED, op_at)
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
            return ast.Comparison(right_path, MIRRORED[op], None, left_number,
                                  self.position(op_at))
        constant: ast.Number | None = None  # (no arithmetic: see ``ast.Comparison``)
        self.skip_ws()
        if op == "!=" and self.text.startswith(("+", "-"), self.pos):  # (a number on the right)
            raise self.error(NOT_EQUAL_REFUSED, op_at)
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

    def string_function(self, name: str, in_predicate: bool) -> ast.Comparison:
        """``starts-with(path, "c")``, ``ends-with(…)``, ``contains(…)``: XQuery's functions on
        the path's string value, by codepoint — an atom like ``path θ "c"`` (the function is
        its θ)."""
        start = self.pos
        self.pos += len(name)
        self.skip_ws()
        self.pos += 1  # (
        path = self.parse_operand_path(in_predicate)
        self.skip_ws()
        if not self.accept(","):
            raise self.expected(f"',' and a string literal: {name}($p/path, \"text\")")
        self.skip_ws()
        if not self.at_string():
            raise self.error(f"the second argument of {name}() must be a string literal")
        constant = ast.String(self.read_string())
        self.skip_ws()
        if not self.accept(")"):
            raise self.expected(f"')' closing {name}(")
        self.skip_ws()
        if self.text.startswith(("=", "<", ">", "!="), self.pos):
            raise self.error(f"{name}(…) is a condition of its own: it is not compared with anything")
        return ast.Comparison(path, name, None, constant, self.position(start))

    def at_string(self) -> bool:
        return self.text.startswith(('"', "'"), self.pos)

    def string_comparison(self, left_path: ast.PathExpr | None, left_number: ast.Number | None,
                          left_string: ast.String | None, op: str, op_at: int, start: int,
                          in_predicate: bool) -> ast.Comparison:
        """``path θ "text"`` or ``"text" θ path`` (mirrored): the path's string values compared
        with the literal as strings, by codepoint — as XQuery compares untyped content with an
        ``xs:string`` (never cast to a number)."""
        if left_number is not None:
            raise self.error("a number compared with a string literal: XQuery refuses to compare "
                             "the two types", start)
        if left_string is not None:
            if self.at_string():
                raise self.error("a comparison must involve a path; both sides are constants", start)
            if self.at_number():
                raise self.error("a string literal compared with a number: XQuery refuses to compare "
                                 "the two types", start)
            path = self.parse_operand_path(in_predicate)
            constant = left_string
            op = MIRRORED[op]
        else:
            assert left_path is not None
            path, constant = left_path, ast.String(self.read_string())
        self.skip_ws()
        if self.text.startswith(("+", "-", "*"), self.pos) or self.peek_name() in ("div", "mod", "idiv"):
            raise self.error("arithmetic on a string is not supported: a string compares with a path only")
        return ast.Comparison(path, op, None, constant, self.position(op_at))

    def refuse_trailing_arithmetic(self) -> None:
        self.skip_ws()
        t = self.text[self.pos: self.pos + 1]
        if t in ("+", "-", "*") or self.peek_name() in ("div", "mod", "idiv"):
            raise self.error("arithmetic on constants is not supported; write the constant's value")

    def read_comparison_operator(self) -> str:
        text = self.text
        for op in ("<=", ">=", "!=", "=", "<", ">"):
            if text.startswith(op, self.pos):  # ('!=' only against a string literal: the caller checks)
                self.pos += len(op)
                return op
        name = self.peek_name()
        if name in VALUE_COMPARISONS:
            raise self.error(f"value comparison '{name}' is not supported; use the general "
                             f"comparison '{VALUE_COMPARISONS[name]}'")
        if name in ("is",):
            raise self.error("node comparisons ('is', '<<', '>>') are not supported")
        if text.startswith(("+", "-"), self.pos):
            raise self.error("arithmetic is only supported on the right-hand side: $v θ $w + c")
        raise self.expected("a comparison operator (=, <, <=, >, >=)")

    def parse_operand_path(self, in_predicate: bool) -> ast.PathExpr:
        """A comparison's path operand: from a variable, or from the context item in a predicate."""
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
        name = self.peek_name()
        if name is not None and self.after_ws_is(start + len(name), "("):
            if name in ast.AGGREGATE_FUNCTIONS:
                raise self.error(f"aggregates cannot appear in conditions; bind them first: let $a "
                                 f":= {name}(...) where $a ...")
            if name == "stream":
                raise self.error("stream() cannot appear in a condition")
            raise self.error(f"function {name}() is not supported in conditions: conditions compare "
                             "paths with numbers and strings, or test them with starts-with, ends-with "
                             "or contains")
        if name is not None and name not in ("and", "or"):
            if not in_predicate:
                raise self.error(f"a path in a condition must start at a variable, e.g. $p/{name}")
            name, at = self.read_step_name()
            return self.parse_steps(ast.ContextItem(self.position(start)), start, in_condition=True,
                                    first_name=name, first_at=at)
        if text.startswith("@", start):
            if not in_predicate:
                raise self.error(f"a path in a condition must start at a variable, e.g. $p/{self.read_step_name()[0]}", start)
            name, at = self.read_step_name()
            return self.parse_steps(ast.ContextItem(self.position(start)), start, in_condition=True,
                                    first_name=name, first_at=at)
        if text.startswith(("*", "/"), start):
            self.read_step_name()  # raises the specific message
            raise self.error("absolute paths are not supported")  # pragma: no cover
        raise self.expected("a path, a number or a string literal in the comparison")

    def expect_keyword_with_hint(self, word: str, what: str) -> None:
        """The keyword that ends a condition (``return``, ``then``, ``in``); a missing one is
        most often an 'or' or a '!=' inside the condition, which the error then names."""
        if not self.accept_keyword(word):
            raise unexpected_in_condition(self, what)
