"""Joins placed in the network (issue 36, deliverable 4): the backbone bytes of a window join of
photons (at SP4) and rare alerts (at SP3), subscribed at SP1 and at SP7, on the paper's network
of eight super-peer processes — the join placed where its inputs meet and reused by the second
subscriber (``placed``), against the same subscriptions joined each at its own super-peer
(``subscriber``: daemons started with ``--no-network-joins``, as before this change). Both
subscriptions' results are checked equal to the reference evaluator's in both modes.

With ``--keys``, the modes are instead ``keyed`` and ``unkeyed``, both placed in the network:
the join's equality ``$a/author = $p/src`` applied where the join runs (a key: each group keeps
only the alerts of its photon's source), against the same join with that equality written as
a term the network does not apply (``($a/author = $p/src or $p/en < -1)``: the same results,
every alert of the band in each group, the equality tested at the subscribers).

Prints, per mode, the bytes all backbone links carried while the photons were published (from
the daemons' link counters), per photon, and each plan's description.

Run: python benchmarks/joins_in_network.py [--photons 20000] [--rounds 1] [--keys] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from local_network import alternating, local_network, write_report

from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

SOURCES = ["ivo://nasa.gsfc.gcn/SWIFT", "ivo://nasa.gsfc.gcn/Fermi"]
JOIN = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
        'where $a/t >= $p/t - 0.3 and $a/t <= $p/t + 0.1 and $a/author = $p/src and $p/en > 0.5 '
        'return <m>{ $p/en }{ $a/ivorn }</m> }</r>')
# the same join, its equality not a key (inside a term: tested at the subscriber only); en >= 0
UNKEYED = JOIN.replace("$a/author = $p/src", "($a/author = $p/src or $p/en < -1)")
QUERIES = {"placed": JOIN, "subscriber": JOIN, "keyed": JOIN, "unkeyed": UNKEYED}
WARM = 1000  # photons (and the alerts of their time) published before subscribing: the statistics


def streams(n: int, seed: int = 5) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """Photons every 0.1 s with a detector record the join does not read; an alert every 3.7 s."""
    rng = random.Random(seed)
    photons, alerts = [], []
    for k in range(n):
        t = k * 0.1
        photons.append((t, f"<photon><t>{t:.1f}</t><src>{rng.choice(SOURCES)}</src>"
                           f"<en>{rng.uniform(0, 2):.3f}</en><det>{'x' * 200}</det></photon>"))
        if k % 37 == 0:
            alerts.append((t, f"<alert><ivorn>ivo://x#{k}</ivorn><t>{t:.1f}</t>"
                              f"<author>{rng.choice(SOURCES)}</author></alert>"))
    return photons, alerts


def backbone_bytes(network) -> int:
    return sum(c.get("bytes", 0) for peer in network.topology.backbone.peers
               for c in network.client(peer).status().get("links", {}).values())


def reference(photons: list, alerts: list) -> list[str]:
    """The reference evaluator's results over what is published after the warm-up (a nested
    loop over finite documents: the slow part of a run, made once)."""
    cut = photons[WARM][0]
    documents = {"photons": StreamDocument.from_text("<photons>" + "".join(x for _, x in photons[WARM:]) + "</photons>"),
                 "alerts": StreamDocument.from_text("<alerts>" + "".join(x for t, x in alerts if t >= cut) + "</alerts>")}
    return list(evaluate(analyze(JOIN).checked, documents).serialized_items())


def run(mode: str, photons: list, alerts: list, expected: list[str]) -> dict:
    serve = ("--no-network-joins",) if mode == "subscriber" else ()
    with local_network("paper-example", serve_args=serve) as network:
        sp4, sp3 = network.client("SP4"), network.client("SP3")
        sp4.register_stream("photons", "photons", "photon", rate=100)
        sp3.register_stream("alerts", "alerts", "alert", rate=3)
        cut = photons[WARM][0]
        sp4.publish("photons", [x for _, x in photons[:WARM]])
        sp3.publish("alerts", [x for t, x in alerts if t < cut])
        time.sleep(1.0)  # (the warm-up's statistics reach the planners' lookups)
        subs = {peer: network.client(peer).subscribe(QUERIES[mode]) for peer in ("SP1", "SP7")}
        before = backbone_bytes(network)
        started = time.monotonic()
        sp4.publish("photons", [x for _, x in photons[WARM:]])
        sp3.publish("alerts", [x for t, x in alerts if t >= cut])
        sp4.close_stream("photons")
        sp3.close_stream("alerts")
        got = {peer: [item for _, item, _ in network.client(peer).results(s.id, idle_timeout=30)]
               for peer, s in subs.items()}
        seconds = time.monotonic() - started
        time.sleep(0.5)  # (the last acknowledgements counted)
        carried = backbone_bytes(network) - before
    exact = all(items == expected for items in got.values())
    return {"mode": mode, "backbone_bytes": carried, "bytes_per_photon": carried / (len(photons) - WARM),
            "seconds": seconds, "results": {p: len(v) for p, v in got.items()}, "expected": len(expected),
            "exact": exact, "plans": {p: s.description for p, s in subs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photons", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keys", action="store_true", help="keyed against unkeyed, both placed in the network")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    photons, alerts = streams(args.photons + WARM)
    expected = reference(photons, alerts)  # (UNKEYED's results are JOIN's)
    modes = ["keyed", "unkeyed"] if args.keys else ["placed", "subscriber"]
    runs = [run(mode, photons, alerts, expected) for _, mode in alternating(args.rounds, modes)]
    for r in runs:
        print(f"{r['mode']:>10}: {r['backbone_bytes']:,} backbone bytes, {r['bytes_per_photon']:.1f} per photon, "
              f"{r['seconds']:.1f} s, results {r['results']} (expected {r['expected']}, exact {r['exact']})")
        for peer, plan in r["plans"].items():
            print("   ", plan.replace("\n", "\n    "))
    medians = {m: statistics.median(r["bytes_per_photon"] for r in runs if r["mode"] == m) for m in modes}
    print(f"bytes per photon, medians: {modes[0]} {medians[modes[0]]:.1f}, {modes[1]} {medians[modes[1]]:.1f} "
          f"({medians[modes[0]] / medians[modes[1]]:.2f}×)")
    write_report("joins_in_network" + ("_keys" if args.keys else ""),
                 {"photons": args.photons, "runs": runs, "medians": medians}, args.out)


if __name__ == "__main__":
    main()
