"""End-to-end latency publish → subscriber over SP4→SP5→SP1 (inline executor).

Run: python benchmarks/network_latency.py [--batches 300] [--rounds 1] [--baseline DIR] [--out FILE.json]

Query 1 is registered at SP1 (its operators run at SP4, its stream goes SP4→SP5→SP1). Every
10 ms a small batch of photons that all pass Query 1 is published at SP4, stamped in its
det_time with the send time; the subscriber long-polls its results and measures, per item, the
time from the Publish call to the item's arrival.

In the same run, the limit it is compared with (``physical_limits``): the round trip of a batch
of the same size through a gRPC echo in another process, times the three calls an item makes
(publish at SP4, SP4→SP5, SP5→SP1; the subscriber's long poll is already waiting).

``--rounds N``: N fresh networks, their items' latencies pooled. ``--baseline DIR``: a checkout
of another revision (``git worktree add DIR REV``) runs the same rounds, alternating with this
one's, and its percentiles are reported beside these.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from local_network import alternating, code_of, local_network, percentile, write_report
from network_measures import latency
from physical_limits import grpc_echo, photons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--per-batch", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1, help="fresh networks per code tree (default 1)")
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    pooled: dict[str, list[float]] = {mode: [] for mode in trees}
    for k, mode in alternating(args.rounds, list(trees)):
        with code_of(trees[mode]), local_network() as network:
            got = latency(network.addresses, args.batches, args.per_batch)
        pooled[mode].extend(got["latencies_ms"])
        print(f"round {k + 1} {mode}: p50 {got['p50_ms']} ms, p99 {got['p99_ms']} ms", flush=True)
    summary = {mode: {"items": len(xs), "p50_ms": round(percentile(xs, 0.5), 2),
                      "p99_ms": round(percentile(xs, 0.99), 2), "max_ms": round(max(xs), 2)}
               for mode, xs in pooled.items()}
    report = {"benchmark": "end-to-end latency publish→subscriber, SP4→SP5→SP1, inline executor",
              "rounds": args.rounds, **summary["this"],
              **({"baseline": summary["baseline"]} if args.baseline else {})}
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
    if args.baseline:
        b = summary["baseline"]
        print(f"baseline, same run: p50 {b['p50_ms']} ms, p99 {b['p99_ms']} ms ({b['items']} items)")
    write_report("network_latency", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
