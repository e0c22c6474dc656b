"""Archive queries with Spark in batch mode (issue 15): throughput on millions of photons, exact
against the 1/8 and 1/64 samples — time, error of the estimates and how often the 95 % intervals
hold the exact value — in the same run.

Run: python benchmarks/archive_query.py [--photons 5000000] [--master local[2]] [--dir DIR] [--out FILE.json]

The archive is written by the super-peer's writer (``superpeer.history.archive.writer.Archiver``: 50,000-item
chunks, hourly event-time buckets, samples eager) from seeded photons at 10 per second; ``--dir``
keeps it (a second run with the same directory and count reuses it). The queries: Query 1 (a
selection, item results) and hourly windows with count, sum, avg and min over every photon.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from local_network import write_report  # noqa: E402

from photons.generator import generate  # noqa: E402
from sharing.scenarios import example_query, paper_example_backbone  # noqa: E402
from superpeer.data.event_time import EventTime
from superpeer.executors.spark.session import spark_session
from superpeer.history.archive.layout import ArchiveLayout
from superpeer.history.archive.query import ArchiveRequest, query_archive
from superpeer.history.archive.writer import Archiver
from superpeer.peer_state import OriginalState, PeerState

CHUNK = 50_000
SPAN = 3600.0
HOURLY = """<photons>
  { for $w in stream("photons")/photons/photon |det_time diff 3600 step 3600|
    return <w><t>{ min($w/det_time) }</t><n>{ count($w/en) }</n><s>{ sum($w/en) }</s><a>{ avg($w/en) }</a></w> }
</photons>"""


def write_archive(directory: Path, photons: int, samples: str = "eager", seed: int = 11) -> dict:
    """The archive of ``photons`` seeded photons; (seconds, items/s, bytes, of which samples)."""
    state = PeerState("SP4", paper_example_backbone())
    state.add_original(OriginalState("photons", "photons", "photon", event_time=EventTime("det_time")))
    original = state.originals["photons"]
    archiver = Archiver(state, directory, span=SPAN, samples=samples)
    source = (p.to_xml() for p in generate(photons, seed, rate=10.0))
    began, generating = time.perf_counter(), 0.0
    for first in range(0, photons, CHUNK):
        t = time.perf_counter()
        texts = list(itertools.islice(source, CHUNK))
        generating += time.perf_counter() - t
        archiver.write_items(original, first, texts)
        if first // CHUNK % 20 == 0:
            print(f"\r  archived {first + len(texts):,} photons", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    sizes = {str(p.relative_to(directory)).split("/")[1]: p.stat().st_size for p in directory.rglob("*.parquet")}
    total = sum(p.stat().st_size for p in directory.rglob("*.parquet"))
    full = sum(p.stat().st_size for p in (directory / "photons" / "full").rglob("*.parquet"))
    return {"photons": photons, "write_seconds": round(archiver.write_s, 2),
            "items_per_s": round(photons / archiver.write_s), "sample_write_seconds": round(archiver.sample_write_s, 2),
            "generating_seconds": round(generating, 2), "wall_seconds": round(time.perf_counter() - began, 2),
            "bytes_full": full, "bytes_samples": total - full, "trees": len(sizes)}


def windows(items: list[str]) -> dict[int, dict[str, float]]:
    from lxml import etree

    out = {}
    for text in items:
        el = etree.fromstring(text)
        k = int(math.floor(float(el.findtext("t")) / SPAN))
        out[k] = {"count": float(el.findtext("n")), "sum": float(el.findtext("s")), "avg": float(el.findtext("a"))}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=5_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path, help="keep the archive here (reused when it holds --photons)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="streamglobe-archive-bench-") as tmp:
        directory = args.dir or Path(tmp) / "archive"
        layout = ArchiveLayout(directory)
        if layout.archived_upto("photons") != args.photons:
            if directory.exists() and any(directory.iterdir()):
                raise SystemExit(f"{directory} holds another archive: give an empty or new --dir")
            written = write_archive(directory, args.photons)
            print(f"archive: {args.photons:,} photons in {written['write_seconds']} s "
                  f"({written['items_per_s']:,} items/s), {written['bytes_full'] / 1e6:.0f} MB + samples "
                  f"{written['bytes_samples'] / 1e6:.0f} MB", flush=True)
        else:
            written = {"reused": str(directory)}
        spark = spark_session(args.master)
        query_archive(ArchiveRequest(example_query("q1"), directory, 0, SPAN), spark)  # warm the workers
        runs = {}
        for name, query in (("q1_selection", example_query("q1")), ("hourly_aggregates", HOURLY)):
            answer = query_archive(ArchiveRequest(query, directory), spark,
                                   lambda line: print("  " + line, file=sys.stderr, flush=True))
            runs[name] = {"rate": 1, "seconds": round(answer.seconds, 2), "rows": answer.rows_read,
                          "rows_per_s": round(answer.rows_read / answer.seconds), "results": len(answer.items)}
            print(f"exact {name}: {answer.rows_read:,} rows in {answer.seconds:.1f} s "
                  f"({runs[name]['rows_per_s']:,} rows/s), {len(answer.items)} results", flush=True)
            if name == "hourly_aggregates":
                exact = windows(answer.items)
        for rate in (8, 64):
            answer = query_archive(ArchiveRequest(HOURLY, directory, budget_rows=math.ceil(args.photons / rate)), spark)
            errors = {fn: [] for fn in ("count", "sum", "avg")}
            held = tried = 0
            for e in answer.estimates:
                truth = exact.get(e.window, {}).get(e.function)
                if truth is None or e.estimate is None or e.low is None:
                    continue
                errors[e.function].append(abs(e.estimate - truth) / abs(truth))
                tried += 1
                held += e.low <= truth <= e.high
            r = {"rate": rate, "seconds": round(answer.seconds, 2), "rows": answer.rows_read,
                 "speedup": round(runs["hourly_aggregates"]["seconds"] / answer.seconds, 2),
                 "median_relative_error": {fn: round(statistics.median(v), 5) for fn, v in errors.items() if v},
                 "max_relative_error": {fn: round(max(v), 5) for fn, v in errors.items() if v},
                 "interval_coverage": round(held / tried, 3) if tried else None, "windows": len(answer.items)}
            runs[f"hourly_aggregates_1/{rate}"] = r
            print(f"1/{rate} sample: {answer.rows_read:,} rows in {answer.seconds:.1f} s ({r['speedup']}x faster); "
                  f"median relative error {r['median_relative_error']}; 95% intervals held the exact value "
                  f"in {100 * (r['interval_coverage'] or 0):.1f}% of {tried}", flush=True)
    write_report("archive_query", {"benchmark": "archive queries, exact vs samples", "archive": written,
                                   "master": args.master, "runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
