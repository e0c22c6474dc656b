"""Element access on one item: the per-item path of the batch operators.

The batch operators read columns for a whole batch at once; items whose shape defeats the
column fast paths (repeated or missing elements, complex paths), the statistics' samples and
namespaced projections come here. Values cast as XQuery casts untyped data to double
(``values``); atoms compare them as ``comparisons`` defines.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Callable

from lxml import etree

from .comparisons import comparison
from .definitions import WHOLE_ITEM, Atom, KeyValue
from ..result_content import detached_copy
from ..stream_document import string_value
from ..values import cast_double


def path_strings(item: etree._Element, path: str) -> list[str]:
    """The string values at an item-relative path (``.`` is the item itself): of the elements
    there, or of their attribute for a path ending in ``@name`` — what a string comparison
    compares (not cast, whitespace and all). A step may pick its elements by name
    (``Param[@name="RA"]``: ``ast.Step.keyed_name``)."""
    if path == WHOLE_ITEM:
        return [string_value(item)]
    current = [item]
    steps = _steps(path)
    attribute = steps[-1][0][1:] if steps[-1][0].startswith("@") else None
    for name, test in (steps[:-1] if attribute is not None else steps):
        nxt: list = []
        for el in current:
            nxt.extend(el.iterchildren(name))
        current = nxt if test is None else [el for el in nxt if _named(el, *test)]
    if attribute is not None:
        return [v for v in (el.get(attribute) for el in current) if v is not None]
    return [string_value(el) for el in current]


def first_string(item: etree._Element, path: str) -> str | None:
    """The string value of the first node at ``path`` (None: there is none): the key of an item
    in a window partitioned by ``path``, for every executor, the evaluator and the estimates."""
    found = path_strings(item, path)
    return found[0] if found else None


def item_key(item: etree._Element, paths: tuple[str, ...]) -> KeyValue:
    """An item's key in a window partitioned by ``paths`` (``WindowSpec.key_paths``):
    ``first_string`` of the one path, or the tuple of every path's."""
    if len(paths) == 1:
        return first_string(item, paths[0])
    return tuple(first_string(item, p) for p in paths)


_NAME_TEST = re.compile(r'([^\[/]+)\[(@?[^=\]]+)=("(?:[^"]|"")*")\]')


@lru_cache(maxsize=4096)
def _steps(path: str) -> tuple[tuple[str, tuple[str, str] | None], ...]:
    """A path's steps: (name, None) or (name, (key, value)) for a name test."""
    if "[" not in path:
        return tuple((name, None) for name in path.split("/"))
    out = []
    for part in _split(path):
        m = _NAME_TEST.fullmatch(part)
        out.append((part, None) if m is None else (m[1], (m[2], html.unescape(m[3][1:-1].replace('""', '"')))))
    return tuple(out)


def _split(path: str) -> list[str]:
    """The steps of a path, a '/' inside a name test's literal not splitting it."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, c in enumerate(path):
        if c == '"' and depth:
            quoted = not quoted
        elif c == "[" and not quoted:
            depth += 1
        elif c == "]" and not quoted:
            depth -= 1
        elif c == "/" and not depth:
            parts.append(path[start:i])
            start = i + 1
    parts.append(path[start:])
    return parts


def _named(el: etree._Element, key: str, value: str) -> bool:
    """Whether the element has the attribute, or a child, ``key`` equal to ``value``."""
    if key.startswith("@"):
        return el.get(key[1:]) == value
    return any(string_value(child) == value for child in el.iterchildren(key))


def path_values(item: etree._Element, path: str) -> list[float]:
    """The doubles at an item-relative path (``path_strings`` cast as XQuery casts untyped data)."""
    return [cast_double(t) for t in path_strings(item, path)]


def atom_test(atom: Atom) -> Callable[[etree._Element], bool]:
    """An atom's test on one item (``Comparison.holds`` over the item's values)."""
    left, right, test = atom.left, atom.right, comparison(atom.op, atom.constant)
    if atom.on_string:
        if right is not None:
            return lambda item: test.holds(path_strings(item, left), path_strings(item, right))
        return lambda item: test.holds(path_strings(item, left))
    if right is None:
        return lambda item: test.holds(path_values(item, left))
    return lambda item: test.holds(path_values(item, left), path_values(item, right))


def pair_test(key: Atom) -> Callable[[etree._Element, etree._Element], bool]:
    """A join key's test on an (outer, inner) pair (``BandJoin.keys``): ``key.left`` read on
    the inner item, ``key.right`` on the outer one, compared exactly as ``atom_test`` compares
    two paths of one item — and as the where clause compares them at the subscriber."""
    left, right, test = key.left, key.right, comparison(key.op, key.constant)
    values = path_strings if key.on_string else path_values
    return lambda outer, inner: test.holds(values(inner, left), values(outer, right))  # type: ignore[arg-type]


class Projection:
    """Keeps kept subtrees whole and the elements on the way to them, in document order."""

    def __init__(self, paths: frozenset[str]) -> None:
        self.paths = paths
        self.identity = WHOLE_ITEM in paths
        # an attribute path (``pos/@ra``): its element is kept on the way, with that attribute
        self.attributes: dict[tuple[str, ...], frozenset[str]] = {}
        for p in paths:
            if "@" in p:
                *owner, name = p.split("/")
                key = tuple(owner)
                self.attributes[key] = self.attributes.get(key, frozenset()) | {name[1:]}
        self.whole = {tuple(p.split("/")) for p in paths if "@" not in p}
        self.prefixes = ({w[:i] for w in self.whole for i in range(1, len(w))}
                         | {o[:i] for o in self.attributes for i in range(1, len(o) + 1)})
        # per level that is pruned (the item, and each prefix not inside a kept subtree): the
        # child names that matter there, and which of them are kept whole
        self.levels: dict[tuple[str, ...], tuple[frozenset[str], frozenset[str]]] = {}
        for at in {()} | self.prefixes:
            if any(at[:i] in self.whole for i in range(1, len(at) + 1)):
                continue
            names = sorted({p[len(at)] for p in self.whole | self.prefixes
                            if len(p) > len(at) and p[:len(at)] == at})
            self.levels[at] = (frozenset(names), frozenset(n for n in names if at + (n,) in self.whole))

    def element(self, item: etree._Element) -> etree._Element:
        """The projected item as a new element (the item itself for ``.``)."""
        return item if self.identity else self._prune(item, ())

    def _prune(self, el: etree._Element, at: tuple[str, ...]) -> etree._Element:
        out = etree.Element(el.tag)
        needed = self.attributes.get(at)
        if needed:  # (in the element's own order)
            for name, value in el.attrib.items():
                if name in needed:
                    out.set(name, value)
        for child in el:
            if not isinstance(child.tag, str):
                continue
            here = at + (child.tag,)
            if here in self.whole:
                out.append(detached_copy(child))
            elif here in self.prefixes:
                out.append(self._prune(child, here))
        return out

    def text(self, item: etree._Element, attributes: bool = True) -> str:
        """The projected item's wire text, written straight from the kept subtrees (no copies).

        Equal to serialising ``element(item)`` for items without namespaces (a namespaced item
        must go through ``element``, so that namespace declarations come out as lxml writes
        them). A kept leaf without attributes is written here, as lxml would write it; anything
        else kept is serialised by lxml. ``attributes`` False promises that the item has none.
        """
        return self._write(item.tag, item, (), attributes)

    def _write(self, tag: str, el: etree._Element, at: tuple[str, ...], attributes: bool) -> str:
        if attributes and at in self.attributes:  # (an attribute kept here: lxml writes it)
            return etree.tostring(self._prune(el, at), encoding="unicode", with_tail=False)
        names, kept = self.levels[at]
        parts = []
        for child in el:
            name = child.tag
            if name not in names:  # also comments and processing instructions
                continue
            if name not in kept:
                parts.append(self._write(name, child, at + (name,), attributes))
            elif len(child) or (attributes and child.attrib):
                parts.append(etree.tostring(child, encoding="unicode", with_tail=False))
            else:
                text = child.text
                parts.append(f"<{name}>{_escape_text(text)}</{name}>" if text else f"<{name}/>")
        return f"<{tag}>{''.join(parts)}</{tag}>" if parts else f"<{tag}/>"


@lru_cache(maxsize=1024)
def projection_for(paths: frozenset[str]) -> Projection:
    """One (immutable) projection per path set, not one per batch: its levels are derived once."""
    return Projection(paths)


_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


def _escape_text(text: str) -> str:
    """Text content as lxml serialises it."""
    return text.translate(_TEXT_ESCAPES) if ("&" in text or "<" in text or ">" in text or "\r" in text) else text
