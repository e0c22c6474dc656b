"""Where an archive keeps what (issue 15): the directory layout shared by the super-peer that
writes an archive (``archive.writer``) and the batch queries that read it (``archive.query``).

::

    DIR/<stream>/meta.json                        shape, event time, columns, partition span
    DIR/<stream>/chunks/part-<first>-<last>.json  a chunk's commit: its files are complete
    DIR/<stream>/full/bucket=<B>/part-<first>-<last>.parquet
    DIR/<stream>/sample_<R>/bucket=<B>/part-<first>-<last>.parquet   (a 1/R sample, OSCAR)

A **chunk** is a run of consecutive items (positions ``first``..``last``) written at once; its
items go to the file of their event-time **bucket** (``floor(event / span)``), so a chunk is one
file per bucket it touches, all named alike, and the chunks of a stream are disjoint and cover
it from where the archive began. A chunk exists once its commit file does (written last, by
rename): readers see only committed chunks, and a writer that crashed mid-chunk writes it again. A query reads whole chunks in position order (count windows
need every earlier item's count), and prunes buckets outside its event-time range.

Samples are **nested Bernoulli samples by position**: an item is in the 1/R sample if a hash of
its position falls below 1/R, so the 1/64 sample is inside the 1/32 one, a sample built lazily at
query time equals the one an eager writer built, and every item is in a sample with probability
exactly 1/R, independently of the others (the basis of the confidence intervals).
"""

from __future__ import annotations

import bisect
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from sharing.estimates import SAMPLE_RATES

FORMAT = 1
SAMPLE_MODES = ("eager", "lazy", "hybrid")
HYBRID_EAGER_FROM = 16  # hybrid: the coarse samples (1/16 … 1/64, small) eagerly, the fine ones lazily
PART = re.compile(r"part-(\d+)-(\d+)\.parquet")
COMMIT = re.compile(r"part-(\d+)-(\d+)\.json")
BUCKET = re.compile(r"bucket=(-?\d+)")


@dataclass
class ArchiveMeta:
    """What a query needs to know of an archived stream."""

    stream: str
    root: str
    item: str
    event_time: str  # the item's element the buckets are of ("": the arrival time, unix seconds)
    span: float  # bucket width in event-time units
    columns: dict[str, str] = field(default_factory=dict)  # parquet column -> item path (numeric)
    samples: str = "hybrid"  # how samples are built (SAMPLE_MODES)
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> "ArchiveMeta":
        j = json.loads(text)
        if j.get("format") != FORMAT:
            raise ValueError(f"archive format {j.get('format')} is not {FORMAT}")
        return cls(**j)

    def eager_rates(self) -> tuple[int, ...]:
        if self.samples == "eager":
            return SAMPLE_RATES
        if self.samples == "hybrid":
            return tuple(r for r in SAMPLE_RATES if r >= HYBRID_EAGER_FROM)
        return ()


@dataclass(frozen=True)
class ChunkFile:
    path: Path
    first: int
    last: int
    bucket: int


def column_name(path: str) -> str:
    """A parquet column for an item path (``coord/cel/ra`` -> ``v_coord__cel__ra``): no dots or
    slashes, which Spark would read as nesting."""
    return "v_" + re.sub(r"[^A-Za-z0-9_]", "_", path.replace("/", "__"))


def part_name(first: int, last: int) -> str:
    return f"part-{first:012d}-{last:012d}.parquet"


def bucket_of(event: np.ndarray, span: float) -> np.ndarray:
    return np.floor(event / span).astype(np.int64)


def sample_keys(positions: np.ndarray) -> np.ndarray:
    """A uniform number in [0, 1) per position (splitmix64): the same everywhere, every time."""
    z = positions.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def in_sample(positions: np.ndarray, rate: int) -> np.ndarray:
    """The mask of positions in the 1/``rate`` sample (nested: 1/64 ⊂ 1/32 ⊂ …)."""
    return sample_keys(positions) < 1.0 / rate


class ArchiveLayout:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        # per stream: the chunks directory's mtime, its records, and their watermarks by position
        self._records: dict[str, tuple[int, list[tuple[int, int, dict]], list[int], list[tuple[int, str, float]]]] = {}

    def stream_dir(self, stream: str) -> Path:
        return self.root / stream

    def tree(self, stream: str, rate: int = 1) -> Path:
        return self.stream_dir(stream) / ("full" if rate == 1 else f"sample_{rate}")

    def meta_path(self, stream: str) -> Path:
        return self.stream_dir(stream) / "meta.json"

    def streams(self) -> list[str]:
        return sorted(p.parent.name for p in self.root.glob("*/meta.json")) if self.root.is_dir() else []

    def meta(self, stream: str) -> ArchiveMeta:
        path = self.meta_path(stream)
        if not path.is_file():
            have = ", ".join(self.streams()) or "none"
            raise FileNotFoundError(f'stream "{stream}" is not in the archive {self.root} (streams there: {have})')
        return ArchiveMeta.from_json(path.read_text())

    def file(self, stream: str, rate: int, bucket: int, first: int, last: int) -> Path:
        return self.tree(stream, rate) / f"bucket={bucket}" / part_name(first, last)

    def commit_path(self, stream: str, first: int, last: int) -> Path:
        return self.stream_dir(stream) / "chunks" / part_name(first, last).replace(".parquet", ".json")

    def committed(self, stream: str) -> set[tuple[int, int]]:
        folder = self.stream_dir(stream) / "chunks"
        if not folder.is_dir():
            return set()
        return {(int(m.group(1)), int(m.group(2))) for f in folder.iterdir() if (m := COMMIT.fullmatch(f.name))}

    def event_ranges(self, stream: str) -> dict[tuple[int, int], tuple[float, float] | None]:
        """Per committed chunk, the lowest and highest event time of its items (None: unknown)."""
        return {(first, last): tuple(r["events"]) if r.get("events") else None
                for first, last, r in self._chunk_records(stream)[1]}

    def watermarks(self, stream: str, start: int, stop: int) -> list[tuple[int, str, float]]:
        """(after, element, value) of the archived watermarks sent after item ``start`` up to
        ``stop`` (``StateStore.read_watermarks``' form)."""
        _, _, afters, marks = self._chunk_records(stream)
        return marks[bisect.bisect_right(afters, start):bisect.bisect_right(afters, stop)]

    def _chunk_records(self, stream: str):
        """(the chunks directory's mtime, every committed chunk's (first, last, record) in
        position order, the watermarks' positions, the watermarks): a chunk's record never
        changes once committed, so the directory is read again only when it changed (replays
        ask for every thousand items)."""
        folder = self.stream_dir(stream) / "chunks"
        try:
            stamp = folder.stat().st_mtime_ns
        except FileNotFoundError:
            return 0, [], [], []
        cached = self._records.get(stream)
        if cached is not None and cached[0] == stamp:
            return cached
        known = {(first, last): r for first, last, r in cached[1]} if cached is not None else {}
        records = [(first, last, known.get((first, last)) or json.loads(self.commit_path(stream, first, last).read_text()))
                   for first, last in sorted(self.committed(stream))]
        found: dict[int, tuple[int, str, float]] = {}  # (a chunk's first watermark may be its predecessor's last)
        for _, _, r in records:
            for after, path, value in r.get("watermarks", ()):
                found[int(after)] = (int(after), str(path), float(value))
        afters = sorted(found)
        entry = (stamp, records, afters, [found[a] for a in afters])
        if time.time_ns() - stamp > 2_000_000_000:  # (a coarse clock could hide a commit in the same tick)
            self._records[stream] = entry
        return entry

    def files(self, stream: str, rate: int = 1, uncommitted: bool = False) -> list[ChunkFile]:
        """Every data file of a tree's committed chunks (``uncommitted``: of the others), in
        position order."""
        out = []
        tree = self.tree(stream, rate)
        if not tree.is_dir():
            return []
        committed = self.committed(stream)
        for bucket_dir in tree.iterdir():
            b = BUCKET.fullmatch(bucket_dir.name)
            if b is None or not bucket_dir.is_dir():
                continue
            for f in bucket_dir.iterdir():
                m = PART.fullmatch(f.name)
                if m is not None and ((int(m.group(1)), int(m.group(2))) in committed) != uncommitted:
                    out.append(ChunkFile(f, int(m.group(1)), int(m.group(2)), int(b.group(1))))
        return sorted(out, key=lambda c: (c.first, c.bucket))

    def archived_upto(self, stream: str) -> int:
        """The position after the last archived item (0: none): where writing resumes."""
        return max((last + 1 for _, last in self.committed(stream)), default=0)


def chunks(files: list[ChunkFile]) -> list[tuple[int, int, list[ChunkFile]]]:
    """Files grouped by chunk, (first, last, files), in position order."""
    out: dict[tuple[int, int], list[ChunkFile]] = {}
    for f in files:
        out.setdefault((f.first, f.last), []).append(f)
    return [(a, b, fs) for (a, b), fs in sorted(out.items())]
