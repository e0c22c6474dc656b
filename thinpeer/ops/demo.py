"""``streamglobe demo``: the paper's example network, live on this machine.

Brings up SP0–SP7 (one process each, free loopback ports), publishes generated photons at SP4,
registers Queries 1–4 at SP1, SP7, SP0 and SP6, prints the plan the network chose for each and a
few results, and compares the traffic per link under stream sharing with what data shipping would
have sent (the whole stream to every subscriber). Stops everything when done.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import ThinPeerError
from thinpeer.ops.processes import NetworkError, up
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

# The shipped example queries and where the paper registers them; topology and queries are
# package data, so the demo runs the same from an installed package in any directory.
QUERIES = [("q1", "SP1"), ("q2", "SP7"), ("q3", "SP0"), ("q4", "SP6")]


def _say(message: str) -> None:
    print(message, flush=True)


def run_demo(photons: int = 6000, executor: str = "inline", spark: dict | None = None,
             secure: bool = True, ui_port: int | None = None, serve_args: tuple[str, ...] = ()) -> int:
    """``ui_port``: serve the web view there too, and keep the network up for it after the
    demo's queries are done, until Ctrl-C; ``serve_args``: more ``superpeer serve`` options
    for every daemon (the re-optimisation flags the user gave)."""
    with tempfile.TemporaryDirectory(prefix="streamglobe-demo-") as tmp:
        topology_file = with_free_ports(shipped_topology("paper-example"),
                                        Path(tmp) / "paper-example.toml")
        _say("Starting the paper's example network (SP0–SP7)…")
        try:
            network = up(topology_file, executor, Path(tmp) / "state", spark=spark, secure=secure,
                         serve_args=serve_args)
        except NetworkError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        view = None
        try:
            if ui_port:
                from thinpeer.cli.ui import start_in_background

                view = start_in_background(network.addresses["SP1"], network.credentials, ui_port)
            code = _run(network, photons, idle_timeout=30 if executor == "inline" else 180)
            if view is not None:
                _say(f"\nThe network stays up for the web view at {view.url}; Ctrl-C ends the demo.")
                threading.Event().wait()
            return code
        except ThinPeerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            if view is not None:
                view.stop()
            network.stop()
            _say("Network stopped.")


def _run(network, photons: int, idle_timeout: float) -> int:
    address = network.addresses
    for peer, a in address.items():
        _say(f"  {peer} at {a}")
    items = [p.to_xml() for p in generate(photons, seed=42)]
    warmup, rest = items[: min(500, len(items) // 4)], items[min(500, len(items) // 4):]
    _say("  (TLS between everyone, mutual between super-peers; the demo's user holds an admin token)"
         if network.credentials.secure else "  (INSECURE: plaintext, no tokens)")
    publisher = network.client("SP4")
    publisher.register_stream("photons", "photons", "photon", rate=1000)
    publisher.publish("photons", warmup)
    time.sleep(1.2)  # one heartbeat round: every super-peer learns the stream
    subs = {}
    for name, peer in QUERIES:
        client = network.client(peer)
        reply = client.subscribe(example_query(name))
        subs[name] = (client, reply.subscription)
        _say(f"\nQuery {name[1:]} registered at {peer}: subscription {reply.subscription}")
        for line in reply.description.splitlines()[1:]:
            _say("  " + line.strip())
    _say(f"\nPublishing {len(rest)} photons at SP4…")
    done = threading.Event()
    failed: list[ThinPeerError] = []

    def publish() -> None:
        try:
            publisher.publish("photons", rest, rate=3000)
            publisher.close_stream("photons")
        except ThinPeerError as exc:  # reported by the main thread (or moot: the demo is stopping)
            failed.append(exc)
        done.set()

    threading.Thread(target=publish, daemon=True).start()
    counts = {}
    for name, (client, sid) in subs.items():
        results = [item for _, item, _ in client.results(sid, idle_timeout=idle_timeout)]
        counts[name] = len(results)
        _say(f"\nQuery {name[1:]}: {len(results)} results, e.g.")
        for item in results[:3]:
            _say(f"  {item}")
    done.wait(idle_timeout)
    if failed:
        raise failed[0]
    _traffic(network, len(warmup) + len(rest), sum(len(x.encode()) for x in rest))
    return 0


def _traffic(network, published: int, stream_bytes: int) -> None:
    backbone = network.topology.backbone
    sharing: dict[frozenset, int] = {}
    for peer in network.addresses:
        for name, counters in network.client(peer).status()["links"].items():
            src, dst = name.split("->")
            key = frozenset((src, dst))
            sharing[key] = sharing.get(key, 0) + counters["bytes"]
    shipping: dict[frozenset, int] = {}
    for _, peer in QUERIES:
        route = backbone.route("SP4", peer)
        for x, y in zip(route, route[1:]):
            shipping[frozenset((x, y))] = shipping.get(frozenset((x, y)), 0) + stream_bytes
    _say("\nTraffic per link (bytes) — stream sharing (measured) vs data shipping (whole stream "
         "to every subscriber):")
    _say(f"  {'link':10s} {'sharing':>12s} {'data shipping':>14s}")
    for key in sorted(set(sharing) | set(shipping), key=lambda k: sorted(k)):
        _say(f"  {'–'.join(sorted(key)):10s} {sharing.get(key, 0):>12,} {shipping.get(key, 0):>14,}")
    _say(f"  {'total':10s} {sum(sharing.values()):>12,} {sum(shipping.values()):>14,}")
