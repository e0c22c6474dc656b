"""Item shapes: items that share a tag skeleton are projected by one regex match and one fill.

Machine-written streams repeat one skeleton item after item (a photon is always
``<photon><coord><cel><ra>…</ra>…``); only the texts differ. For such items, parsing the text and
walking the tree per item (the general projection in ``items``) is almost all of a selection +
projection chain's cost. A shape is compiled once per skeleton: a regular expression whose groups
are the item's text runs, and per projection a template of the projected item's wire text with
those groups as fields. Projecting an item is then a ``fullmatch`` and a ``format``.

Only items for which this is exactly what lxml writes take this path: plain element names (no
prefixes, so no namespaces), no attributes, comments, processing instructions, CDATA sections or
references, and text runs free of the characters lxml would write differently (``&``, ``>``,
CR) or that XML forbids. Anything else does not match and goes the general way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence, Union

from .items import Projection

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_TAG = re.compile(rf"<(/?)({_NAME})(/?)>")
# a text run: anything between tags; the shape's group accepts only runs lxml writes verbatim
_RUN = re.compile(r"(?<=>)[^<]+")
_RUN_GROUP = "([^<&>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]+)"
_SLOT = "\x00"  # stands for a text run in a skeleton (it cannot occur in XML text)


@dataclass
class _Element:
    name: str
    children: list[Union["_Element", int]] = field(default_factory=list)  # int: a text run's group


class ItemShape:
    """One skeleton: its regex (groups = text runs, in order) and its element tree."""

    def __init__(self, root: _Element, pattern: str) -> None:
        self.root = root
        self.regex = re.compile(pattern)
        self._templates: dict[frozenset[str], str] = {}
        self._slots: dict[str, tuple[tuple[int, ...], ...]] = {}

    def slots_at(self, path: str) -> tuple[tuple[int, ...], ...]:
        """Per element at a simple path (``.``: the item), the text runs of its string value."""
        found = self._slots.get(path)
        if found is None:
            level = [self.root]
            if path != ".":
                for name in path.split("/"):
                    level = [c for el in level for c in el.children
                             if not isinstance(c, int) and c.name == name]
            found = self._slots[path] = tuple(tuple(_runs(el)) for el in level)
        return found

    def project(self, text: str, projection: Projection) -> str | None:
        """The projected wire text of an item of this shape; None if the text is not of it."""
        m = self.regex.fullmatch(text)
        return None if m is None else self.fill(m, projection)

    def fill(self, match: re.Match, projection: Projection) -> str:
        """The projected wire text of the item this shape's regex matched."""
        template = self._templates.get(projection.paths)
        if template is None:
            template = self._templates[projection.paths] = _template(self.root, projection)
        return template.format(*match.groups())


def shape_of(text: str) -> ItemShape | None:
    """The shape of an item's text (cached per skeleton); None for items outside the fast path."""
    return _shape(_RUN.sub(_SLOT, text))


@lru_cache(maxsize=256)
def _shape(skeleton: str) -> ItemShape | None:
    stack: list[_Element] = []
    root: _Element | None = None
    pattern: list[str] = []
    slots = 0
    at = 0
    while at < len(skeleton):
        if skeleton[at] == _SLOT:
            if not stack:
                return None  # text outside the item
            stack[-1].children.append(slots)
            slots += 1
            pattern.append(_RUN_GROUP)
            at += 1
            continue
        tag = _TAG.match(skeleton, at)
        if tag is None or root is not None and not stack:
            return None  # not a plain tag, or something after the item's end
        closing, name, empty = tag.groups()
        if closing:
            if empty or not stack or stack[-1].name != name:
                return None
            stack.pop()
        else:
            el = _Element(name)
            if stack:
                stack[-1].children.append(el)
            else:
                root = el
            if not empty:
                stack.append(el)
        pattern.append(re.escape(tag.group(0)))
        at = tag.end()
    if root is None or stack:
        return None
    return ItemShape(root, "".join(pattern))


def _runs(el: _Element):
    for c in el.children:
        if isinstance(c, int):
            yield c
        else:
            yield from _runs(c)


def _template(root: _Element, projection: Projection) -> str:
    """``Projection.text`` of an item of this shape, with ``{i}`` for the i-th text run."""
    if projection.identity:
        return _whole(root)

    def pruned(el: _Element, at: tuple[str, ...]) -> str:
        names, kept = projection.levels[at]
        parts = []
        for child in el.children:
            if isinstance(child, int) or child.name not in names:
                continue  # text at a pruned level is dropped, as are elements off every path
            parts.append(_whole(child) if child.name in kept else pruned(child, at + (child.name,)))
        return f"<{el.name}>{''.join(parts)}</{el.name}>" if parts else f"<{el.name}/>"

    return pruned(root, ())


def _whole(el: _Element) -> str:
    """An element as lxml writes it: ``<a/>`` when it has neither children nor text."""
    if not el.children:
        return f"<{el.name}/>"
    inner = "".join(f"{{{c}}}" if isinstance(c, int) else _whole(c) for c in el.children)
    return f"<{el.name}>{inner}</{el.name}>"


class ShapedItems:
    """A batch whose every item has a shape: each item's match, and element texts read off its
    groups, so that columns need no parsed tree. Items of a shape are well-formed by
    construction (balanced plain tags, text runs of allowed characters only)."""

    def __init__(self, matches: list[re.Match], shapes: list[ItemShape]) -> None:
        self.matches = matches
        self.shapes = shapes  # per item
        self.uniform = not shapes or shapes.count(shapes[0]) == len(shapes)  # one C loop (identity first)

    def texts(self, path: str) -> tuple[bool, list]:
        """Per item, the string values of the elements at a simple path (``.``: the item).

        (True, [text per item]) when every item has exactly one such element; else (False,
        [[text, …] per item]).
        """
        slots = {id(s): s.slots_at(path) for s in (self.shapes[:1] if self.uniform else self.shapes)}
        if all(len(found) == 1 and len(found[0]) <= 1 for found in slots.values()):
            if self.uniform:
                (found,) = slots.values()
                if not found[0]:
                    return True, [""] * len(self.matches)
                group = found[0][0] + 1
                return True, [m[group] for m in self.matches]
            return True, [_text(m, slots[id(s)][0]) for m, s in zip(self.matches, self.shapes)]
        return False, [[_text(m, el) for el in slots[id(s)]] for m, s in zip(self.matches, self.shapes)]


def _text(match: re.Match, slots: tuple[int, ...]) -> str:
    return "".join(match[k + 1] for k in slots)


def match_shapes(texts: Sequence[str]) -> ShapedItems | None:
    """The batch's items matched to their shapes; None if some item has none."""
    first = shape_of(texts[0]) if texts else None
    if first is not None:  # the common case, one shape for the whole batch: matched in one call
        uniform = list(map(first.regex.fullmatch, texts))
        if None not in uniform:
            return ShapedItems(uniform, [first] * len(uniform))  # type: ignore[arg-type]
    matches: list[re.Match] = []
    shapes: list[ItemShape] = []
    shape: ItemShape | None = None
    for text in texts:
        m = None if shape is None else shape.regex.fullmatch(text)
        if m is None:
            shape = shape_of(text)
            m = None if shape is None else shape.regex.fullmatch(text)
            if m is None:
                return None
        matches.append(m)
        shapes.append(shape)  # type: ignore[arg-type]
    return ShapedItems(matches, shapes)
