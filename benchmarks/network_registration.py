"""Registration latency through gRPC for the 25-query paper-example workload.

Run: python benchmarks/network_registration.py [--out FILE.json]

Starts SP0–SP7 as processes, registers the photon stream at SP4 (with 1,000 photons for
statistics), then registers the simulator's paper-example workload (Queries 1–4 plus 21 template
queries, each at its super-peer) one after the other, timing each Subscribe call end to end:
planning over the peers' tables via gRPC, two-phase reservation and commit on every peer.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from local_network import local_network, write_report
from network_measures import registration


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with local_network() as network:
        report = {"benchmark": "registration latency through gRPC", "workload": "paper-example, 25 queries",
                  **registration(network.addresses)}
    print(f"registration through gRPC (25 queries): median {report['median_ms']} ms, p99 "
          f"{report['p99_ms']} ms, avg {report['avg_ms']} ms (paper: 2153 ms average)")
    write_report("network_registration", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
