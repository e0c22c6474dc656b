"""The paper's three scenarios live in containers: per strategy, admitted/rejected subscriptions,
the measured bytes on every backbone link next to the cost model's prediction, and whether every
delivered result equals the reference evaluator's.

Run: python benchmarks/live_simulation.py [--photons 3000] [--scenarios paper-example,paper-grid,
     paper-grid-constrained] [--strategies sharing,query-shipping,data-shipping] [--out FILE]

Each (scenario, strategy) gets a fresh compose project (``deploy simulate``; inline executor).
The model's bytes are the cost model's link bits/s times the photons' simulated duration. Needs a
Docker engine and docker-compose; the images are built if missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sharing.planner import Strategy
from sharing.scenarios import SCENARIOS
from thinpeer.ops.containers.live_simulation import simulate_live


def _ratio(measured: float, model: float) -> str:
    return f"{measured / model:5.2f}" if model else "    –"


def print_table(report: dict) -> None:
    print(f"\n{report['scenario']}: {report['super_peers']} super-peers, {report['links']} links, "
          f"{report['subscriptions']} subscriptions, {report['photons_per_stream']} photons per stream")
    print(f"  {'strategy':15s} {'admitted':>8s} {'rejected':>8s} {'measured MB':>12s} {'model MB':>10s} "
          f"{'ratio':>6s} {'verified':>10s}")
    for name, s in report["strategies"].items():
        v = s["verified"]
        print(f"  {name:15s} {s['registered']:8d} {s['rejected']:8d} {s['total_traffic_bytes'] / 1e6:12.3f} "
              f"{s['total_traffic_estimate_bytes'] / 1e6:10.3f} "
              f"{_ratio(s['total_traffic_bytes'], s['total_traffic_estimate_bytes']):>6s} "
              f"{v['identical']:4d}/{v['checked']:<5d}")
    for name, s in report["strategies"].items():
        busy = {e: l for e, l in s["links"].items() if l["bytes"] or l["estimate_bytes"]}
        print(f"  {name}: per link, measured vs model bytes")
        for e, l in sorted(busy.items()):
            print(f"    {e:10s} {l['bytes']:12,d} {l['estimate_bytes']:12,d} {_ratio(l['bytes'], l['estimate_bytes'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=3000, help="photons per stream after the statistics")
    parser.add_argument("--scenarios", default="paper-example,paper-grid,paper-grid-constrained")
    parser.add_argument("--strategies", default="sharing,query-shipping,data-shipping")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/live_simulation.json"))
    args = parser.parse_args()
    strategies = [Strategy(s) for s in args.strategies.split(",")]
    reports = []
    for name in args.scenarios.split(","):
        started = time.monotonic()
        report = simulate_live(SCENARIOS[name](args.seed), args.photons, strategies, "inline", "sgbenchsim",
                               lambda message: print(f"  {message}", file=sys.stderr, flush=True))
        report["wall_seconds"] = round(time.monotonic() - started, 1)
        print_table(report)
        reports.append(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "deploy simulate, three paper scenarios", "reports": reports},
                                   indent=2) + "\n")
    print(f"\nwrote {args.out}")
    mismatches = sum(len(s["verified"]["mismatches"]) for r in reports for s in r["strategies"].values())
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
