"""Registration time of the planner alone (SUBSCRIBE + cost model + install), per subscription.

Run: python benchmarks/planner_registration.py [--large-peers 1000] [--large-queries 10000]
                                              [--out FILE.json]

Reports median and p99 for the paper scenarios (stream sharing strategy) and for a random
small-world network of 1,000 super-peers with 10,000 subscriptions (capacities large enough that
the network keeps filling with streams, the planner's worst case). Statistics come from 2,000
generated photons per stream; no photons are pushed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from local_network import percentile  # noqa: E402
from sharing import scenarios  # noqa: E402
from sharing.backbone import Backbone, Link, Peer  # noqa: E402
from sharing.planner import Strategy  # noqa: E402
from sharing.simulator import Simulation  # noqa: E402


def measure(scenario: scenarios.Scenario, label: str) -> dict:
    # Analyses are parsed once up front (as a super-peer does on arrival); timing is the planner.
    sim = Simulation(scenario, photons=2000, verify=False,
                     progress=lambda m: print(f"    {m}", flush=True))
    sim._push = lambda state, result: None  # type: ignore[method-assign]
    start = time.perf_counter()
    result = sim.run(Strategy.SHARING)
    total = time.perf_counter() - start
    regs = result.registration_ms
    row = {
        "scenario": label,
        "super_peers": len(scenario.backbone.peers),
        "subscriptions": len(regs),
        "admitted": sum(p.admitted for p in result.plans.values()),
        "streams_in_network": len(result.state.streams) if result.state else 0,
        "median_ms": round(statistics.median(regs), 3),
        "p99_ms": round(percentile(regs, 0.99), 3),
        "max_ms": round(max(regs), 3),
        "total_s": round(total, 1),
    }
    print(f"  {label:32s} median {row['median_ms']:7.3f} ms   p99 {row['p99_ms']:7.3f} ms   "
          f"({row['subscriptions']} subscriptions, {row['admitted']} admitted, "
          f"{row['streams_in_network']} streams)", flush=True)
    return row


def large_scenario(peers: int, queries: int, seed: int) -> scenarios.Scenario:
    base = scenarios.random_scenario(peers, queries, seed)
    roomy = Backbone([Peer(p.id, 64.0) for p in base.backbone.peers.values()],
                     [Link(l.a, l.b, 10e9) for l in base.backbone.links.values()])
    return scenarios.Scenario(base.name, roomy, base.sources, base.queries, base.description)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large-peers", type=int, default=1000)
    parser.add_argument("--large-queries", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "planner_registration.json")
    args = parser.parse_args()
    print("planner registration time per subscription (stream sharing strategy)")
    rows = [measure(scenarios.SCENARIOS[name](args.seed), name)
            for name in ("paper-example", "paper-grid", "paper-grid-constrained")]
    t = time.perf_counter()
    large = large_scenario(args.large_peers, args.large_queries, args.seed)
    print(f"  (built {args.large_peers}-peer scenario with {args.large_queries} queries in "
          f"{time.perf_counter() - t:.1f} s; analysing…)", flush=True)
    rows.append(measure(large, f"random {args.large_peers} peers"))
    report = {"benchmark": "planner registration time", "strategy": "sharing", "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
