"""A subscription whose results are its input's items takes their wire text, unparsed
(``wxquery.pass_through``), through eight in-process super-peers: its results are Saxon-HE's
for the same query over the published document, item for item (canonical XML), on items
written in every way XML allows — quotes, character references, CDATA, empty elements,
namespaces in scope — with the condition applied upstream or at the subscriber's peer; and a
subscription that restructures its items still goes through the evaluator."""

from __future__ import annotations

from network_harness import reference_results, same
from oracle import result_items, saxon_query
from superpeer_fakes import buffered_results, in_process_network

XSI = "http://www.w3.org/2001/XMLSchema-instance"


def item(k: int) -> str:
    forms = [f"<packet id='{k}'><en>{k % 7}</en><note><![CDATA[a < b & c]]></note></packet>",
             f'<packet id="{k}" xmlns:xsi="{XSI}"><en>{k % 7}</en><note xsi:nil="true"></note></packet>',
             f"<packet id=\"{k}\"><en>{k % 7}</en><note>&#65;&#x42;&gt;&amp;</note><e/></packet>",
             f'<packet id="{k}"><en>{k % 7}</en><note>é ü 😀</note></packet>']
    return forms[k % len(forms)]


ITEMS = [item(k) for k in range(60)]
FOR = 'for $p in stream("packets")/packets/packet'
THROUGH = [f"<r>{{ {FOR} return $p }}</r>",
           f"<r>{{ {FOR} where $p/en >= 3 return $p }}</r>",
           '<r>{ for $p in stream("packets")/packets/packet[en < 2] return $p }</r>']
EVALUATED = f"<r>{{ {FOR} where $p/en >= 3 return <x>{{ $p/note }}</x> }}</r>"


def test_items_passed_through_are_saxons_results() -> None:
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("packets", "packets", "packet", rate=10)
        sp4.data.publish("packets", ITEMS[:4])
        queries = [*THROUGH, EVALUATED]
        peers = ["SP1", "SP7", "SP4", "SP0"]  # (SP4: the condition is applied at the stream's own peer)
        records = [net.peers[p].control.subscribe(q) for p, q in zip(peers, queries)]
        assert [r.runtime.wants_text for r in records] == [True, True, True, False]
        sp4.data.publish("packets", ITEMS[4:])
        sp4.data.close_stream("packets")
        document = "<packets>" + "".join(ITEMS[4:]) + "</packets>"
        for record, query in zip(records, queries):
            got = buffered_results(record)
            theirs = result_items(saxon_query(query.replace('stream("packets")', ""), document))[1]
            assert result_items("<r>" + "".join(got) + "</r>")[1] == theirs, record.plan.describe()
            assert same(got, reference_results(query, ITEMS[4:], root="packets"))
    finally:
        for p in net.peers.values():
            p.stop()
