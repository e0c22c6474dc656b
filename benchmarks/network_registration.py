"""Registration latency through gRPC for the 25-query paper-example workload.

Run: python benchmarks/network_registration.py [--out FILE.json]

Starts SP0–SP7 as processes, registers the photon stream at SP4 (with 1,000 photons for
statistics), then registers the simulator's paper-example workload (Queries 1–4 plus 21 template
queries, each at its super-peer) one after the other, timing each Subscribe call end to end:
planning over the peers' tables via gRPC, two-phase reservation and commit on every peer.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from local_network import local_network, percentile, write_report

from photons.generator import generate
from sharing.scenarios import paper_example
from thinpeer.client import SuperPeerClient


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scenario = paper_example(1)
    with local_network() as network:
        address = network.addresses
        source = SuperPeerClient(address["SP4"])
        source.register_stream("photons", "photons", "photon", rate=150)
        source.publish("photons", [p.to_xml() for p in generate(1000, 1)])
        time.sleep(1.2)
        times = []
        for q in scenario.queries:
            client = SuperPeerClient(address[q.peer])
            start = time.perf_counter()
            client.subscribe(q.text)
            times.append((time.perf_counter() - start) * 1000)
            client.close()
        source.close_stream("photons")
    report = {"benchmark": "registration latency through gRPC", "workload": "paper-example, 25 queries",
              "median_ms": round(statistics.median(times), 2), "p99_ms": round(percentile(times, 0.99), 2),
              "avg_ms": round(statistics.fmean(times), 2), "min_ms": round(min(times), 2),
              "max_ms": round(max(times), 2)}
    print(f"registration through gRPC (25 queries): median {report['median_ms']} ms, p99 "
          f"{report['p99_ms']} ms, avg {report['avg_ms']} ms (paper: 2153 ms average)")
    write_report("network_registration", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
