"""A super-peer's archive (issue 15, ``serve --archive DIR``): every stream registered there,
persisted as Parquet for queries over the past (``archive.query``) and for ``subscribe --since``
reaching beyond the in-memory history (``history_source``).

The writer follows each stream's log (``state_store``), not the publish path: a chunk of logged
items is parsed once, its event time and numeric columns extracted, and written one file per
event-time bucket (``archive.layout``), each file to a temporary name then renamed. Where
writing resumes after a restart is read from the files themselves (the last position written),
so a chunk is never archived twice; the log keeps every item not yet archived (``retention``
counts the archive's position as a pin). Rows keep the item's XML as it was logged (lossless),
its position, arrival time, event time, and the numeric leaves the stream's statistics know.

Samples (OSCAR's multiple resolutions) are written with each chunk for the rates the mode makes
eagerly (``ArchiveMeta.eager_rates``); the others are built by the first query that needs them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wxquery.operators.batch import ItemBatch

from ...peer_state import OriginalState, PeerState
from .layout import SAMPLE_MODES, SAMPLE_RATES, ArchiveLayout, ArchiveMeta, bucket_of, column_name, in_sample

log = logging.getLogger("streamglobe.superpeer")

CHUNK_ITEMS = 50_000  # the most items one chunk takes (one parse, one file per bucket)
MIN_CHUNK_ITEMS = 5_000  # fewer wait for more, up to FLUSH_S
FLUSH_S = 2.0
MAX_COLUMNS = 64


@dataclass(frozen=True)
class ArchiveSettings:
    """``serve --archive DIR --archive-bucket SPAN --archive-samples MODE``."""

    directory: Path
    span: float = 3600.0  # bucket width, in the stream's event-time units (seconds of arrival without one)
    samples: str = "hybrid"

    def __post_init__(self) -> None:
        if not (self.span > 0 and math.isfinite(self.span)):
            raise ValueError(f"the archive's bucket span must be a positive number, not {self.span}")
        if self.samples not in SAMPLE_MODES:
            raise ValueError(f"archive samples {self.samples!r}: one of {', '.join(SAMPLE_MODES)}")


class Archiver:
    def __init__(self, state: PeerState, root: str | Path, span: float = 3600.0,
                 samples: str = "hybrid") -> None:
        self.state = state
        self.layout = ArchiveLayout(root)
        self.span = span
        self.samples = samples
        self.upto: dict[str, int] = {}  # stream -> the position after its last archived item
        self.written_items: dict[str, int] = {}
        self.write_s = 0.0  # spent writing (parse, extract, parquet) since start
        self.sample_write_s = 0.0  # of which writing samples
        self.last_error = ""
        self.errors: dict[str, int] = {}  # stream -> failed attempts in a row (it waits longer each time)
        self.gaps: dict[str, tuple[int, int]] = {}  # stream -> items missing from its archive
        self._retry_at: dict[str, float] = {}
        self._since_flush: dict[str, float] = {}
        self.kept_meta: set[str] = set()  # streams whose archive keeps settings other than this run's
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="archive", daemon=True)
        self.layout.root.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def position(self, stream: str) -> int:
        """Items of ``stream`` before this are archived (what the log may drop). The first time:
        after the last committed chunk (the files of one a crash left half-written go), or the
        log's first item if the log no longer holds what follows the archive (a gap, said once)."""
        if stream not in self.upto:
            for f in self.layout.files(stream, uncommitted=True):
                f.path.unlink(missing_ok=True)
            for rate in (1, *SAMPLE_RATES):
                for tmp in self.layout.tree(stream, rate).glob("bucket=*/*.tmp"):
                    tmp.unlink(missing_ok=True)
            for tmp in self.layout.stream_dir(stream).glob("chunks/*.tmp"):
                tmp.unlink(missing_ok=True)
            at = self.layout.archived_upto(stream)
            original = self.state.originals.get(stream)
            if original is not None and original.retained_from > at:
                self.gaps[stream] = (at, original.retained_from)
                log.warning("the archive of %s lacks items %d–%d: the log no longer holds them", stream, at,
                            original.retained_from - 1)
                at = original.retained_from
            self.upto[stream] = at
        return self.upto[stream]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.flush_once()
            except Exception as exc:  # noqa: BLE001 - the archive must never stop the daemon
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("archiving failed")
                busy = False
            if not busy:
                self._wake.wait(0.5)
                self._wake.clear()

    def flush_once(self, force: bool = False) -> bool:
        """Write one chunk of every stream that has enough waiting (or waited long enough, or
        ended; ``force``: anything); whether any stream has more waiting."""
        more = False
        now = time.monotonic()
        for original in list(self.state.originals.values()):
            if now < self._retry_at.get(original.name, 0.0):
                continue
            try:
                more = self._flush_stream(original, now, force) or more
                self.errors.pop(original.name, None)
            except Exception as exc:  # noqa: BLE001 - one stream's trouble stops neither the others nor the daemon
                n = self.errors[original.name] = self.errors.get(original.name, 0) + 1
                self._retry_at[original.name] = now + min(2.0 ** n, 300.0)
                self.last_error = f"{original.name}: {type(exc).__name__}: {exc}"
                log.warning("archiving %s failed (attempt %d): %s", original.name, n, self.last_error)
        return more

    def _flush_stream(self, original: OriginalState, now: float, force: bool) -> bool:
        """One chunk of one stream if it is due; whether more of it is waiting."""
        start, stop = self.position(original.name), original.logged
        if stop <= start:
            self._since_flush[original.name] = now
            return False
        waited = now - self._since_flush.setdefault(original.name, now)
        if not (force or original.closed or stop - start >= MIN_CHUNK_ITEMS or waited >= FLUSH_S):
            return False
        end = min(stop, start + CHUNK_ITEMS)
        self.write_chunk(original, start, end)
        self._since_flush[original.name] = now
        return end < stop

    def drain(self, deadline_s: float = 60.0) -> None:
        """Archive everything logged so far (tests, a stopping daemon)."""
        until = time.monotonic() + deadline_s
        while self.flush_once(force=True) and time.monotonic() < until:
            pass

    # ------------------------------------------------------------------ one chunk

    def write_chunk(self, original: OriginalState, start: int, end: int) -> None:
        texts = self.state.store.read_log(original.name, start, end)
        if len(texts) != end - start:  # trimmed under us: cannot happen while the pin holds
            raise RuntimeError(f"{original.name}: items {start}–{end - 1} are not all in the log")
        self.write_items(original, start, texts)

    def write_items(self, original: OriginalState, start: int, texts: list[str]) -> None:
        """Items ``start``… of ``original`` as one chunk (the log's, or a benchmark's)."""
        name, store, end = original.name, self.state.store, start + len(texts)
        began = time.perf_counter()
        meta = self._meta(original, texts)
        batch = ItemBatch(texts)
        batch.prepare([meta.event_time, *meta.columns.values()] if meta.event_time else meta.columns.values())
        positions = np.arange(start, end, dtype=np.int64)
        arrival = arrival_times(store.arrivals(name), positions)
        event = batch.first_values(meta.event_time) if meta.event_time else arrival
        event = np.where(np.isfinite(event), event, arrival)  # an item without one: when it came
        columns = {"position": positions, "arrival": arrival, "event": event,
                   "item": pa.array(texts, type=pa.large_string())}
        for col, path in meta.columns.items():
            columns[col] = batch.first_values(path)
        table = pa.table(columns)
        buckets = bucket_of(event, meta.span)
        rows_per_bucket = {}
        for b in np.unique(buckets).tolist():
            rows = np.flatnonzero(buckets == b)
            rows_per_bucket[b] = int(rows.size)
            part = table.take(pa.array(rows))
            write_atomically(part, self.layout.file(name, 1, b, start, end - 1))
            sampled = time.perf_counter()
            for rate in meta.eager_rates():
                write_atomically(part.filter(pa.array(in_sample(part.column("position").to_numpy(), rate))),
                                 self.layout.file(name, rate, b, start, end - 1))
            self.sample_write_s += time.perf_counter() - sampled
        # The watermarks sent among these items (and the one right before them, which may have
        # been logged after the previous chunk was written): a replay from the archive closes
        # time windows, and drops late items, as the first run did.
        marks = store.read_watermarks(name, start - 1, end)
        # last: the chunk now exists (every event time is finite: arrival stands in for a missing one)
        write_text_atomically(self.layout.commit_path(name, start, end - 1), json.dumps(
            {"first": start, "last": end - 1, "rows": rows_per_bucket, "samples": list(meta.eager_rates()),
             "events": [float(event.min()), float(event.max())],
             "watermarks": [list(m) for m in marks]}))
        self.write_s += time.perf_counter() - began
        self.upto[name] = end
        self.written_items[name] = self.written_items.get(name, 0) + (end - start)

    def _meta(self, original: OriginalState, texts: Sequence[str]) -> ArchiveMeta:
        path = self.layout.meta_path(original.name)
        if path.is_file():
            meta = ArchiveMeta.from_json(path.read_text())
            if (meta.span, meta.samples) != (self.span, self.samples) and original.name not in self.kept_meta:
                self.kept_meta.add(original.name)
                log.warning("the archive of %s keeps its bucket span %g and samples %s (not %g, %s): an "
                            "archive's layout does not change", original.name, meta.span, meta.samples,
                            self.span, self.samples)
            return meta
        meta = ArchiveMeta(original.name, original.root, original.item,
                           original.event_time.path if original.event_time else "", self.span,
                           {column_name(p): p for p in numeric_paths(original, texts)}, self.samples)
        write_text_atomically(path, meta.to_json())
        return meta

    def status(self) -> dict:
        return {"directory": str(self.layout.root), "bucket_span": self.span, "samples": self.samples,
                "archived_upto": dict(self.upto), "written_items": dict(self.written_items),
                "write_s": round(self.write_s, 3), "sample_write_s": round(self.sample_write_s, 3),
                "last_error": self.last_error, "failing": dict(self.errors),
                "gaps": {n: list(g) for n, g in self.gaps.items()}}


def numeric_paths(original: OriginalState, texts: Sequence[str]) -> list[str]:
    """The item's numeric leaves the stream's statistics know (from the first items if they
    know none yet, e.g. after a restart): those with a number in most sampled items."""
    samples = original.statistics.sample
    if not samples:
        from lxml import etree

        from sharing.statistics import StreamStatistics

        stats = StreamStatistics()
        for t in texts[:200]:
            try:
                stats.observe(etree.fromstring(t))
            except etree.XMLSyntaxError:
                continue
        samples = stats.sample
    counts: dict[str, int] = {}
    for values in samples:
        for p, v in values.items():
            if not math.isnan(v):
                counts[p] = counts.get(p, 0) + 1
    return sorted(p for p, n in counts.items() if n * 2 >= len(samples))[:MAX_COLUMNS]


def arrival_times(arrivals: list[tuple[int, float, int]], positions: np.ndarray) -> np.ndarray:
    """Each position's arrival time, from the log's (first item, time, bytes) per batch."""
    if not arrivals:
        return np.full(positions.shape, time.time())
    firsts = np.array([a[0] for a in arrivals], dtype=np.int64)
    times = np.array([a[1] for a in arrivals], dtype=np.float64)
    idx = np.clip(np.searchsorted(firsts, positions, side="right") - 1, 0, len(times) - 1)
    return times[idx]


def write_atomically(table: pa.Table, path: Path) -> None:
    """A Parquet file under a temporary name of its own (a query building the same sample
    lazily may be at it too), then renamed."""
    tmp = _temporary(path)
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def write_text_atomically(path: Path, text: str) -> None:
    tmp = _temporary(path)
    tmp.write_text(text)
    os.replace(tmp, path)


def _temporary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def build_sample(layout: ArchiveLayout, stream: str, rate: int, first: int, last: int, bucket: int) -> Path:
    """A lazily built sample file (the same rows an eager writer would have written)."""
    target = layout.file(stream, rate, bucket, first, last)
    if not target.is_file():
        table = pq.read_table(layout.file(stream, 1, bucket, first, last))
        write_atomically(table.filter(pa.array(in_sample(table.column("position").to_numpy(), rate))), target)
    return target


