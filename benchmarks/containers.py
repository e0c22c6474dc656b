"""The paper-example network in containers next to the same network on loopback, in one run:
registration latency, end-to-end latency, forwarding throughput, and shaped link rates.

Run: python benchmarks/containers.py [--photons 50000] [--rates 10mbit,50mbit,100mbit] [--out FILE]

Each measurement gets a fresh network (loopback processes from ``network up``; containers from
``deploy up``, inline executor), because each registers its own ``photons`` stream. The link
rates are TCP transfers SP4→SP5 after ``deploy bandwidth`` set the link to each rate: measured
next to configured. Needs a Docker engine and docker-compose; the images are built if missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from local_network import local_network, write_report
from network_measures import forwarding, latency, registration

from streamglobe.units import parse_bitrate
from thinpeer.ops.containers.compose import Deployment
from thinpeer.ops.containers.measure import link_rate

CLI = [sys.executable, "-m", "thinpeer.cli"]
PROJECT = "sgbench"


@contextmanager
def container_network(state: Path):
    up = subprocess.run([*CLI, "deploy", "up", "--topology", "paper-example", "--project", PROJECT,
                         "--state-dir", str(state)], capture_output=True, text=True)
    try:
        if up.returncode != 0:
            raise SystemExit(f"deploy up failed:\n{up.stderr}")
        yield json.loads(up.stdout), Deployment.load(state / PROJECT)
    finally:
        subprocess.run([*CLI, "deploy", "down", "--project", PROJECT, "--state-dir", str(state)],
                       capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=50_000, help="photons for the forwarding run")
    parser.add_argument("--batches", type=int, default=200, help="latency: batches of 5 photons")
    parser.add_argument("--rates", default="10mbit,50mbit,100mbit")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    measures = {"registration": registration,
                "latency": lambda a: latency(a, args.batches),
                "forwarding": lambda a: forwarding(a, args.photons)}
    report: dict = {"benchmark": "paper-example in containers vs loopback (inline executor)",
                    "loopback": {}, "containers": {}, "links": []}
    with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmp:
        for name, measure in measures.items():
            with local_network() as network:
                report["loopback"][name] = measure(network.addresses)
            with container_network(Path(tmp)) as (addresses, _):
                report["containers"][name] = measure(addresses)
            print(f"{name:13s} loopback {report['loopback'][name]}\n{'':13s} containers "
                  f"{report['containers'][name]}", flush=True)
        with container_network(Path(tmp)) as (_, deployment):
            for rate in args.rates.split(","):
                subprocess.run([*CLI, "deploy", "bandwidth", "SP4", "SP5", rate, "--project", PROJECT,
                                "--state-dir", tmp], check=True, capture_output=True)
                measured = link_rate(Deployment.load(Path(tmp) / PROJECT), "SP4", "SP5", seconds=4)
                measured["configured_bit_s"] = parse_bitrate(rate)
                measured["ratio"] = round(measured["measured_bit_s"] / measured["configured_bit_s"], 3)
                report["links"].append(measured)
                print(f"link SP4->SP5 configured {parse_bitrate(rate) / 1e6:8.1f} Mbit/s, measured "
                      f"{measured['measured_bit_s'] / 1e6:8.1f} Mbit/s ({measured['ratio']:.0%})", flush=True)
    write_report("containers", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
