"""Direct element constructors of the WXQuery parser: ``<name>text {expr} <child/></name>``.

Inside a constructor the text is XML content, not an expression: white space is significant,
'(:' is not a comment, '{' opens an enclosed expression and '{{' is a literal brace, '&' starts a
character or entity reference. This layer reads that content itself and goes back to the
expression grammar for each ``{...}`` through the abstract ``parse_expr`` (see
``ExpressionParser``); attribute values (``id="{ $e/@id }"``) are read the same way.
Namespace declarations, comments and processing instructions are refused.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from . import ast
from .lexer import NAME_RE, REFERENCE_RE, Lexer, referenced
from .refused_constructs import unexpected_after_expression



class ConstructorParser(Lexer, ABC):
    """Parses direct element constructors and their content."""

    @abstractmethod
    def parse_expr(self) -> ast.Expr:
        """An expression, possibly a comma-separated sequence (see ``ExpressionParser``)."""

    def parse_constructor(self) -> ast.ElementConstructor:
        """``<name>content</name>`` or ``<name/>``, at the '<'. Literal text that is only white
        space is dropped (XQuery's boundary-space strip) unless it holds a reference or CDATA."""
        start = self.pos
        self.enter(start)
        try:
            self.pos += 1  # '<'
            m = NAME_RE.match(self.text, self.pos)
            if not m:
                raise self.expected("an element name after '<'")
            name = m.group()
            self.pos = m.end()
            if self.text.startswith(":", self.pos):
                raise self.error("namespace prefixes are not supported")
            attributes = self.parse_attributes(name)
            if self.text.startswith("/>", self.pos):
                self.pos += 2
                return ast.ElementConstructor(name, (), self.position(start), attributes)
            if not self.text.startswith(">", self.pos):
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
                    m = NAME_RE.match(self.text, self.pos)
                    if not m or m.group() != name:
                        got = m.group() if m else self.describe_here()
                        raise self.error(f"end tag </{got}> does not match start tag <{name}>", end_at)
                    self.pos = m.end()
                    self.skip_xml_ws()
                    if not self.text.startswith(">", self.pos):
                        raise self.expected(f"'>' closing </{name}")
                    self.pos += 1
                    return ast.ElementConstructor(name, tuple(content), self.position(start), attributes)
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
                    enclosed = self.parse_enclosed()
                    if enclosed is not None:
                        content.append(enclosed)
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
        finally:
            self.depth -= 1

    def skip_xml_ws(self) -> None:
        """White space inside a tag, where '(:' is not a comment."""
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def read_reference(self) -> str:
        """``&name;``, ``&#N;`` or ``&#xN;`` in element content or an attribute value, at the
        '&': exactly XML's forms, naming an XML character (XQuery's XPST0003, XQST0090)."""
        start = self.pos
        m = REFERENCE_RE.match(self.text, start)
        if m is None or m.group(1) is None:
            name = re.match(r"&([^;&<\s]{1,40});", self.text[start:])
            if name and not name.group(1).startswith("#"):
                raise self.error(f"unknown entity '&{name.group(1)};' (only lt, gt, amp, quot, apos)", start)
            raise self.error("malformed reference: expected '&name;', '&#N;' or '&#xN;' (write '&amp;' for '&')",
                             start)
        char = referenced(m.group(1))
        if char is None:
            raise self.error(f"'&{m.group(1)};' names no XML character (XQuery's XQST0090)", start)
        self.pos = m.end()
        return char

    def parse_enclosed(self) -> ast.Enclosed | None:
        """``{ expr }``, at the '{' (None for ``{}``, which is empty)."""
        brace = self.pos
        self.pos += 1
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return None
        expr = self.parse_expr()
        self.skip_ws()
        if not self.text.startswith("}", self.pos):
            if self.pos < len(self.text):
                raise unexpected_after_expression(self) if self.text[self.pos] not in "<\"'" \
                    else self.expected("'}' closing the enclosed expression")
            raise self.error("enclosed expression '{' is not closed", brace)
        self.pos += 1
        return ast.Enclosed(expr, self.position(brace))

    def parse_attributes(self, element: str) -> tuple[ast.AttributeConstructor, ...]:
        """The attributes of a start tag, up to its '>' or '/>', each once (XQuery's XQST0040)."""
        out: list[ast.AttributeConstructor] = []
        while True:
            spaced = self.pos
            self.skip_xml_ws()
            m = NAME_RE.match(self.text, self.pos)
            if not m:
                return tuple(out)
            if self.pos == spaced:
                raise self.expected(f"white space before attribute {m.group()} of <{element}>")
            start, name = self.pos, m.group()
            self.pos = m.end()
            if name == "xmlns" or self.text.startswith(":", self.pos):
                raise self.error("namespace prefixes and declarations are not supported", start)
            if any(a.name == name for a in out):
                raise self.error(f"<{element}> has attribute {name} twice (XQuery's XQST0040)", start)
            self.skip_xml_ws()
            if not self.text.startswith("=", self.pos):
                raise self.expected(f"'=' after attribute {name}")
            self.pos += 1
            self.skip_xml_ws()
            out.append(ast.AttributeConstructor(name, self.parse_attribute_value(name), self.position(start)))

    def parse_attribute_value(self, name: str) -> tuple[ast.Enclosed | ast.Text, ...]:
        """A quoted value, at its quote: text (a doubled quote is one; white space characters
        become spaces, as XML normalises attribute values; references are kept as written) and
        enclosed expressions."""
        if self.pos >= len(self.text) or self.text[self.pos] not in "\"'":
            raise self.expected(f"a quoted value of attribute {name}")
        quote, opened = self.text[self.pos], self.pos
        self.pos += 1
        parts: list[ast.Enclosed | ast.Text] = []
        buf: list[str] = []
        text_start = self.pos

        def flush() -> None:
            if buf:
                parts.append(ast.Text("".join(buf), self.position(text_start)))
                buf.clear()

        while True:
            if self.pos >= len(self.text):
                raise self.error(f"the value of attribute {name} is not closed: expected {quote}", opened)
            c = self.text[self.pos]
            if c == quote and self.text.startswith(quote * 2, self.pos):
                buf.append(quote)
                self.pos += 2
            elif c == quote:
                self.pos += 1
                flush()
                return tuple(parts)
            elif self.text.startswith("{{", self.pos) or self.text.startswith("}}", self.pos):
                buf.append(c)
                self.pos += 2
            elif c == "{":
                flush()
                enclosed = self.parse_enclosed()
                if enclosed is not None:
                    parts.append(enclosed)
                text_start = self.pos
            elif c == "}":
                raise self.error("'}' in an attribute value must be written '}}'")
            elif c == "<":
                raise self.error(f"'<' in the value of attribute {name} must be written &lt;")
            elif c == "&":
                buf.append(self.read_reference())
            else:
                buf.append(" " if c in "\t\n\r" else c)
                self.pos += 1
