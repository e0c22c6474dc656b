"""How long a durable super-peer takes to log a publisher's batch: the wait a Publish call has
before its reply (issue 32, deliverable 3).

Run: python benchmarks/log_append.py [--batches 600] [--rounds 3] [--baseline DIR] [--out FILE.json]

A state store in a fresh directory logs ``--batches`` batches of 1,000 photons, one after the
other, as ``DataPlane.publish`` does (``StateStore.append``: the batch, its arrival, where the
stream stands, in one transaction); each append is timed (wall, as the publisher waits for it),
and the process's CPU for all of them. ``--baseline DIR``: a checkout of another revision (``git
worktree add DIR REV``) runs the same rounds, alternating with this one's, each in a process of
its own that imports its tree's code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from local_network import ROOT, alternating, percentile, write_report

ONE_ROUND = """
import json, sys, tempfile, time
from photons.generator import generate
from superpeer.history.state_store import StateStore
from superpeer.data.wire_batch import WireBatch
batches = int(sys.argv[1])
batch = WireBatch.of([p.to_xml() for p in generate(1000, 3)])
store = StateStore(tempfile.mkdtemp(dir=sys.argv[2]))
store.add_original("photons", "photons", "photon", 1.0, 0.0)
times, cpu = [], time.process_time()
for k in range(batches):
    start = time.perf_counter()
    store.append("photons", k * 1000, batch, (k + 1) * 1000, (k + 1) * 1000, 0, 0, at=time.time())
    times.append((time.perf_counter() - start) * 1000)
print(json.dumps({"times_ms": times, "cpu_s": time.process_time() - cpu}))
store.close()
"""


def one_round(tree: Path, batches: int, scratch: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", ONE_ROUND, str(batches), scratch], cwd=tree, env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(runs: list[dict], batches: int) -> dict:
    times = [t for r in runs for t in r["times_ms"]]
    return {"appends": len(times), "median_ms": round(statistics.median(times), 3),
            "p99_ms": round(percentile(times, 0.99), 3), "max_ms": round(max(times), 3),
            "wall_ms_per_batch": round(statistics.fmean(times), 3),
            "cpu_ms_per_batch": round(1000 * sum(r["cpu_s"] for r in runs) / (batches * len(runs)), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    runs: dict[str, list[dict]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="streamglobe-log-") as scratch:
        for k, tree in alternating(args.rounds, list(trees)):
            runs[tree].append(one_round(trees[tree], args.batches, scratch))
            s = summary(runs[tree][-1:], args.batches)
            print(f"round {k + 1} {tree}: append median {s['median_ms']} ms, p99 {s['p99_ms']} ms, "
                  f"max {s['max_ms']} ms, {s['cpu_ms_per_batch']} ms CPU per batch", flush=True)
    report = {"benchmark": "a durable log's append of a 1,000-photon batch", "batches": args.batches,
              "rounds": args.rounds, **{t: summary(rs, args.batches) for t, rs in runs.items()}}
    for t in trees:
        s = report[t]
        print(f"{t}: {s['appends']} appends, median {s['median_ms']} ms, p99 {s['p99_ms']} ms, "
              f"max {s['max_ms']} ms; wall {s['wall_ms_per_batch']} ms and CPU {s['cpu_ms_per_batch']} ms per batch")
    write_report("log_append", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
