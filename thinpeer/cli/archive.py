"""``streamglobe archive query`` and ``archive list``: queries over the Parquet archive a
super-peer writes with ``serve --archive DIR`` (``superpeer.history.archive.query``; README "The past")."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from streamglobe.units import quantity
from thinpeer.cli.command import EXIT_OK, AddCommand, CliError

ROWS = re.compile(r"\s*(\d+)\s*(?:rows?)?\s*", re.IGNORECASE)


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """``--budget 100000`` (rows) or a duration (``--budget 10s``, ``1m``: seconds, read as every
    duration is, ``streamglobe.units``)."""
    rows = ROWS.fullmatch(text)
    if rows is not None:
        return int(rows.group(1)), None
    found = quantity(text)
    if found is None or found.kind != "duration":
        raise CliError(f"error: --budget {text!r}: a number of rows (100000) or a duration (10s, 2m)")
    return None, float(found.value)


def cmd_archive_query(args: argparse.Namespace) -> int:
    from superpeer.executors.spark.session import first_line, spark_session
    from superpeer.history.archive.query import ArchiveQueryError, ArchiveRequest, parse_time, query_archive
    from thinpeer.cli.query import read_query

    rows, seconds = parse_budget(args.budget) if args.budget else (None, None)
    if not 0 < args.confidence < 1:
        raise CliError(f"error: --confidence must be between 0 and 1, not {args.confidence}")
    try:
        request = ArchiveRequest(read_query(args.query), Path(args.archive),
                                 parse_time(args.time_from) if args.time_from else -math.inf,
                                 parse_time(args.time_to) if args.time_to else math.inf,
                                 approximate=args.approximate, budget_rows=rows, budget_s=seconds,
                                 confidence=args.confidence)
    except ArchiveQueryError as exc:
        raise CliError(f"error: {exc}") from None
    if request.event_from >= request.event_to:
        raise CliError(f"error: --from {args.time_from} is not before --to {args.time_to}")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        progress(f"starting Spark ({args.master})")
        spark = spark_session(args.master, cores=args.cores)
        answer = query_archive(request, spark, progress)
    except ArchiveQueryError as exc:
        raise CliError(f"error: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - Spark's errors are long: the first line says it
        raise CliError(f"error: the archive query failed: {first_line(exc)}") from None
    out = sys.stdout
    out.write(f"<{answer.root}>\n")
    for item in answer.items:
        out.write(item + "\n")
    if answer.rate > 1:
        out.write(answer.approximation_xml() + "\n")
    out.write(f"</{answer.root}>\n")
    what = "exact" if answer.rate == 1 else f"approximate, from the 1/{answer.rate} sample"
    print(f"{len(answer.items)} result item(s), {what}; {answer.rows_read} archived rows read in "
          f"{answer.seconds:.1f} s", file=sys.stderr)
    for note in answer.notes:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK


def cmd_archive_list(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from superpeer.history.archive.layout import SAMPLE_RATES, ArchiveLayout

    layout = ArchiveLayout(args.archive)
    if not layout.root.is_dir():
        raise CliError(f"error: no archive at {layout.root}")
    listing = {}
    for stream in layout.streams():
        meta = layout.meta(stream)
        files = layout.files(stream)
        listing[stream] = {
            "items": sum(pq.ParquetFile(f.path).metadata.num_rows for f in files),
            "positions": [min((f.first for f in files), default=0), max((f.last for f in files), default=-1)],
            "event_time": meta.event_time or "arrival (unix seconds)", "bucket_span": meta.span,
            "buckets": sorted({f.bucket for f in files}), "columns": meta.columns, "samples": meta.samples,
            "sample_files": {f"1/{r}": len(layout.files(stream, r)) for r in SAMPLE_RATES}}
    print(json.dumps(listing, indent=2))
    return EXIT_OK


def register(add_command: AddCommand) -> None:
    archive = add_command("archive", help="query the Parquet archive a super-peer writes (serve --archive)")
    actions = archive.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    p = actions.add_parser("query", help="evaluate a WXQuery over an archive with Spark (batch)")
    p.add_argument("query", metavar="FILE", help="the WXQuery ('-' for stdin)")
    p.add_argument("--archive", required=True, metavar="DIR")
    p.add_argument("--from", dest="time_from", metavar="T",
                   help="only items with event time T or later (a number in the stream's event-time "
                        "units, or an ISO 8601 time for a stream archived by arrival)")
    p.add_argument("--to", dest="time_to", metavar="T", help="only items with event time before T")
    p.add_argument("--approximate", action="store_true",
                   help="answer from the coarsest sample (1/64): window aggregates scaled, with "
                        "confidence intervals in a trailing <sg:approximation> element")
    p.add_argument("--budget", metavar="ROWS|DURATION",
                   help="answer from the finest sample whose rows fit (e.g. 100000), or that the "
                        "throughput measured on the coarsest says fits the time (e.g. 10s)")
    p.add_argument("--confidence", type=float, default=0.95, help="of the intervals (default %(default)s)")
    p.add_argument("--master", default="local[2]", help="the Spark master (default %(default)s)")
    p.add_argument("--cores", type=int, default=2, help="cores on a cluster master (default %(default)s)")
    p.set_defaults(func=cmd_archive_query)
    p = actions.add_parser("list", help="the streams of an archive: items, partitions, samples (JSON)")
    p.add_argument("--archive", required=True, metavar="DIR")
    p.set_defaults(func=cmd_archive_list)
