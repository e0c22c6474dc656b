"""Subscriptions filtering real VOEvent packets by string (issue 36): the packets ``voevent-parse``
ships (Swift, Gaia, ASAS-SN, MOA, a broker test), read as ``thinpeer.voevent`` reads them, flow
through eight real super-peers in one process; a stream filtered on its author is reused by a
later subscription filtered on the same author and more, and every subscriber gets what the
reference evaluator gives over all that was published."""

from __future__ import annotations

from pathlib import Path

import pytest
import voeventparse.fixtures
from network_harness import reference_results, same
from superpeer_fakes import buffered_results, in_process_network

from thinpeer.voevent.shape import voevent_item

PACKETS = sorted(Path(voeventparse.fixtures.__file__).parent.glob("*.xml"))
ITEMS = [voevent_item(p.read_bytes()) for p in PACKETS] * 8
HEAD = 'for $e in stream("voevents")/voevents/voevent'
GCN = "ivo://nasa.gsfc.tan/gcn"


@pytest.fixture
def network():
    net = in_process_network()
    sp4 = net.peers["SP4"]
    sp4.control.register_stream("voevents", "voevents", "voevent", rate=10)
    sp4.data.publish("voevents", ITEMS[:12])  # (statistics before any subscription)
    yield net
    for p in net.peers.values():
        p.stop()


def test_a_stream_filtered_by_author_serves_a_later_subscription_on_the_same_author(network) -> None:
    everything = f'<gcn>{{ {HEAD} where $e/author/ivorn = "{GCN}" return $e }}</gcn>'
    important = (f'<gcn>{{ {HEAD} where "{GCN}" = $e/author/ivorn and $e/importance > 0.95 '
                 f'return <a>{{ $e/ivorn }}{{ $e/importance }}</a> }}</gcn>')
    swift = (f'<swift>{{ {HEAD} where $e/ivorn >= "ivo://nasa.gsfc.gcn/SWIFT#" and '
             f'$e/ivorn < "ivo://nasa.gsfc.gcn/SWIFT$" and $e/role != "test" return $e/ivorn }}</swift>')
    q1 = network.peers["SP1"].control.subscribe(everything)
    q2 = network.peers["SP7"].control.subscribe(important)
    q3 = network.peers["SP6"].control.subscribe(swift)
    (part1,), (part2,) = q1.plan.parts, q2.plan.parts
    assert part2.reused == part1.result_stream, q2.plan.describe()
    network.peers["SP4"].data.publish("voevents", ITEMS[12:])
    network.peers["SP4"].data.close_stream("voevents")
    for record, query in ((q1, everything), (q2, important), (q3, swift)):
        expected = reference_results(query, ITEMS[12:], root="voevents")
        assert expected, query  # (the filters keep some packets, and not all)
        assert len(expected) < len(ITEMS[12:])
        assert same(buffered_results(record), expected)
