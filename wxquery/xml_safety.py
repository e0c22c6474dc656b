"""How XML that comes from the network is parsed where it enters (issue 14).

Entities are never resolved (no file or network read: XXE; no nested expansion: billion
laughs), no DTD is loaded, and libxml2's default bounds on depth and text size stay on (no
``huge_tree``): a hostile document is refused with the parser's reason, never expanded. A
publisher's items are checked with this parser once, at the super-peer they enter
(``superpeer.data.items``), and a neighbour's transfers wherever they are read as values.

Two other parsers set ``huge_tree`` on purpose, and neither resolves entities, loads a DTD or
reads the network: the operators' batch parser (``operators.batch``), which reads a batch of
items already checked here as one document far larger than libxml2's default text bound, and
the readers of stream documents from the user's own files (``stream_document`` for ``query
run``, ``publish --input``), whose size is the user's to choose.
"""

from __future__ import annotations

from lxml import etree

SAFE_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def parse_untrusted(text: str | bytes) -> etree._Element:
    return etree.fromstring(text.encode("utf-8") if isinstance(text, str) else text, parser=SAFE_PARSER)
