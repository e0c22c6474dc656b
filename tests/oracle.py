"""Saxon-HE as the independent oracle for WXQuery semantics (DESIGN.md §3).

A WXQuery case is evaluated by our reference evaluator and its hand-written XQuery 3.1 twin by
Saxon on the same document; the results are compared item by item in canonical XML form.
"""

from __future__ import annotations

from functools import lru_cache

from lxml import etree


@lru_cache(maxsize=1)
def _processor():
    from saxonche import PySaxonProcessor

    return PySaxonProcessor(license=False)


def saxon_query(xquery: str, document: str) -> str:
    proc = _processor()
    xq = proc.new_xquery_processor()
    node = proc.parse_xml(xml_text=document)
    xq.set_context(xdm_item=node)
    xq.set_query_content(xquery)
    return xq.run_query_to_string()


def result_items(document: str) -> tuple[str, list[str]]:
    """The root name and the result items (canonical element XML, or text) of a result document."""
    root = etree.fromstring(document.encode("utf-8"))
    items: list[str] = []
    if root.text:
        items.append("text:" + root.text)
    for child in root:
        tail = child.tail
        child.tail = None
        items.append(etree.tostring(child, method="c14n").decode())
        if tail:
            items.append("text:" + tail)
    return root.tag, items
