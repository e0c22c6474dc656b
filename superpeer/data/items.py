"""What a published item is, checked once where it enters the network (DESIGN.md §7).

An item is exactly one well-formed XML element of its stream's item type, in UTF-8, without an
XML declaration, DOCTYPE, or comments, processing instructions or text outside the element
(XML whitespace around it is trimmed; the trimmed text is what travels). Entities are never
expanded and no DTD is read: a reference to an entity XML does not predefine is an error.
Every peer downstream parses the same text the same way, so all subscribers see the same items.

The batch is parsed in one go with a secret processing instruction between items: it must come
back as element, marker, element, …, element — each marker at the top level, no text or other
node in between — which proves every item began and ended at the top level (an item that opens
a CDATA section, comment or element the next one closes swallows a marker). Only a batch that
fails that test is parsed item by item, to name each bad item and the reason.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from lxml import etree

from wxquery.operators.records import WindowRecord
from wxquery.xml_safety import SAFE_PARSER

# The super-peer's one XML parser (``wxquery.xml_safety``): no DTD, no entity expansion, no
# network, and libxml2's default limits (nesting depth 256, text nodes of 10,000,000 bytes) kept.
PARSER = SAFE_PARSER

_MARK = "sg-item-" + secrets.token_hex(16)  # unguessable: an item cannot forge a boundary
_SEP = f"<?{_MARK}?>"
_WHITESPACE = " \t\r\n"
_WHITESPACE_BYTES = _WHITESPACE.encode()
CDATA_NOT_FINISHED = 63  # libxml2 XML_ERR_CDATA_NOT_FINISHED, which it has no message for


@dataclass(frozen=True)
class Checked:
    """The accepted items of a batch (parsed, and their wire text) and the rejected ones."""

    values: list[etree._Element]
    texts: list[str]
    rejected: list[tuple[int, str]]  # (index in the batch, reason)


def utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def check_items(items: list[str] | list[bytes], item: str, max_bytes: int) -> Checked:
    """Split a batch into well-formed ``<item>`` elements and rejections with reasons. Items
    that come as UTF-8 bytes are parsed from those bytes (no second encoded copy of a big
    item); a batch of one item is parsed alone."""
    texts: list[str] = []
    datas: list[bytes | None] = []  # the item's UTF-8 bytes, when it came as bytes
    index: list[int] = []  # batch index of each text
    rejected: list[tuple[int, str]] = []
    for k, raw in enumerate(items):
        size = len(raw) if isinstance(raw, bytes) else utf8_size(raw)
        if size > max_bytes:
            rejected.append((k, f"{size:,} bytes, more than the {max_bytes:,} bytes an item may "
                                f"have at this super-peer (its --max-item-bytes)"))
            continue
        data: bytes | None = None
        if isinstance(raw, bytes):
            data = raw.strip(_WHITESPACE_BYTES)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                offset = exc.start + len(raw) - len(raw.lstrip(_WHITESPACE_BYTES))
                rejected.append((k, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                                    f"{offset})"))
                continue
        else:
            text = raw.strip(_WHITESPACE)
        texts.append(text)
        datas.append(data)
        index.append(k)
    values = _parse_batch(texts, datas, item) if len(texts) > 1 else None
    if values is None:
        values, kept_texts = [], []
        for k, text, data in zip(index, texts, datas):
            try:
                values.append(parse_item(text, item, data))
            except ValueError as exc:
                rejected.append((k, str(exc)))
                continue
            kept_texts.append(text)
        texts = kept_texts
        rejected.sort()
    return Checked(values, texts, rejected)


def parse_batch(texts: list[str], item: str | None = None) -> list[etree._Element] | None:
    """Wire texts of a stream (checked where they entered the network) parsed in one go, each
    exactly one element (of type ``item``, if given); None when any is not (then each is
    parsed alone, to drop only the bad ones)."""
    return _parse_batch(texts, [None] * len(texts), item) if texts else []


def _parse_batch(texts: list[str], datas: list[bytes | None], item: str | None
                 ) -> list[etree._Element] | None:
    """The items of a clean batch parsed in one go; None when any item is not clean."""
    if all(d is not None for d in datas):
        joined = b"<b>" + _SEP.encode().join(datas) + b"</b>"  # type: ignore[arg-type]
    else:
        joined = ("<b>" + _SEP.join(texts) + "</b>").encode("utf-8")
    try:
        root = etree.fromstring(joined, parser=PARSER)
    except etree.XMLSyntaxError:
        return None
    del joined
    nodes = list(root)
    if root.text is not None or len(nodes) != 2 * len(texts) - 1:
        return None
    elements = nodes[::2]
    for el in elements:
        if (item is not None and el.tag != item) or el.tail is not None or not isinstance(el.tag, str):
            return None
    for mark in nodes[1::2]:
        if mark.tag is not etree.PI or mark.target != _MARK or mark.text or mark.tail is not None:
            return None
    return elements


def parse_item(text: str, item: str, data: bytes | None = None) -> etree._Element:
    """One item alone (parsed from ``data``, its UTF-8 bytes, when given): ValueError with the
    reason when it is not exactly one ``<item>``."""
    if not text:
        raise ValueError(f"empty: an item is one <{item}> element")
    if text[0] != "<" or text[1:2] in ("?", "!", "/"):
        what = {"?": "an XML declaration or processing instruction",
                "!": "a DOCTYPE, comment or CDATA section"}.get(text[1:2], "text")
        raise ValueError(f"starts with {what}: an item is one <{item}> element and nothing else")
    try:
        el = etree.fromstring(data if data is not None else text.encode("utf-8"), parser=PARSER)
    except etree.XMLSyntaxError as exc:
        raise ValueError(parser_message(exc)) from None
    if el.getprevious() is not None or el.getnext() is not None:
        raise ValueError(f"a comment or processing instruction after the <{el.tag}> element: an "
                         f"item is one <{item}> element and nothing else")
    if el.tag != item:
        raise ValueError(f"element <{el.tag}> is not a <{item}> item")
    return el


def parser_message(exc: etree.XMLSyntaxError) -> str:
    """libxml2's message, reworded where it is cryptic or advises lifting its limits."""
    msg = exc.msg or str(exc)
    if "Extra content at the end of the document" in msg:
        return f"more than one element, or text after the element ({msg})"
    if exc.code == CDATA_NOT_FINISHED:
        return f"a CDATA section that is not closed ({msg.replace('Unregistered error message, ', '')})"
    if "Excessive depth" in msg:
        return "nested deeper than the 256 elements the super-peer's XML parser allows"
    if "Text node too long" in msg:
        return "a text node longer than the 10,000,000 bytes the super-peer's XML parser allows"
    return msg


def parse_each(kind: str, texts: list[str]) -> tuple[list, list[bool], list[str]]:
    """A neighbour's batch that did not parse as one, item by item, as the values its consumers
    read (window records for a stream of ``records``): (the values of the items that parse,
    whether each did, why the others did not) — a bad item is dropped, the rest go on."""
    values: list = []
    kept: list[bool] = []
    errors: list[str] = []
    for text in texts:
        try:
            values.append(WindowRecord.from_xml(text) if kind == "records"
                          else etree.fromstring(text.encode("utf-8"), parser=PARSER))
            kept.append(True)
        except (etree.XMLSyntaxError, ValueError, TypeError) as exc:
            errors.append(str(exc))
            kept.append(False)
    return values, kept, errors
