"""What holding items for replay costs: a link's send buffer while its far end is silent, and the
origin's log on disk.

Run: python benchmarks/replay_buffer.py [--rate 1000] [--pause-s 5] [--photons 20000] [--out FILE]

The paper example as processes on loopback (``network up``, inline executor, a state directory
per peer). Photons are published at SP4 at ``--rate`` items/s with Query 1 at SP1 and Query 2 at
SP7 (both routed through SP5); SP5 is paused (SIGSTOP) for ``--pause-s`` seconds and resumed.
Sampled every 50 ms from SP4's ``status``: the items and bytes its link to SP5 holds (queued and
not yet acknowledged: the link's replay buffer), and its peak. At the end: the bytes SP4's state
directory takes per published item (the stream's log, which re-planned subscriptions replay).
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time
from pathlib import Path

from local_network import write_report

from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import up
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--pause-s", type=float, default=5.0)
    parser.add_argument("--photons", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="streamglobe-bench-") as tmp:
        path = with_free_ports(shipped_topology("paper-example"), Path(tmp) / "paper-example.toml")
        network = up(path, state_dir=Path(tmp) / "state")
        try:
            address = network.addresses
            sp4 = SuperPeerClient(address["SP4"])
            sp4.register_stream("photons", "photons", "photon", rate=args.rate)
            photons = [p.to_xml() for p in generate(args.photons, seed=17)]
            item_bytes = sum(len(x.encode()) for x in photons) / len(photons)
            sp4.publish("photons", photons[:200], position=0)
            time.sleep(2)
            for q, peer in (("q1", "SP1"), ("q2", "SP7")):
                SuperPeerClient(address[peer]).subscribe(example_query(q))
            done = threading.Event()

            def publish() -> None:
                SuperPeerClient(address["SP4"]).publish("photons", photons[200:], rate=args.rate,
                                                        position=200, retry_s=60)
                done.set()

            threading.Thread(target=publish, daemon=True).start()
            time.sleep(2)
            samples = []
            sp5 = network.processes["SP5"]
            paused = time.monotonic()
            sp5.send_signal(signal.SIGSTOP)
            resumed = None
            while not done.is_set() or (samples and samples[-1]["items"]):
                now = time.monotonic()
                if resumed is None and now - paused >= args.pause_s:
                    sp5.send_signal(signal.SIGCONT)
                    resumed = now
                link = sp4.status()["links"].get("SP4->SP5", {})
                samples.append({"t": round(now - paused, 3), "items": link.get("held_items", 0),
                                "bytes": link.get("held_bytes", 0)})
                time.sleep(0.05)
                if now - paused > args.pause_s + 120:
                    break
            if resumed is None:
                sp5.send_signal(signal.SIGCONT)
            final = sp4.status()
            state_bytes = sum(f.stat().st_size for f in (Path(tmp) / "state" / "SP4").rglob("*") if f.is_file())
            logged = final["streams_registered_here"]["photons"]["logged"]
        finally:
            network.stop()
    peak = max(samples, key=lambda s: s["bytes"])
    report = {"benchmark": "replay buffer of a link whose far end is paused, and the origin's log",
              "rate": args.rate, "pause_s": args.pause_s, "avg_item_bytes": round(item_bytes, 1),
              "peak_held_items": peak["items"], "peak_held_bytes": peak["bytes"],
              "peak_at_s": peak["t"], "expected_bytes_if_all_held": round(args.rate * args.pause_s * item_bytes),
              "log_items": logged, "state_dir_bytes": state_bytes,
              "state_bytes_per_item": round(state_bytes / max(logged, 1), 1), "samples": samples}
    print(f"link SP4->SP5 held at most {peak['items']:,} items / {peak['bytes'] / 1e6:.2f} MB "
          f"(at {peak['t']:.1f} s of a {args.pause_s:.0f} s pause at {args.rate:.0f} items/s of "
          f"{item_bytes:.0f} B: {report['expected_bytes_if_all_held'] / 1e6:.2f} MB if every item were held)")
    print(f"SP4's state directory: {state_bytes / 1e6:.2f} MB for {logged:,} logged items, "
          f"{report['state_bytes_per_item']} B per item")
    write_report("replay_buffer", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
