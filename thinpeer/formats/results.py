"""A subscription's results as text: one XML document, one XML item per line, or JSON lines.

``xml`` keeps what ``subscribe`` has always printed: ``<root>item item …</root>``. ``lines`` puts
each result on a line of its own: a line break inside an item is written as a character
reference (``&#10;``, ``&#13;``), which any XML parser reads back as the same text. ``ndjson``
writes each result as the JSON value ``thinpeer.formats.json_items`` maps it to (the JSON a
JSON stream's item came from, or what a result built by a query reads as).
"""

from __future__ import annotations

FORMATS = ("xml", "lines", "ndjson")
MEDIA_TYPES = {"xml": "application/xml", "lines": "text/plain; charset=utf-8",
               "ndjson": "application/x-ndjson"}
EXTENSIONS = {"xml": "xml", "lines": "lines", "ndjson": "ndjson"}


def one_line(item: str) -> str:
    """An XML item on one line, meaning the same. An item with line breaks is written again by
    lxml first: then the only line breaks left are in text (a tag's are gone, an attribute's are
    ``&#10;``, CDATA is text), where a character reference means the same."""
    if "\n" not in item and "\r" not in item:
        return item
    from lxml import etree

    from wxquery.xml_safety import parse_untrusted

    try:
        item = etree.tostring(parse_untrusted(item), encoding="unicode")
    except etree.XMLSyntaxError:
        pass  # not an element (cannot come from a super-peer): its breaks are escaped as they are
    return item.replace("\r", "&#13;").replace("\n", "&#10;")


def render_line(item: str, fmt: str) -> str:
    """One result as a line (without its line end), for ``lines`` or ``ndjson``."""
    if fmt == "ndjson":
        from thinpeer.formats.json_items import item_to_ndjson

        return item_to_ndjson(item)
    return one_line(item)


def render_batch(items: list[str], root: str, fmt: str) -> str:
    """Results as a whole: a document for ``xml``, lines (each ended) for the others."""
    if fmt == "xml":
        return f"<{root}>{''.join(items)}</{root}>\n"
    return "".join(render_line(item, fmt) + "\n" for item in items)
