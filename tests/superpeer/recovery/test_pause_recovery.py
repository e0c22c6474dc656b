"""A super-peer on the route stops answering mid-stream (SIGSTOP: a hung process, a paused
container) and comes back: its neighbours declare it down, then up; the subscriptions whose
items pass it are degraded (with the reason) and planned again around it, and when it answers
again the old plan's streams are removed there; every subscriber's results are still exactly
the reference results — nothing lost or taken twice. Real daemon processes (``network up``)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from network_harness import reference_results, same, until
from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import up
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

pytestmark = pytest.mark.slow




def test_a_paused_superpeer_on_the_route_loses_nothing(tmp_path: Path) -> None:
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    network = up(path, state_dir=tmp_path / "state",
                 serve_args=("--heartbeat-s", "0.3", "--heartbeat-misses", "2"))
    sp5 = network.processes["SP5"]
    try:
        address = network.addresses
        publisher = SuperPeerClient(address["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=500)
        photons = [p.to_xml() for p in generate(3000, seed=31)]
        publisher.publish("photons", photons[:200])
        time.sleep(1.0)  # a heartbeat round: every peer has the statistics
        subs = {name: (SuperPeerClient(address[peer]), SuperPeerClient(address[peer]).subscribe(
                    example_query(name)).subscription) for name, peer in (("q1", "SP1"), ("q2", "SP7"))}
        done = threading.Event()

        def publish() -> None:
            publisher.publish("photons", photons[200:], rate=1500)
            publisher.close_stream("photons")
            done.set()

        threading.Thread(target=publish, daemon=True).start()
        time.sleep(0.4)
        sp5.send_signal(signal.SIGSTOP)  # SP5 carries both routes: SP4→SP5→SP1, SP5→SP7
        sp4 = SuperPeerClient(address["SP4"])
        until(lambda: sp4.status()["failure_detector"]["links"]["SP4–SP5"]["state"] == "down")

        def health(name: str) -> dict:
            client, sid = subs[name]
            return client.status()["subscriptions"][sid]["health"]

        for name in subs:  # the subscribers' own super-peers see their routes broken: planned again
            until(lambda: health(name)["replans"] >= 1 and health(name)["state"] == "ok")
            assert "SP5" in health(name)["last_failure"] and health(name)["since"]
        sp5.send_signal(signal.SIGCONT)
        until(lambda: sp4.status()["failure_detector"]["links"]["SP4–SP5"]["state"] == "up")
        sp5_client = SuperPeerClient(address["SP5"])  # the old plans are removed from SP5
        until(lambda: not [s for s in sp5_client.status()["stream_table"] if not s["original"]])
        assert done.wait(60), "publishing did not finish"
        for name, (client, sid) in subs.items():
            got = [item for _, item, _ in client.results(sid, idle_timeout=30)]
            expected = reference_results(example_query(name), photons[200:])
            assert expected and same(got, expected), (name, len(got), len(expected))
        assert sp4.status()["failure_detector"]["peers"]["SP5"]["times_down"] >= 1
    finally:
        sp5.send_signal(signal.SIGCONT)
        network.stop()
