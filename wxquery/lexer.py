"""The character-level layer of the WXQuery parser: a cursor over the query text.

There is no separate token stream because XQuery's direct element constructors switch between
expression lexing and XML-content lexing mid-query; the grammar layers (paths, conditions, FLWR,
constructors, expressions) therefore all read the text through this one cursor. It owns what
every layer needs to agree on: white space and ``(: comments :)``, names, numbers, string
literals, look-ahead without consuming, and turning an offset into the line and column that
every error names.
"""

from __future__ import annotations

import bisect
import re
from fractions import Fraction

from . import ast
from .errors import Position, QueryLimitError, WXQueryError, WXQuerySyntaxError
from .limits import DEFAULT_LIMITS, QueryLimits

NAME_START = r"A-Za-z_\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD"
NAME_RE = re.compile(rf"[{NAME_START}][{NAME_START}\-.0-9\u00B7\u0300-\u036F\u203F-\u2040]*")
WHITE_SPACE_RE = re.compile(r"[ \t\r\n]*")
NUMBER_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# a reference in a string literal: predefined entity or character reference (group 1 None: a bare '&')
REFERENCE_RE = re.compile(r"&(?:(lt|gt|amp|quot|apos|#[0-9]+|#x[0-9A-Fa-f]+);)?")
PREDEFINED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _code(reference: str) -> int:
    """The codepoint a character reference (``#65``, ``#x41``) names."""
    return int("0" + reference[1:], 0) if reference.startswith("#x") else int(reference[1:])


def referenced(name: str) -> str | None:
    """What a reference's name (``amp``, ``#65``, ``#x41``) stands for; None for a character
    reference that names no XML character (XQuery refuses those)."""
    if name in PREDEFINED:
        return PREDEFINED[name]
    return chr(_code(name)) if _char_ok(name) else None


def _char_ok(reference: str) -> bool:
    """Whether a character reference names an XML character (XQuery refuses the others)."""
    c = _code(reference)
    return c in (0x9, 0xA, 0xD) or 0x20 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD or 0x10000 <= c <= 0x10FFFF


class Lexer:
    """The query text, the current offset into it, and the lexical reads the grammar builds on."""

    def __init__(self, text: str, limits: QueryLimits = DEFAULT_LIMITS) -> None:
        self.text = text.replace("\r\n", "\n").replace("\r", "\n")  # (XQuery's end-of-line handling)
        self.pos = 0
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]  # (of the text as read)
        self.limits = limits
        self.depth = 0  # nesting of expressions, constructors, bindings and condition groups
        self.comparisons = 0
        self.paths: set[tuple] = set()

    # ------------------------------------------------------------------ limits

    def enter(self, at: int) -> None:
        """One level deeper (the caller leaves with ``self.depth -= 1``). Every cycle of the
        recursive grammar passes through a caller, so this bounds the stack every later
        recursive pass over the AST needs; the error names the construct that is too deep."""
        self.depth += 1
        if self.depth > self.limits.max_nesting_depth:
            raise QueryLimitError(
                f"query is nested too deeply: more than {self.limits.max_nesting_depth} nested "
                "expressions, element constructors, for/let bindings and parenthesised "
                "conditions (limit max_nesting_depth)", self.position(at))

    def count_comparison(self, at: int) -> None:
        self.comparisons += 1
        if self.comparisons > self.limits.max_comparisons:
            raise QueryLimitError(
                f"query has too many comparisons: more than {self.limits.max_comparisons} "
                "(limit max_comparisons)", self.position(at))

    def count_path(self, key: tuple, at: int) -> None:
        self.paths.add(key)
        if len(self.paths) > self.limits.max_paths:
            raise QueryLimitError(
                f"query has too many distinct paths: more than {self.limits.max_paths} "
                "(limit max_paths)", self.position(at))

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
        m = NAME_RE.match(self.text, self.pos)
        if m:
            return f"'{m.group()}'"
        return f"'{self.text[self.pos]}'"

    def expected(self, what: str) -> WXQuerySyntaxError:
        return self.error(f"expected {what}, found {self.describe_here()}")

    # ------------------------------------------------------------------ lexical helpers

    def skip_ws(self) -> None:
        text = self.text
        while True:
            self.pos = WHITE_SPACE_RE.match(text, self.pos).end()
            if not text.startswith("(:", self.pos):
                return
            self.skip_comment()

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
        m = NAME_RE.match(self.text, self.pos)
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
        m = NUMBER_RE.match(self.text, self.pos)
        if not m:
            self.pos = start
            raise self.expected(what)
        self.pos = m.end()
        if self.pos < len(self.text) and NAME_RE.match(self.text, self.pos):
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
        return bool(NUMBER_RE.match(self.text, i))

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
            out.append(self._references(self.text[self.pos:end], self.pos))
            self.pos = end + 1
            if self.text.startswith(quote, self.pos):  # doubled quote escapes itself
                out.append(quote)
                self.pos += 1
            else:
                return "".join(out)

    def _references(self, text: str, at: int) -> str:
        """A string literal's predefined entity and character references resolved, as XQuery
        reads them (``&amp;`` is ``&``, ``&#x41;`` is ``A``); a bare ``&`` is an error."""
        if "&" not in text:
            return text
        out, i = [], 0
        for m in REFERENCE_RE.finditer(text):
            out.append(text[i:m.start()])
            name = m.group(1)
            char = referenced(name) if name is not None else None
            if char is None:
                raise self.error("'&' in a string literal starts a reference such as &amp;, &lt;, &quot; "
                                 "or &#65; (write '&amp;' for '&')", at + m.start())
            out.append(char)
            i = m.end()
        out.append(text[i:])
        return "".join(out)

    def parse_variable_name(self) -> tuple[str, int]:
        """``$name``: the name, and the offset of the ``$`` for errors about the binding."""
        start = self.expect("$", "a variable '$name'")
        name, _ = self.read_name("a variable name after '$'")
        return name, start

    # ------------------------------------------------------------------ look-ahead

    def peek_following_name(self, offset: int) -> str | None:
        """The name ``offset`` characters ahead, without moving."""
        saved = self.pos
        self.pos += offset
        try:
            return self.peek_name()
        finally:
            self.pos = saved

    def peek_following_is_number(self, offset: int) -> bool:
        """Whether a number starts ``offset`` characters ahead, without moving."""
        saved = self.pos
        self.pos += offset
        try:
            return self.at_number()
        finally:
            self.pos = saved

    def after_number_is(self, s: str) -> bool:
        """Whether the number here is followed by ``s``, without moving."""
        saved = self.pos
        try:
            self.read_number()
            return self.peek(s)
        except WXQueryError:
            return False
        finally:
            self.pos = saved
