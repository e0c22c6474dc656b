"""How the reference evaluator reads stream items: child-axis navigation and atomization.

WXQuery paths only use the child axis with element names (an attribute as the last step), and
conditions compare untyped content as xs:double (or as strings against a string literal), so these few functions are all the XPath the evaluator needs.
They are shared by the expression compiler (paths, conditions, aggregates) and the window
part (time-window references).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Iterable, Iterator

from lxml import etree

from .evaluation_context import Value
from .stream_document import string_value
from .values import NAN, cast_double


@dataclass(frozen=True)
class Attribute:
    """An attribute an ``@name`` step reached: what a constructor it is enclosed in gets."""

    name: str
    value: str


def atomize(value: Value) -> float:
    """Untyped element content → xs:double; numbers stay numbers (as doubles for comparison)."""
    if isinstance(value, etree._Element):
        return cast_double(string_value(value))
    if isinstance(value, Attribute):
        return cast_double(value.value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Decimal):
        return float(value)
    return NAN


def child_elements(elements: Iterable[Value], name: str) -> list:
    """Child elements named ``name`` of every element (static checks ensure paths only start
    at nodes); for ``@name``, the attribute of each element that has it."""
    out: list = []
    if name.startswith("@"):
        attribute = name[1:]
        for el in elements:
            value = el.get(attribute)
            if value is not None:
                out.append(Attribute(attribute, value))
        return out
    for el in elements:
        out.extend(el.iterchildren(name))
    return out


def text_of(value: Value) -> str:
    """A node's string value: an element's text (all of its descendants'), an attribute's value."""
    return value.value if isinstance(value, Attribute) else string_value(value)


def navigate_items(items: Iterable[Value], item_filter: Callable[[Value], bool] | None,
                   rest: Callable[[list], list] | None) -> Iterator[Value]:
    """Stream items that pass the item step's predicates, then the path's remaining steps."""
    for item in items:
        if item_filter is not None and not item_filter(item):
            continue
        if rest is None:
            yield item
        else:
            yield from rest([item])


def navigator(names: tuple[str, ...]) -> Callable[[Iterable[Value]], list]:
    """Child-axis navigation along ``names`` from a sequence of elements, in document order.

    One step iterates children directly; longer paths use a compiled XPath (explicit ``child::``
    axes, so that element names such as ``and`` or ``count`` are never read as operators).
    """
    if len(names) == 1:
        name = names[0]
        return lambda elements: child_elements(elements, name)
    if names[-1].startswith("@"):  # the elements, then their attribute
        parents, attribute = navigator(names[:-1]), names[-1]
        return lambda elements: child_elements(parents(elements), attribute)
    xpath = etree.XPath("/".join(f"child::{n}" for n in names))

    def navigate(elements: Iterable[Value]) -> list:
        out: list = []
        for el in elements:
            out.extend(xpath(el))
        return out

    return navigate

