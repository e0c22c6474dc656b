"""A super-peer that dialled a neighbour before the neighbour listened (a network starting up)
still reaches it as soon as it listens: its first calls wait for the connection instead of
failing inside gRPC's reconnect backoff (``peer_channels.FIRST_CONTACT_S``). Real gRPC servers."""

from __future__ import annotations

import time

from sharing.properties import InputStream
from superpeer.rpc.server import start_superpeer
from superpeer.topology import load_topology
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology


def test_a_peer_dialled_before_it_listened_answers_the_first_lookup_once_it_does(tmp_path):
    topology = load_topology(with_free_ports(shipped_topology("paper-example.toml"), tmp_path / "t.toml"))
    sp5 = start_superpeer(topology, "SP5")
    sp4 = None
    try:
        sp5.node.heartbeat_once()  # SP4 is not listening: its channel backs off (1 s, growing)
        assert "SP4" in sp5.node.transport.unreachable
        sp4 = start_superpeer(topology, "SP4")
        began = time.monotonic()
        got = sp5.node.transport.lookup("SP4", InputStream("photons", ("photons", "photon")))
        assert got is not None, sp5.node.transport.unreachable.get("SP4")
        streams, usage = got
        assert streams == [] and "version" in usage
        assert time.monotonic() - began < 5
        assert "SP4" not in sp5.node.transport.unreachable
    finally:
        for running in (sp5, sp4):
            if running is not None:
                running.stop(grace=0)


def test_a_peer_that_starts_seconds_after_it_was_first_dialled_is_reached_at_once(tmp_path):
    """Heartbeats find SP4 silent for six seconds: gRPC's own backoff would by then wait ~4 s
    before dialling again; the control channel's is capped at 2 s, so the first lookup after
    SP4 starts still reaches it."""
    topology = load_topology(with_free_ports(shipped_topology("paper-example.toml"), tmp_path / "t.toml"))
    sp5 = start_superpeer(topology, "SP5")
    sp4 = None
    try:
        until = time.monotonic() + 6
        while time.monotonic() < until:
            sp5.node.heartbeat_once()
        sp4 = start_superpeer(topology, "SP4")
        got = sp5.node.transport.lookup("SP4", InputStream("photons", ("photons", "photon")))
        assert got is not None, sp5.node.transport.unreachable.get("SP4")
    finally:
        for running in (sp5, sp4):
            if running is not None:
                running.stop(grace=0)
