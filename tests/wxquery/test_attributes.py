"""Attributes (issue 36): ``@name`` as the last step of a path — in filters, item predicates,
aggregates and results (the attributes of a constructed element) — checked against Saxon-HE on
generated items (present, missing and empty attributes, numbers, non-numbers, references); the
executors' batch selection and projection against the reference evaluator; and what XQuery would
refuse, refused with its position."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from oracle import result_items, saxon_query

from sharing.analysis import analyze
from wxquery.errors import UnsatisfiablePredicateError, WXQueryError
from wxquery.evaluator import evaluate
from wxquery.operators.batch import ItemBatch, selection_mask
from wxquery.operators.items import projection_for
from wxquery.stream_document import StreamDocument
from wxquery.values import string_literal

VALUES = ["", "obs", "test", "1", "2.5", "10", " 3 ", "x&y", "a<b"]
NUMBERS = ["1", "2.5", "10", " 3 ", "-0", "1e1"]  # (cast as XQuery casts: Saxon stops at a non-number)


def _attributes(draw, names: list[str]) -> str:
    return "".join(f" {n}={quoteattr(draw(st.sampled_from(VALUES if n == 'role' else NUMBERS)))}"
                   for n in names if draw(st.booleans()))


@st.composite
def events(draw) -> list[str]:
    out = []
    for k in range(draw(st.integers(1, 10))):
        pos = f"<pos{_attributes(draw, ['ra', 'dec'])}><frame>icrs</frame></pos>" if draw(st.booleans()) else ""
        out.append(f'<ev id="{k}"{_attributes(draw, ["role", "w"])}>{pos}<en>{k % 3}.5</en></ev>')
    return out


@st.composite
def conditions(draw) -> list[str]:
    atoms = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(["@role", "@w", "pos/@ra", "pos/@dec"]))
        op = draw(st.sampled_from(["=", "<", "<=", ">", ">="]))
        if draw(st.booleans()):
            atoms.append(f"$e/{path} {op} {string_literal(draw(st.sampled_from(VALUES)))}")
        elif path != "@role":  # (numbers where the values are numbers)
            atoms.append(f"$e/{path} {op} {draw(st.sampled_from(['0', '1', '2.5', '10']))}")
    return atoms or ['$e/@role != "test"']


def _query(where: list[str], source: str, predicate: str) -> str:
    return (f"<r>{{ for $e in {source}/events/ev{predicate} where {' and '.join(where)} "
            f"return <a>{{ $e/@id }}{{ $e/pos/@ra }}{{ $e/en }}</a> }}</r>")


@pytest.mark.oracle
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=events(), where=conditions(), predicate=st.sampled_from(["", '[@role != "test"]', "[@w]", "[pos/@ra >= '1']"]))
def test_attributes_give_what_saxon_gives(items: list[str], where: list[str], predicate: str) -> None:
    if predicate == "[@w]":
        predicate = "[@w = '1']"  # (a bare path is not a comparison in WXQuery)
    document = "<events>" + "".join(items) + "</events>"
    try:
        analysis = analyze(_query(where, 'stream("ev")', predicate))
    except UnsatisfiablePredicateError:
        assert result_items(saxon_query(_query(where, "", predicate), document))[1] == []
        return
    ours = result_items(evaluate(analysis.checked, StreamDocument.from_text(document)).document())
    assert ours == result_items(saxon_query(_query(where, "", predicate), document))
    # the executors' selection keeps the same items, and their projection the attributes needed
    inp = analysis.properties.inputs[0]
    mask = selection_mask(ItemBatch(items), inp.selection.atoms if inp.selection else ())
    kept = [etree.fromstring(t).get("id") for t, m in zip(items, mask) if m]
    assert kept == [etree.fromstring(item).get("id") for item in ours[1]]
    batch = ItemBatch(items)
    project = batch.projector(frozenset(inp.projection.output))
    for row, text in enumerate(items):
        projected, whole = etree.fromstring(project(row)), etree.fromstring(text)
        assert projected.get("id") == whole.get("id")
        assert [p.get("ra") for p in projected.iter("pos")] == [p.get("ra") for p in whole.iter("pos")]
        assert projected.get("role") is None  # (not needed: not kept)


def test_a_projection_keeps_the_attributes_asked_for_on_the_way() -> None:
    item = '<ev id="7" role="obs"><pos ra="1.5" dec="-2"><frame>icrs</frame></pos><en>1</en><x a="1">t</x></ev>'
    projection = projection_for(frozenset({"@id", "pos/@ra", "x"}))
    expected = '<ev id="7"><pos ra="1.5"/><x a="1">t</x></ev>'
    assert projection.text(etree.fromstring(item)) == expected
    assert etree.tostring(projection.element(etree.fromstring(item)), encoding="unicode") == expected
    assert ItemBatch([item]).projector(projection.paths)(0) == expected


HEAD = 'for $e in stream("s")/a/e'


@pytest.mark.parametrize("text, anchor, fragment", [
    (f"<r>{{ {HEAD} return $e/@id }}</r>", "$e/@id", "enclosed directly in an element constructor"),
    (f"<r>{{ {HEAD} return <a>{{ $e/x }}{{ $e/@id }}</a> }}</r>", "{ $e/@id", "must come first"),
    (f"<r>{{ {HEAD} return <a>{{ $e/@id }}{{ $e/@id }}</a> }}</r>", "{ $e/@id }</a>", "attribute @id twice"),
    (f"<r>{{ $e/@id }}{{ {HEAD} return $e }}</r>", "{ $e/@id", "takes no attribute"),
    (f"<r>{{ {HEAD} return $e/@id/x }}</r>", "/x", "an attribute ends a path"),
    (f"<r>{{ {HEAD} return $e/@* }}</r>", "@*", "wildcards ('@*')"),
    (f"<r>{{ {HEAD} where @id = 1 return $e }}</r>", "@id =", "must start at a variable"),
    (f"<r>{{ {HEAD} for $i in $e/@id return $i }}</r>", "@id return", "iterates over elements"),
])
def test_misplaced_attributes_are_refused_with_their_position(text: str, anchor: str, fragment: str) -> None:
    with pytest.raises(WXQueryError) as err:
        analyze(text)
    assert fragment in err.value.message, err.value.message
    assert (err.value.position.line, err.value.position.column) == (1, text.index(anchor) + 1), err.value.format()


PARAMS = ["RA", "Dec", "Sig", "a/b"]


@st.composite
def packets(draw) -> list[str]:
    """VOEvent-like items: their data in ``<Param name="…" value="…"/>``, some in a Group."""
    out = []
    for k in range(draw(st.integers(1, 8))):
        names = draw(st.lists(st.sampled_from(PARAMS), max_size=3, unique=True))  # (Saxon stops at two RA)
        params = "".join(f'<Param name="{n}" value="{draw(st.sampled_from(NUMBERS))}"/>' for n in names)
        group = (f'<Group name="g"><Param name="Sig" value="{draw(st.sampled_from(NUMBERS))}"/></Group>'
                 if draw(st.booleans()) else "")
        out.append(f'<v id="{k}"><What>{params}{group}</What></v>')
    return out


@st.composite
def name_tests(draw) -> list[str]:
    atoms = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([f'What/Param[@name = {string_literal(n)}]/@value' for n in PARAMS]
                                    + ['What/Group[@name = "g"]/Param[@name = "Sig"]/@value']))
        op = draw(st.sampled_from(["=", "<", "<=", ">", ">="]))
        atoms.append(f"$e/{path} {op} {draw(st.sampled_from(['0', '1', '2.5', '10']))}")
    return atoms


@pytest.mark.oracle
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=packets(), where=name_tests(), pick=st.booleans())
def test_elements_picked_by_name_give_what_saxon_gives(items: list[str], where: list[str], pick: bool) -> None:
    """``$e/What/Param[@name = "RA"]/@value > 100``: the Param named RA, in conditions and item
    predicates, against Saxon; the executors' selection against the reference evaluator."""
    document = "<vs>" + "".join(items) + "</vs>"
    predicate = '[What/Param[@name = "Dec"]/@value < 10]' if pick else ""

    def query(source: str) -> str:
        return (f"<r>{{ for $e in {source}/vs/v{predicate} where {' and '.join(where)} "
                f'return <a>{{ $e/@id }}{{ $e/What/Param[@name = "RA"]/@value }}</a> }}</r>')

    try:
        analysis = analyze(query('stream("vs")'))
    except UnsatisfiablePredicateError:
        assert result_items(saxon_query(query(""), document))[1] == []
        return
    ours = result_items(evaluate(analysis.checked, StreamDocument.from_text(document)).document())
    assert ours == result_items(saxon_query(query(""), document))
    inp = analysis.properties.inputs[0]
    mask = selection_mask(ItemBatch(items), inp.selection.atoms)
    assert ([etree.fromstring(t).get("id") for t, m in zip(items, mask) if m]
            == [etree.fromstring(item).get("id") for item in ours[1]])
