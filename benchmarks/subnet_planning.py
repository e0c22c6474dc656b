"""Planning in subnets against planning the whole network (issue 37): registration time and
backbone traffic of stream sharing on a random small-world network of 10,000 super-peers, flat and
cut into K subnets (``sharing.subnets.partition``; each planned on its own, originals relayed
through gateways: ``sharing.subnet_planning``).

Run: python benchmarks/subnet_planning.py [--peers 10000] [--queries 1000] [--subnets 10 100]
                                          [--photons 300] [--seed 1] [--out FILE.json]

Every variant registers the same subscriptions in the same order into a fresh network state, then
pushes the same photons through what was installed: traffic is measured on the links, and every
subscription's results are compared with the reference evaluator's (``verified``). The figure to
read is each K's traffic against the flat plans' (the gap the hierarchy costs) beside its
registration time (what it saves).
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
from sharing.planner import Strategy  # noqa: E402
from sharing.scenarios import random_scenario  # noqa: E402
from sharing.simulator import Simulation, StrategyResult  # noqa: E402
from sharing.subnets import partition  # noqa: E402


def row(label: str, result: StrategyResult, seconds: float, extra: dict) -> dict:
    regs = result.registration_ms
    assert result.state is not None
    out = {"variant": label, **extra,
           "admitted": sum(p.admitted for p in result.plans.values()), "subscriptions": len(regs),
           "registration_median_ms": round(statistics.median(regs), 3),
           "registration_p99_ms": round(percentile(regs, 0.99), 3),
           "registration_total_s": round(sum(regs) / 1000, 2),
           "traffic_bytes": sum(result.link_bytes.values()),
           "traffic_model_bytes": round(sum(result.state.link_used.values())),
           "streams_in_network": sum(1 for s in result.state.streams.values() if not s.original),
           "verified": result.verified, "mismatches": result.mismatches[:5], "wall_s": round(seconds, 1)}
    print(f"  {label:16s} registration median {out['registration_median_ms']:8.3f} ms  p99 "
          f"{out['registration_p99_ms']:8.3f} ms  traffic {out['traffic_bytes'] / 1e6:8.2f} MB  "
          f"verified {out['verified']}/{out['admitted']}  ({seconds:.0f} s)", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--subnets", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--photons", type=int, default=300, help="photons pushed per stream")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "subnet_planning.json")
    args = ap.parse_args()

    scenario = random_scenario(args.peers, args.queries, args.seed)
    print(f"{scenario.description}; {args.photons} photons per stream", flush=True)
    sim = Simulation(scenario, photons=args.photons, verify=True)
    start = time.perf_counter()
    flat = row("flat", sim.run(Strategy.SHARING), time.perf_counter() - start, {"subnets": None})
    rows = [flat]
    for k in args.subnets:
        subnets = partition(scenario.backbone, k, args.seed)
        start = time.perf_counter()
        result = sim.run(Strategy.SHARING, subnets)
        rows.append(row(f"{k} subnets", result, time.perf_counter() - start, {"subnets": subnets.summary()}))
    print("\nagainst the flat plans (same subscriptions, same photons):")
    for r in rows[1:]:
        r["traffic_against_flat"] = round(r["traffic_bytes"] / flat["traffic_bytes"], 3)
        r["registration_speedup"] = round(flat["registration_median_ms"] / r["registration_median_ms"], 1)
        s = r["subnets"]
        print(f"  {r['variant']:16s} ({s['smallest']}–{s['largest']} super-peers each, {s['gateways']} gateways): "
              f"traffic {r['traffic_against_flat']:.2f}×, registration median {r['registration_speedup']:.0f}× "
              f"faster", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "subnet_planning", "peers": args.peers, "queries": args.queries,
                                    "photons": args.photons, "seed": args.seed, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
