"""Replay throughput of a stream's retained past (issue 15): photons/s a `--from-start`
subscription receives while its super-peer replays the log (or the Parquet archive, then the
log), against the live rate of the same photons through the same route in the same run.

Run: python benchmarks/history_replay.py [--photons 200000] [--rounds 2] [--out FILE.json]

Photons are published at SP4 with a live subscription at SP1 that takes every photon (the
baseline: publish → SP4 → SP5 → SP1 → results, photons/s from the first batch to the last
result). Then a second subscription at SP1 asks `--from-start`: SP4 replays every photon to it on
a copy of its own. Two modes, alternating: `log` (no history bound: the log holds everything) and
`archive` (`--history 1000 --archive DIR`: all but the last 1,000 photons come from Parquet).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from local_network import alternating, local_network, write_report
from network_measures import WHOLE

from photons.generator import generate
from thinpeer.client import SuperPeerClient


def received(client: SuperPeerClient, sid: str, target: int, started: float, limit_s: float = 900) -> float:
    """Seconds from ``started`` until ``target`` results of ``sid`` were read."""
    count = 0
    for batch in client.result_batches(sid, 0, idle_timeout=limit_s):
        count += len(batch.items)
        if count >= target:
            return time.perf_counter() - started
    raise SystemExit(f"only {count} of {target} results arrived")


def one_round(photons: int, mode: str) -> dict:
    items = [p.to_xml() for p in generate(photons, 7)]
    with tempfile.TemporaryDirectory(prefix="streamglobe-archive-") as tmp:
        args = ("--archive", tmp, "--history", "1000") if mode == "archive" else ()
        with local_network(serve_args=args) as network:
            address = network.addresses
            source, sink = SuperPeerClient(address["SP4"]), SuperPeerClient(address["SP1"])
            source.register_stream("photons", "photons", "photon", rate=1000)
            live = sink.subscribe(WHOLE).subscription
            start = time.perf_counter()
            publisher = threading.Thread(target=lambda: source.publish("photons", items), daemon=True)
            publisher.start()
            live_s = received(sink, live, photons, start)
            publisher.join()
            sink.unsubscribe(live)  # (a running subscription pins the log where it began)
            if mode == "archive":  # wait until the archive has everything and the log only 1,000
                deadline = time.monotonic() + 600
                while True:
                    history = source.status()["streams_registered_here"]["photons"]["history"]
                    if history["retained_from"] >= photons - 1000 or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                retained_from = history["retained_from"]
            else:
                retained_from = 0
            start = time.perf_counter()
            past = sink.subscribe(WHOLE, from_start=True).subscription
            replay_s = received(sink, past, photons, start)
    return {"mode": mode, "photons": photons, "live_seconds": round(live_s, 2),
            "live_photons_per_s": round(photons / live_s), "replay_seconds": round(replay_s, 2),
            "replay_photons_per_s": round(photons / replay_s), "log_retained_from": retained_from}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"log": [], "archive": []}
    for k, mode in alternating(args.rounds, list(runs)):
        r = one_round(args.photons, mode)
        runs[mode].append(r)
        print(f"round {k + 1} {mode:7s}: live {r['live_photons_per_s']:,} photons/s; replay from "
              f"{'archive+log' if mode == 'archive' else 'log'} {r['replay_photons_per_s']:,} photons/s "
              f"(log kept from item {r['log_retained_from']:,})", flush=True)
    median = {mode: {"live": statistics.median(r["live_photons_per_s"] for r in rs),
                     "replay": statistics.median(r["replay_photons_per_s"] for r in rs)} for mode, rs in runs.items()}
    for mode, m in median.items():
        print(f"median {mode:7s}: replay {m['replay']:,.0f} photons/s vs live {m['live']:,.0f} photons/s "
              f"({m['replay'] / m['live']:.2f}x)")
    write_report("history_replay", {"benchmark": "replay of a stream's retained past vs live delivery",
                                    "runs": runs, "median_photons_per_s": median}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
