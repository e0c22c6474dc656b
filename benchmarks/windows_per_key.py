"""Windows per key (issue 36) against the same window over all items, in the same run: items/s
of the batch operators (``ChainGroup``, what the inline executor runs and the Spark driver's
half) for a count and a time window partitioned by 1 … 10,000 keys, and records/s of a coarser
time window combined per key from the finer one's records; the evaluator's partitioned windows
(post-processing at a subscriber) too. Medians over rounds, modes alternating.

A per-key window keeps state per key; what this shows is how the cost grows with the keys (it
should grow with the records written, not with keys × batches).

Run: python benchmarks/windows_per_key.py [--items 100000] [--keys 1,100,1000,10000] [--rounds 3]
     [--out FILE.json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from fractions import Fraction as F
from pathlib import Path

from local_network import alternating, write_report

from wxquery.operators import definitions as alg
from wxquery.operators.chains import normalise
from wxquery.operators.runner import ChainGroup
from wxquery.operators.windows import KeyedWindows

BATCH = 1000
PARTIALS = (("sum", "en"), ("count", "en"))


def photons(n: int, keys: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"<photon><chip>c{rng.randrange(keys)}</chip><en>{rng.uniform(0.1, 9):.4f}</en>"
            f"<t>{k * 0.01:.2f}</t></photon>" for k in range(n)]


def windows(kind: str, keyed: bool) -> alg.WindowSpec:
    key = "chip" if keyed else None
    return (alg.WindowSpec("count", F(10), F(10), key=key) if kind == "count"
            else alg.WindowSpec("diff", F(5), F(5), "t", key))


def through(ops: list, kind: str, texts: list[str]) -> tuple[float, list[str]]:
    group = ChainGroup()
    group.add(normalise(0, "out", "in", kind, ops))
    out: list[str] = []
    began = time.perf_counter()
    for at in range(0, len(texts), BATCH):
        out += group.push(texts[at:at + BATCH], end=at + BATCH >= len(texts))["out"]
    return time.perf_counter() - began, out


def evaluator(texts: list[str], keys: int) -> float:
    """The reference evaluator's windows per key over parsed items (keys read off the items)."""
    items = [(k, float(t.split("<t>")[1].split("<")[0])) for k, t in enumerate(texts)]
    chips = [t.split("<chip>")[1].split("<")[0] for t in texts]
    assigner = KeyedWindows(windows("diff", True), lambda i: chips[i[0]], lambda i: i[1])
    began = time.perf_counter()
    for item in items:
        assigner.push(item)
    assigner.flush()
    return time.perf_counter() - began


def run(n: int, keys: list[int], rounds: int) -> dict:
    report: dict = {"items": n, "batch": BATCH, "cases": []}
    for k in keys:
        texts = photons(n, k, seed=k)
        case: dict = {"keys": k}
        samples: dict[str, list[float]] = {}
        modes = ["count", "count_by_key", "time", "time_by_key", "combine_by_key", "evaluator_by_key"]
        fine = through([alg.WindowAggregate(windows("diff", True), PARTIALS)], "items", texts)[1]
        coarse = alg.CombineWindows(windows("diff", True), alg.WindowSpec("diff", F(20), F(10), "t", "chip"), PARTIALS)
        for _, mode in alternating(rounds, modes):
            if mode == "combine_by_key":
                seconds, out = through([coarse], "records", fine)
                samples.setdefault(mode, []).append(len(fine) / seconds)
                case["records_in"], case["records_out"] = len(fine), len(out)
            elif mode == "evaluator_by_key":
                samples.setdefault(mode, []).append(n / evaluator(texts, k))
            else:
                kind, _, keyed = mode.partition("_by_")
                seconds, out = through([alg.WindowAggregate(windows(kind, bool(keyed)), PARTIALS)], "items", texts)
                samples.setdefault(mode, []).append(n / seconds)
                case[f"{mode}_records"] = len(out)
        for mode, values in samples.items():
            case[f"{mode}_per_s"] = round(statistics.median(values))
        report["cases"].append(case)
        print(f"keys {k:>6}: " + "  ".join(f"{m} {case[f'{m}_per_s']:>9,}/s" for m in modes), flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--keys", default="1,100,1000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    report = run(args.items, [int(k) for k in args.keys.split(",")], args.rounds)
    write_report("windows_per_key", report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
