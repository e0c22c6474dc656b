"""A re-optimisation's look-ahead does not count on subscriptions that will not move
(``superpeer.control.staying``): real parts of eight super-peers in one process on the fake
transport; the test runs the rounds and delivers what a heartbeat tells."""

from __future__ import annotations

import pytest
from network_harness import until
from reoptimisation_harness import Feed, hear, photon_network, ranged

from sharing.scenarios import paper_example_backbone
from superpeer.control import reoptimisation
from superpeer.control.remote_view import fetch_planning_view
from superpeer.control.reoptimisation_settings import ReoptimisationSettings
from superpeer.node import Node, NodeSettings
from superpeer.subscriptions.record import past_progress
from superpeer.topology import Topology

NARROW = [ranged(120, 124), ranged(126, 130)]
WIDE = ranged(110, 140)


@pytest.fixture
def net():
    yield from photon_network()


def view_at(net, peer: str, record):
    node = net.peers[peer]
    return fetch_planning_view(node.state, node.control.link, record.runtime.analysis.properties,
                               node.control.new_stream_id, scoped=True)


def test_a_reader_that_stays_saves_nothing_in_the_look_ahead(net):
    """Two narrow subscriptions with streams of their own, then a wide one: either narrow one
    would save by moving onto the wide stream, unless it stays where it is, or its peer moves
    nothing."""
    feed = Feed(net)
    sp1 = net.peers["SP1"]
    first, second = (sp1.control.subscribe(q) for q in NARROW)
    sp1.control.subscribe(WIDE)
    feed.publish(100)
    snapshot = view_at(net, "SP1", first).snapshot
    follower = (second.runtime.id,)
    assert reoptimisation.FOLLOW(snapshot, follower, 0.1) > 0
    snapshot.staying = frozenset({second.runtime.id})
    assert reoptimisation.FOLLOW(snapshot, follower, 0.1) == 0
    snapshot.staying = frozenset({"SP1"})
    assert reoptimisation.FOLLOW(snapshot, follower, 0.1) == 0
    snapshot.staying = frozenset({"SP7", "SP1-00000000"})  # (others stay: it still moves)
    assert reoptimisation.FOLLOW(snapshot, follower, 0.1) > 0


def test_each_peer_tells_the_others_what_stays_there(net):
    """A subscription registered with another strategy stays (it is not moved between plans):
    its peer says so after a round, the others plan over it; a peer whose re-optimisation is off
    says it moves none. One over the past is listed until it is seen caught up."""
    Feed(net).publish(50)
    sp7 = net.peers["SP7"]
    shipped = sp7.control.subscribe(NARROW[0], strategy="data-shipping")
    live = sp7.control.subscribe(NARROW[1])
    past = sp7.control.subscribe(NARROW[1], from_start=True)
    assert sp7.state.staying == frozenset()  # (not yet looked at)
    until(lambda: not past_progress(past, sp7.control.positions.next), seconds=30)  # (its replay caught up)
    sp7.reoptimiser.round("test")  # (the one over the past: listed until seen caught up, in this round)
    assert sp7.state.staying == frozenset({shipped.runtime.id, past.runtime.id}) and past.caught_up
    sp7.reoptimiser.round("test")
    assert sp7.state.staying == frozenset({shipped.runtime.id})
    assert live.runtime.id not in sp7.state.staying and past.runtime.id not in sp7.state.staying
    net.peers["SP3"].state.staying = frozenset({"SP3"})  # (as a peer whose re-optimisation is off starts)
    hear(net)
    sp1 = net.peers["SP1"]
    wide = sp1.control.subscribe(WIDE)
    assert view_at(net, "SP1", wide).snapshot.staying == {shipped.runtime.id, "SP3"}


def test_a_peer_whose_re_optimisation_is_off_moves_nothing_and_says_so():
    backbone = paper_example_backbone()
    node = Node("SP3", Topology(backbone, {p: f"in-process:{p}" for p in backbone.peers}),
                NodeSettings(reoptimisation=ReoptimisationSettings(enabled=False)))
    try:
        assert node.state.staying == frozenset({"SP3"})
        assert node.state.usage_report()["staying"] == ["SP3"]
    finally:
        node.stop()


def test_a_subscription_damping_holds_back_is_reported_as_staying_until_its_wait_nearly_ends(net):
    """A follower that moved often lately waits several cool-downs: another peer's look-ahead
    must not credit a move with what it would save by following (it would not follow)."""
    from superpeer.control.staying import held_back, staying_here

    sp7 = net.peers["SP7"]
    record = sp7.control.subscribe(NARROW[0])
    cooldown, now = 10.0, 1_000.0
    ids = lambda: staying_here("SP7", [record], True, True, cooldown, now)  # noqa: E731
    record.moves, record.last_replan = [now - 1], now - 1  # (moved once: one cool-down, as before)
    assert not held_back(record, cooldown, now) and ids() == frozenset()
    record.moves = [now - 60, now - 30, now - 1]  # (three moves: the wait doubled twice, 40 s)
    assert held_back(record, cooldown, now) and ids() == {record.runtime.id}
    assert not held_back(record, cooldown, now + 30)  # (its last cool-down: it may follow soon)
    assert staying_here("SP7", [record], True, True) == frozenset()  # (no cool-down given: not looked at)
