"""A plan that reuses a running stream keeps it from its reservation to its commit (issue 31):
the stream's last other user may leave meanwhile — at another super-peer, which plans nothing
with this one — and the new subscription must still get every result. Real nodes of eight
super-peers in one process on the fake transport; the leave is placed at an exact call."""

from __future__ import annotations

import threading

import pytest
from reoptimisation_harness import Feed, photon_network, reference
from superpeer_fakes import buffered_results

from sharing.scenarios import paper_query
from superpeer.control.control_plane import REPLANS


@pytest.fixture
def net():
    yield from photon_network()


@pytest.mark.parametrize("method", ["commit", "reserve"])
def test_the_last_user_of_a_reused_stream_leaving_during_the_installation(net, method):
    feed = Feed(net)
    q1 = net.peers["SP1"].control.subscribe(paper_query(1))
    feed.publish(100)
    sp7 = net.peers["SP7"]
    (shared,) = q1.plan.parts
    left: list[str] = []  # (the next subscription's id is not known before: any call not q1's)
    once = threading.Lock()  # (the peers of a wave commit at the same time)

    def hook(call) -> None:
        with once:
            first = call.method == method and not left and q1.runtime.id not in call.args
            if first:
                left.append(call.peer)
        if first:
            net.peers["SP1"].control.unsubscribe(q1.runtime.id)
    net.hook = hook
    first = feed.at
    q2 = sp7.control.subscribe(paper_query(2))
    net.hook = lambda call: None
    assert left, f"q1 left before q2's first {method}"
    (part,) = q2.plan.parts
    if method == "commit":  # (reserved with q1's stream: kept for q2 although q1 left)
        assert part.reused == shared.result_stream
        assert net.peers["SP5"].state.table.get(shared.result_stream) is not None
        assert net.peers["SP1"].state.table.get(shared.result_stream) is None  # (its tail, not read, is cut)
    else:  # (gone at the reservation: planned again without it)
        assert part.reused != shared.result_stream
    feed.publish(300)
    feed.close()
    assert buffered_results(q2) == reference(paper_query(2), first, feed.at)


def test_an_aborted_reservation_lets_the_streams_it_kept_go(net):
    feed = Feed(net)
    q1 = net.peers["SP1"].control.subscribe(paper_query(1))
    feed.publish(50)
    (part,) = q1.plan.parts
    sp5 = net.peers["SP5"]
    ok, why = sp5.participant.reserve("t1", [], "SP7-x", "SP7", pins=[part.result_stream])
    assert ok, why
    net.peers["SP1"].control.unsubscribe(q1.runtime.id)
    assert net.peers["SP5"].state.table.get(part.result_stream).users == {"SP7-x"}
    assert net.peers["SP4"].state.table.get(part.result_stream) is None  # (not kept there)
    sp5.participant.abort("t1")
    assert sp5.state.table.get(part.result_stream) is None


def test_a_lapsed_reservation_lets_the_streams_it_kept_go(net):
    q1 = net.peers["SP1"].control.subscribe(paper_query(1))
    (part,) = q1.plan.parts
    sp5 = net.peers["SP5"]
    now = [1000.0]
    sp5.state.transactions.clock = lambda: now[0]
    ok, why = sp5.participant.reserve("t1", [], "SP7-x", "SP7", pins=[part.result_stream])
    assert ok, why
    net.peers["SP1"].control.unsubscribe(q1.runtime.id)
    assert sp5.state.table.get(part.result_stream) is not None
    now[0] += 2 * sp5.state.transactions.ttl_s  # (its coordinator never came back)
    assert sp5.state.transactions.is_expired("t1")
    assert sp5.state.table.get(part.result_stream) is None


def test_a_reservation_of_a_stream_already_gone_is_a_conflict(net):
    q1 = net.peers["SP1"].control.subscribe(paper_query(1))
    (part,) = q1.plan.parts
    net.peers["SP1"].control.unsubscribe(q1.runtime.id)
    ok, why = net.peers["SP5"].participant.reserve("t1", [], "SP7-x", "SP7", pins=[part.result_stream])
    assert not ok and why.startswith("conflict: ") and part.result_stream in why
    assert not net.peers["SP5"].state.transactions.open


def test_a_peer_keeping_a_reused_stream_out_of_reach_is_planned_again_not_counted_as_full(net):
    """Not reached (down, not yet known to be): the plan is made again — around it once the
    failure detector says so — and the subscription is not given up after ``REPLANS`` tries."""
    q1 = net.peers["SP1"].control.subscribe(paper_query(1))
    (shared,) = q1.plan.parts
    base = net.reserves.get("SP4", 0)
    net.refuse = lambda peer, n: "SP4 is unreachable (test)" if peer == "SP4" and n <= base + REPLANS else ""
    q2 = net.peers["SP7"].control.subscribe(paper_query(2))
    (part,) = q2.plan.parts
    assert part.reused == shared.result_stream and net.reserves["SP4"] == base + REPLANS + 1
