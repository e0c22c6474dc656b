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


class Partitioned(list):
    """The variable of a partitioned window (``|count 4 by chip|``), bound to the window's items
    (none, for a window aggregated upstream: then ``record`` is its ``WindowRecord``).

    ``$w/chip``, a key path, reads its ``key_items`` entry: an item made of that key alone, the
    key path holding the key's string value — once per window, as ``$w[1]/chip`` in XQuery
    (every item of the window has it), and the same whether the window was cut here or upstream.
    ``key``: the window's key, a string (or None) for one key path, a tuple of them, one per
    path, for several (``|count 4 by chip, @src|``)."""

    def __init__(self, items: Iterable[Value], key_paths: tuple[tuple[str, ...], ...], key: object,
                 record: object = None) -> None:
        super().__init__(items)
        values = key if len(key_paths) > 1 else (key,)
        assert isinstance(values, tuple) and len(values) == len(key_paths), "one key value per key path"
        self.key_items = {names: key_item(names, value) for names, value in zip(key_paths, values)}
        self.record = record


def key_item(names: tuple[str, ...], key: str | None) -> etree._Element:
    """``<_><chip>A</chip></_>`` for key path ``chip`` and key "A" (``<_ src="A"/>`` for
    ``@src``); ``<_/>`` for the window of the items without the key."""
    root = etree.Element("_")
    if key is None:
        return root
    el = root
    for name in names[:-1]:
        el = etree.SubElement(el, name)
    if names[-1].startswith("@"):
        el.set(names[-1][1:], key)
    else:
        etree.SubElement(el, names[-1]).text = key
    return root


def bound_roots(bound: object, names: tuple[str, ...]) -> list:
    """Where a path from a variable starts: its items, or for a key path of a partitioned
    window, the item holding that key (``Partitioned``)."""
    if isinstance(bound, Partitioned):
        found = bound.key_items.get(names)
        if found is not None:
            return [found]
    return bound  # type: ignore[return-value]
