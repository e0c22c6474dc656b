"""Closing count windows on the Spark driver (issue 17): the windows of one batch folded from
their panes as arrays (``wxquery.operators.pane_folds``) against one window at a time
(``ChainState._merged``), alternating in the same run; records/s of closing and of closing plus
writing the records — as ``WindowRecord``s written by ``to_xml``, or (``folded_texts``, what the
driver does) a column at a time by ``records.window_texts`` — medians over rounds.

The shape is the executor benchmark's count chain (``|count 100 step 50| sum(en), count(en)``)
and its 10,000 windows per 100,000 photons at N = 30.

Run: python benchmarks/count_window_close.py [--windows 10000] [--rounds 9] [--out FILE.json]
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
from wxquery.operators import panes as pane_state
from wxquery.operators.chains import normalise
from wxquery.operators.panes import ChainState
from wxquery.operators.records import window_texts

MODES = ["one_by_one", "folded", "folded_texts"]


def chain():
    window = alg.WindowAggregate(alg.WindowSpec("count", F(100), F(50)), (("sum", "en"), ("count", "en")))
    return normalise(0, "w", "in", "items", (window,))


def one(windows: int, mode: str, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    state = ChainState(chain())
    state.add_panes([(p, [rng.random() * 50, 50]) for p in range(windows + 1)])
    state.clock.seen = (windows + 1) * 50
    saved = pane_state.FOLD_AT_LEAST
    pane_state.FOLD_AT_LEAST = 10**12 if mode == "one_by_one" else saved
    try:
        began = time.perf_counter()
        rows = state._closed(0.0, False)
        closed = time.perf_counter()
        if mode == "folded_texts":
            texts = window_texts(state.chain.window.partials, rows)
        else:
            texts = [state._window_record(k, values).to_xml() for k, values in rows]
        written = time.perf_counter()
    finally:
        pane_state.FOLD_AT_LEAST = saved
    assert len(texts) == windows
    return closed - began, written - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for k, mode in alternating(args.rounds, MODES):
        times[mode].append(one(args.windows, mode, seed=k))
    report = {"args": vars(args)}
    for mode in MODES:
        close_s = statistics.median(t[0] for t in times[mode])
        total_s = statistics.median(t[1] for t in times[mode])
        report[mode] = {"close_records_per_s": round(args.windows / close_s),
                        "close_and_write_records_per_s": round(args.windows / total_s),
                        "close_ms": round(close_s * 1000, 2), "close_and_write_ms": round(total_s * 1000, 2)}
        print(f"{mode:>12}: close {report[mode]['close_ms']:7.2f} ms ({report[mode]['close_records_per_s']:,} records/s), "
              f"close+write {report[mode]['close_and_write_ms']:7.2f} ms "
              f"({report[mode]['close_and_write_records_per_s']:,} records/s)")
    report["close_speedup"] = round(report["one_by_one"]["close_ms"] / report["folded"]["close_ms"], 2)
    report["close_and_write_speedup"] = round(report["one_by_one"]["close_and_write_ms"]
                                              / report["folded"]["close_and_write_ms"], 2)
    report["close_and_write_texts_speedup"] = round(report["one_by_one"]["close_and_write_ms"]
                                                    / report["folded_texts"]["close_and_write_ms"], 2)
    print(f"speed-up: close {report['close_speedup']}x, close+write {report['close_and_write_speedup']}x, "
          f"close+write a column at a time {report['close_and_write_texts_speedup']}x")
    write_report("count_window_close", report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
