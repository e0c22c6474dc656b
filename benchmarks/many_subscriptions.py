"""Many subscriptions at one super-peer: the inline executor with N chains on one stream, with the
shared predicate index and without it (every chain compares every item), in the same run.

Run: python benchmarks/many_subscriptions.py [--photons 100000] [--chains 1,10,100,1000] [--repeat 3] [--out FILE]

Each chain is what a subscription to a small sky region installs at the stream's super-peer
(query shipping's operators, from a real WXQuery text): a box in ``ra``/``dec`` (0.5–3° a side,
placed at random over the survey), every third one also an energy cut, projected to ``ra``,
``dec``, ``en`` and ``det_time``. Photons are pushed through the executor's public interface in
batches of ``--batch``, as ``Publish``/``Transfer`` deliver them; every output is delivered to a
counting sink. Reported per N: photons/s (wall) and per CPU-second, best of ``--repeat``, for
both, and the ratio; plus the parse rate of the same items alone (the limit no number of chains
can beat), measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from photons.generator import generate
from sharing.analysis import analyze
from sharing.matching import full_pipeline
from superpeer.executors.inline import InlineExecutor
from wxquery.operators.batch import ItemBatch
from wxquery.operators.predicate_index import INDEX_FROM

NEVER = 10 ** 9  # chains a key needs before it is indexed: never (the baseline)


def subscription(rng: random.Random) -> str:
    ra, dec = rng.uniform(112, 146), rng.uniform(-57, -34)
    w, h = rng.uniform(0.5, 3), rng.uniform(0.5, 3)
    energy = f" and $p/en >= {rng.uniform(0.2, 1.5):.2f}" if rng.random() < 1 / 3 else ""
    return f"""<region>{{ for $p in stream("photons")/photons/photon
      where $p/coord/cel/ra >= {ra:.3f} and $p/coord/cel/ra <= {ra + w:.3f}
        and $p/coord/cel/dec >= {dec:.3f} and $p/coord/cel/dec <= {dec + h:.3f}{energy}
      return <p>{{ $p/coord/cel/ra }}{{ $p/coord/cel/dec }}{{ $p/en }}{{ $p/det_time }}</p> }}</region>"""


def chains(n: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    return [full_pipeline(analyze(subscription(rng)).properties.inputs[0]).residual for _ in range(n)]


def run(installed: list[tuple], texts: list[str], batch: int, index_from: int) -> tuple[float, float, int]:
    delivered = [0]

    def count(stream: str, seq: int, out: list, end: bool, origins=None) -> None:
        delivered[0] += len(out)

    executor = InlineExecutor(deliver=count, index_from=index_from)
    for k, ops in enumerate(installed):
        executor.install(f"s{k}", ops, parent="photons", parent_kind="items")
    wall, cpu = time.perf_counter(), time.process_time()
    for at in range(0, len(texts), batch):
        executor.push("photons", [], texts[at:at + batch], at + batch >= len(texts))
    return time.perf_counter() - wall, time.process_time() - cpu, delivered[0]


def parse_rate(texts: list[str], batch: int) -> float:
    """Photons/s of parsing the batches and reading the chains' columns, nothing else."""
    start = time.perf_counter()
    for at in range(0, len(texts), batch):
        b = ItemBatch(texts[at:at + batch])
        for path in ("coord/cel/ra", "coord/cel/dec", "en"):
            b.column(path)
    return len(texts) / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=100_000)
    parser.add_argument("--chains", default="1,10,100,1000")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "many_subscriptions.json")
    args = parser.parse_args()

    texts = [p.to_xml() for p in generate(args.photons, seed=args.seed)]
    limit = max(parse_rate(texts, args.batch) for _ in range(args.repeat))
    print(f"{args.photons:,} photons in batches of {args.batch}, best of {args.repeat}; parsing alone: "
          f"{limit:,.0f} photons/s (index from {INDEX_FROM} chains on one key)", flush=True)
    rows = []
    for n in (int(x) for x in args.chains.split(",")):
        installed = chains(n, args.seed)
        row: dict = {"chains": n}
        for label, index_from in (("one_by_one", NEVER), ("indexed", INDEX_FROM)):
            best = min((run(installed, texts, args.batch, index_from) for _ in range(args.repeat)),
                       key=lambda r: r[0])
            wall, cpu, out = best
            row[label] = {"photons_per_s": round(args.photons / wall),
                          "photons_per_cpu_s": round(args.photons / max(cpu, 1e-9)), "outputs": out}
        assert row["indexed"]["outputs"] == row["one_by_one"]["outputs"]
        row["speedup"] = round(row["indexed"]["photons_per_s"] / row["one_by_one"]["photons_per_s"], 2)
        row["of_parse_rate"] = round(row["indexed"]["photons_per_s"] / limit, 3)
        rows.append(row)
        print(f"  N={n:>5}: one by one {row['one_by_one']['photons_per_s']:>9,} photons/s, indexed "
              f"{row['indexed']['photons_per_s']:>9,} ({row['speedup']}×; {row['of_parse_rate']:.0%} of "
              f"parsing alone), {row['indexed']['outputs']:,} outputs", flush=True)
    report = {"benchmark": "many subscriptions at one super-peer (inline executor)", "photons": args.photons,
              "batch": args.batch, "parse_rate_photons_per_s": round(limit), "index_from": INDEX_FROM,
              "python": platform.python_version(), "machine": platform.machine(), "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
