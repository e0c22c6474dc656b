"""Items per second one super-peer forwards and duplicates, on loopback.

Run: python benchmarks/network_forwarding.py [--photons 200000] [--out FILE.json]

Photons are published at SP4; two subscriptions that take the whole stream sit at SP1 and SP7,
so SP5 receives every photon once and sends it twice (SP5→SP1 and SP5→SP7), without parsing it.
The rate is photons per second through SP5, from the first to the last photon on both output links
(SP5's own link counters).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from local_network import local_network, write_report
from network_measures import forwarding


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with local_network() as network:
        report = {"benchmark": "forwarding and duplication at one super-peer", **forwarding(network.addresses, args.photons)}
    rate, cpu, target = report["photons_per_s_through_sp5"], report["sp5_cpu_seconds"], report["photons"]
    print(f"SP5 forwarded and duplicated {target} photons in {report['seconds']:.2f} s: {rate:,} photons/s "
          f"in, {2 * rate:,} items/s out (whole pipeline: publisher, SP4, SP5 and two "
          f"subscribers share this machine's cores)")
    print(f"SP5's own cost: {cpu:.2f} CPU-seconds, i.e. {report['sp5_photons_per_cpu_second']:,} photons/s "
          f"forwarded and duplicated per core")
    write_report("network_forwarding", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
