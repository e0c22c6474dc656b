"""What building samples costs (issue 15, OSCAR): eager (with every archived chunk), lazy (by the
first query that needs a rate), hybrid (1/16–1/64 eagerly, finer lazily), against an archive
without samples (lazy, at ingestion) — ingestion time and bytes, and the time of the first and a repeated
approximate query at 1/4 and 1/64, in the same run.

Run: python benchmarks/archive_samples.py [--photons 1000000] [--rounds 1] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

from archive_query import HOURLY, write_archive
from local_network import alternating, write_report

from superpeer.executors.spark.session import spark_session
from superpeer.history.archive.query import ArchiveRequest, query_archive

MODES = ["lazy", "eager", "hybrid"]  # lazy writes no samples at ingestion: the baseline


def one(photons: int, mode: str, spark) -> dict:
    with tempfile.TemporaryDirectory(prefix="streamglobe-samples-") as tmp:
        directory = Path(tmp) / "archive"
        r = write_archive(directory, photons, samples=mode)
        for rate in (4, 64):
            for attempt in ("first", "again"):
                answer = query_archive(ArchiveRequest(HOURLY, directory, budget_rows=math.ceil(photons / rate)), spark)
                r[f"query_1/{rate}_{attempt}_s"] = round(answer.seconds, 2)
                r[f"query_1/{rate}_{attempt}_built_s"] = round(answer.samples_built_s, 2)
        r["bytes_after_queries"] = sum(p.stat().st_size for p in directory.rglob("*.parquet"))
    return r


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    spark = spark_session(args.master)
    with tempfile.TemporaryDirectory(prefix="streamglobe-warm-") as tmp:  # the workers started before timing
        write_archive(Path(tmp) / "a", 20_000, samples="eager")
        query_archive(ArchiveRequest(HOURLY, Path(tmp) / "a"), spark)
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for k, mode in alternating(args.rounds, MODES):
        r = one(args.photons, mode, spark)
        runs[mode].append(r)
        print(f"round {k + 1} {mode:6s}: ingest {r['write_seconds']} s ({r['items_per_s']:,} items/s, samples "
              f"{r['sample_write_seconds']} s, {r['bytes_samples'] / 1e6:.0f} MB); query 1/4 first "
              f"{r['query_1/4_first_s']} s (building {r['query_1/4_first_built_s']} s), again {r['query_1/4_again_s']} s; "
              f"1/64 first {r['query_1/64_first_s']} s, again {r['query_1/64_again_s']} s", file=sys.stderr, flush=True)
    base = statistics.median(r["write_seconds"] for r in runs["lazy"])
    summary = {m: {"ingest_s": round(statistics.median(r["write_seconds"] for r in rs), 2),
                   "ingest_overhead": round(statistics.median(r["write_seconds"] for r in rs) / base - 1, 3),
                   "sample_bytes": statistics.median(r["bytes_samples"] for r in rs),
                   "first_query_1/4_s": round(statistics.median(r["query_1/4_first_s"] for r in rs), 2),
                   "first_query_1/64_s": round(statistics.median(r["query_1/64_first_s"] for r in rs), 2)}
               for m, rs in runs.items()}
    for m, s in summary.items():
        print(f"{m:6s}: ingestion {s['ingest_s']} s ({100 * s['ingest_overhead']:+.1f}% vs lazy), samples "
              f"{s['sample_bytes'] / 1e6:.0f} MB; first 1/4 query {s['first_query_1/4_s']} s, first 1/64 query "
              f"{s['first_query_1/64_s']} s")
    write_report("archive_samples", {"benchmark": "eager vs lazy vs hybrid samples", "photons": args.photons,
                                     "runs": runs, "summary": summary}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
