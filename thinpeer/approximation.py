"""The ``<sg:approximation>`` elements of an approximate subscription's reads, as one.

Each read of a subscription on a sample carries the intervals of the windows that arrived with
its items (``ReadResultsReply.approximation``); ``streamglobe subscribe`` ends its document with
one element holding all of them, in the form of an archive query's approximate answer.
"""

from __future__ import annotations

from lxml import etree


def merged(elements: list[str]) -> str:
    """One ``<sg:approximation>`` element with the windows of all ``elements`` in order ("" if
    none): the attributes (rate, confidence) are the first one's, the same in every read."""
    elements = [e for e in elements if e]
    if not elements:
        return ""
    whole = etree.fromstring(elements[0])
    for text in elements[1:]:
        whole.extend(list(etree.fromstring(text)))
    return etree.tostring(whole, encoding="unicode")
