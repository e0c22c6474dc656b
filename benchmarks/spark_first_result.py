"""Registration → first result on the paper-example network with eight Spark super-peers.

Run: python benchmarks/spark_first_result.py [--modes warm,cold] [--out FILE.json]

Starts SP0–SP7 as processes with ``--executor spark`` (every super-peer its own Spark session,
all on this machine), registers the photon stream at SP4 and publishes photons continuously
(``--rate`` per second). Then registers the paper-example workload (Queries 1–4 and the template
queries, each at its super-peer) one after the other, and for each measures the time from the
Subscribe call until its first result item arrives. ``warm``: Spark starts with each daemon and
the workload is registered once every super-peer reports its executor ready (the time to that
is reported too); ``cold``: ``--spark-cold-start``, each session starts with its first operator
(the behaviour before warm starts); ``inline``: the same network on the inline executor, the floor
(a window aggregate's first result waits for its first window to end in event time, which the
photons' ``det_time`` advances at the publishing rate, whatever the executor). All in one run,
one network after the other; figures per kind of query (per-item: selection and projection).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

from local_network import local_network, percentile, write_report

from photons.generator import generate
from sharing.scenarios import paper_example
from thinpeer.client import SuperPeerClient


def executor_states(address: dict[str, str]) -> dict[str, dict]:
    out = {}
    for peer, addr in address.items():
        client = SuperPeerClient(addr)
        try:
            out[peer] = client.status()["executor_status"]
        finally:
            client.close()
    return out


def first_result(client: SuperPeerClient, subscription: str, deadline: float) -> float | None:
    """Seconds until the subscription's first result (None: none before the deadline)."""
    for _ in client.results(subscription, idle_timeout=max(deadline - time.monotonic(), 1.0)):
        return time.monotonic()
    return None


def measure(mode: str, queries: int, rate: int, timeout: float) -> dict:
    serve_args = () if mode == "inline" else \
        ("--executor", "spark") + (("--spark-cold-start",) if mode == "cold" else ())
    began = time.monotonic()
    with local_network(serve_args=serve_args) as network:
        up_s = time.monotonic() - began
        address = network.addresses
        ready_s = None
        if mode == "warm":
            while time.monotonic() - began < timeout:
                states = executor_states(address)
                if all(s["state"] == "ready" for s in states.values()):
                    ready_s = time.monotonic() - began
                    break
                time.sleep(0.5)
        photons = [p.to_xml() for p in generate(rate * 600, seed=2, rate=float(rate))]
        source = SuperPeerClient(address["SP4"])
        source.register_stream("photons", "photons", "photon", rate=rate)
        source.publish("photons", photons[:rate])
        stop = threading.Event()

        def publish() -> None:
            k = rate
            while not stop.is_set() and k < len(photons):
                source.publish("photons", photons[k:k + rate // 10])
                k += rate // 10
                time.sleep(0.1)

        time.sleep(1.2)  # one heartbeat: every peer has the stream's statistics
        publisher = threading.Thread(target=publish, daemon=True)
        publisher.start()
        firsts: list[dict] = []
        try:
            for q in paper_example(1).queries[:queries]:
                client = SuperPeerClient(address[q.peer])
                start = time.monotonic()
                reply = client.subscribe(q.text)
                registered = time.monotonic() - start
                got = first_result(client, reply.subscription, start + timeout)
                firsts.append({"query": q.id, "peer": q.peer, "kind": q.template,
                               "registration_s": round(registered, 3),
                               "first_result_s": None if got is None else round(got - start, 3)})
                print(f"  {mode} {q.id} at {q.peer}: first result after "
                      f"{firsts[-1]['first_result_s']} s", flush=True)
                client.close()
        finally:
            stop.set()
            publisher.join()
        states = executor_states(address)
    seconds = [f["first_result_s"] for f in firsts if f["first_result_s"] is not None]
    per_item = [f["first_result_s"] for f in firsts
                if f["first_result_s"] is not None and f["kind"] != "aggregation"]
    return {"mode": mode, "network_up_s": round(up_s, 1),
            "all_executors_ready_s": None if ready_s is None else round(ready_s, 1),
            "subscriptions": len(firsts), "without_result": len(firsts) - len(seconds),
            "first_result_p50_s": round(statistics.median(seconds), 2) if seconds else None,
            "first_result_p99_s": round(percentile(seconds, 0.99), 2) if seconds else None,
            "first_result_max_s": round(max(seconds), 2) if seconds else None,
            "per_item_p50_s": round(statistics.median(per_item), 2) if per_item else None,
            "per_item_p99_s": round(percentile(per_item, 0.99), 2) if per_item else None,
            "window_first_results_s": {f["query"]: f["first_result_s"] for f in firsts
                                       if f["kind"] == "aggregation"},
            "failed_batches": sum(s.get("failed_batches", 0) for s in states.values()),
            "start_failures": sum(s.get("start_failures", 0) for s in states.values()),
            "per_query": firsts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="warm,cold,inline")
    parser.add_argument("--queries", type=int, default=12, help="of the paper-example workload, in order")
    parser.add_argument("--rate", type=int, default=500, help="photons/s published meanwhile")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = [measure(mode, args.queries, args.rate, args.timeout) for mode in args.modes.split(",")]
    print(f"\n{'mode':6} {'ready s':>8} {'p50 s':>7} {'p99 s':>7} {'per-item p50':>12} {'per-item p99':>12} "
          f"{'no result':>9} {'failed batches':>14}  windows' first results (s)")
    for r in results:
        print(f"{r['mode']:6} {r['all_executors_ready_s'] or '-':>8} {r['first_result_p50_s'] or '-':>7} "
              f"{r['first_result_p99_s'] or '-':>7} {r['per_item_p50_s'] or '-':>12} {r['per_item_p99_s'] or '-':>12} "
              f"{r['without_result']:>9} {r['failed_batches']:>14}  {r['window_first_results_s']}")
    write_report("spark_first_result", {"benchmark": "registration to first result, Spark paper-example",
                                        "args": vars(args), "results": results}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
