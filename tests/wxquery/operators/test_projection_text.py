"""The projection written straight to text equals the projected element serialised by lxml, for
arbitrary items: attributes, text and tails at every level, comments, processing instructions,
repeated and missing elements, characters that need escaping."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from wxquery.operators.batch import ItemBatch
from wxquery.operators.items import Projection

NAMES = ["a", "b", "c", "d"]
TEXT = st.text(alphabet=st.sampled_from(list("x1.&<>\r\n\t \"'é")), max_size=6)


@st.composite
def elements(draw, depth: int = 0) -> etree._Element:
    el = etree.Element(draw(st.sampled_from(NAMES)))
    for key in draw(st.lists(st.sampled_from(["k", "m"]), max_size=2, unique=True)):
        el.set(key, draw(TEXT))
    el.text = draw(st.none() | TEXT)
    if depth < 3:
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["element", "element", "comment", "pi"]))
            if kind == "element":
                child = draw(elements(depth + 1))
            elif kind == "comment":
                child = etree.Comment(draw(st.sampled_from(["", " c ", "a-b"])))
            else:
                child = etree.ProcessingInstruction("p", draw(st.sampled_from(["", "x y"])))
            child.tail = draw(st.none() | TEXT)
            el.append(child)
    return el


PATHS = st.frozensets(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
                      min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(items=st.lists(elements(), min_size=1, max_size=4), paths=PATHS)
def test_projection_text_equals_the_serialised_projection(items, paths) -> None:
    texts = [etree.tostring(item, encoding="unicode") for item in items]
    batch = ItemBatch(texts)
    projection = Projection(paths)
    project = batch.projector(paths)
    for row, parsed in enumerate(batch.items):
        assert project(row) == etree.tostring(projection.element(parsed), encoding="unicode")


def _rewritten(text: str, empty_pairs: bool, raw_gt: bool, char_refs: bool) -> str:
    """The same item written differently: as a person or another library might write it."""
    if empty_pairs:
        text = re.sub(r"<([a-d])/>", r"<\1></\1>", text)
    if raw_gt:
        text = text.replace("&gt;", ">")
    if char_refs:
        text = text.replace("1", "&#49;")
    return text


@settings(max_examples=150, deadline=None)
@given(items=st.lists(elements(), min_size=1, max_size=4), paths=PATHS,
       styles=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_projection_of_items_written_by_hand(items, paths, styles) -> None:
    """Items of one shape take the text fast path: whatever way they are written, the
    projection is what lxml writes for the projected element."""
    texts = [_rewritten(etree.tostring(item, encoding="unicode"), *styles) for item in items]
    texts += [re.sub(r">[^<]+<", ">z<", t) for t in texts]  # same shapes, other texts
    batch = ItemBatch(texts)
    projection = Projection(paths)
    project = batch.projector(paths)
    for row, parsed in enumerate(batch.items):
        assert project(row) == etree.tostring(projection.element(parsed), encoding="unicode")
