"""Result content of the reference evaluator: literal text, copied elements, escaping.

XQuery's content rules decide how a constructor's parts become one element (copies of
elements, text appended to the previous sibling's tail, atomic values separated by single
spaces) and how the top-level result is serialized. The constructor compiler and the
serializer of ``Evaluation`` must follow the same rules, so their pieces live here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from lxml import etree


@dataclass(frozen=True)
class TextNode:
    """Literal text of a constructor that ends up directly in the result stream."""

    text: str


def escape_text(text: str) -> str:
    """Escape text for element content (quotes need no escaping there)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def append_text(parent: etree._Element, text: str) -> None:
    """Append text after the last child of ``parent``, or as its text if it has none."""
    if len(parent):
        last = parent[-1]
        last.tail = (last.tail or "") + text
    else:
        parent.text = (parent.text or "") + text


def detached_copy(el: etree._Element) -> etree._Element:
    """A deep copy of ``el`` without the tail text that belongs to its old parent, keeping the
    namespaces in scope where it was (declared on an ancestor, ``xmlns:xsi`` on a VOEvent): an
    XQuery copy does (``copy-namespaces preserve, inherit``), lxml's drops those it does not use."""
    c = copy.deepcopy(el)
    c.tail = None
    if isinstance(el.tag, str):
        scope = el.nsmap
        if scope and any(c.nsmap.get(prefix) != uri for prefix, uri in scope.items()):
            shell = etree.Element(c.tag, dict(c.attrib), nsmap=scope)
            shell.text = c.text
            shell.extend(list(c))
            c = shell
    return c

