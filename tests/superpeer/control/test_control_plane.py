"""The control plane without gRPC: registration, planning over a snapshot, two-phase install
(reserve → commit | abort → re-plan), unsubscribe and route truncation — real parts of eight
super-peers in one process, joined by a fake of the peer transport."""

from __future__ import annotations

import threading
import time

import pytest
from superpeer_fakes import FakeNetwork, in_process_network

from photons.generator import generate
from sharing.planner import Planner
from sharing.scenarios import paper_query
from superpeer.control.control_plane import REPLANS
from superpeer.control.peer_link import STATISTICS
from superpeer.errors import NodeError

PHOTONS = [p.to_xml() for p in generate(300, seed=5)]


@pytest.fixture
def network():
    net = in_process_network()
    sp4 = net.peers["SP4"]
    sp4.control.register_stream("photons", "photons", "photon", rate=100)
    sp4.data.publish("photons", PHOTONS[:200])  # statistics before any subscription
    net.calls.clear()
    yield net
    for p in net.peers.values():
        p.stop()


def subscribe(net: FakeNetwork, peer: str, query: str):
    return net.peers[peer].control.subscribe(query)


def commit_peers(net: FakeNetwork, subscription: str) -> set[str]:
    return {c.peer for c in net.calls_of("commit") if c.args[1] == subscription}


def test_registration_is_announced_to_every_peer():
    net = in_process_network()
    net.peers["SP2"].control.register_stream("s", "r", "i", rate=1)
    assert {c.peer for c in net.calls_of("announce")} == set(net.backbone.peers) - {"SP2"}
    assert all("s" in p.state.known_originals for p in net.peers.values())
    assert [s.id for s in net.peers["SP2"].state.table] == ["s"]
    assert not any(len(p.state.table) for name, p in net.peers.items() if name != "SP2")


def test_commit_goes_only_to_the_peers_a_plan_touches(network):
    q1 = subscribe(network, "SP1", paper_query(1))
    (part1,) = q1.plan.parts
    assert part1.route == ("SP4", "SP5", "SP1")
    # reserved on the new stream's route; the original's peer SP4 holds the reused stream
    assert commit_peers(network, q1.runtime.id) == {"SP4", "SP5", "SP1"}
    network.calls.clear()
    q2 = subscribe(network, "SP7", paper_query(2))
    (part2,) = q2.plan.parts
    assert (part2.reused, part2.reuse_peer) == (part1.result_stream, "SP5")
    reserved = {c.peer for c in network.calls_of("reserve")}
    assert reserved == {"SP4", "SP5", "SP7"}  # (SP4 only keeps q1's stream, which q2 reads through it)
    # q1's stream is at SP4, SP5, SP1 and its parent "photons" at SP4: they count the new user
    assert commit_peers(network, q2.runtime.id) == {"SP1", "SP4", "SP5", "SP7"}
    for peer in ("SP0", "SP2", "SP3", "SP6"):
        assert not [c for c in network.calls_of("commit") if c.peer == peer]
    for peer in ("SP4", "SP5", "SP1"):
        entry = network.peers[peer].state.table.get(part1.result_stream)
        assert entry is not None and q2.runtime.id in entry.users
    assert q2.runtime.id in network.peers["SP4"].state.table.get("photons").users
    assert all(not p.state.transactions.open for p in network.peers.values())


def test_refused_reservation_aborts_what_was_reserved_and_replans(network):
    network.refuse = lambda peer, n: "no room (test)" if (peer, n) == ("SP5", 1) else ""
    q1 = subscribe(network, "SP1", paper_query(1))
    reserves = [(c.peer, c.args[0]) for c in network.calls_of("reserve")]
    first_txn = reserves[0][1]
    asked = {p for p, t in reserves if t == first_txn}
    assert asked == {"SP1", "SP4", "SP5"}  # (all at once the first time)
    aborted = {c.peer for c in network.calls_of("abort") if c.args[0] == first_txn}
    assert aborted == asked - {"SP5"}  # only those that had reserved
    assert not [c for c in network.calls_of("commit") if c.args[0] == first_txn]
    assert q1.plan is not None and q1.plan.admitted
    assert len({t for _, t in reserves}) == 2  # planned again, and installed the second time
    assert all(not p.state.transactions.open for p in network.peers.values())
    assert network.peers["SP5"].state.table.get(q1.plan.parts[0].result_stream) is not None


def test_a_plan_reserves_at_once_and_in_order_after_a_collision(network):
    """The first reservation of a plan asks its peers all at once (one round trip); after a
    refusal for a collision it asks them one after the other, in one global order, so that
    of two colliding installations one wins."""
    lock = threading.Lock()
    in_flight: dict[str, int] = {}
    most: dict[str, int] = {}
    first_three = threading.Barrier(3, timeout=10)  # (fails if the first ones come one by one)
    left = threading.Event()

    def reserve_at(peer, txn, *args, **kwargs):
        with lock:
            in_flight[txn] = in_flight.get(txn, 0) + 1
            most[txn] = max(most.get(txn, 0), in_flight[txn])
            first = len(most) == 1
        try:
            if first:
                first_three.wait()
            elif in_flight[txn] == 1:
                left.wait(0.05)  # (time for a second one of the same transaction to start, if it would)
            return real(peer, txn, *args, **kwargs)
        finally:
            with lock:
                in_flight[txn] -= 1

    transport = network.peers["SP1"].control.two_phase.link
    real = transport.reserve
    transport.reserve = reserve_at
    network.refuse = lambda peer, n: (f"conflict: another installation of the same stream is in flight at {peer}"
                                      if (peer, n) == ("SP4", 1) else "")
    q1 = subscribe(network, "SP1", paper_query(1))
    assert q1.plan is not None and q1.plan.admitted
    first, second = list(most)
    assert most[first] == 3 and most[second] == 1
    assert [c.peer for c in network.calls_of("reserve") if c.args[0] == second] == ["SP1", "SP4", "SP5"]
    assert all(not p.state.transactions.open for p in network.peers.values())


def test_reservation_refused_every_time_fails_cleanly(network):
    network.refuse = lambda peer, n: "no room (test)" if peer == "SP5" else ""
    with pytest.raises(NodeError) as err:
        subscribe(network, "SP1", paper_query(1))
    assert err.value.code == "ABORTED" and "SP5: no room (test)" in err.value.message
    assert len({c.args[0] for c in network.calls_of("reserve")}) == REPLANS
    assert not network.calls_of("commit")
    assert all(not p.state.transactions.open for p in network.peers.values())
    assert all(s.original for p in network.peers.values() for s in p.state.table)
    assert not network.peers["SP1"].control.subscriptions


def test_registration_asks_only_the_peers_the_inputs_streams_reach(network):
    """SUBSCRIBE's breadth-first search from the original's peer and the subscriber's, not
    every peer of the backbone: Query 1's stream runs SP4→SP5→SP1, so Query 2 at SP7 asks SP4
    and SP7, then SP5 and SP1 that the stream reaches — and it still finds the stream."""
    q1 = subscribe(network, "SP1", paper_query(1))
    network.calls.clear()
    q2 = subscribe(network, "SP7", paper_query(2))
    assert {c.peer for c in network.calls_of("lookup")} == {"SP4", "SP7", "SP5", "SP1"}
    assert q2.plan.parts[0].reused == q1.plan.parts[0].result_stream
    # the statistics come with the original's peer's answer (no call of their own): the
    # sample once, then only the counters
    assert not network.calls_of("statistics")
    assert [c.args[1] for c in network.calls_of("lookup") if c.peer == "SP4"] == [0]
    held = network.peers["SP7"].state.statistics_held["photons"].sample_id
    assert held and network.peers["SP7"].state.statistics_held["photons"].frequency > 0
    network.calls.clear()
    subscribe(network, "SP7", paper_query(1))
    assert [c.args[1] for c in network.calls_of("lookup") if c.peer == "SP4"] == [held]
    assert [c.args[1] for c in network.calls_of("lookup") if c.peer != "SP4"] == [None] * 3


def test_statistics_are_asked_for_when_the_originals_peer_leaves_them_out(network):
    """A peer of an older version answers a lookup without the statistics: they are asked for."""
    sp7 = network.peers["SP7"].control
    lookup = sp7.link.lookup

    def older(peer, input_stream, statistics_of=None):
        answer = lookup(peer, input_stream, statistics_of)
        if answer is not None:
            answer[1].pop(STATISTICS, None)
        return answer

    sp7.link.lookup = older
    q = subscribe(network, "SP7", paper_query(2))
    assert q.plan is not None and q.plan.admitted
    assert [(c.peer, c.args[1]) for c in network.calls_of("statistics")] == [("SP4", 0)]
    assert network.peers["SP7"].state.statistics_held["photons"].frequency > 0


def test_peers_that_start_nothing_commit_together_and_the_origin_after_them(network):
    """Query 1's stream is made at SP4 and runs SP4→SP5→SP1: SP1 and SP5 commit at the same
    time (SP1's commit waits until SP5's has begun), SP4 only once both have committed."""
    sp5_began, committed = threading.Event(), []

    def hook(call):
        if call.method != "commit":
            return
        if call.peer == "SP5":
            sp5_began.set()
        if call.peer == "SP1":
            assert sp5_began.wait(10), "SP1 committed alone: SP5 waited for it"
        if call.peer == "SP4":
            committed.append(set(done))

    done: list[str] = []
    network.hook = hook
    real_commit = {p: network.peers[p].commit for p in ("SP1", "SP5")}
    for p, commit in real_commit.items():
        network.peers[p].commit = lambda *a, p=p, commit=commit, **k: (done.append(p), commit(*a, **k))[1]
    q = subscribe(network, "SP1", paper_query(1))
    assert q.plan is not None and q.plan.parts[0].operator_peer == "SP4"
    assert [c.peer for c in network.calls_of("commit")][-1] == "SP4"
    assert committed == [{"SP1", "SP5"}]


def test_a_failed_installation_is_undone_only_where_it_reserved_or_committed(network):
    """Query 1 at SP1 (its stream made at SP4, over SP5) whose commit fails at SP4, however often
    it is planned again: what it reserved and committed is let go at SP1, SP4 and SP5, not at
    every super-peer of the backbone, and nothing stays reserved anywhere."""
    def fail_at_sp4(call):
        if call.method == "commit" and call.peer == "SP4":
            raise NodeError("UNAVAILABLE", "super-peer SP4 is unreachable")

    network.hook = fail_at_sp4
    with pytest.raises(NodeError):
        subscribe(network, "SP1", paper_query(1))
    network.hook = lambda call: None
    undone = {c.peer for c in network.calls if c.method in ("abort", "remove")}
    assert "SP4" in undone and undone <= {"SP1", "SP4", "SP5"}, undone
    assert all(not p.state.transactions.reserved() for p in network.peers.values())
    assert not [s.id for p in network.peers.values() for s in p.state.table.streams.values() if not s.original]


def test_a_registration_whose_streams_peer_is_down_fails_at_its_first_silence(network):
    """The original's peer does not answer the lookup: the registration fails then, naming it,
    without asking it again for the statistics (another timeout)."""
    network.down.add("SP4")
    with pytest.raises(NodeError) as err:
        subscribe(network, "SP7", paper_query(2))
    assert err.value.code == "UNAVAILABLE" and "SP4" in err.value.message and "photons" in err.value.message
    assert [c.method for c in network.calls if c.peer == "SP4"] == ["lookup"]


def test_the_planner_runs_without_calling_any_peer(network):
    real_planners = []

    class Guarded:
        def __init__(self, view):
            self.planner = Planner(view.snapshot)
            real_planners.append(self.planner)

        def subscribe(self, *args, **kwargs):
            network.forbidden = "planning"
            try:
                return self.planner.subscribe(*args, **kwargs)
            finally:
                network.forbidden = ""

    for peer in ("SP1", "SP7"):
        network.peers[peer].control.make_planner = Guarded
    q1 = subscribe(network, "SP1", paper_query(1))
    q2 = subscribe(network, "SP7", paper_query(2))
    assert len(real_planners) == 2
    assert q2.plan.parts[0].reused == q1.plan.parts[0].result_stream


def test_an_unreachable_peer_offers_nothing_to_reuse(network):
    q1 = subscribe(network, "SP1", paper_query(1))
    network.down.add("SP5")
    network.down.add("SP1")
    network.calls.clear()
    # SP5 and SP1 hold Query 1's stream, but cannot be asked: Query 2 is planned without them,
    # and reserving on SP5 (on every route from SP4 to SP7) fails, so it cannot be installed
    with pytest.raises(NodeError) as err:
        subscribe(network, "SP7", paper_query(2))
    assert err.value.code == "ABORTED" and "SP5 is unreachable" in err.value.message
    network.down.clear()
    q2 = subscribe(network, "SP7", paper_query(2))
    assert q2.plan.parts[0].reused == q1.plan.parts[0].result_stream


def test_unsubscribe_releases_and_cuts_a_still_used_route_back(network):
    q1 = subscribe(network, "SP1", paper_query(1))
    q2 = subscribe(network, "SP7", paper_query(2))
    q1_stream = q1.plan.parts[0].result_stream
    network.calls.clear()
    removed = network.peers["SP1"].control.unsubscribe(q1.runtime.id)
    assert removed == []  # Query 2 still reads Query 1's stream at SP5
    # only where its plan was committed is asked, not every peer of the backbone
    assert {c.peer for c in network.calls_of("remove")} == {"SP4", "SP5", "SP1"}
    for peer in ("SP4", "SP5"):
        entry = network.peers[peer].state.table.get(q1_stream)
        assert entry.route == ("SP4", "SP5") and q1.runtime.id not in entry.users
    assert network.peers["SP1"].state.table.get(q1_stream) is None
    network.calls.clear()
    removed = network.peers["SP7"].control.unsubscribe(q2.runtime.id)
    assert q1_stream in removed
    assert {c.peer for c in network.calls_of("remove")} == {"SP1", "SP4", "SP5", "SP7"}
    assert all(s.original for p in network.peers.values() for s in p.state.table)
    assert all(not p.executor.installed() for p in network.peers.values())


def test_a_subscription_waits_for_its_stream_and_is_installed_when_it_is_registered():
    net = in_process_network()
    try:
        record = net.peers["SP1"].control.subscribe(paper_query(1), wait_for_streams=True)
        assert record.plan is None and record.waiting_for == ("photons",) and not record.registration_ms
        time.sleep(0.3)
        net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
        assert record.plan is not None and record.plan.admitted
        # its registration's time is its activation's, not its wait for the stream
        assert 0 < record.registration_ms["total"] < 300 and record.registration_ms["lookups"] > 0
        assert [c.peer for c in net.calls_of("activate")] == ["SP1"]
    finally:  # its subscription's thread must not outlive the test (the soak test counts them)
        for p in net.peers.values():
            p.stop()


def test_an_announcement_lost_once_is_sent_again():
    """The first announcement to SP1 is lost (a channel reconnecting under load): it is tried
    again before the registration returns, so a subscription at SP1 right after it finds the
    stream."""
    net = in_process_network()
    tries = []

    def lose_the_first(call) -> None:
        if call.method == "announce" and call.peer == "SP1":
            tries.append(call)
            (net.down.add if len(tries) == 1 else net.down.discard)("SP1")

    net.hook = lose_the_first
    net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
    assert len(tries) == 2 and "photons" in net.peers["SP1"].state.known_originals
    net.peers["SP1"].control.subscribe(paper_query(1))


def test_registration_does_not_ask_the_peers_only_streams_it_cannot_use_reach(network):
    """As SUBSCRIBE's search itself, the lookups follow only the streams that can serve the
    subscription (and their ancestors): Query 1's stream (SP4→SP5→SP1) carries photons of
    right ascension 120–138 only, so a query of 200–210 at SP7 asks SP4 and SP7 alone — and
    Query 2, which that stream serves, still asks SP5 and SP1 and reuses it."""
    subscribe(network, "SP1", paper_query(1))
    network.calls.clear()
    far = paper_query(2).replace("130.5", "200").replace("135.5", "210")
    subscribe(network, "SP7", far)
    assert {c.peer for c in network.calls_of("lookup")} == {"SP4", "SP7"}
    network.calls.clear()
    q2 = subscribe(network, "SP7", paper_query(2))
    assert {"SP5", "SP1"} <= {c.peer for c in network.calls_of("lookup")}
    assert q2.plan.parts[0].reused != "photons"


def test_an_approximate_registration_still_asks_every_peer_the_inputs_streams_reach(network):
    """An approximate subscription may be planned on a sample of its input, which a sampled
    stream serves although it does not serve the input itself: its search follows every stream."""
    subscribe(network, "SP1", paper_query(1))
    network.calls.clear()
    far = paper_query(2).replace("130.5", "200").replace("135.5", "210")
    network.peers["SP7"].control.subscribe(far, approximate=True)
    assert {c.peer for c in network.calls_of("lookup")} == {"SP4", "SP7", "SP5", "SP1"}


def test_a_refusal_at_a_peer_the_search_did_not_ask_asks_every_peer_the_next_time(network):
    """SP5 was not asked (only Query 1's stream, which cannot serve the query, reaches it): its
    usage was as last heard. When it refuses the reservation, the plan is made again over every
    peer the input's streams reach, SP5 included."""
    subscribe(network, "SP1", paper_query(1))
    network.calls.clear()
    refused = network.reserves.get("SP5", 0) + 1
    network.refuse = lambda peer, n: "no room (test)" if (peer, n) == ("SP5", refused) else ""
    far = subscribe(network, "SP7", paper_query(2).replace("130.5", "200").replace("135.5", "210"))
    assert far.plan is not None and far.plan.admitted
    assert network.reserves["SP5"] > refused  # (refused once, then reserved)
    txns = list(dict.fromkeys(c.args[0] for c in network.calls_of("reserve")))
    first = {c.peer for c in network.calls_of("lookup")[:2]}
    assert first == {"SP4", "SP7"} and len(txns) == 2
    assert {"SP5", "SP1"} <= {c.peer for c in network.calls_of("lookup")[2:]}
