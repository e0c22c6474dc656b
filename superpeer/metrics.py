"""Prometheus metrics of one super-peer (``serve --metrics-port``), with ``prometheus-client``.

Operators watch streaming systems with Prometheus, so a super-peer serves the text exposition
format on its own HTTP port. Nearly everything is read, at each scrape, from what ``status``
already counts (``StatusCollector``): traffic per link and per stream registered here, queue
depths, dropped and late items, re-plans and migrations, failures detected, load. Two things
``status`` cannot say are measured as they happen: how long registrations take (and each of their
steps), and how long the executor takes over a batch (``Metrics.registration``,
``Metrics.registration_step`` and ``Metrics.executor_batch``, histograms).
The process's own CPU and memory come with the library's process collector.

Nothing here changes what a super-peer does: a scrape takes the same locks ``status`` takes, and
a super-peer started without ``--metrics-port`` serves no port.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .subscriptions.step_times import STEPS

log = logging.getLogger("streamglobe.superpeer")
PREFIX = "streamglobe_"
# registrations take milliseconds to seconds (planning over many peers, replays of the past)
REGISTRATION_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0)
LINK_COUNTERS = {  # status field: (metric, help)
    "items": ("link_items", "items a link has carried (acknowledged by the next super-peer)"),
    "bytes": ("link_bytes", "bytes of items a link has carried"),
    "batches": ("link_batches", "batches a link has carried"),
    "errors": ("link_errors", "failed sends and broken link streams"),
    "dropped": ("link_dropped_items", "items a link gave up (refused for good by the next super-peer)"),
}
LINK_GAUGES = {
    "held_items": ("link_held_items", "items waiting to leave on a link or not yet acknowledged"),
    "held_bytes": ("link_held_bytes", "bytes waiting to leave on a link or not yet acknowledged"),
}
STREAM_COUNTERS = {
    "accepted": ("stream_accepted_items", "items a stream registered here has accepted from its publishers"),
    "rejected": ("stream_rejected_items", "items refused (malformed, too big, out of order)"),
    "duplicates": ("stream_duplicate_items", "items published again (taken once)"),
}


class StatusCollector(Collector):
    """Metric families read off ``status`` at each scrape."""

    def __init__(self, peer: str, status: Callable[[], dict]) -> None:
        self.peer = peer
        self.status = status

    def describe(self) -> list[Metric]:
        return []  # (the families depend on what runs: nothing is read before the node is built)

    def collect(self) -> Iterator[Metric]:
        try:
            s = self.status()
        except Exception:
            log.exception("reading the status for a metrics scrape failed")
            return
        yield from _links(s.get("links", {}))
        yield from _streams(s.get("streams_registered_here", {}))
        yield from _operators(s.get("operators", []))
        yield from _subscriptions(s.get("subscriptions", {}), s.get("reoptimisation", {}))
        yield from _failures(s.get("failure_detector", {}), s.get("unreachable_peers", {}))
        yield from _backpressure(s.get("backpressure", {}), s.get("links", {}))
        load = s.get("load", {})
        g = GaugeMetricFamily(PREFIX + "load", "this super-peer's reserved load (share of its capacity)")
        g.add_metric([], float(load.get("load", 0.0)))
        yield g
        g = GaugeMetricFamily(PREFIX + "link_reserved_bits_per_second",
                              "bandwidth the installed plans reserve on each link", labels=["link"])
        for n, bits in sorted(load.get("links", {}).items()):
            g.add_metric([f"{self.peer}->{n}"], float(bits))
        yield g
        info = GaugeMetricFamily(PREFIX + "executor_info", "the executor this super-peer runs operators on "
                                 "(1), with its state", labels=["executor", "state"])
        executor = s.get("executor_status", {})
        info.add_metric([str(s.get("executor", "")), str(executor.get("state", "running"))], 1.0)
        yield info


def _links(links: dict) -> Iterator[Metric]:
    for key, (name, text) in LINK_COUNTERS.items():
        c = CounterMetricFamily(PREFIX + name, text, labels=["link"])
        for link, counters in sorted(links.items()):
            c.add_metric([link], float(counters.get(key, 0)))
        yield c
    for key, (name, text) in LINK_GAUGES.items():
        g = GaugeMetricFamily(PREFIX + name, text, labels=["link"])
        for link, counters in sorted(links.items()):
            g.add_metric([link], float(counters.get(key, 0)))
        yield g


def _backpressure(pressure: dict, links: dict) -> Iterator[Metric]:
    """Where the pressure comes from: how long each stream's batches waited here for room, which
    wait now, and which links' neighbours hold our batches back."""
    c = CounterMetricFamily(PREFIX + "backpressure_seconds", "time batches of a stream waited here for room on "
                            "the links (or executor) they go to next", labels=["stream"])
    g = GaugeMetricFamily(PREFIX + "backpressure_waiting", "1 while batches of a stream wait here for room",
                          labels=["stream"])
    for stream, held in sorted(pressure.get("streams", {}).items()):
        c.add_metric([stream], float(held.get("held_back_s", 0.0)))
        g.add_metric([stream], 1.0 if held.get("waiting") else 0.0)
    yield c
    yield g
    g = GaugeMetricFamily(PREFIX + "link_held_back", "1 while a link's neighbour holds our batches back "
                          "(its own links are full)", labels=["link"])
    for link, counters in sorted(links.items()):
        g.add_metric([link], 1.0 if counters.get("pressure") else 0.0)
    yield g


def _streams(streams: dict) -> Iterator[Metric]:
    for key, (name, text) in STREAM_COUNTERS.items():
        c = CounterMetricFamily(PREFIX + name, text, labels=["stream"])
        for stream, s in sorted(streams.items()):
            c.add_metric([stream], float(s.get(key, 0)))
        yield c


def _operators(operators: list) -> Iterator[Metric]:
    late = CounterMetricFamily(PREFIX + "window_late_items", "items a window operator dropped as too late",
                               labels=["stream"])
    missing = CounterMetricFamily(PREFIX + "window_missing_reference_items",
                                  "items a window operator dropped for want of a numeric reference",
                                  labels=["stream"])
    for op in operators:
        if "late_items" in op:
            late.add_metric([op["stream"]], float(op["late_items"]))
            missing.add_metric([op["stream"]], float(op.get("missing_reference", 0)))
    yield late
    yield missing


def _subscriptions(subscriptions: dict, reoptimisation: dict) -> Iterator[Metric]:
    g = GaugeMetricFamily(PREFIX + "subscriptions", "subscriptions registered here, by state", labels=["state"])
    states: dict[str, int] = {}
    replans = 0
    for sub in subscriptions.values():
        health = sub.get("health", {})
        state = str(health.get("state", "unknown"))
        states[state] = states.get(state, 0) + 1
        replans += int(health.get("replans", 0))
    for state, n in sorted(states.items()):
        g.add_metric([state], float(n))
    yield g
    c = CounterMetricFamily(PREFIX + "failure_replans", "re-plans of the subscriptions registered here "
                            "around a failure")
    c.add_metric([], float(replans))
    yield c
    c = CounterMetricFamily(PREFIX + "reoptimisation_rounds", "re-optimisation rounds run here")
    c.add_metric([], float(reoptimisation.get("rounds", 0)))
    yield c
    c = CounterMetricFamily(PREFIX + "migrations", "running subscriptions moved live to a cheaper plan")
    c.add_metric([], float(reoptimisation.get("migrations", 0)))
    yield c


def _failures(detector: dict, unreachable: dict) -> Iterator[Metric]:
    c = CounterMetricFamily(PREFIX + "peers_declared_down", "times this super-peer declared another one down",
                            labels=["peer"])
    up = GaugeMetricFamily(PREFIX + "peer_up", "whether this super-peer hears the other one (1) or not (0)",
                           labels=["peer"])
    for peer, d in sorted(detector.get("peers", {}).items()):
        c.add_metric([peer], float(d.get("times_down", 0)))
        up.add_metric([peer], 1.0 if d.get("state") == "up" else 0.0)
    yield c
    yield up
    g = GaugeMetricFamily(PREFIX + "unreachable_peers", "super-peers the last calls could not reach")
    g.add_metric([], float(len(unreachable)))
    yield g


class Metrics:
    """A super-peer's metrics: its registry, the histograms measured as things happen, and the
    HTTP server that serves them (a part of the node: ``start``/``stop``)."""

    def __init__(self, peer: str, status: Callable[[], dict], port: int | None = None,
                 host: str = "127.0.0.1") -> None:
        self.port, self.host = port, host
        self.registry = CollectorRegistry()
        self.registration = Histogram(PREFIX + "registration_seconds", "time to register a subscription here, "
                                      "from its query to its installed plan", buckets=REGISTRATION_BUCKETS,
                                      registry=self.registry)
        self.registration_step = Histogram(PREFIX + "registration_step_seconds", "time a registration here spent "
                                           "in each step: " + ", ".join(STEPS),
                                           ["step"], buckets=REGISTRATION_BUCKETS, registry=self.registry)
        self.executor_batch = Histogram(PREFIX + "executor_batch_seconds", "time the executor takes over one "
                                        "batch of a stream (every operator on it)", buckets=BATCH_BUCKETS,
                                        registry=self.registry)
        self.registry.register(StatusCollector(peer, status))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._server = None

    def registration_steps(self, ms: dict[str, float]) -> None:
        """One registration's steps (``SubscriptionRecord.registration_ms``; none while it waits)."""
        for step in STEPS:
            if step in ms:
                self.registration_step.labels(step).observe(ms[step] / 1000)

    def start(self) -> None:
        if self.port is None:
            return
        self._server, _ = start_http_server(self.port, self.host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", self.host, self._server.server_port)

    @property
    def address(self) -> str | None:
        return None if self._server is None else f"{self.host}:{self._server.server_port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
