"""How the reference evaluator reads stream items: child-axis navigation and atomization.

WXQuery paths only use the child axis with element names, and conditions compare untyped
element content as xs:double, so these few functions are all the XPath the evaluator needs.
They are shared by the expression compiler (paths, conditions, aggregates) and the window
part (time-window references).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Callable, Iterable, Iterator

from lxml import etree

from .evaluation_context import Value
from .stream_document import string_value
from .values import NAN, cast_double


def atomize(value: Value) -> float:
    """Untyped element content → xs:double; numbers stay numbers (as doubles for comparison)."""
    if isinstance(value, etree._Element):
        return cast_double(string_value(value))
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Decimal):
        return float(value)
    return NAN


def child_elements(elements: Iterable[Value], name: str) -> list:
    """Child elements named ``name`` of every element (static checks ensure paths only start
    at nodes)."""
    out: list = []
    for el in elements:
        out.extend(el.iterchildren(name))
    return out


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
    xpath = etree.XPath("/".join(f"child::{n}" for n in names))

    def navigate(elements: Iterable[Value]) -> list:
        out: list = []
        for el in elements:
            out.extend(xpath(el))
        return out

    return navigate

