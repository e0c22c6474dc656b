"""Streams whose items are in a namespace — real VOEvent packets, ``<voe:VOEvent xmlns:voe=…>``
with unqualified descendants — read as XQuery reads them: the prefix declared in the prolog
(``declare namespace voe = "…";``) or the URI written out (``Q{…}VOEvent``) in the stream's path.
Against Saxon-HE on the packets voevent-parse ships (VOEvent 2.0 and 1.1, and one without a
namespace, in one document); misuse refused with its position; and through in-process
super-peers, the stream registered with the names its document has, as ``publish`` does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import voeventparse.fixtures
from lxml import etree
from network_harness import same
from oracle import result_items, saxon_query
from superpeer_fakes import buffered_results, in_process_network

from sharing.analysis import analyze
from thinpeer.sources.xml_items import open_xml
from wxquery.errors import WXQueryError
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

V2 = "http://www.ivoa.net/xml/VOEvent/v2.0"
PACKETS = [re.sub(r"^<\?xml[^>]*\?>\s*", "", p.read_text())
           for p in sorted(Path(voeventparse.fixtures.__file__).parent.glob("*.xml"))]
DOCUMENT = "<voevents>" + "".join(PACKETS) + "</voevents>"
HEAD = f'xquery version "3.1";\ndeclare namespace voe = "{V2}";\n'
FOR = 'for $e in stream("voevents")/voevents/voe:VOEvent'
QUERIES = [
    HEAD + f'<r>{{ {FOR} where $e/@role = "observation" return <a id="{{ $e/@ivorn }}">{{ $e/Who/AuthorIVORN }}</a> }}</r>',
    HEAD + (f'<r>{{ {FOR} where $e/What/Param[@name = "Packet_Type"]/@value >= 61 '
            f'return <p>{{ $e/What/Param[@name = "Packet_Type"]/@value }}{{ $e/Who/Date }}</p> }}</r>'),
    HEAD + f'<r>{{ {FOR} return $e/WhereWhen }}</r>',
    HEAD + f'<r>{{ {FOR} where $e/Who/AuthorIVORN >= "ivo://nasa" return $e }}</r>',
    f'<r>{{ for $e in stream("voevents")/voevents/Q{{{V2}}}VOEvent return <i>{{ $e/@ivorn }}</i> }}</r>',
    ('declare namespace v1 = "http://www.ivoa.net/xml/VOEvent/v1.1";\n'
     '<r>{ for $e in stream("voevents")/voevents/v1:VOEvent return <i>{ $e/@ivorn }{ $e/@role }</i> }</r>'),
]


def _twin(query: str) -> str:
    return query.replace('stream("voevents")', "")


@pytest.mark.oracle
@pytest.mark.parametrize("query", QUERIES)
def test_items_in_a_namespace_give_what_saxon_gives(query: str) -> None:
    ours = result_items(evaluate(analyze(query).checked, StreamDocument.from_text(DOCUMENT)).document())
    theirs = result_items(saxon_query(_twin(query), DOCUMENT))
    assert theirs[1], "(each query selects something)"
    assert ours == theirs


@pytest.mark.parametrize("query, position, fragment", [
    ('<r>{ for $e in stream("v")/voevents/voe:VOEvent return $e }</r>', (1, 37),
     "namespace prefix voe is not declared"),
    (f'declare namespace voe = "{V2}";\n<r>{{ for $e in stream("v")/voevents/voe:VOEvent return $e/voe:Who }}</r>',
     (2, 59), "a namespace is named only in the stream's path"),
    ('<r>{ for $e in stream("v")/voevents/*:VOEvent return $e }</r>', (1, 37), "wildcards ('*:name')"),
    ('declare namespace a = "u";\ndeclare namespace a = "v";\n<r/>', (2, 1), "declared twice"),
    ('declare namespace xml = "u"; <r/>', (1, 19), "cannot be declared"),
    ('declare namespace a = ""; <r/>', (1, 23), "must not be empty"),
    ('declare namespace a = "u" <r/>', (1, 27), "expected ';' ending the declaration"),
    ('declare variable $x := 1; <r/>', (1, 1), "prolog declarations ('declare ...') are not supported"),
    ('<r>{ for $e in stream("v")/voevents/Q{u}p:x return $e }</r>', (1, 37), "a name without a prefix"),
    ('<r>{ for $e in stream("v")/r/Q{u}x[Q{u}c = 1] return $e }</r>', (1, 36), "named only in the stream's path"),
    ('<r>{ for $e in stream("v")/Q{u}r[Q{u}c = 1]/x return $e }</r>', (1, 34), "named only in the stream's path"),
    ('<r>{ for $e in stream("v")/r/x/Q{u}c return $e }</r>', (1, 32), "named only in the stream's path"),
    ('declare namespace fn = "u";\ndeclare namespace fn = "v";\n<r/>', (2, 1), "declared twice"),
    ('declare namespace x = "http://www.w3.org/XML/1998/namespace"; <r/>', (1, 23), "XQST0070"),
    ('xquery version "3.1"\n<r/>', (1, 1), "with its ';'"),
])
def test_namespaces_misused_are_refused_with_their_position(query: str, position: tuple, fragment: str) -> None:
    with pytest.raises(WXQueryError) as caught:
        analyze(query)
    assert fragment in caught.value.message
    assert (caught.value.position.line, caught.value.position.column) == position, caught.value.message


def _canonical(items: list[str]) -> list[str]:
    return [etree.tostring(etree.fromstring(i), method="c14n").decode() for i in items]


def test_packets_in_a_namespace_through_the_network() -> None:
    """Registered with the names its document has (``{uri}VOEvent``, as ``publish`` reads
    them); filters and projections upstream; each result equals Saxon's."""
    chunks = iter([("<voevents>" + "".join(PACKETS * 5) + "</voevents>").encode()])
    document = open_xml("voevents.xml", chunks)
    assert (document.root, document.item) == ("voevents", f"{{{V2}}}VOEvent")
    items = [i for i in document if i.startswith("<voe:")]  # (the others: not items, refused one by one)
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("voevents", document.root, document.item, rate=10)
        sp4.data.publish("voevents", items[:4])
        queries = QUERIES[:5]
        records = [net.peers[p].control.subscribe(q) for p, q in zip(["SP1", "SP7", "SP1", "SP6", "SP7"], queries)]
        sp4.data.publish("voevents", items[4:])
        sp4.data.close_stream("voevents")
        later = "<voevents>" + "".join(items[4:]) + "</voevents>"
        for record, query in zip(records, queries):
            theirs = result_items(saxon_query(_twin(query), later))[1]
            assert theirs and same(_canonical(buffered_results(record)), theirs), record.plan.describe()
        assert any(p.operators and p.operator_peer == "SP4" for r in records for p in r.plan.parts)
    finally:
        for p in net.peers.values():
            p.stop()


def test_a_query_naming_other_items_is_told_the_registered_names() -> None:
    net = in_process_network()
    try:
        net.peers["SP4"].control.register_stream("voevents", "voevents", f"{{{V2}}}VOEvent", rate=10)
        with pytest.raises(Exception, match=r"items <Q\{http://www.ivoa.net/xml/VOEvent/v2.0\}VOEvent>, but the "
                                            r"query reads stream\(\"voevents\"\)/voevents/VOEvent"):
            net.peers["SP1"].control.subscribe('<r>{ for $e in stream("voevents")/voevents/VOEvent return $e }</r>')
    finally:
        for p in net.peers.values():
            p.stop()


@pytest.mark.parametrize("query", [
    f'declare namespace voe = " {V2} ";\n<r>{{ {FOR} return <i>{{ $e/@ivorn }}</i> }}</r>',
    f'declare namespace voe = "{V2}&#x20;";\n<r>{{ {FOR} return <i>{{ $e/@ivorn }}</i> }}</r>',
    f'<r>{{ for $e in stream("voevents")/voevents/Q{{ {V2.replace("/", "&#x2F;", 1)} }}VOEvent return <i>{{ $e/@ivorn }}</i> }}</r>',
])
def test_namespace_uris_are_read_as_xquery_reads_them(query: str) -> None:
    """(a URI literal is whitespace-collapsed; references in Q{…} are expanded)"""
    ours = result_items(evaluate(analyze(query).checked, StreamDocument.from_text(DOCUMENT)).document())
    theirs = result_items(saxon_query(_twin(query), DOCUMENT))
    assert theirs[1] and ours == theirs
