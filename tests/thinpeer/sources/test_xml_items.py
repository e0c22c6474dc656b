"""The pull-parsed items of a stream document equal a whole-document parse's, however the bytes
are cut, and a broken document says where — after the items before the break."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from thinpeer.sources.lines import LineItems, numbered_lines
from thinpeer.sources.xml_items import open_xml
from wxquery.errors import InputDocumentError


def pieces(data: bytes, cuts: list[int]):
    at = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        yield data[at:cut]
        at = cut
    yield data[at:]


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=8)
items = st.lists(st.tuples(st.sampled_from(["photon", "other"]), texts, texts), max_size=12)


@settings(max_examples=150, deadline=None)
@given(items, st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_items_as_the_whole_document_has_them(children, cuts):
    root = etree.Element("photons")
    for name, text, inner in children:
        el = etree.SubElement(root, name)
        el.text = text
        etree.SubElement(el, "en").text = inner
        el.tail = "\n  "
    data = etree.tostring(root, encoding="utf-8", xml_declaration=True)
    expected = [etree.tostring(c, encoding="unicode", with_tail=False) for c in etree.fromstring(data)]
    if not expected:
        with pytest.raises(InputDocumentError, match="no items"):
            open_xml("doc", pieces(data, cuts))
        return
    source = open_xml("doc", pieces(data, cuts))
    assert (source.root, source.item) == ("photons", children[0][0])
    assert list(source) == expected
    assert source.stray_text == 0


def test_text_between_items_is_counted_and_comments_dropped():
    doc = b"<r> x <i>1</i><!-- c --><?pi?> <i>2</i> y <i>3</i>\n</r>"
    source = open_xml("doc", iter([doc[:9], doc[9:]]))
    assert list(source) == ["<i>1</i>", "<i>2</i>", "<i>3</i>"]
    assert source.stray_text == 2


def test_a_break_is_reported_with_line_and_column_after_the_items_before_it():
    source = open_xml("live.xml", iter([b"<r>\n<i>1</i>\n", b"<i>2</j>\n</r>"]))
    got = []
    with pytest.raises(InputDocumentError) as caught:
        for item in source:
            got.append(item)  # noqa: PERF402 - the items before the error
    assert got == ["<i>1</i>"]
    assert str(caught.value).startswith("live.xml:3:") and "mismatch" in str(caught.value)


def test_external_and_undefined_entities_are_errors():
    with pytest.raises(InputDocumentError, match="not defined"):
        list(open_xml("d", iter([b'<!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]><r><i>&e;</i></r>'])))
    with pytest.raises(InputDocumentError, match="not defined"):
        list(open_xml("d", iter([b"<r><i>&nope;</i></r>"])))


def test_lines_are_numbered_across_pieces_and_blank_ones_skipped():
    data = [b"<i>1</i>\n\n<i", b">2</i>\r\n  \n<i>3</i>"]
    assert list(numbered_lines(iter(data))) == [(1, b"<i>1</i>"), (3, b"<i>2</i>\r"), (5, b"<i>3</i>")]
    source = LineItems(iter(data))
    assert source.item == "i" and list(source) == ["<i>1</i>", "<i>2</i>", "<i>3</i>"]


def test_a_line_that_is_not_utf8_is_rejected_alone():
    source = LineItems(iter([b"<i>1</i>\n<i>\xff</i>\n<i>3</i>\n"]))
    out = list(source)
    assert out[0] == "<i>1</i>" and out[2] == "<i>3</i>"
    assert "line 2: not UTF-8" in out[1].reason
