"""End-to-end latency publish → subscriber over SP4→SP5→SP1 (inline executor).

Run: python benchmarks/network_latency.py [--batches 300] [--out FILE.json]

Query 1 is registered at SP1 (its operators run at SP4, its stream goes SP4→SP5→SP1). Every
10 ms a small batch of photons that all pass Query 1 is published at SP4, stamped in its
det_time with the send time; the subscriber long-polls its results and measures, per item, the
time from the Publish call to the item's arrival.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from local_network import local_network, write_report
from network_measures import latency


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--per-batch", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with local_network() as network:
        report = {"benchmark": "end-to-end latency publish→subscriber, SP4→SP5→SP1, inline executor",
                  **latency(network.addresses, args.batches, args.per_batch)}
    print(f"publish→subscriber over SP4→SP5→SP1: p50 {report['p50_ms']} ms, p99 {report['p99_ms']} ms "
          f"({report['items']} items)")
    write_report("network_latency", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
