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
