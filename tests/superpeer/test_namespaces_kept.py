"""Namespace declarations in scope on stream items (``xmlns:xsi`` on a VOEvent) are kept on the
elements a result copies, as an XQuery copy keeps them (``copy-namespaces preserve, inherit``):
by the reference evaluator (against Saxon-HE), and through eight in-process super-peers with the
projection applied upstream (against the reference)."""

from __future__ import annotations

from network_harness import reference_results, same
from oracle import result_items, saxon_query
from superpeer_fakes import buffered_results, in_process_network

XSI = "http://www.w3.org/2001/XMLSchema-instance"
ITEMS = [(f'<packet xmlns:xsi="{XSI}" ivorn="ivo://x#{k}"><Who><Date>2016-0{k % 9 + 1}-01</Date></Who>'
          f'<What><Param name="Sig" value="{k}"/></What><role>observation</role></packet>') for k in range(40)]
QUERIES = [('<r>{ for $p in stream("packets")/packets/packet where $p/What/Param[@name = "Sig"]/@value > 5 '
            'return <e>{ $p/@ivorn }{ $p/Who/Date }</e> }</r>'),
           '<r>{ for $p in stream("packets")/packets/packet return <w>{ $p/What }</w> }</r>']


def test_a_copy_keeps_the_namespaces_in_scope_as_saxon_does() -> None:
    document = "<packets>" + "".join(ITEMS) + "</packets>"
    for query in QUERIES:
        twin = query.replace('stream("packets")', "")
        ours = "<r>" + "".join(reference_results(query, ITEMS, root="packets")) + "</r>"
        assert result_items(ours)[1] == result_items(saxon_query(twin, document))[1]


def test_namespaces_are_kept_through_the_network() -> None:
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("packets", "packets", "packet", rate=10)
        sp4.data.publish("packets", ITEMS[:5])
        records = [net.peers[p].control.subscribe(q) for p, q in zip(["SP1", "SP7"], QUERIES)]
        sp4.data.publish("packets", ITEMS[5:])
        sp4.data.close_stream("packets")
        for record, query in zip(records, QUERIES):
            expected = reference_results(query, ITEMS[5:], root="packets")
            assert XSI in expected[0]
            assert same(buffered_results(record), expected), record.plan.describe()
    finally:
        for p in net.peers.values():
            p.stop()
