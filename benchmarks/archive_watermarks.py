"""An archived chunk with watermarks among its items, evaluated by an archive query's task
(issue 15): in one pass with each row's watermark floor (``WindowClock.admit_batch``, what
``superpeer.executors.spark.batch.run_unit`` does) against one segment per watermark (what it did
before), alternating in the same run; milliseconds per chunk, medians over rounds. The answers
are checked equal (panes summed in a different grouping may differ in the last bits: compared
to 1e-9).

The chain is the executor benchmark's time window (``|det_time diff 20 step 10|`` sum, count and
max of ``en``), the chunk 50,000 photons, its watermarks evenly spaced and each a little above
the items before it (an idle stream's watermark is its clock's time).

Run: python benchmarks/archive_watermarks.py [--photons 50000] [--watermarks 0,500,5000] [--rounds 7] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from fractions import Fraction as F
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_network import alternating, write_report  # noqa: E402

from photons.generator import generate  # noqa: E402
from wxquery.operators import definitions as alg  # noqa: E402
from wxquery.operators.batch import ItemBatch  # noqa: E402
from wxquery.operators.chains import evaluate_chain, normalise  # noqa: E402
from wxquery.operators.windows import WindowClock, watermark_floors  # noqa: E402

MODES = ["segments", "one_pass"]


def chain():
    window = alg.WindowAggregate(alg.WindowSpec("diff", F(20), F(10), "det_time"),
                                 (("sum", "en"), ("count", "en"), ("max", "en")))
    return normalise(0, "w", "photons", "items", (window,))


def marks_for(texts: list[str], refs: np.ndarray, count: int) -> list[tuple[int, float]]:
    """Evenly spaced watermarks, each 0.5 above the highest reference before it."""
    if count == 0:
        return []
    afters = np.linspace(1, len(texts) - 1, count).astype(int)
    highest = np.maximum.accumulate(refs)
    return [(int(a), float(highest[a - 1]) + 0.5) for a in afters]


def run(mode: str, texts: list[str], marks: list[tuple[int, float]]) -> tuple[float, dict]:
    c = chain()
    positions = np.arange(len(texts), dtype=np.int64)
    clock = WindowClock()
    panes: dict[int, list] = {}
    began = time.perf_counter()
    if mode == "one_pass":
        batch = ItemBatch(texts)
        batch.prepare(c.paths())
        outputs = [evaluate_chain(c, batch, positions, clock, 0.0,
                                  floors=watermark_floors(positions, marks) if marks else None)]
    else:
        outputs, done = [], 0
        cuts = np.searchsorted(positions, [a for a, _ in marks], side="left") if marks else []
        for (_, value), cut in [*zip(marks, (int(x) for x in cuts)), ((None, None), len(texts))]:
            if cut > done:
                batch = ItemBatch(texts[done:cut])
                batch.prepare(c.paths())
                outputs.append(evaluate_chain(c, batch, positions[done:cut], clock, 0.0))
                done = cut
            if value is not None:
                clock.high = max(clock.high, value)
    seconds = time.perf_counter() - began
    for out in outputs:
        for p, values in out.panes:
            old = panes.get(p)
            panes[p] = values if old is None else [a + b if fn != "max" else max(a, b)
                                                   for fn, a, b in zip(("sum", "count", "max"), old, values)]
    return seconds, {"panes": panes, "late": clock.late_items}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=50_000)
    parser.add_argument("--watermarks", default="0,500,5000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    texts = [p.to_xml() for p in generate(args.photons)]
    batch = ItemBatch(texts)
    refs = batch.first_values("det_time")
    report: dict = {"args": vars(args), "by_watermarks": {}}
    for count in [int(x) for x in args.watermarks.split(",")]:
        marks = marks_for(texts, refs, count)
        times: dict[str, list[float]] = {m: [] for m in MODES}
        answers = {}
        for _, mode in alternating(args.rounds, MODES):
            seconds, answers[mode] = run(mode, texts, marks)
            times[mode].append(seconds)
        a, b = answers["segments"], answers["one_pass"]
        same = a["late"] == b["late"] and a["panes"].keys() == b["panes"].keys() and all(
            np.allclose(a["panes"][p], b["panes"][p], rtol=1e-9) for p in a["panes"])
        row = {mode: round(1000 * statistics.median(times[mode]), 1) for mode in MODES}
        row.update(speedup=round(row["segments"] / row["one_pass"], 2), late_items=b["late"], same_answer=same)
        report["by_watermarks"][count] = row
        print(f"{count:>6} watermarks: segments {row['segments']:7.1f} ms, one pass {row['one_pass']:7.1f} ms "
              f"({row['speedup']}x), {row['late_items']} late items, same answer: {same}")
        if not same:
            print("ANSWERS DIFFER", file=sys.stderr)
            return 1
    write_report("archive_watermarks", report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
