"""Prometheus metrics of real super-peers (gRPC on loopback), scraped over HTTP by a real client
and read with Prometheus' own text parser while photons flow: the counters say what moved."""

from __future__ import annotations

import json
import logging
import urllib.request

from network_harness import running_network, until
from prometheus_client.parser import text_string_to_metric_families

from photons.generator import generate
from sharing.scenarios import example_query
from superpeer.logs import JsonLogFormatter
from thinpeer.client import SuperPeerClient

PEERS = ("SP1", "SP4", "SP5")


def scrape(address: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape: (name, sorted labels) → value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_counters_move_with_the_photons_and_registrations_are_timed(tmp_path):
    options = {p: {"metrics_port": 0} for p in PEERS}
    with running_network(tmp_path, peer_options=options) as (topology, peers):
        address = {p: peers[p].node.metrics.address for p in PEERS}
        assert all(address.values())
        assert peers["SP0"].node.metrics.address is None  # (no port asked: none served)
        before = scrape(address["SP1"])
        assert before[("streamglobe_registration_seconds_count", ())] == 0
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100)
        photons = [p.to_xml() for p in generate(3000, seed=5)]
        publisher.publish("photons", photons[:500])
        reader = SuperPeerClient(topology.address("SP1"))
        sid = reader.subscribe(example_query("q1")).subscription  # SP4 → SP5 → SP1
        publisher.publish("photons", photons[500:])

        def stream_accepted() -> float:
            return scrape(address["SP4"])[("streamglobe_stream_accepted_items_total", (("stream", "photons"),))]

        until(lambda: stream_accepted() == 3000, 30, what=stream_accepted)
        sp1 = scrape(address["SP1"])
        assert sp1[("streamglobe_registration_seconds_count", ())] == 1
        # … and each of its steps, as the subscription's status says them (milliseconds)
        steps = reader.status()["subscriptions"][sid]["registration_ms"]
        assert set(steps) == {"analysis", "lookups", "planning", "reserve", "widen", "commit", "other", "total",
                              "thread_cpu"}
        assert all(v >= 0 for v in steps.values()) and steps["lookups"] > 0 and steps["commit"] > 0
        assert abs(sum(v for k, v in steps.items() if k not in ("total", "thread_cpu")) - steps["total"]) < 0.05
        assert 0 < steps["thread_cpu"] <= steps["total"] + 1
        for step in ("analysis", "lookups", "planning", "reserve", "widen", "commit", "other"):
            assert sp1[("streamglobe_registration_step_seconds_count", (("step", step),))] == 1
        assert sp1[("streamglobe_registration_step_seconds_sum", (("step", "commit"),))] == steps["commit"] / 1000
        assert sp1[("streamglobe_subscriptions", (("state", "ok"),))] == 1
        assert sp1[("process_cpu_seconds_total", ())] > 0

        def link_items(peer: str, link: str) -> float:
            return scrape(address[peer]).get(("streamglobe_link_items_total", (("link", link),)), 0.0)

        # what crossed SP4→SP5 is what SP5 forwarded on to SP1: the results' items, once each
        until(lambda: link_items("SP5", "SP5->SP1") > 0 and link_items("SP5", "SP5->SP1") == link_items(
            "SP4", "SP4->SP5"), 30, what=lambda: (link_items("SP4", "SP4->SP5"), link_items("SP5", "SP5->SP1")))
        results = [item for _, item, _ in reader.results(sid, idle_timeout=3)]
        assert link_items("SP5", "SP5->SP1") == len(results) > 0
        # the operators ran at SP4 (query shipping's filter, near the data): timed per batch
        computing = [p for p in PEERS if scrape(address[p])[("streamglobe_executor_batch_seconds_count", ())] > 0]
        assert computing, "no executor batch was timed"
        first = link_items("SP5", "SP5->SP1")
        publisher.publish("photons", [p.to_xml() for p in generate(3000, seed=6)])
        until(lambda: link_items("SP5", "SP5->SP1") > first, 30)


def test_json_log_lines_carry_the_peer_the_level_and_the_message():
    record = logging.LogRecord("streamglobe.superpeer", logging.WARNING, __file__, 1, "re-planned %s", ("SP1-x",),
                               None)
    line = json.loads(JsonLogFormatter("SP4").format(record))
    assert line["peer"] == "SP4" and line["level"] == "warning" and line["message"] == "re-planned SP1-x"
    assert line["logger"] == "streamglobe.superpeer" and line["time"].endswith("+00:00")
