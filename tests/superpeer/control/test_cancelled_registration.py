"""A registration whose client has gone (cancelled, or its deadline passed) stops waiting and
keeps nothing: not while it waits for this peer's installation of another subscription, and
not when the client goes while it is being installed — it would never learn its id, and its
streams would run for nobody. Real super-peers in one process (``superpeer_fakes``)."""

from __future__ import annotations

import threading
import time

import pytest

from sharing.scenarios import paper_query
from superpeer.errors import NodeError
from superpeer_fakes import Call, in_process_network
from photons.generator import generate

PHOTONS = [p.to_xml() for p in generate(100, seed=5)]


def network():
    net = in_process_network()
    net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
    net.peers["SP4"].data.publish("photons", PHOTONS)
    return net


def kept_anywhere(net, sid: str) -> list[str]:
    """Where anything of subscription ``sid`` is left: its record, or a stream it uses."""
    left = [f"record at {p}" for p, node in net.peers.items() if sid in node.control.subscriptions]
    for p, node in net.peers.items():
        with node.state.lock:
            left += [f"{s.id} at {p}" for s in node.state.table if any(u.startswith(sid) for u in s.users)]
        left += [f"reservation at {p}" for _ in node.state.transactions.reserved()]
    return left


def test_a_registration_waiting_for_the_peers_turn_stops_when_its_client_goes():
    net = network()
    committing, release, gone = threading.Event(), threading.Event(), threading.Event()

    def hook(call: Call) -> None:  # (SP1's first installation holds its turn until released)
        if call.method == "commit" and call.sender == "SP1" and not release.is_set():
            committing.set()
            assert release.wait(20)

    net.hook = hook
    first = threading.Thread(target=lambda: net.peers["SP1"].control.subscribe(paper_query(1)))
    first.start()
    assert committing.wait(10)
    outcome: dict = {}

    def second() -> None:
        try:
            net.peers["SP1"].control.subscribe(paper_query(3), cancelled=gone.is_set)
        except NodeError as exc:
            outcome["error"] = exc
        outcome["at"] = time.monotonic()

    waiting = threading.Thread(target=second)
    waiting.start()
    time.sleep(0.3)  # (it is waiting for SP1's turn: not done)
    assert waiting.is_alive()
    went = time.monotonic()
    gone.set()
    waiting.join(5)
    assert not waiting.is_alive() and outcome["error"].code == "CANCELLED", outcome
    assert outcome["at"] - went < 2
    release.set()
    first.join(20)
    assert len(net.peers["SP1"].control.subscriptions) == 1  # (the first one, which is kept)
    for p in net.peers.values():
        p.stop()


def test_a_client_gone_while_its_subscription_was_installed_leaves_nothing_behind():
    net = network()
    gone = threading.Event()

    def hook(call: Call) -> None:  # (the client goes while the plan is being committed)
        if call.method == "commit" and call.sender == "SP1":
            gone.set()

    net.hook = hook
    with pytest.raises(NodeError) as raised:
        net.peers["SP1"].control.subscribe(paper_query(1), cancelled=gone.is_set)
    assert raised.value.code == "CANCELLED" and "nothing is kept" in raised.value.message
    assert net.calls_of("commit"), "the plan was committed before the client went"
    sids = {c.args[1] for c in net.calls_of("commit")}
    for sid in sids:
        assert not kept_anywhere(net, sid), kept_anywhere(net, sid)
    assert not net.peers["SP1"].state.store.subscriptions()
    for p in net.peers.values():
        p.stop()


def test_a_client_whose_deadline_passes_while_its_registration_waits_leaves_nothing(tmp_path):
    """Through real gRPC servers: SP1's turn to install is held (as a long installation would
    hold it) while a client subscribes there with a 1 s deadline. The client gets its deadline;
    once the turn is free the super-peer has kept nothing of the registration."""
    from network_harness import running_network
    from thinpeer.client import SuperPeerClient, ThinPeerError

    with running_network(tmp_path) as (topology, peers):
        SuperPeerClient(topology.address("SP4")).register_stream("photons", "photons", "photon", rate=100)
        for running in peers.values():
            running.node.heartbeat_once()
        control = peers["SP1"].node.control
        with control._installing:  # (this peer's one installation at a time: taken)
            with pytest.raises(ThinPeerError) as raised:
                SuperPeerClient(topology.address("SP1"), timeout=1.0).subscribe(paper_query(1))
            assert raised.value.code == "DEADLINE_EXCEEDED"
            deadline = time.monotonic() + 10
            while control.subscriptions and time.monotonic() < deadline:
                time.sleep(0.05)  # (the handler notices within its poll of the turn)
        assert not control.subscriptions
        assert not peers["SP1"].node.state.store.subscriptions()
        reply = SuperPeerClient(topology.address("SP1")).subscribe(paper_query(1))  # (the turn is free)
        assert list(control.subscriptions) == [reply.subscription]
