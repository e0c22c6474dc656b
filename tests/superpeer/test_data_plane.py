"""The data plane without gRPC: publish and validation, forwarding along routes, derived
streams computed once per parent, delivery to subscriptions, and what a neighbour may send
wrong — real parts of eight super-peers in one process, joined by a fake transport."""

from __future__ import annotations


import pytest

from sharing.scenarios import paper_query
from superpeer.errors import NodeError
from network_harness import same, reference_results
from superpeer_fakes import buffered_results as results, photon_network
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
    assert network.peers["SP5"].senders["SP7"].items > 0


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
    assert sp1.transfer(stream, ["<photon><en>1</photon>", *PHOTONS[:3]], False) == 4
    assert sp1.transfer("no-such-stream", PHOTONS[:5], False) == 5
    status = sp1.status()
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
