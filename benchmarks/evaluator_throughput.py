"""Reference-evaluator throughput (photons/s) for the paper's Queries 1–4.

Run: python benchmarks/evaluator_throughput.py [--photons 100000] [--repeat 3] [--out FILE.json]

Generates a seeded photon document once, then evaluates each query over it end to end
(incremental XML parsing, operators, serialization of the results), and reports the best of
``--repeat`` runs as photons per second of input.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from photons.generator import generate, write_document  # noqa: E402
from sharing.analysis import analyze  # noqa: E402
from sharing.scenarios import example_query  # noqa: E402
from wxquery.evaluator import evaluate  # noqa: E402
from wxquery.stream_document import StreamDocument  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "evaluator_throughput.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        doc_path = Path(tmp) / "photons.xml"
        with open(doc_path, "w") as f:
            write_document(f, generate(args.photons, args.seed))
        size_mb = doc_path.stat().st_size / 1e6
        print(f"{args.photons} photons ({size_mb:.1f} MB), best of {args.repeat} runs", flush=True)
        rows = []
        for name in ("q1", "q2", "q3", "q4"):
            analysis = analyze(example_query(name))
            best = float("inf")
            results = 0
            for _ in range(args.repeat):
                start = time.perf_counter()
                ev = evaluate(analysis.checked, StreamDocument.from_file(doc_path))
                results = sum(1 for _ in ev.serialized_items())
                best = min(best, time.perf_counter() - start)
            rate = args.photons / best
            rows.append({"query": name, "seconds": round(best, 3), "photons_per_s": round(rate),
                         "result_items": results})
            print(f"  {name}: {rate:>10,.0f} photons/s  ({best:.2f} s, {results} result items)",
                  flush=True)
    report = {"benchmark": "reference evaluator throughput", "photons": args.photons,
              "python": platform.python_version(), "machine": platform.machine(),
              "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
