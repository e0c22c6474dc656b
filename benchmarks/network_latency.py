"""End-to-end latency publish → subscriber over SP4→SP5→SP1 (inline executor).

Run: python benchmarks/network_latency.py [--batches 300] [--out FILE.json]

Query 1 is registered at SP1 (its operators run at SP4, its stream goes SP4→SP5→SP1). Every
10 ms a small batch of photons that all pass Query 1 is published at SP4, stamped in its
det_time with the send time; the subscriber long-polls its results and measures, per item, the
time from the Publish call to the item's arrival.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

from local_network import local_network, percentile, write_report

from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient


def photon(t: float, k: int) -> str:
    return (f"<photon><coord><cel><ra>130.{k % 90:02d}</ra><dec>-45.5</dec></cel><det><dx>1</dx>"
            f"<dy>1</dy></det></coord><phc>100</phc><en>1.5</en><det_time>{t:.6f}</det_time></photon>")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--per-batch", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    q1 = example_query("q1")
    latencies: list[float] = []
    with local_network() as network:
        a = network.addresses
        source = SuperPeerClient(a["SP4"])
        source.register_stream("photons", "photons", "photon", rate=500)
        source.publish("photons", [photon(0.0, k) for k in range(200)])
        time.sleep(1.2)
        subscriber = SuperPeerClient(a["SP1"])
        reply = subscriber.subscribe(q1)
        sent: dict[str, float] = {}

        def publish() -> None:
            for b in range(args.batches):
                stamp = 1000.0 + b
                batch = [photon(stamp, k) for k in range(args.per_batch)]
                sent[f"{stamp:.6f}"] = time.perf_counter()
                source.publish("photons", batch)
                time.sleep(0.01)
            source.close_stream("photons")

        threading.Thread(target=publish, daemon=True).start()
        for _, item, _ in subscriber.results(reply.subscription, idle_timeout=30):
            now = time.perf_counter()
            stamp = item.split("<det_time>")[1].split("<")[0]
            if stamp in sent:
                latencies.append((now - sent[stamp]) * 1000)
    report = {"benchmark": "end-to-end latency publish→subscriber, SP4→SP5→SP1, inline executor",
              "items": len(latencies), "p50_ms": round(statistics.median(latencies), 2),
              "p99_ms": round(percentile(latencies, 0.99), 2), "max_ms": round(max(latencies), 2)}
    print(f"publish→subscriber over SP4→SP5→SP1: p50 {report['p50_ms']} ms, p99 {report['p99_ms']} ms "
          f"({len(latencies)} items)")
    write_report("network_latency", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
