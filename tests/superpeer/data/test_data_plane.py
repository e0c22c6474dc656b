"""The data plane without gRPC: publish and validation, forwarding along routes, derived
streams computed once per parent, delivery to subscriptions, and what a neighbour may send
wrong — real parts of eight super-peers in one process, joined by a fake transport."""

from __future__ import annotations

import dataclasses


import pytest

from sharing.scenarios import paper_query
from superpeer.errors import NodeError
from network_harness import same, reference_results, until
from superpeer_fakes import buffered_results as results, in_process_network, photon_network
from photons.generator import generate

PHOTONS = [p.to_xml() for p in generate(600, seed=11)]


reference = reference_results  # the invariant: the reference evaluator's results




@pytest.fixture
def network():
    yield from photon_network(PHOTONS[:100])


def test_shared_streams_deliver_the_reference_results(network):
    q = {n: paper_query(n) for n in (1, 2, 3, 4)}
    records = {1: network.peers["SP1"].control.subscribe(q[1]),
               2: network.peers["SP7"].control.subscribe(q[2]),
               3: network.peers["SP0"].control.subscribe(q[3]),
               4: network.peers["SP6"].control.subscribe(q[4])}
    accepted, rejected, reasons, *_ = network.peers["SP4"].data.publish(
        "photons", PHOTONS[100:] + ["<photon><en>1</photon>", "<nope/>"])
    assert (accepted, rejected) == (500, 2)
    assert "Opening and ending tag mismatch" in reasons[0] and "<nope> is not a <photon>" in reasons[1]
    assert network.peers["SP4"].data.close_stream("photons") == 600
    for n, record in records.items():
        got, expected = results(record), reference(q[n], PHOTONS[100:])
        assert expected and same(got, expected), n
    # Query 2 is computed at SP5 from Query 1's stream, which reaches SP5 once
    q1_stream = records[1].plan.parts[0].result_stream
    assert records[2].plan.parts[0].reused == q1_stream
    assert network.peers["SP5"].state.derived_here(q1_stream)
    assert network.peers["SP5"].transport.senders["SP7"].items > 0


def test_pure_forwarding_does_not_parse(network):
    record = network.peers["SP1"].control.subscribe(paper_query(1))
    stream = record.plan.parts[0].result_stream
    assert not network.peers["SP5"].data.needs_values(stream)  # SP5 only forwards it
    assert network.peers["SP1"].data.needs_values(stream)  # delivered to Query 1 at SP1


def test_publish_checks_the_stream(network):
    with pytest.raises(NodeError) as elsewhere:
        network.peers["SP1"].data.publish("photons", PHOTONS[:1])
    assert elsewhere.value.code == "NOT_FOUND" and "registered at SP4" in elsewhere.value.message
    network.peers["SP4"].data.close_stream("photons")
    with pytest.raises(NodeError) as closed:
        network.peers["SP4"].data.publish("photons", PHOTONS[:1])
    assert closed.value.code == "FAILED_PRECONDITION"
    stats = network.peers["SP4"].state.originals["photons"].statistics
    assert stats.items == 100 and stats.frequency == 100


def test_bad_transfers_are_dropped_and_counted(network):
    record = network.peers["SP1"].control.subscribe(paper_query(1))
    stream = record.plan.parts[0].result_stream
    sp1 = network.peers["SP1"].data
    route = record.plan.parts[0].route
    before = route[route.index("SP1") - 1]
    assert sp1.transfer(stream, ["<photon><en>1</photon>", *PHOTONS[:3]], False, before) == 4
    assert sp1.transfer("no-such-stream", PHOTONS[:5], False) == 5
    for forged in ("", "SP7"):  # only the peer before SP1 on the route may send it there
        with pytest.raises(NodeError) as refused:
            sp1.transfer(stream, PHOTONS[:1], True, forged)
        assert refused.value.code == "PERMISSION_DENIED" and before in refused.value.message
    status = sp1.status()
    assert status["refused_transfers_from_the_wrong_peer"] == 2
    assert status["dropped_malformed_transfers"] == 1
    assert "Opening and ending tag mismatch" in status["last_malformed_transfer"]
    assert status["dropped_transfers_for_unknown_streams"] == 5


def test_executor_redelivery_is_dropped(network):
    record = network.peers["SP1"].control.subscribe(
        '<r>{ for $p in stream("photons")/photons/photon return $p/phc }</r>')
    sp4 = network.peers["SP4"]
    derived = [s for s in sp4.state.table if s.parent == "photons"]
    assert derived
    sid = derived[0].id
    out = PHOTONS[:2]  # executors hand outputs on as wire text
    sp4.data.executor_output(sid, 0, out, False)
    sp4.data.executor_output(sid, 0, out, False)  # an executor restart repeats sequence numbers
    sp4.data.executor_output(sid, 2, [], True)
    assert len(results(record)) == 2


class Recorder:
    """A neighbour's link that keeps what is sent on it, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send(self, stream: str, items: list[str], end: bool = False, position: int | None = None,
             origins=None) -> None:
        self.sent.append(("items", stream, position, len(items)))

    def send_watermark(self, stream: str, path: str, value: float) -> None:
        self.sent.append(("watermark", stream, path, value))


def test_a_replay_sends_the_logged_watermarks_in_their_place_and_not_the_live_ones():
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("photons", "photons", "photon", rate=100, event_time="det_time")
        sp4.data.publish("photons", PHOTONS[:30])
        sp4.data.idle_watermarks(0.0)  # after item 30
        sp4.data.publish("photons", PHOTONS[30:50])
        recorder = Recorder()
        sp4.transport.senders["SP5"] = recorder
        entry = sp4.state.table.get("photons")
        copy = dataclasses.replace(entry, id="copy", parent="photons", original=False, route=("SP4", "SP5"),
                                   users={"s"})
        with sp4.state.lock:
            sp4.state.table.add(copy)
            sp4.executor.install("copy", (), "photons")
            sp4.data.replay("copy", 10)
            sp4.data.watermark("photons", "det_time", 1e9)  # live, while the copy is being filled
        until(lambda: "copy" not in sp4.data.replays)
        mark = next(x for x in recorder.sent if x[0] == "watermark")
        assert recorder.sent == [("items", "copy", 10, 20), mark, ("items", "copy", 30, 20)]
        assert mark[2] == "det_time" and mark[3] < 1e9
        sp4.data.publish("photons", PHOTONS[50:52])  # live again, numbered on
        assert recorder.sent[-1] == ("items", "copy", 50, 2)
    finally:
        for p in net.peers.values():
            p.stop()
