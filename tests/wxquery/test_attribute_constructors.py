"""Attributes written in a constructor's start tag (``<alert id="{ $e/@id }" kind="grb">``): text,
references, doubled quotes and braces, and enclosed paths, aggregates and numbers whose values
are atomized and joined by spaces — against Saxon-HE; their misuse refused with its position;
and through in-process super-peers, where the projection upstream keeps what the values read."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from network_harness import reference_results, same
from oracle import result_items, saxon_query
from superpeer_fakes import buffered_results, in_process_network

from sharing.analysis import analyze
from wxquery.errors import WXQueryError
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument


@st.composite
def events(draw) -> list[str]:
    out = []
    for k in range(draw(st.integers(1, 6))):
        role = draw(st.sampled_from(["", ' role="obs"', ' role="a &amp; b"', ' role=" x\ty "']))
        en = "".join(f"<en>{draw(st.sampled_from(['1.50', '2', ' 3e0 ', '0.1']))}</en>"
                     for _ in range(draw(st.integers(0, 2))))
        src = draw(st.sampled_from(["", "<src><n>a</n>b<n>c</n></src>", "<src/>"]))
        out.append(f'<ev id="{k}"{role}>{en}{src}</ev>')
    return out


TEXTS = ["x", " ", "a''b", "&amp;", "&lt;&#65;", "{{}}", "tab\there", "line\nbreak", "&#9;", '"']
ENCLOSED = ["{ $e/@id }", "{$e/@role}", "{ $e/en }", "{ $e/src }", "{ count($e/en) }", "{ sum($e/en) }",
            "{ max($e/en) }", "{ 2.50 }", "{ $e/@none }", "{}"]


@st.composite
def constructors(draw) -> str:
    """``<out a0="…" a1="…">…</out>``: each value a few texts and enclosed expressions."""
    attributes = []
    for i in range(draw(st.integers(1, 3))):
        parts = draw(st.lists(st.sampled_from(TEXTS + ENCLOSED), max_size=3))
        quote = draw(st.sampled_from(["'", '"']))
        value = "".join(p.replace("''", "'" + "'") if quote == "'" else p.replace('"', '""') for p in parts)
        attributes.append(f"a{i}={quote}{value}{quote}")
    content = draw(st.sampled_from(["", "{ $e/en }", "text", "{ $e/@id }<n/>"]))
    return f"<out {' '.join(attributes)}>{content}</out>"


def _query(constructor: str, source: str) -> str:
    return f"<r>{{ for $e in {source}/evs/ev return {constructor} }}</r>"


@pytest.mark.oracle
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=events(), constructor=constructors())
def test_attribute_constructors_give_what_saxon_gives(items: list[str], constructor: str) -> None:
    document = "<evs>" + "".join(items) + "</evs>"
    analysis = analyze(_query(constructor, 'stream("evs")'))
    ours = result_items(evaluate(analysis.checked, StreamDocument.from_text(document)).document())
    assert ours == result_items(saxon_query(_query(constructor, ""), document))


@pytest.mark.parametrize("constructor, position, fragment", [
    ('<a x="1" x="2"/>', 53, "attribute x twice (XQuery's XQST0040)"),
    ('<a x="1">{ $e/@x }</a>', 53, "would get attribute @x twice"),
    ('<a x="1"y="2"/>', 52, "expected white space before attribute y"),
    ('<a x="{ for $i in $e/en return $i }"/>', 50, "takes paths, aggregates and numbers"),
    ('<a x="<b/>"/>', 50, "'<' in the value of attribute x must be written &lt;"),
    ('<a x="}"/>', 50, "'}' in an attribute value must be written '}}'"),
    ('<a x=1/>', 49, "expected a quoted value of attribute x"),
    ('<a xmlns="urn:x"/>', 47, "namespace prefixes and declarations are not supported"),
    ('<a p:x="1"/>', 47, "namespace prefixes and declarations are not supported"),
    ('<a x="{ $f/en }"/>', 52, "$f"),
])
def test_misused_attribute_constructors_are_refused_with_their_position(constructor, position, fragment) -> None:
    with pytest.raises(WXQueryError) as caught:
        analyze(_query(constructor, 'stream("evs")'))
    assert fragment in caught.value.message
    assert (caught.value.position.line, caught.value.position.column) == (1, position), caught.value.message


def test_the_outermost_element_takes_no_attribute_and_a_value_must_be_closed() -> None:
    with pytest.raises(WXQueryError, match="1:49: the value of attribute x is not closed"):
        analyze('<r>{ for $e in stream("evs")/evs/ev return <a x="1')
    with pytest.raises(WXQueryError, match="outermost element stands for the result stream"):
        analyze('<r id="x">{ for $e in stream("evs")/evs/ev return $e/en }</r>')


ITEMS = [f'<ev id="{k}" role="{"obs" if k % 3 else "test"}"><en>{k % 7 / 2}</en><pos ra="{k}"/></ev>'
         for k in range(60)]
QUERIES = [
    '<r>{ for $e in stream("evs")/evs/ev where $e/@role = "obs" return <hit id="{ $e/@id }" ra="{ $e/pos/@ra }"/> }</r>',
    '<r>{ for $e in stream("evs")/evs/ev where $e/en > 1 return <e kind="hard" n="{ count($e/en) }">{ $e/en }</e> }</r>',
    '<r>{ for $w in stream("evs")/evs/ev |count 5| return <w mean="{ avg($w/en) }" top="{ max($w/en) }"/> }</r>',
]


def test_attribute_constructors_through_the_network() -> None:
    """Each subscription's result equals the reference evaluator's (and, without a window,
    Saxon's), the values read through a projection applied upstream."""
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("evs", "evs", "ev", rate=10)
        sp4.data.publish("evs", ITEMS[:10])
        records = [net.peers[p].control.subscribe(q) for p, q in zip(["SP1", "SP7", "SP1"], QUERIES)]
        sp4.data.publish("evs", ITEMS[10:])
        sp4.data.close_stream("evs")
        for record, query in zip(records, QUERIES):
            expected = reference_results(query, ITEMS[10:], root="evs")
            assert expected and same(buffered_results(record), expected), record.plan.describe()
        document = "<evs>" + "".join(ITEMS[10:]) + "</evs>"
        for query in QUERIES[:2]:
            theirs = result_items(saxon_query(query.replace('stream("evs")', ""), document))[1]
            assert same(reference_results(query, ITEMS[10:], root="evs"), theirs)
        assert any(p.operators for p in records[0].plan.parts), records[0].plan.describe()
    finally:
        for p in net.peers.values():
            p.stop()


@pytest.mark.parametrize("reference, fragment", [
    ("&#1;", "names no XML character"), ("&#xFFFE;", "names no XML character"), ("&#0;", "names no XML character"),
    ("&# 65;", "malformed reference"), ("&#+65;", "malformed reference"), ("&#x41 ;", "malformed reference"),
    ("&nbsp;", "unknown entity '&nbsp;'"), ("& ", "malformed reference"),
])
def test_references_are_xml_s_and_name_xml_characters(reference: str, fragment: str) -> None:
    for constructor in (f'<a x="{reference}"/>', f"<a>{reference}</a>"):
        with pytest.raises(WXQueryError, match=fragment) as caught:
            analyze(_query(constructor, 'stream("evs")'))
        assert (caught.value.position.line, caught.value.position.column) == (1, 44 + constructor.index("&"))


def test_a_character_reference_may_have_leading_zeros() -> None:
    document = '<evs><ev id="1"/></evs>'
    query = _query('<a x="&#x0000000041;&#00066;">&#x0000000043;</a>', 'stream("evs")')
    ours = result_items(evaluate(analyze(query).checked, StreamDocument.from_text(document)).document())
    assert ours == result_items(saxon_query(_query('<a x="&#x0000000041;&#00066;">&#x0000000043;</a>', ""), document))
