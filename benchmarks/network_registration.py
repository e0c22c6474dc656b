"""Registration latency through gRPC for the 25-query paper-example workload.

Run: python benchmarks/network_registration.py [--rounds N] [--baseline DIR] [--clients both|connected|new]
    [--out FILE.json]

Starts SP0–SP7 as processes, registers the photon stream at SP4 (with 1,000 photons for
statistics), then registers the simulator's paper-example workload (Queries 1–4 plus 21 template
queries, each at its super-peer) one after the other, timing each Subscribe call end to end:
planning over the peers' tables via gRPC, two-phase reservation and commit on every peer.
Each round starts a fresh network. Each registration's steps (analysis, lookups, planning,
reserve, commit, other) as the registering super-peer timed them are summarised too, and the
CPU time the super-peers spent per registration (their idle cost left out): one registration
after the other, on this machine's cores, none can take less than that over the cores.
``--clients``: each Subscribe call over a client connected
beforehand (a program's client library keeps its connection), over a new client per call (the
connection's set-up timed too, as before), or both, in rounds of their own. ``--baseline DIR``: a checkout of another revision (``git
worktree add DIR REV``) whose super-peers run the same rounds, alternating with this one's — the
comparison of the same run, on the same noisy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from local_network import alternating, code_of, local_network, percentile, write_report
from network_measures import registration


def summary(times: list[float]) -> dict:
    return {"registrations": len(times), "median_ms": round(statistics.median(times), 2),
            "p99_ms": round(percentile(times, 0.99), 2), "avg_ms": round(statistics.fmean(times), 2),
            "min_ms": round(min(times), 2), "max_ms": round(max(times), 2)}


CORES = len(os.sched_getaffinity(0))


def step_summary(steps: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per step of a registration (as the registering super-peer timed it), its median and mean."""
    names = dict.fromkeys(k for s in steps for k in s)  # (a baseline's daemons may say fewer)
    return {k: {"median_ms": round(statistics.median(s[k] for s in steps if k in s), 2),
                "mean_ms": round(statistics.fmean(s[k] for s in steps if k in s), 2)} for k in names}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="fresh networks per code tree (default 1)")
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--clients", choices=["both", "connected", "new"], default="both",
                        help="clients connected beforehand, a new one per call, or both (default)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    clients = ["connected", "new"] if args.clients == "both" else [args.clients]
    modes = [(tree, c) for tree in trees for c in clients]
    times: dict[tuple[str, str], list[float]] = {mode: [] for mode in modes}
    steps: dict[tuple[str, str], list[dict]] = {mode: [] for mode in modes}
    cpu: dict[tuple[str, str], list[float]] = {mode: [] for mode in modes}
    for k, (tree, c) in alternating(args.rounds, modes):
        with code_of(trees[tree]), local_network() as network:
            measured = registration(network.addresses, connected=c == "connected")
            times[tree, c].extend(measured["times_ms"])
            steps[tree, c].extend(measured["steps_ms"])
            cpu[tree, c].append(measured["network_cpu_ms_per_registration"])
        print(f"round {k + 1} {tree}, {c} clients: median {statistics.median(times[tree, c][-25:]):.2f} ms",
              flush=True)
    report = {"benchmark": "registration latency through gRPC", "workload": "paper-example, 25 queries",
              "rounds": args.rounds,
              **{tree: {f"{c}_clients": {**summary(times[tree, c]), "steps": step_summary(steps[tree, c]),
                                         "network_cpu_ms_per_registration": round(statistics.median(cpu[tree, c]), 2)}
                        for c in clients} for tree in trees}}
    for tree, c in modes:
        s = report[tree][f"{c}_clients"]
        print(f"registration through gRPC, {tree}, {c} clients ({s['registrations']} registrations): median "
              f"{s['median_ms']} ms, p99 {s['p99_ms']} ms, avg {s['avg_ms']} ms (paper: 2153 ms average)")
        print(f"  the super-peers' CPU per registration (idle cost left out), median of the rounds: "
              f"{s['network_cpu_ms_per_registration']} ms: {s['network_cpu_ms_per_registration'] / CORES:.1f} ms "
              f"over {CORES} cores at best")
        if s["steps"]:
            print("  at the registering super-peer, median / mean ms: " + ", ".join(
                f"{step} {v['median_ms']} / {v['mean_ms']}" for step, v in s["steps"].items()))
    write_report("network_registration", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
