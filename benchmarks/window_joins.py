"""Window joins (issue 36) against the nested loop, in the same run: a subscription's runtime
(the subscriber's post-processing, real evaluator and feeds) joining photons with alerts on a
band of event time and an equality of sources. The band join streams: each photon is answered
once the alerts have passed its band, and the alerts kept are those of the band. The nested
loop (the same query with its band not used, as before window joins) reads every alert for
every photon and answers only at the end of the alert stream.

Prints photons/s per mode, the results there are before either stream ends, and the most
alerts kept (the band join fed in lockstep with its evaluation; the nested loop keeps them all). Medians over rounds, modes alternating.

Run: python benchmarks/window_joins.py [--photons 5000] [--alerts 500] [--rounds 3] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from local_network import alternating, write_report

from sharing.analysis import analyze
from superpeer.subscriptions import runtime as runtime_module
from superpeer.subscriptions.runtime import SubscriptionRuntime
from wxquery.stream_document import StreamDocument

BATCH = 500
SOURCES = ["ivo://nasa.gsfc.gcn/SWIFT", "ivo://nasa.gsfc.gcn/Fermi", "ivo://gaia.cam.uk"]
QUERY = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
         'where $a/t >= $p/t - 2 and $a/t <= $p/t + 1 and $a/author = $p/src '
         'return <m>{ $p/en }{ $a/ivorn }</m> }</r>')


def streams(photons: int, alerts: int, seed: int = 1) -> tuple[list, list]:
    rng = random.Random(seed)
    span = photons * 0.01
    p = [f"<photon><t>{k * 0.01:.2f}</t><src>{rng.choice(SOURCES)}</src><en>{rng.uniform(0.1, 9):.3f}</en></photon>"
         for k in range(photons)]
    a = [f"<alert><ivorn>ivo://x#{k}</ivorn><t>{k * span / alerts:.2f}</t><author>{rng.choice(SOURCES)}</author></alert>"
         for k in range(alerts)]
    parse = StreamDocument.from_text
    return (list(parse("<photons>" + "".join(p) + "</photons>").items("photons", "photon")),
            list(parse("<alerts>" + "".join(a) + "</alerts>").items("alerts", "alert")))


def run(mode: str, photons: list, alerts: list) -> dict:
    bands = runtime_module.join_bands
    if mode != "band":
        runtime_module.join_bands = lambda checked: []  # (the nested loop: the band not used)
    try:
        runtime = SubscriptionRuntime("bench", analyze(QUERY), retention=10_000_000)
    finally:
        runtime_module.join_bands = bands
    kept = 0
    started = time.perf_counter()
    runtime.start()
    ratio = max(1, len(photons) // max(1, len(alerts)))
    j = 0
    for k in range(0, len(photons), BATCH):  # (in time order: alerts up to the photons' time)
        upto = min(len(alerts), (k + BATCH) // ratio + 1)
        runtime.feed("a", alerts[j:upto], False)
        j = upto
        runtime.feed("p", photons[k:k + BATCH], False)
        if mode == "band":  # (lockstep: what is kept once the evaluation has caught up)
            while len(runtime.feeds["p"]._items) and runtime.thread.is_alive():
                time.sleep(0.0005)
            kept = max(kept, len(runtime.feeds["a"]))
    runtime.feed("a", alerts[j:upto], False)
    held, still = -1, 0  # (the results there are before either stream ends: until none come for 0.5 s)
    while still < 50:
        now = runtime.buffer.base + len(runtime.buffer.items)
        still = still + 1 if now == held else 0
        held = now
        time.sleep(0.01)
    open_for = time.perf_counter() - started
    runtime.feed("a", [], True)
    runtime.feed("p", [], True)
    runtime.thread.join()
    elapsed = time.perf_counter() - started - 0.5  # (the quiet half second waited above)
    if mode != "band":
        kept = len(alerts)
    results = runtime.buffer.base + len(runtime.buffer.items)
    return {"seconds": elapsed, "photons_per_s": len(photons) / elapsed, "results": results,
            "results_before_end": held, "open_s": open_for, "most_alerts_kept": kept}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photons", type=int, default=5000)
    parser.add_argument("--alerts", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    photons, alerts = streams(args.photons, args.alerts)
    runs: dict[str, list[dict]] = {"band": [], "nested loop": []}
    for k, mode in alternating(args.rounds, list(runs)):
        runs[mode].append(run(mode, photons, alerts))
        r = runs[mode][-1]
        print(f"round {k + 1} {mode:12} {r['seconds']:7.2f} s  {r['photons_per_s']:9.0f} photons/s  "
              f"{r['results']} results, {r['results_before_end']} before the streams ended  "
              f"alerts kept {r['most_alerts_kept']}")
    summary = {}
    for mode, rs in runs.items():
        summary[mode] = {"photons_per_s": statistics.median(r["photons_per_s"] for r in rs),
                         "results": rs[0]["results"],
                         "results_before_end": min(r["results_before_end"] for r in rs),
                         "most_alerts_kept": max(r["most_alerts_kept"] for r in rs)}
    if len({s["results"] for s in summary.values()}) != 1:
        print("the two modes gave different numbers of results", summary, file=sys.stderr)
        return 1
    print()
    print(f"{'mode':12} {'photons/s':>10} {'results':>8} {'before end':>11} {'alerts kept':>12}")
    for mode, s in summary.items():
        print(f"{mode:12} {s['photons_per_s']:10.0f} {s['results']:8} {s['results_before_end']:11} "
              f"{s['most_alerts_kept']:12}")
    write_report("window_joins", {"photons": args.photons, "alerts": args.alerts, "rounds": args.rounds,
                                  "batch": BATCH, "summary": summary, "runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
