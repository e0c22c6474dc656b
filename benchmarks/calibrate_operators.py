"""Measure operator base loads on this machine and write ``sharing/calibration.json``.

Run: python benchmarks/calibrate_operators.py [--photons 20000] [--out sharing/calibration.json]

The cost model's loads are base load (seconds per input item) × pindex × frequency; the base
loads come from here, measured with the inline operators on generated photons, not picked by
hand. Operators run as the executors run them: the batch operators over 1,000-item batches of
wire text (parsing included). Forwarding is measured as serializing an item for the wire.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import time
from fractions import Fraction
from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from photons.generator import generate, write_document  # noqa: E402
from sharing.analysis import analyze  # noqa: E402
from sharing.scenarios import example_query  # noqa: E402
from wxquery.operators import definitions as alg  # noqa: E402
from wxquery.evaluator import post_process  # noqa: E402
from wxquery.operators.chains import normalise  # noqa: E402
from wxquery.operators.records import serialize  # noqa: E402
from wxquery.operators.runner import ChainGroup, run_operators  # noqa: E402
from wxquery.stream_document import StreamDocument  # noqa: E402


def per_item(fn, items, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(items)
        best = min(best, time.perf_counter() - start)
    return best / max(len(items), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=ROOT / "sharing" / "calibration.json")
    args = parser.parse_args()
    buf = io.StringIO()
    write_document(buf, generate(args.photons, seed=1))
    items = list(StreamDocument.from_text(buf.getvalue()).items("photons", "photon"))
    texts = [serialize(x) for x in items]

    def batched(operators, kind: str = "items"):
        """The operators over the texts given, in batches as they arrive from the wire."""
        def run(xs: list[str]) -> list[str]:
            group = ChainGroup()
            group.add(normalise(0, "out", "in", kind, operators))
            out: list[str] = []
            for at in range(0, len(xs), 1000):
                out.extend(group.push(xs[at:at + 1000], at + 1000 >= len(xs))["out"])
            return out
        return run
    a = alg.Atom("coord/cel/ra", ">=", None, Fraction(120))
    none = alg.Select(())
    one = alg.Select((a,))
    four = alg.Select((a, alg.Atom("coord/cel/ra", "<=", None, Fraction(138)),
                       alg.Atom("coord/cel/dec", ">=", None, Fraction(-49)),
                       alg.Atom("coord/cel/dec", "<=", None, Fraction(-40))))
    t_none = per_item(batched([none]), texts)
    t_one = per_item(batched([one]), texts)
    t_four = per_item(batched([four]), texts)
    project = alg.Project(frozenset({"coord/cel/ra", "coord/cel/dec", "en", "det_time"}))
    window = alg.WindowSpec("diff", Fraction(20), Fraction(10), "det_time")
    partials = (("sum", "en"), ("count", "en"))
    records = run_operators([alg.WindowAggregate(alg.WindowSpec("diff", Fraction(1), Fraction(1),
                                                                 "det_time"), partials)], "items", texts)
    q1 = analyze(example_query("q1"))
    clause = next(b.clause for b in q1.checked.clauses.values() if b.kind == "item")
    delivered = [etree.fromstring(t) for t in run_operators(
        [four, alg.Project(q1.properties.inputs[0].projection.output)], "items", texts)]
    calibration = {
        "select_base": t_none,
        "select_atom": max((t_four - t_one) / 3, (t_one - t_none), 1e-9),
        "project": per_item(batched([project]), texts),
        "window_aggregate": per_item(batched([alg.WindowAggregate(window, partials)]), texts),
        "combine": per_item(batched([alg.CombineWindows(
            alg.WindowSpec("diff", Fraction(1), Fraction(1), "det_time"), window, partials)], "records"), records),
        "aggregate_filter": per_item(batched([alg.AggregateFilter(
            (alg.Atom("avg(en)", ">=", None, Fraction("1.3")),))], "records"), records),
        "forward": per_item(lambda xs: [serialize(x) for x in xs], items),
        "post_process": per_item(lambda xs: list(post_process(
            q1.checked, {id(clause): xs}, q1.properties.applied_upstream,
            q1.properties.aggregated_upstream).serialized_items()), delivered),
        "measured_on": f"{platform.node()} {platform.machine()} python {platform.python_version()} "
                       f"{time.strftime('%Y-%m-%d')}",
    }
    for k, v in calibration.items():
        print(f"  {k:17s} {v * 1e6:8.2f} µs/item" if isinstance(v, float) else f"  {k}: {v}")
    args.out.write_text(json.dumps(calibration, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
