"""Items of a known shape are read off their texts, without a tree: the columns, projections and
validity must be exactly those of the parsed items, whatever the texts hold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.batch import ItemBatch
from wxquery.operators.items import Projection
from wxquery.operators.shapes import shape_of

NAMES = ["a", "b", "c"]
# numbers, texts that are not numbers, whitespace, characters lxml writes differently or
# refuses: every column must come out as the tree's column
RUN = st.one_of(
    st.sampled_from(["1", "-2.5", " 3 ", "1e3", "", "x", "NaN", "INF", "-0", "\n", "1_0", "٣"]),
    st.text(alphabet=st.sampled_from(list("0123456789.-e \t\n\r&>x\x01é")), max_size=5))


@st.composite
def items(draw, depth: int = 0) -> str:
    name = draw(st.sampled_from(NAMES))
    parts = [draw(RUN)]
    if depth < 3:
        for _ in range(draw(st.integers(0, 3))):
            parts += [draw(items(depth + 1)), draw(RUN)]
    inner = "".join(parts).replace("&", "&amp;")
    if not inner and draw(st.booleans()):
        return f"<{name}/>"
    return f"<{name}>{inner}</{name}>"


PATHS = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join) | st.just(".")


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and all(x == y or (math.isnan(x) and math.isnan(y))
                                          for x, y in zip(a.tolist(), b.tolist()))
    as_lists = [lambda c: [[x] for x in c.tolist()] if isinstance(c, np.ndarray) else c]
    a, b = (as_lists[0](c) for c in (a, b))
    return len(a) == len(b) and all(
        len(xs) == len(ys) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(xs, ys))
        for xs, ys in zip(a, b))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(items(), min_size=1, max_size=6), paths=st.lists(PATHS, min_size=1, max_size=4))
def test_columns_of_shaped_items_equal_the_trees_columns(texts, paths) -> None:
    texts = [t.replace("\x01", "") for t in texts]  # a forbidden character: see the next test
    shaped = ItemBatch(texts)
    tree = ItemBatch(texts, joined="".join(texts).encode("utf-8"))  # always a tree
    assert shaped.malformed == tree.malformed == 0
    for path in paths:
        assert _same(shaped.column(path), tree.column(path)), path
        assert np.array_equal(shaped.first_values(path), tree.first_values(path), equal_nan=True)
    projection = frozenset(p for p in paths if p != ".") or frozenset({"a"})
    expected = [Projection(projection).text(item) for item in tree.items]
    assert [shaped.projector(projection)(row) for row in range(shaped.n)] == expected


@pytest.mark.parametrize("text", [
    '<a k="1"><b>1</b></a>', "<a><!-- c --><b>1</b></a>", "<a><?p x?><b>1</b></a>",
    "<a><b><![CDATA[1]]></b></a>", "<a><b>&#49;</b></a>", "<a><b>1&amp;</b></a>",
    "<q:a xmlns:q='urn:q'><b>1</b></q:a>", "<a><b>1</b></a> ", " <a/>", "<a></b>",
    "<a><b>1</a></b>", "<a/><a/>", "<a><b>1\r</b></a>", "<a>\x01</a>", "<a>x>y</a>", "text",
])
def test_items_outside_the_plain_shapes_have_none(text: str) -> None:
    shape = shape_of(text)
    assert shape is None or shape.regex.fullmatch(text) is None


def test_a_batch_with_an_item_that_does_not_parse_still_counts_it() -> None:
    texts = ["<a><b>1</b></a>", "<a><b>2</a>", "<a><b>3</b></a>", "<a>\x01</a>"]
    batch = ItemBatch(texts)
    assert batch.shaped is None and batch.malformed == 2
    assert batch.valid is not None and batch.valid.tolist() == [True, False, True, False]
    assert batch.first_values("b").tolist()[::2] == [1.0, 3.0]
