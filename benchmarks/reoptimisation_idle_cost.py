"""What re-optimisation costs a network that has nothing new to plan: CPU of all super-peers.

Run: python benchmarks/reoptimisation_idle_cost.py [--subscriptions 100] [--settle 40]
     [--seconds 20] [--rounds 2] [--baseline DIR] [--out FILE.json]

Starts SP0–SP7 as processes, registers the photon stream at SP4 (1,000 photons for its
statistics) and the paper-example workload (Queries 1–4 and template queries, each at its
super-peer) up to ``--subscriptions``, while photons are published at a steady ``RATE`` (a move
switches plans only as items pass); waits ``--settle`` seconds, until the moves the
registrations' order called for are done, then measures the CPU all eight daemons spend over
``--seconds`` while nothing is registered or failing (their own ``process_cpu_seconds``). Modes, in the same run, rounds
alternating: this checkout; ``--baseline DIR`` (a checkout of another revision, ``git worktree
add DIR REV``); and this checkout with ``--no-reoptimise`` (the control plane without rounds:
heartbeats, failure detection). The difference to the last is what the periodic rounds cost.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from pathlib import Path

from local_network import alternating, code_of, local_network, write_report

from photons.generator import generate
from sharing.scenarios import paper_example, template_queries
from thinpeer.client import SuperPeerClient

RATE = 100  # photons per second published throughout


def workload(n: int) -> list[tuple[str, str]]:
    """(peer, query): the paper example's 25, then template queries at random peers."""
    scenario = paper_example(1)
    queries = [(q.peer, q.text) for q in scenario.queries]
    if n > len(queries):
        extra = template_queries(random.Random(7), ["photons"], sorted(scenario.backbone.peers),
                                 n - len(queries), start=len(queries) + 1)
        queries += [(q.peer, q.text) for q in extra]
    return queries[:n]


def steady_cpu(address: dict[str, str], queries: list[tuple[str, str]], settle: float,
               seconds: float) -> dict:
    """With ``queries`` running and nothing new to plan: the percent of one core the whole
    network spends; over the same time, the moves and the subscriptions the rounds skipped as
    unchanged; the subscriptions switching plans at the end."""
    photons = [p.to_xml() for p in generate(1000 + int(RATE * (settle + seconds + 60)), 1)]
    source = SuperPeerClient(address["SP4"])
    source.register_stream("photons", "photons", "photon", rate=RATE)
    source.publish("photons", photons[:1000])
    stop = threading.Event()

    def publish() -> None:
        at = 1000
        while not stop.wait(0.1) and at + RATE // 10 <= len(photons):
            source.publish("photons", photons[at:at + RATE // 10])
            at += RATE // 10

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    time.sleep(1.2)
    clients = {peer: SuperPeerClient(a) for peer, a in address.items()}
    for peer, query in queries:
        clients[peer].subscribe(query)
    time.sleep(settle)
    before = {p: c.status() for p, c in clients.items()}
    start = time.perf_counter()
    time.sleep(seconds)
    after = {p: c.status() for p, c in clients.items()}
    elapsed = time.perf_counter() - start
    stop.set()
    publisher.join()

    def grew(read) -> float:  # (summed over the super-peers)
        return sum(read(after[p]) - read(before[p]) for p in clients)

    return {"percent_of_a_core": 100 * grew(lambda s: s["process_cpu_seconds"]) / elapsed,
            "moves": grew(lambda s: s["reoptimisation"].get("migrations", 0)),
            "skipped_unchanged": grew(lambda s: s["reoptimisation"].get("skipped_unchanged", 0)),
            "switching_at_end": sum(s.get("reoptimisation", "").startswith("switching")
                                    for a in after.values() for s in a["subscriptions"].values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscriptions", type=int, default=100)
    parser.add_argument("--settle", type=float, default=40.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    modes = {"this": (None, ()), **({"baseline": (args.baseline, ())} if args.baseline else {}),
             "no_reoptimise": (None, ("--no-reoptimise",))}
    queries = workload(args.subscriptions)
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for k, mode in alternating(args.rounds, list(modes)):
        tree, serve_args = modes[mode]
        with code_of(tree), local_network(serve_args=serve_args) as network:
            run = steady_cpu(network.addresses, queries, args.settle, args.seconds)
        runs[mode].append(run)
        print(f"round {k + 1} {mode}: {run['percent_of_a_core']:.1f} % of a core, {run['moves']} moves, "
              f"{run['skipped_unchanged']} subscriptions skipped as unchanged, {run['switching_at_end']} "
              "switching plans at the end", flush=True)
    report = {"benchmark": "CPU of the network with subscriptions running and nothing new to plan",
              "subscriptions": len(queries), "photons_per_s": RATE, "settle_s": args.settle,
              "seconds": args.seconds, "rounds": args.rounds,
              **{m: {"runs": rs, "median": round(statistics.median(r["percent_of_a_core"] for r in rs), 2),
                     "moves": [r["moves"] for r in rs]} for m, rs in runs.items()}}
    off = report["no_reoptimise"]["median"]
    for mode in modes:
        median = report[mode]["median"]
        print(f"{mode}: {median:.1f} % of a core for eight super-peers with {len(queries)} subscriptions "
              f"(rounds: {median - off:+.1f} over --no-reoptimise), moves per run {report[mode]['moves']}")
    write_report("reoptimisation_idle_cost", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
