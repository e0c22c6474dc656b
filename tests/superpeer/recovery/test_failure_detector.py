"""Failure detection from heartbeats: a peer is declared down after the configured number of
missed answers and up at the first answer; whether a silent neighbour is down or only cut off
is decided by whether the others hear it. The unit half drives the detector with a clock; the
integration half stops and restarts a real daemon."""

from __future__ import annotations

import pytest
from network_harness import until

from superpeer.recovery.failure_detector import FailureDetector, HeartbeatSettings
from superpeer.rpc.server import start_superpeer
from superpeer.topology import load_topology
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import free_ports


def test_down_after_the_configured_misses_and_up_at_the_first_answer() -> None:
    d = FailureDetector("A", frozenset({"B"}), HeartbeatSettings(0.5, misses=3))
    d.heard("B", 0.0)
    d.missed("B", 1.0, "UNAVAILABLE: refused")
    d.missed("B", 2.0, "UNAVAILABLE: refused")
    assert d.peer_state("B") == "up" and not d.link_down("B")
    d.missed("B", 3.0, "UNAVAILABLE: refused")
    assert d.peer_state("B") == "down" and d.link_down("B")
    shown = d.status(4.0)
    assert shown["links"]["A–B"]["state"] == "down"
    assert "B is down" in shown["links"]["A–B"]["reason"] and "refused" in shown["links"]["A–B"]["reason"]
    assert shown["peers"]["B"]["since"].startswith("1970-01-01T00:00:03")
    d.heard("B", 5.0)
    assert d.peer_state("B") == "up" and d.status(5.0)["peers"]["B"]["times_down"] == 1


def test_a_silent_neighbour_that_others_hear_is_a_cut_link() -> None:
    d = FailureDetector("A", frozenset({"B", "C"}), HeartbeatSettings(1.0, misses=1))
    d.heard("C", 0.0, frozenset({"A", "B"}))
    d.missed("B", 0.0, "DEADLINE_EXCEEDED")
    assert d.peer_state("B") == "unreachable"
    assert "the link is cut" in d.status(0.0)["links"]["A–B"]["reason"]
    assert "heard by C" in d.status(0.0)["peers"]["B"]["reason"]
    d.heard("C", 1.0, frozenset({"A"}))  # now C does not hear B either
    assert d.peer_state("B") == "down"


@pytest.mark.parametrize("interval,misses", [(0, 3), (1.0, 0), (-1.0, 2)])
def test_nonsense_settings_are_refused(interval: float, misses: int) -> None:
    with pytest.raises(ValueError):
        HeartbeatSettings(interval, misses)


LINE = """\
[[superpeer]]
id = "A"
address = "127.0.0.1:{a}"
[[superpeer]]
id = "B"
address = "127.0.0.1:{b}"
[[superpeer]]
id = "C"
address = "127.0.0.1:{c}"
[[link]]
a = "A"
b = "B"
bandwidth = 1e8
[[link]]
a = "B"
b = "C"
bandwidth = 1e8
"""






def test_a_stopped_daemon_is_declared_down_and_up_again_when_it_returns(tmp_path) -> None:
    a, b, c = free_ports(3)
    path = tmp_path / "line.toml"
    path.write_text(LINE.format(a=a, b=b, c=c))
    topology = load_topology(path)
    settings = HeartbeatSettings(0.2, misses=2)
    peers = {p: start_superpeer(topology, p, heartbeats=settings) for p in ("A", "B", "C")}
    try:
        sp_b = SuperPeerClient(topology.address("B"))
        until(lambda: sp_b.status()["failure_detector"]["links"]["B–C"]["state"] == "up", seconds=15)
        peers["C"].stop(grace=0)
        # (for a round it may read "cut": A's last report may still have heard C)
        link = until(lambda: "C is down" in (l := sp_b.status()["failure_detector"]["links"]["B–C"]).get("reason", "")
                      and l, seconds=15)
        assert link["state"] == "down" and link["since"]
        # A is not C's neighbour, hears B, and B does not hear C: C is down (not just cut off)
        sp_a = SuperPeerClient(topology.address("A"))
        until(lambda: sp_a.status()["failure_detector"]["peers"]["C"]["state"] == "down", seconds=15)
        assert sp_a.status()["failure_detector"]["links"]["A–B"]["state"] == "up"
        peers["C"] = start_superpeer(topology, "C", heartbeats=settings)
        until(lambda: sp_b.status()["failure_detector"]["links"]["B–C"]["state"] == "up", seconds=15)
        assert sp_b.status()["failure_detector"]["peers"]["C"]["times_down"] == 1
    finally:
        for running in peers.values():
            running.stop(grace=0)
