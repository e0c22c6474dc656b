"""Stream widening and the moves of its readers (issue 31), in process like
``test_reoptimisation``: a near miss widens a running stream, its readers move onto the wide
one — alone, or as a group that none of them frees alone — and every result is exact."""

from __future__ import annotations

import pytest
from reoptimisation_harness import Feed, photon_network, ranged, reference, switch_all
from superpeer_fakes import buffered_results


@pytest.fixture
def net():
    yield from photon_network()


def test_a_near_miss_widens_the_running_stream_and_its_consumer_moves_onto_it(net):
    """A at SP1 reads ra 120–125; N at SP7 needs ra 123–128: the planner widens A's stream to
    ra 120–128 (one stream on SP4–SP5 instead of two), A moves onto it at its next round and its
    stream is removed; both get exactly their results."""
    feed = Feed(net)
    sp1, sp7 = net.peers["SP1"], net.peers["SP7"]
    sp7.control.widening = True  # (``serve --widening``)
    a_query, n_query = ranged(120, 125), ranged(123, 128)
    a = sp1.control.subscribe(a_query)
    a_first = feed.at
    feed.publish(200)
    running = a.plan.parts[0].result_stream
    n = sp7.control.subscribe(n_query)
    n_first = feed.at
    (part,) = n.plan.parts
    assert part.widened and part.widened in {s.id for s in net.peers["SP4"].state.table}, n.describe()
    assert "widened" in n.describe()
    feed.publish(200)
    sp1.reoptimiser.round("test")
    feed.publish(400, switch_all(net))
    assert a.plan_history and a.plan_history[-1]["state"] == "switched", a.reoptimisation
    assert a.plan.parts[0].reused == part.new_streams[0].id or part.new_streams[0].id in a.plan.parts[0].reused
    assert all(running not in {s.id for s in p.state.table} for p in net.peers.values())
    feed.close()
    assert buffered_results(a) == reference(a_query, a_first, feed.at)
    assert buffered_results(n) == reference(n_query, n_first, feed.at)


def test_a_burst_of_near_misses_settles_on_one_stream(net):
    """Three near misses in a row, each a little wider than the stream the one before widened:
    every widening leaves a generation behind, and its readers leave it round by round, until
    one stream crosses SP4–SP5 and every result is exact."""
    feed = Feed(net)
    sp1, sp7 = net.peers["SP1"], net.peers["SP7"]
    for p in net.peers.values():
        p.control.widening = True
    queries = [(sp1, ranged(120, 125)), (sp1, ranged(121, 124)), (sp7, ranged(123, 128)),
               (sp1, ranged(119, 126, en=0.5)), (sp7, ranged(118, 130))]
    subs, widened = [], []
    for peer, q in queries:
        subs.append((q, peer.control.subscribe(q), feed.at))
        widened += [p.widened for p in subs[-1][1].plan.parts if p.widened]
        feed.publish(100)
    assert len(widened) >= 2, widened  # (generations)
    for _ in range(6):
        for p in (sp1, sp7):
            for _, record, _ in subs:
                record.last_replan = 0
            p.reoptimiser.round("test")
        feed.publish(200, switch_all(net))
    assert not sp1.reoptimiser.switches and not sp7.reoptimiser.switches
    across = [s.describe() for s in net.peers["SP4"].state.table if not s.original and "SP5" in s.route]
    assert len(across) == 1, across
    feed.close()
    for q, record, first in subs:
        assert buffered_results(record) == reference(q, first, feed.at), record.describe()


def three_readers_and_a_near_miss(net, feed: Feed, unrelated: int = 0):
    """S (ra 120–125, SP4→SP5→SP1) serves A and B at SP1 (B narrower, on a residual of its own)
    and C at SP0 (S forwarded on), after ``unrelated`` subscriptions of other ranges elsewhere;
    N at SP7 needs ra 123–128, and S is widened to ra 120–128 for it."""
    sp0, sp1, sp7 = net.peers["SP0"], net.peers["SP1"], net.peers["SP7"]
    sp7.control.widening = True  # (``serve --widening``)
    others = []
    for k in range(unrelated):
        peer = net.peers[("SP2", "SP3", "SP6", "SP0", "SP7")[k % 5]]
        q = ranged(60 + 6 * k, 63 + 6 * k)
        others.append((q, peer.control.subscribe(q), feed.at))
    feed.publish(100)
    queries = {"A": ranged(120, 125), "B": ranged(121, 124), "C": ranged(120, 125, en=0.5)}
    at = {"A": sp1, "B": sp1, "C": sp0}
    consumers = {}
    for name, q in queries.items():
        consumers[name] = (q, at[name].control.subscribe(q), feed.at)
        feed.publish(100)
    running = consumers["A"][1].plan.parts[0].result_stream
    for name, (_, record, _) in consumers.items():
        part = record.plan.parts[0]
        assert running in (part.reused, part.result_stream), f"{name} does not read {running}: {record.describe()}"
    n_query = ranged(123, 128)
    n = sp7.control.subscribe(n_query)
    (part,) = n.plan.parts
    assert part.widened == running, n.describe()
    return consumers, others, (n_query, n, feed.at), running, part.new_streams[0].id


def test_a_stream_with_three_consumers_widened_for_a_near_miss_keeps_every_result_exact(net):
    """A, B and C move onto the wide stream (as a group: none of them frees S alone), S is
    removed everywhere, one stream crosses SP4–SP5, and all four get exactly their results
    across the change."""
    feed = Feed(net)
    sp0, sp1 = net.peers["SP0"], net.peers["SP1"]
    consumers, _, (n_query, n, n_first), running, wide = three_readers_and_a_near_miss(net, feed)
    feed.publish(200)
    for _ in range(3):
        for p in (sp0, sp1):
            for _, record, _ in consumers.values():
                record.last_replan = 0
            p.reoptimiser.round("test")
        feed.publish(200, switch_all(net))
    for name, (_, record, _) in consumers.items():
        assert record.plan_history and record.plan_history[-1]["state"] == "switched", (name, record.reoptimisation)
    assert all(running not in {s.id for s in p.state.table} for p in net.peers.values())
    across = [s.id for s in net.peers["SP5"].state.table if not s.original and "SP4" in s.route]
    assert across == [wide], across
    feed.close()
    for name, (q, record, first) in consumers.items():
        assert buffered_results(record) == reference(q, first, feed.at), name
    assert buffered_results(n) == reference(n_query, n_first, feed.at)


def test_a_reader_that_left_for_its_group_does_not_move_back_while_the_others_follow(net):
    """The rounds of SP0 and SP1 interleave with the switches: C (at SP0) leaves S for the wide
    stream on the credit of A and B, and SP1's round comes while C still reads both plans. C
    does not take S again while the others may still follow (``LEFT_HOLD_COOLDOWNS``): every
    reader moves at most twice in eight rounds, S is gone at the end, and every result is exact."""
    feed = Feed(net)
    sp0, sp1 = net.peers["SP0"], net.peers["SP1"]
    consumers, others, (n_query, n, n_first), running, _ = three_readers_and_a_near_miss(net, feed, unrelated=7)
    feed.publish(200)
    for _ in range(8):
        for p in (sp0, sp1):
            for _, record, _ in consumers.values():
                record.last_replan = 0  # (the cool-down is not what holds it)
            p.reoptimiser.round("test")
            feed.publish(50)  # (the other peer's round comes before this one's switch is done)
        feed.publish(200, switch_all(net))
    moves = {name: sum(1 for e in record.plan_history if e.get("state") == "switched")
             for name, (_, record, _) in consumers.items()}
    assert all(m <= 2 for m in moves.values()), moves
    assert not {r.runtime.id for _, r, _ in consumers.values()} & {*sp0.reoptimiser.switches, *sp1.reoptimiser.switches}
    assert all(running not in {s.id for s in p.state.table} for p in net.peers.values()), moves
    feed.close()
    for name, (q, record, first) in consumers.items():
        assert buffered_results(record) == reference(q, first, feed.at), name
    for q, record, first in others:
        assert buffered_results(record) == reference(q, first, feed.at), q
    assert buffered_results(n) == reference(n_query, n_first, feed.at)
