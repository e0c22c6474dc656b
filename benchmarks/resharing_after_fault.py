"""Bytes on the backbone per published photon around a fault, with and without re-optimisation
(issue 31), in the same run.

The paper example as daemon processes, photons at SP4 (600/s), q1 at SP1 and q2 at SP7 sharing
q1's stream at SP5. SP5 is killed (``kill -9``): both are planned around it on private copies of
the raw stream; it is started again. Backbone bytes per photon are sampled every two seconds
before, during and after, for a network that re-optimises and one that does not.

    python benchmarks/resharing_after_fault.py [--after 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import up
from thinpeer.ops.topologies import shipped_topology

HEARTBEATS = ("--heartbeat-s", "0.5", "--heartbeat-misses", "3")
REOPTIMISE = ("--reoptimise-every", "1s", "--reoptimise-cooldown", "2s")
RATE = 600


def sample(address: dict[str, str]) -> tuple[dict[str, int], int]:
    """Bytes sent so far on every link (of the peers that answer), and photons accepted."""
    links: dict[str, int] = {}
    for a in address.values():
        try:
            status = SuperPeerClient(a).status()
        except Exception:  # noqa: BLE001 - a killed peer sends nothing
            continue
        links.update((name, c["bytes"]) for name, c in status["links"].items())
    accepted = SuperPeerClient(address["SP4"]).status()["streams_registered_here"]["photons"]["accepted"]
    return links, accepted


def per_photon(address: dict[str, str], seconds: float = 2.0) -> float:
    (a, n), _ = sample(address), time.sleep(seconds)
    b, m = sample(address)
    sent = sum(v - a.get(k, 0) if v >= a.get(k, 0) else v for k, v in b.items())
    return sent / max(m - n, 1)


def run(label: str, serve: tuple[str, ...], after_s: float, root: Path) -> dict:
    path = with_free_ports(shipped_topology("paper-example"), root / f"{label}.toml")
    network = up(path, state_dir=root / label, serve_args=(*HEARTBEATS, *serve))
    stop = threading.Event()
    try:
        address = network.addresses
        publisher = SuperPeerClient(address["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=RATE)
        photons = [p.to_xml() for p in generate(int(RATE * (after_s + 60)), seed=3)]
        publisher.publish("photons", photons[:200], position=0)
        time.sleep(1.0)
        for name, peer in (("q1", "SP1"), ("q2", "SP7")):
            SuperPeerClient(address[peer]).subscribe(example_query(name))

        def publish() -> None:
            at = 200
            while not stop.is_set() and at < len(photons):
                publisher.publish("photons", photons[at:at + 300], rate=RATE, position=at, retry_s=60)
                at += 300
        threading.Thread(target=publish, daemon=True).start()
        time.sleep(3.0)
        before = per_photon(address)
        network.kill("SP5")
        time.sleep(3.0)
        during = per_photon(address)
        network.start("SP5")
        after = []
        started = time.monotonic()
        while time.monotonic() - started < after_s:
            after.append(round(per_photon(address), 1))
        print(f"{label:>12}: before {before:7.1f}  during {during:7.1f}  after restart (every 2 s) {after}",
              flush=True)
        return {"before": round(before, 1), "during": round(during, 1), "after": after,
                "last_half_mean": round(sum(after[len(after) // 2:]) / max(len(after[len(after) // 2:]), 1), 1)}
    finally:
        stop.set()
        network.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=float, default=20.0, help="seconds sampled after the restart")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {"reoptimising": run("reoptimising", REOPTIMISE, args.after, Path(tmp)),
                   "frozen": run("frozen", ("--no-reoptimise",), args.after, Path(tmp))}
    for label, r in results.items():
        print(f"{label:>12}: after the restart (second half) {r['last_half_mean']:.1f} bytes/photon = "
              f"{r['last_half_mean'] / r['before']:.2f}x the state before the fault")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "resharing_after_fault.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
