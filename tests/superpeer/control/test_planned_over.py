"""A periodic re-optimisation round plans a subscription again only once something it was planned
over changed (``superpeer.control.planned_over``): real parts of eight super-peers in one
process on the fake transport; the test runs the rounds and delivers what a heartbeat tells."""

from __future__ import annotations

import pytest
from reoptimisation_harness import Feed, hear, photon_network, ranged

from superpeer.control import planned_over

NARROW = ranged(120, 124)
WIDE = ranged(110, 140)


@pytest.fixture
def net():
    yield from photon_network()


def planned(net, peer: str, event: str = "") -> set[str]:
    """The peers a round at ``peer`` asked for their tables: a periodic round, or one woken by
    ``event`` (which changes what plans read)."""
    net.calls.clear()
    net.peers[peer].reoptimiser.round(event or "periodic", skip_unchanged=not event)
    return {c.peer for c in net.calls_of("lookup")}


def test_a_periodic_round_skips_a_subscription_until_a_peer_it_read_changes(net):
    sp1 = net.peers["SP1"]
    narrow = sp1.control.subscribe(NARROW)
    Feed(net).publish(100)
    narrow.last_replan = 0
    hear(net)
    assert planned(net, "SP1") == {"SP4", "SP5", "SP1"}
    kept = narrow.reoptimisation
    assert kept.startswith("kept"), kept
    hear(net)
    assert planned(net, "SP1") == set()  # nothing it read changed: not planned again
    assert narrow.reoptimisation == kept
    assert planned(net, "SP1", event="subscription SP1-x registered here")  # such a round plans all

    net.peers["SP7"].control.subscribe(WIDE)  # new streams at SP4 and SP5, which SP1's plan read
    assert planned(net, "SP1") == set()  # (not heard yet)
    hear(net)
    assert planned(net, "SP1") >= {"SP4", "SP5"}


def test_a_subscription_kept_is_planned_again_after_a_while_or_when_it_changed(net, monkeypatch):
    sp1 = net.peers["SP1"]
    narrow = sp1.control.subscribe(NARROW)
    Feed(net).publish(100)
    narrow.last_replan = 0
    hear(net)
    planned(net, "SP1")
    hear(net)
    assert planned(net, "SP1") == set()
    narrow.leave_for_followers(frozenset({"SP9.1"}), 60.0)  # its own state changed
    assert planned(net, "SP1") == {"SP4", "SP5", "SP1"}
    assert narrow.reoptimisation.startswith("kept"), narrow.reoptimisation
    hear(net)
    assert planned(net, "SP1") == set()
    monkeypatch.setattr(planned_over, "RECONSIDER_S", 0.0)  # the statistics and load may have moved
    assert planned(net, "SP1")
