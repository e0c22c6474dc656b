"""Admission stays honest: a link that measurably carries more than its plans reserve (a derived
stream priced while its source was idle, then flooded) refuses a subscription that would push
it further, naming the link, and admits it again once the traffic is gone. Real daemons on
loopback; the link's bandwidth in the topology is what admission holds it to."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from network_harness import start_own_topology, until

from photons.generator import generate
from thinpeer.client import SuperPeerClient, ThinPeerError

pytestmark = pytest.mark.slow

LINE = """
[[superpeer]]
id = "A"
address = "127.0.0.1:1"
[[superpeer]]
id = "B"
address = "127.0.0.1:2"
[[link]]
a = "A"
b = "B"
bandwidth = "2Mbit"
"""
BRIGHT = '<b>{ for $p in stream("bulk")/photons/photon where $p/en >= 0.2 return $p }</b>'
OTHER = '<o>{ for $p in stream("other")/photons/photon return $p }</o>'


def test_a_link_measured_full_refuses_more_and_admits_again_when_it_is_not(tmp_path: Path) -> None:
    topology, peers = start_own_topology(tmp_path, LINE)
    stop = threading.Event()
    try:
        a, b = SuperPeerClient(topology.address("A")), SuperPeerClient(topology.address("B"))
        a.register_stream("bulk", "photons", "photon", rate=1)  # (priced at one photon a second)
        a.register_stream("other", "photons", "photon", rate=50)
        photons = [p.to_xml() for p in generate(2_000, seed=8)]
        a.publish("other", photons[:50])
        b.subscribe(BRIGHT)  # its stream A→B is priced at the declared rate

        def flood() -> None:  # ~5 Mbit/s on loopback: far above the link's 2 Mbit/s
            while not stop.is_set():
                a.publish("bulk", photons, rate=3_500)

        threading.Thread(target=flood, daemon=True).start()
        until(lambda: a.status()["load"].get("measured_links", {}).get("B", 0) > 2.5e6, 60)
        for peer in peers.values():
            peer.node.heartbeat_once()  # (B hears A's measurement now, not at the next round)
        with pytest.raises(ThinPeerError) as caught:
            b.subscribe(OTHER)
        assert caught.value.code == "RESOURCE_EXHAUSTED" and "A–B" in caught.value.message, caught.value
        assert a.status()["load"]["links"].get("B", 0.0) < 2e6  # (what the plans reserve: it fits)
        stop.set()
        until(lambda: a.status()["load"].get("measured_links", {}).get("B", 0) < 0.5e6, 90)
        for peer in peers.values():
            peer.node.heartbeat_once()
        assert b.subscribe(OTHER).plan.admitted
    finally:
        stop.set()
        for peer in peers.values():
            peer.stop(grace=0)


SMALL_PEER = """
[[superpeer]]
id = "A"
address = "127.0.0.1:1"
load_capacity = 0.01
[[superpeer]]
id = "B"
address = "127.0.0.1:2"
[[link]]
a = "A"
b = "B"
bandwidth = "1Mbit"
"""
RARE = '<r>{ for $p in stream("bulk")/photons/photon where $p/en >= 9 return $p }</r>'
HARD = '<h>{ for $p in stream("other")/photons/photon where $p/en >= 1.5 return $p }</h>'


def test_a_peer_whose_executor_is_measured_busy_takes_no_more_operators_until_it_is_not(tmp_path: Path) -> None:
    """A's operators were priced at one photon a second, then flooded: its executor measurably
    spends more than A's capacity, so a new subscription's filter is not placed there (it is
    refused naming A, or planned elsewhere) — and is placed at A again once the flood is over."""
    topology, peers = start_own_topology(tmp_path, SMALL_PEER)
    stop = threading.Event()
    try:
        a, b = SuperPeerClient(topology.address("A")), SuperPeerClient(topology.address("B"))
        a.register_stream("bulk", "photons", "photon", rate=1)  # (priced at one photon a second)
        a.register_stream("other", "photons", "photon", rate=50)
        photons = [p.to_xml() for p in generate(2_000, seed=8)]
        a.publish("other", photons[:50])
        assert "] at A;" in b.subscribe(RARE).description  # its filter runs at A

        def flood() -> None:
            try:
                while not stop.is_set():
                    a.publish("bulk", photons, rate=20_000)
            except ThinPeerError:
                if not stop.is_set():
                    raise

        threading.Thread(target=flood, daemon=True).start()
        until(lambda: a.status()["load"].get("measured_load", 0) > 0.015, 60,
              what=lambda: str(a.status()["load"]))
        assert a.status()["load"]["load"] < 0.01  # (what the plans reserve: it fits)
        for peer in peers.values():
            peer.node.heartbeat_once()  # (B hears A's measurement now, not at the next round)
        try:
            busy = b.subscribe(HARD).description
            assert "] at A;" not in busy, busy
        except ThinPeerError as refused:
            assert refused.code == "RESOURCE_EXHAUSTED" and "peer A" in refused.message, refused
        stop.set()
        until(lambda: a.status()["load"].get("measured_load", 1) < 0.001, 90,
              what=lambda: str(a.status()["load"]))
        for peer in peers.values():
            peer.node.heartbeat_once()
        assert "] at A;" in b.subscribe(HARD.replace("1.5", "1.6")).description
    finally:
        stop.set()
        for peer in peers.values():
            peer.stop(grace=0)
