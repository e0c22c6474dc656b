"""Namespaces of the WXQuery parser: the prolog's ``declare namespace`` and qualified names in the
stream's path.

Real streams name their items in a namespace — a VOEvent packet is a ``voe:VOEvent`` element
whose descendants have no namespace — so the path from ``stream("name")`` to the items may name
its steps as XQuery does: ``voe:VOEvent`` with the prefix declared in the prolog, or the URI
written out (``Q{http://…}VOEvent``). A qualified name becomes lxml's ``{uri}local``, the name
the items' element has when they are read, registered and matched. Everywhere else paths stay
unqualified (their elements have no namespace in the streams this serves), and a prefix there is
refused with its position, as are other prolog declarations.
"""

from __future__ import annotations

import re

from .lexer import NAME_RE, Lexer

# The prefixes XQuery 3.1 declares for every query (§4.12 of the recommendation).
PREDECLARED = {"xml": "http://www.w3.org/XML/1998/namespace", "xs": "http://www.w3.org/2001/XMLSchema",
               "xsi": "http://www.w3.org/2001/XMLSchema-instance", "fn": "http://www.w3.org/2005/xpath-functions",
               "local": "http://www.w3.org/2005/xquery-local-functions"}
_VERSION_RE = re.compile(r'xquery\s+(?:version\s+("[^"]*"|\'[^\']*\')\s*)?(?:encoding\s+("[^"]*"|\'[^\']*\')\s*)?;')


class NamespaceParser(Lexer):
    """Reads the prolog and the qualified names of a stream's path."""

    namespaces: dict[str, str] = PREDECLARED  # (replaced by the prolog's)
    stream_steps = 0  # (steps of the stream's path still to read that may be qualified: root, items)

    def parse_prolog(self) -> None:
        """``xquery version "3.1";`` (any version: what the query uses is checked as it comes),
        then ``declare namespace prefix = "uri";`` any number of times."""
        self.namespaces = dict(PREDECLARED)
        self.skip_ws()
        m = _VERSION_RE.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        elif self.peek_keyword("xquery") and self.peek_following_name(len("xquery")) in ("version", "encoding"):
            raise self.error('expected a version declaration such as xquery version "3.1"; (with its \';\')')
        declared: set[str] = set()
        while self.peek_keyword("declare") and self.peek_following_name(len("declare")) == "namespace":
            start = self.pos
            self.expect_keyword("declare")
            self.expect_keyword("namespace")
            prefix, at = self.read_name("a namespace prefix")
            if prefix in ("xml", "xmlns"):
                raise self.error(f"the prefix {prefix} cannot be declared (XQuery's XQST0070)", at)
            self.expect("=", "'=' after the prefix")
            self.skip_ws()
            uri_at = self.pos
            uri = " ".join(self.read_string().split())  # (a URI literal is whitespace-collapsed)
            if not uri:
                raise self.error(f"namespace {prefix}: the URI must not be empty", uri_at)
            self.expect(";", "';' ending the declaration")
            if prefix in declared:
                raise self.error(f"namespace prefix {prefix} is declared twice (XQuery's XQST0033)", start)
            if uri == PREDECLARED["xml"]:
                raise self.error("the XML namespace is bound to the prefix xml only (XQuery's XQST0070)", uri_at)
            declared.add(prefix)
            self.namespaces[prefix] = uri

    def qualified_name(self, at: int, stream_path: bool) -> str | None:
        """A step's ``prefix:local`` or ``Q{uri}local`` at ``at`` as ``{uri}local`` (the cursor
        moved past it); None when there is none. Only the stream's path takes one."""
        text = self.text
        if text.startswith("Q{", at):
            end = text.find("}", at + 2)
            m = NAME_RE.match(text, end + 1) if end >= 0 else None
            if m is None:
                raise self.expected("Q{uri}name: a URI in braces, then a name")
            if text.startswith(":", m.end()) or "{" in text[at + 2:end]:
                raise self.error("Q{uri}name: a name without a prefix after the URI", at)
            uri = " ".join(self._references(text[at + 2:end], at + 2).split())
            qualified = ("{" + uri + "}" if uri else "") + m.group()  # (Q{}name: in no namespace)
        else:
            m = NAME_RE.match(text, at)
            if m is None or not text.startswith(":", m.end()) or text.startswith(("::", ":="), m.end()):
                return None
            local = NAME_RE.match(text, m.end() + 1)
            if local is None:
                raise self.expected(f"a name after the prefix {m.group()}:")
            uri = self.namespaces.get(m.group())
            if uri is None:
                raise self.error(f"namespace prefix {m.group()} is not declared: declare it before the query, "
                                 f'e.g. declare namespace {m.group()} = "…"; (XQuery\'s XPST0081)', at)
            qualified = "{" + uri + "}" + local.group()
            m = local
        if not stream_path:
            raise self.error("a namespace is named only in the stream's path (its root and items: "
                             "stream(\"s\")/root/p:item); the elements inside items have none", at)
        self.pos = m.end()
        return qualified
