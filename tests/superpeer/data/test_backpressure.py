"""Back-pressure with real daemons: a neighbour that stops taking batches (its process paused with
SIGSTOP: its socket stays open, nothing is acknowledged) holds the publisher back instead of
filling the sender's memory or dropping anything; once it runs again, every item arrives once.

Failure detection is slowed down here so that the pause stays a slow link, not a failed peer
(a failed one is planned around by recovery, which other tests cover)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from network_harness import reference_results, same, until

from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import up
from thinpeer.ops.topologies import shipped_topology

pytestmark = pytest.mark.slow

BUFFER = 256 << 10  # serve --link-buffer: small, so that a few seconds of photons fill it
WHOLE = '<photons>{ for $p in stream("photons")/photons/photon return $p }</photons>'


def test_a_stalled_neighbour_holds_the_publisher_back_and_nothing_is_lost(tmp_path: Path) -> None:
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    network = up(path, state_dir=tmp_path / "state",
                 serve_args=("--heartbeat-s", "5", "--heartbeat-misses", "20", "--link-buffer", str(BUFFER),
                             "--no-reoptimise"))
    photons = [p.to_xml() for p in generate(60_000, seed=4)]  # ~14 MB of text
    try:
        sp4, sp1 = SuperPeerClient(network.addresses["SP4"]), SuperPeerClient(network.addresses["SP1"])
        sp4.register_stream("photons", "photons", "photon")
        sp4.publish("photons", photons[:100])
        sid = sp1.subscribe(WHOLE).id  # routed SP4 → SP5 → SP1
        q1 = sp1.subscribe(example_query("q1")).id
        summary = {}

        def publish() -> None:
            summary["done"] = sp4.publish("photons", photons[100:])
            sp4.close_stream("photons")

        paused = network.processes["SP5"].pid
        os.kill(paused, signal.SIGSTOP)
        try:
            worker = threading.Thread(target=publish, daemon=True)
            worker.start()
            # the publisher is held back, and says why, while SP5 takes nothing
            until(lambda: sp4.status()["backpressure"]["streams"].get("photons", {}).get("waiting"), 60)
            time.sleep(3.0)  # (a while longer: nothing more may pile up meanwhile)
            link = sp4.status()["links"]["SP4->SP5"]
            held = sp4.status()["backpressure"]["streams"]["photons"]
            assert "SP5" in held["reason"], held
            assert worker.is_alive()  # (not done: held back)
        finally:
            os.kill(paused, signal.SIGCONT)
        worker.join(300)
        assert not worker.is_alive() and summary["done"].accepted == len(photons) - 100
        assert summary["done"].held_back_s > 0 and "SP5" in summary["done"].held_back
        one_batch = 1 << 20  # (a batch is admitted while the link is below its bound)
        assert link["peak_held_bytes"] <= BUFFER + one_batch, link
        final = sp4.status()["links"]["SP4->SP5"]
        assert final["dropped"] == 0 and final["peak_held_bytes"] <= BUFFER + one_batch, final
        got = [item for _, item, _ in sp1.results(sid, offset=0, idle_timeout=60)]
        assert got == photons[100:], (len(got), len(photons) - 100)
        vela = [item for _, item, _ in sp1.results(q1, offset=0, idle_timeout=60)]
        assert same(vela, reference_results(example_query("q1"), photons[100:]))
    finally:
        network.stop()


ONE_PEER = """
[[superpeer]]
id = "A"
address = "127.0.0.1:1"
"""


@pytest.mark.timeout(600)
def test_a_spark_executor_slower_than_its_input_holds_the_publisher_back(tmp_path: Path) -> None:
    from network_harness import start_own_topology

    backlog = 512 << 10  # (and micro-batches every 2 s: the publisher is far faster)
    topology, peers = start_own_topology(tmp_path, ONE_PEER, {"A": {"executor": "spark", "executor_options": {
        "backlog": backlog, "trigger_ms": 2000, "master": "local[1]"}}})
    peer = peers["A"]
    photons = [p.to_xml() for p in generate(30_000, seed=5)]
    try:
        client = SuperPeerClient(topology.address("A"), timeout=60)
        client.register_stream("photons", "photons", "photon")
        sid = client.subscribe(example_query("q1")).id
        peaks = []
        stop = threading.Event()

        def watch() -> None:  # the executor's backlog, sampled while the publisher runs
            while not stop.is_set():
                peaks.append(peer.node.executor.feed.backlog_bytes)
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        summary = client.publish("photons", photons)
        client.close_stream("photons")
        stop.set()
        watcher.join()
        assert summary.accepted == len(photons)
        assert summary.held_back_s > 0 and "Spark executor" in summary.held_back, summary
        assert max(peaks) <= backlog + (1 << 20), max(peaks)  # (a publisher's batch beyond the bound at most)
        got = [item for _, item, _ in client.results(sid, idle_timeout=120)]
        assert same(got, reference_results(example_query("q1"), photons))
    finally:
        peer.stop(grace=0)


def test_a_subscriber_that_stops_reading_is_bounded_by_its_retention_and_stalls_nobody(tmp_path: Path) -> None:
    from network_harness import running_network

    photons = [p.to_xml() for p in generate(20_000, seed=6)]
    with running_network(tmp_path, peer_options={"SP1": {"retention": 1_000}}) as (topology, _):
        sp4, sp1, sp7 = (SuperPeerClient(topology.address(p)) for p in ("SP4", "SP1", "SP7"))
        sp4.register_stream("photons", "photons", "photon")
        sp4.publish("photons", photons[:100])
        stalled = sp1.subscribe(WHOLE).id  # never read until the end
        reading = sp7.subscribe(WHOLE).id
        summary = sp4.publish("photons", photons[100:])
        sp4.close_stream("photons")
        got = [item for _, item, _ in sp7.results(reading, idle_timeout=60)]
        assert got == photons[100:]  # the reader that reads has everything
        assert summary.held_back_s == 0.0, summary  # nobody waited for the one that does not
        buffer = until(lambda: (s := sp1.status()["subscriptions"][stalled])["results"] == len(photons) - 100 and s, 60)
        assert buffer["held"] <= 1_000 and buffer["dropped_by_retention"] == len(photons) - 100 - buffer["held"]
        first = sp1.read(stalled, 0)
        assert first.dropped == buffer["dropped_by_retention"] and first.items == photons[-buffer["held"]:][:len(first.items)]
