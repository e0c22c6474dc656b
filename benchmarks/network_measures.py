"""The network measurements, on any running paper-example network given by its addresses: a local
one on loopback (``local_network``) or one in containers (``benchmarks/containers.py``).

Each function starts from a fresh network (it registers the ``photons`` stream at SP4) and
returns its figures as a dict.
"""

from __future__ import annotations

import statistics
import threading
import time

import grpc
from local_network import percentile

from photons.generator import generate
from sharing.scenarios import example_query, paper_example
from thinpeer.client import SuperPeerClient

WHOLE = '<all>{ for $p in stream("photons")/photons/photon return $p }</all>'


def registration(address: dict[str, str], connected: bool = False) -> dict:
    """Each Subscribe call of the 25-query paper-example workload, end to end. ``connected``:
    over a client connected to its super-peer beforehand (as a program using the client
    library keeps one), else a new client per call, its connection set up in the time."""
    source = SuperPeerClient(address["SP4"])
    source.register_stream("photons", "photons", "photon", rate=150)
    source.publish("photons", [p.to_xml() for p in generate(1000, 1)])
    watch = {peer: SuperPeerClient(at) for peer, at in address.items()}  # (each daemon's own CPU time)

    def network_cpu() -> tuple[float, float, dict[str, dict]]:  # (when, their CPU seconds, their status)
        statuses = {peer: c.status() for peer, c in watch.items()}
        return time.perf_counter(), sum(s["process_cpu_seconds"] for s in statuses.values()), statuses
    idle_from = network_cpu()
    time.sleep(1.2)  # one heartbeat: every peer has the stream's statistics
    idle_to = network_cpu()
    times = []
    clients: dict[str, SuperPeerClient] = {}
    if connected:
        for peer, at in address.items():
            clients[peer] = SuperPeerClient(at)
            grpc.channel_ready_future(clients[peer].channel).result(timeout=30)
    cpu_from = network_cpu()
    registered: dict[str, list[str]] = {}
    for q in paper_example(1).queries:
        client = clients.get(q.peer) or SuperPeerClient(address[q.peer])
        start = time.perf_counter()
        sid = client.subscribe(q.text).subscription
        times.append((time.perf_counter() - start) * 1000)
        registered.setdefault(q.peer, []).append(sid)
        if not connected:
            client.close()
    cpu_to = network_cpu()
    for client in [*clients.values(), *watch.values()]:
        client.close()
    source.close_stream("photons")
    # the super-peers' CPU time per registration, what they spend idle meanwhile (heartbeats) left out:
    # on a machine of few cores, registrations one after the other take at least this over the cores
    idle_rate = (idle_to[1] - idle_from[1]) / (idle_to[0] - idle_from[0])
    cpu_ms = 1000 * ((cpu_to[1] - cpu_from[1]) - idle_rate * (cpu_to[0] - cpu_from[0])) / len(times)
    return {"queries": len(times), "median_ms": round(statistics.median(times), 2),
            "p99_ms": round(percentile(times, 0.99), 2), "avg_ms": round(statistics.fmean(times), 2),
            "min_ms": round(min(times), 2), "max_ms": round(max(times), 2),
            "times_ms": [round(t, 3) for t in times], "steps_ms": registration_steps(cpu_to[2], registered),
            "network_cpu_ms_per_registration": round(cpu_ms, 2), "network_idle_cpu_percent": round(100 * idle_rate, 1)}


def registration_steps(statuses: dict[str, dict], registered: dict[str, list[str]]) -> list[dict[str, float]]:
    """Each registration's steps as its super-peer timed them (``status`` → ``registration_ms``;
    a daemon that does not say them, an older one, gives none)."""
    steps = []
    for peer, sids in registered.items():
        subscriptions = statuses[peer].get("subscriptions", {})
        steps += [subscriptions[sid]["registration_ms"] for sid in sids
                  if subscriptions.get(sid, {}).get("registration_ms")]
    return steps


def _stamped_photon(t: float, k: int) -> str:
    return (f"<photon><coord><cel><ra>130.{k % 90:02d}</ra><dec>-45.5</dec></cel><det><dx>1</dx>"
            f"<dy>1</dy></det></coord><phc>100</phc><en>1.5</en><det_time>{t:.6f}</det_time></photon>")


def latency(address: dict[str, str], batches: int = 300, per_batch: int = 5) -> dict:
    """Publish at SP4 → Query 1's subscriber at SP1 (SP4→SP5→SP1), per item."""
    source = SuperPeerClient(address["SP4"])
    source.register_stream("photons", "photons", "photon", rate=500)
    source.publish("photons", [_stamped_photon(0.0, k) for k in range(200)])
    time.sleep(1.2)
    subscriber = SuperPeerClient(address["SP1"])
    reply = subscriber.subscribe(example_query("q1"))
    sent: dict[str, float] = {}

    def publish() -> None:
        for b in range(batches):
            stamp = 1000.0 + b
            batch = [_stamped_photon(stamp, k) for k in range(per_batch)]
            sent[f"{stamp:.6f}"] = time.perf_counter()
            source.publish("photons", batch)
            time.sleep(0.01)
        source.close_stream("photons")

    threading.Thread(target=publish, daemon=True).start()
    latencies: list[float] = []
    for _, item, _ in subscriber.results(reply.subscription, idle_timeout=30):
        now = time.perf_counter()
        stamp = item.split("<det_time>")[1].split("<")[0]
        if stamp in sent:
            latencies.append((now - sent[stamp]) * 1000)
    return {"items": len(latencies), "p50_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(percentile(latencies, 0.99), 2), "max_ms": round(max(latencies), 2),
            "latencies_ms": [round(x, 3) for x in latencies]}


PIPELINE = ("SP4", "SP5", "SP1", "SP7")  # (the publishing peer, the forwarding one, the subscribers')


def forwarding(address: dict[str, str], photons: int) -> dict:
    """SP5 receives every photon once and sends it twice (to SP1 and SP7), without parsing it."""
    items = [p.to_xml() for p in generate(photons, 3)]
    source = SuperPeerClient(address["SP4"])
    # declared rate: admission sees a modest stream; the publisher then sends as fast as it can
    source.register_stream("photons", "photons", "photon", rate=1000)
    source.publish("photons", items[:200])
    time.sleep(1.2)
    for peer in ("SP1", "SP7"):
        SuperPeerClient(address[peer]).subscribe(WHOLE)
    sp5 = SuperPeerClient(address["SP5"])
    # SP5's CPU without items, polled as below (heartbeats, status): taken off its forwarding cost
    idle_start, idle_cpu = time.perf_counter(), sp5.status()["process_cpu_seconds"]
    while time.perf_counter() - idle_start < 2.0:
        sp5.status()
        time.sleep(0.05)
    cpu_before = sp5.status()["process_cpu_seconds"]
    idle_per_s = (cpu_before - idle_cpu) / (time.perf_counter() - idle_start)
    pipeline = {p: SuperPeerClient(address[p]) for p in PIPELINE}
    peers_before = {p: c.status()["process_cpu_seconds"] for p, c in pipeline.items()}
    publisher_cpu = [0.0]

    def publish() -> None:
        started = time.thread_time()
        source.publish("photons", items[200:])
        publisher_cpu[0] = time.thread_time() - started

    publisher = threading.Thread(target=publish, daemon=True)
    start = time.perf_counter()
    publisher.start()
    target = len(items) - 200
    while True:
        links = sp5.status()["links"]
        done = [links.get(f"SP5->{p}", {}).get("items", 0) for p in ("SP1", "SP7")]
        now = time.perf_counter()
        if min(done) >= target:
            break
        if now - start > 600:
            raise SystemExit("forwarding did not finish in 10 minutes")
        time.sleep(0.05)
    elapsed = now - start
    cpu = sp5.status()["process_cpu_seconds"] - cpu_before
    busy = cpu - idle_per_s * elapsed
    publisher.join()
    time.sleep(0.5)  # (the subscribers' last results)
    us = {p: round(1e6 * (c.status()["process_cpu_seconds"] - peers_before[p]) / target, 2) for p, c in pipeline.items()}
    us["publisher"] = round(1e6 * publisher_cpu[0] / target, 2)
    rate = target / elapsed
    return {"photons": target, "seconds": round(elapsed, 2), "photons_per_s_through_sp5": round(rate),
            "items_sent_per_s_by_sp5": round(2 * rate), "publish_seconds": round(time.perf_counter() - start, 2),
            "sp5_cpu_seconds": round(cpu, 3),
            "sp5_photons_per_cpu_second": round(target / cpu) if cpu > 0 else None,
            "sp5_idle_cpu_per_s": round(idle_per_s, 3),
            "sp5_photons_per_forwarding_cpu_second": round(target / busy) if busy > 0 else None,
            "cpu_us_per_photon": us}
