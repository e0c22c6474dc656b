"""End-to-end latency publish → subscriber over SP4→SP5→SP1 (inline executor).

Run: python benchmarks/network_latency.py [--batches 300] [--out FILE.json]

Query 1 is registered at SP1 (its operators run at SP4, its stream goes SP4→SP5→SP1). Every
10 ms a small batch of photons that all pass Query 1 is published at SP4, stamped in its
det_time with the send time; the subscriber long-polls its results and measures, per item, the
time from the Publish call to the item's arrival.

In the same run, the limit it is compared with (``physical_limits``): the round trip of a batch
of the same size through a gRPC echo in another process, times the three calls an item makes
(publish at SP4, SP4→SP5, SP5→SP1; the subscriber's long poll is already waiting).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from local_network import local_network, write_report
from network_measures import latency
from physical_limits import grpc_echo, photons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--per-batch", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with local_network() as network:
        report = {"benchmark": "end-to-end latency publish→subscriber, SP4→SP5→SP1, inline executor",
                  **latency(network.addresses, args.batches, args.per_batch)}
    echo = grpc_echo(photons(args.per_batch * 300), args.per_batch)
    hops = {q: round(3 * echo[f"small_batch_rtt_{q}_ms"], 3) for q in ("p50", "p99")}
    report["limit"] = {"grpc_echo": echo, "three_round_trips_ms": hops,
                       "p50_vs_limit": round(report["p50_ms"] / hops["p50"], 1),
                       "p99_vs_limit": round(report["p99_ms"] / hops["p99"], 1)}
    print(f"publish→subscriber over SP4→SP5→SP1: p50 {report['p50_ms']} ms, p99 {report['p99_ms']} ms "
          f"({report['items']} items)")
    print(f"limit, same run: three gRPC echo round trips of a {args.per_batch}-photon batch p50 {hops['p50']} ms, "
          f"p99 {hops['p99']} ms: the network is {report['limit']['p50_vs_limit']}× / "
          f"{report['limit']['p99_vs_limit']}× that")
    write_report("network_latency", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
