"""Window records: what an aggregate stream carries, one record per window, and the wire text of
stream values.

A record holds a window's partial aggregates (``aggregates``), not final values, so that a
subscriber can reuse it for other aggregates of the same partials and for coarser windows; its
text form round-trips exactly (doubles in shortest round-trip form).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from lxml import etree

from .definitions import MAX_KEY_PATHS, KeyValue, Partial
from ..values import format_atomic, format_atomics
from .aggregates import Number, PartialValue, final
from ..xml_safety import parse_untrusted


@dataclass
class WindowRecord:
    """One window's partial aggregates: ``values[(fn, element)]``; ``sum``/``min``/``max`` are
    None when the window had no value of the element (then sum() is 0 and min/avg are empty)."""

    index: int
    values: dict[Partial, PartialValue] = field(default_factory=dict)
    key: KeyValue = None  # of a partitioned window: the key its items share (None: none)

    def final(self, function: str, element: str) -> list[Number]:
        """The aggregate's value as XQuery gives it (a one-item or empty sequence)."""
        return final(function, element, self.values)

    def to_xml(self) -> str:
        """``<w k="3"><p f="sum" e="en">12.5</p>…</w>``; doubles print in shortest round-trip form,
        so ``from_xml`` gives back exactly the same values."""
        parts = [f'<w k="{self.index}"{key_attributes(self.key)}>']
        for partial, value in self.values.items():
            head = _head(partial)
            parts.append(head + "/>" if value is None else f"{head}>{format_atomic(value)}</p>")
        parts.append("</w>")
        return "".join(parts)

    @classmethod
    def from_xml(cls, text: str) -> "WindowRecord":
        el = parse_untrusted(text)
        several = el.get("keys")
        if several is not None and not 1 < int(several) <= MAX_KEY_PATHS:
            raise ValueError(f"a window record with {several} keys (2 to {MAX_KEY_PATHS})")
        key: KeyValue = (el.get("key") if several is None
                         else tuple(el.get(f"key{i}") for i in range(1, int(several) + 1)))
        record = cls(int(el.get("k")), key=key)
        for p in el:
            fn, element = p.get("f"), p.get("e")
            if p.text is None:
                record.values[(fn, element)] = None
            elif fn == "count":
                record.values[(fn, element)] = int(p.text)
            else:
                record.values[(fn, element)] = float(p.text)
        return record


def window_texts(partials: Sequence[Partial], rows: Sequence[tuple[int, Sequence[PartialValue]]],
                 keys: Sequence[KeyValue] | None = None) -> list[str]:
    """What ``WindowRecord(k, dict(zip(partials, values)), key).to_xml()`` writes for each ``(k,
    values)`` (a count of None as 0; ``partials`` distinct; ``keys``: a window per key's, one
    per row), a column at a time and without the records: a driver closing ten thousand windows
    a batch spent more on the records than on closing them."""
    if not rows:
        return []
    if keys is None:
        columns: list[list[str]] = [[f'<w k="{k}">' for k, _ in rows]]
    else:
        columns = [[f'<w k="{k}"{key_attributes(key)}>' for (k, _), key in zip(rows, keys)]]
    for i, partial in enumerate(partials):
        head = _head(partial)
        values = [row[i] for _, row in rows]
        if partial[0] == "count":
            columns.append([f"{head}>{v}</p>" if type(v) is int else f"{head}>{format_atomic(v or 0)}</p>"
                            for v in values])
            continue
        empty = head + "/>"
        texts = iter(format_atomics([v for v in values if v is not None]))
        columns.append([empty if v is None else f"{head}>{next(texts)}</p>" for v in values])
    columns.append(["</w>"] * len(rows))
    return ["".join(parts) for parts in zip(*columns)]


@lru_cache(maxsize=4096)
def _head(partial: Partial) -> str:
    """A partial's element start, written for thousands of records per batch."""
    fn, element = partial
    return f'<p f="{fn}" e="{escape_attribute(element)}"'


def key_attributes(key: KeyValue) -> str:
    """A record's key as attributes of its ``<w>``: ``key="A"`` for one key path (none: the
    window of the items without it, or no key); for several, their number and each present one,
    ``keys="2" key1="A" key2="x"`` (``key2`` left out: the items without the second path)."""
    if key is None:
        return ""
    if isinstance(key, str):
        return f' key="{escape_attribute(key)}"'
    return f' keys="{len(key)}"' + "".join(f' key{i}="{escape_attribute(v)}"'
                                           for i, v in enumerate(key, 1) if v is not None)


def escape_attribute(text: str) -> str:
    """Text as an attribute value that parses back to exactly it (whitespace characters would
    be normalised to spaces by the parser, so they travel as references)."""
    return (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
            .replace("\t", "&#9;").replace("\n", "&#10;").replace("\r", "&#13;"))


def serialize(value: "etree._Element | WindowRecord") -> str:
    """A stream value as it travels on the wire (UTF-8 XML element without declaration)."""
    if isinstance(value, WindowRecord):
        return value.to_xml()
    return etree.tostring(value, encoding="unicode", with_tail=False)


def item_size(value: "etree._Element | WindowRecord | str") -> int:
    """Bytes an item occupies on the wire (UTF-8 XML, as DESIGN.md §7)."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, WindowRecord):
        return len(value.to_xml().encode())
    return len(etree.tostring(value, encoding="utf-8", with_tail=False))
