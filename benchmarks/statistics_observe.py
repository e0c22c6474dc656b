"""What a super-peer's statistics cost per observed item (it observes one in 50 of a stream it
ingests): ``StreamStatistics.observe`` over generated photons, this checkout's and, with
``--baseline DIR``, another revision's in the same run, alternating.

Run: python benchmarks/statistics_observe.py [--items 2000] [--rounds 6] [--baseline DIR] [--out FILE.json]

Each tree's code is loaded in a process of its own (``--baseline``: a checkout made with
``git worktree add DIR REV``); the figure is microseconds per observed item, best and median
of the rounds, and per ingested photon (one in 50 observed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from local_network import ROOT, write_report

ONE_ROUND = """
import json, sys, time
from lxml import etree
from photons.generator import generate
from sharing.statistics import StreamStatistics
items = [etree.fromstring(p.to_xml()) for p in generate({items}, 3)]
s = StreamStatistics(frequency=1.0)
start = time.perf_counter()
for item in items:
    s.observe(item)
print(json.dumps((time.perf_counter() - start) * 1e6 / len(items)))
"""


def one_round(tree: Path, items: int) -> float:
    out = subprocess.run([sys.executable, "-c", ONE_ROUND.format(items=items)], cwd=tree, check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    times: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            times[name].append(one_round(tree, args.items))
    report = {"benchmark": "statistics_observe", "items": args.items, "rounds": args.rounds}
    for name, values in times.items():
        best, median = min(values), statistics.median(values)
        report[name] = {"best_us_per_observed_item": round(best, 2), "median_us_per_observed_item": round(median, 2),
                        "median_us_per_ingested_photon": round(median / 50, 3)}
        print(f"{name}: {best:.1f} us per observed item at best, {median:.1f} median "
              f"({median / 50:.2f} us per ingested photon, one in 50 observed)")
    write_report("statistics_observe", report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
