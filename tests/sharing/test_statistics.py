"""Statistics and the estimates they give, against what the operators actually produce."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from conftest import photon_document
from sharing.analysis import analyze
from sharing.scenarios import paper_query
from sharing.serialization import statistics_from_json, statistics_to_json
from sharing.statistics import MAX_WALKED_ELEMENTS, StreamStatistics
from wxquery.operators import definitions as alg
from per_item_operators import Pipeline
from wxquery.operators.records import item_size
from wxquery.stream_document import StreamDocument

ITEMS = list(StreamDocument.from_text(photon_document(4000, seed=6)).items("photons", "photon"))


def stats() -> StreamStatistics:
    s = StreamStatistics(frequency=100.0)
    for item in ITEMS:
        s.observe(item)
    return s


def test_element_statistics_and_increment():
    s = stats()
    assert s.items == 4000
    assert abs(s.avg_item_size - sum(item_size(i) for i in ITEMS) / 4000) < 1e-6
    assert s.occurrence("coord/cel/ra") == 1.0 and s.element_size("en") > 8
    assert abs(s.avg_increment("det_time") - 0.1) < 0.02  # generator: 10 photons per second
    assert s.avg_increment("en") is None  # not ordered
    assert s.repeated_elements == frozenset()


def test_the_increment_is_per_item_when_only_some_items_are_observed():
    """A super-peer observes one item in 50 of a long stream: an ordered element advances
    between two observed items by as many items as lie between them, not by one."""
    s = StreamStatistics()
    for k, item in enumerate(ITEMS):
        if k < 500 or k % 50 == 0:
            s.observe(item, index=k)
    assert abs(s.avg_increment("det_time") - 0.1) < 0.02  # as when every item is observed
    # on the wire: four values per increment (as a peer of an earlier version reads them), the
    # number of the last observed item beside them
    j = statistics_to_json(s)
    assert all(len(v) == 4 for v in j["increments"].values())
    again = statistics_from_json(j)
    assert again.increments["det_time"].last_index == s.increments["det_time"].last_index == 3950
    del j["increments_at"]  # (from a peer of an earlier version)
    assert statistics_from_json(j).increments["det_time"].last_index is None


def test_selectivity_and_projected_size_match_the_operators():
    s = stats()
    for n in (1, 2):
        (inp,) = analyze(paper_query(n)).properties.inputs
        kept = Pipeline([alg.Select(inp.selection.atoms)]).run(ITEMS)
        assert abs(s.selectivity(inp.selection) - len(kept) / len(ITEMS)) < 0.08
        projected = Pipeline([alg.Project(inp.projection.output)]).run(kept)
        actual = sum(item_size(i) for i in projected) / len(projected)
        assert abs(s.projected_size(inp.projection.output) - actual) / actual < 0.05


def test_relational_predicates_use_the_sample():
    s = stats()
    sel = analyze('<r>{ for $p in stream("photons")/photons/photon where $p/coord/det/dx <= '
                  '$p/coord/det/dy - 500 return $p }</r>').properties.inputs[0].selection
    kept = Pipeline([alg.Select(sel.atoms)]).run(ITEMS)
    assert abs(s.selectivity(sel) - len(kept) / len(ITEMS)) < 0.05


def test_window_rates():
    s = stats()
    (inp,) = analyze(paper_query(3)).properties.inputs
    est = s.estimate(inp)
    # one record per 10 s step; the stream advances 100 items/s × 0.1 s/item = 10 s per second
    assert abs(est.freq - 1.0) < 0.25 and est.size < 100


def test_repeated_elements_are_detected():
    s = StreamStatistics()
    for item in StreamDocument.from_text("<s><i><v>1</v><v>2</v></i><i><v>3</v></i></s>").items("s", "i"):
        s.observe(item)
    assert s.repeated_elements == frozenset({"v"})
    assert s.histogram("v").fraction(0, 10) > 0.9
    assert alg.WindowSpec("count", Fraction(4), Fraction(2)).tiles


def test_attribute_and_string_filters_are_measured_on_large_items_too() -> None:
    """Items over the sample's size limit are kept as a skeleton of their values: with the
    attributes on the way to them, so that an attribute filter is measured, not guessed at 0."""
    from lxml import etree

    from sharing.stream_properties import Selection

    padding = "x" * 9000
    for pad in ("", padding):
        stats = StreamStatistics()
        for k in range(400):
            stats.observe(etree.fromstring(f'<ev id="{k}"><pos ra="{k}"/><src>{"A" if k % 2 else "B"}</src>'
                                           f'<note>{pad}</note><en>{k}</en></ev>'))
        on_id = stats.selectivity(Selection((alg.Atom("@id", ">=", None, Fraction(200)),)))
        on_ra = stats.selectivity(Selection((alg.Atom("pos/@ra", "<", None, Fraction(100)),)))
        on_src = stats.selectivity(Selection((alg.Atom("src", "=", None, "A"),)))
        assert 0.4 < on_id < 0.6 and 0.15 < on_ra < 0.35 and 0.4 < on_src < 0.6, (len(pad), on_id, on_ra, on_src)


def test_attributes_are_observed_like_leaf_elements() -> None:
    """``@t`` gets its increments (a time window on it is priced), ``pos/@ra`` its histogram,
    and an attribute of a repeated element counts as repeated."""
    from lxml import etree

    from sharing.stream_properties import Selection

    stats = StreamStatistics()
    for k in range(400):
        stats.observe(etree.fromstring(f'<ev t="{k / 10}"><pos ra="{k}"/><c x="1"/><c x="2"/></ev>'))
    assert stats.avg_increment("@t") == pytest.approx(0.1)
    assert stats.avg_increment("pos/@ra") == pytest.approx(1.0)
    assert 0.2 < stats.selectivity(Selection((alg.Atom("pos/@ra", "<", None, Fraction(100)),))) < 0.3
    assert "c/@x" in stats.repeated_elements and "pos/@ra" not in stats.repeated_elements
    assert stats.element_size("@t") > 0


def test_an_item_too_large_to_walk_whole_leaves_no_element_known_to_occur_once():
    """Past ``MAX_WALKED_ELEMENTS`` a second ``m`` would go unseen: ``m`` must not count as
    occurring once (matching would chain comparisons through it), nor any other element."""
    s = StreamStatistics()
    s.observe(etree.fromstring("<v><m>1</m><x>2</x></v>"))
    assert s.single_elements == {"m", "x"}
    s.observe(etree.fromstring("<v><m>1</m>" + "<f/>" * MAX_WALKED_ELEMENTS + "<m>9</m></v>"))
    assert s.single_elements == frozenset() and s.truncated_items == 1
    assert statistics_from_json(statistics_to_json(s)).single_elements == frozenset()


_TAGS = st.sampled_from(["a", "b", "ra", "énergie", "x-y"])
_TEXT = st.one_of(st.none(), st.text(alphabet="ab 1.5é\n\t", max_size=6), st.text(alphabet='a&<>"\'\r=', max_size=4))


@st.composite
def _trees(draw, depth: int = 0) -> etree._Element:
    el = etree.Element(draw(_TAGS), nsmap={"p": "urn:p"} if draw(st.integers(0, 9)) == 0 else None)
    el.text = draw(_TEXT)
    if draw(st.integers(0, 7)) == 0:
        el.set("k", draw(st.text(alphabet="ab&\"", max_size=3)))
    for _ in range(draw(st.integers(0, 3 if depth < 3 else 0))):
        if draw(st.integers(0, 9)) == 0:
            el.append(etree.Comment("c") if draw(st.booleans()) else etree.ProcessingInstruction("pi", "x"))
        else:
            el.append(draw(_trees(depth + 1)))
        el[-1].tail = draw(_TEXT)
    return el


@settings(max_examples=300, deadline=None)
@given(st.lists(_trees(), min_size=1, max_size=4))
def test_element_bytes_are_what_serialising_each_element_gives(items):
    """Each element path's bytes are the sum of ``etree.tostring`` of its elements (summed from
    the children's in items without attributes, namespaces, escapes, comments and PIs), items
    parsed back from their text (as a super-peer observes them) and built directly alike."""
    for parsed in (False, True):
        s = StreamStatistics(frequency=1.0)
        expected: dict[str, int] = {}
        for item in items:
            if parsed:
                item = etree.fromstring(etree.tostring(item, encoding="utf-8"))
            s.observe(item)

            def walk(el, prefix):
                for child in el:
                    if isinstance(child.tag, str):
                        path = f"{prefix}/{child.tag}" if prefix else child.tag
                        expected[path] = expected.get(path, 0) + len(etree.tostring(child, encoding="utf-8",
                                                                                       with_tail=False))
                        walk(child, path)
            walk(item, "")
        assert {p: e.total_bytes for p, e in s.elements.items() if "@" not in p} == expected
