"""What runs inside Spark: the feed data source, whose scan tasks evaluate the operators.

Both halves of a micro-batch's work run in Spark's Python worker processes, not in the
super-peer. The reader fetches the super-peer's buffered items over the feed's loopback
connection (``spark_feed``), with real offsets so that Spark's checkpoint can replay a batch. The
operators are pushed down into that scan: each partition carries the chains installed on its
input stream and their cursors (planned by the driver right before the batch runs, after the
previous batch was applied), so the task that fetched the items parses them once and evaluates
every chain on them (``batch_operators``). It returns items, per-pane partial aggregates, records
and the chains' cursors as rows; the raw items never cross into the JVM and back.

One partition per input stream keeps each stream's items in order inside one task, so count
windows and lateness are exact; a stream whose operators are all per-item (selections,
projections) is split across tasks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from multiprocessing.connection import Client
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from .batch_operators import Chain, Cursor, ItemBatch, evaluate_chain
from .spark_feed import FeedSlice

SOURCE_NAME = "streamglobe_feed"
SOURCE_SCHEMA = "chain int, kind int, off long, text string"
ITEM, PANE, RECORD, CURSOR, EOS = range(5)


@dataclass(frozen=True)
class FeedTask:
    """One partition of a micro-batch: a range of one input stream and what to run on it."""

    src: int
    start: int
    end: int
    chains: tuple[Chain, ...]
    cursors: dict[int, Cursor]
    lateness: float


class _FeedClient:
    def __init__(self, options: dict) -> None:
        self.address = (options["host"], int(options["port"]))
        self.authkey = bytes.fromhex(options["authkey"])
        self.conn = None

    def call(self, method: str, *args):
        if self.conn is None:
            self.conn = Client(self.address, authkey=self.authkey)
        self.conn.send((method, *args))
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"StreamGlobe feed: {value}")
        return value

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class FeedReader(DataSourceStreamReader):
    def __init__(self, options: dict) -> None:
        self.options = dict(options)
        self.client = _FeedClient(self.options)

    def initialOffset(self) -> dict:
        return {"offset": self.client.call("base")}

    def latestOffset(self) -> dict:
        return {"offset": self.client.call("latest")}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(task) for task in self.client.call("plan", start["offset"], end["offset"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task: FeedTask = partition.value
        client = _FeedClient(self.options)
        try:
            items: FeedSlice = client.call("read", task.src, task.start, task.end)
        finally:
            client.close()
        batch = evaluate_task(task, items)
        if batch is not None:
            yield batch

    def commit(self, end: dict) -> None:
        self.client.call("commit", end["offset"])


class FeedSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SOURCE_SCHEMA

    def streamReader(self, schema) -> FeedReader:
        return FeedReader(self.options)


def evaluate_task(task: FeedTask, items: FeedSlice) -> pa.RecordBatch | None:
    """Every chain of the partition over its items."""
    local = {cid: Cursor(**vars(c)) for cid, c in task.cursors.items()}
    rows: list[tuple[int, int, int, str | None]] = []
    if len(items.offsets) and task.chains:
        batch = ItemBatch(JoinedTexts(items.joined, items.lengths), items.joined)
        batch.prepare(p for chain in task.chains for p in chain.paths())
        for chain in task.chains:
            out = evaluate_chain(chain, batch, items.offsets, local.setdefault(chain.id, Cursor()), task.lateness)
            rows.extend((chain.id, ITEM, o, x) for o, x in out.items)
            rows.extend((chain.id, PANE, p, json.dumps(v)) for p, v in out.panes)
            rows.extend((chain.id, RECORD, o, x) for o, x in out.records)
    if items.ended:  # after the stream's last items
        rows.append((-1, EOS, task.src, None))
    for chain in task.chains:
        if chain.id in local and chain.output_kind == "records":  # per-item chains keep no state
            rows.append((chain.id, CURSOR, 0, json.dumps(vars(local[chain.id]))))
    if not rows:
        return None
    chain_ids, kinds, offs, out_texts = zip(*rows)
    return pa.RecordBatch.from_arrays(
        [pa.array(chain_ids, pa.int32()), pa.array(kinds, pa.int32()),
         pa.array(offs, pa.int64()), pa.array(out_texts, pa.string())],
        names=["chain", "kind", "off", "text"])


class JoinedTexts(Sequence[str]):
    """Items back to back in one UTF-8 buffer, decoded only where a chain passes one on."""

    def __init__(self, joined: bytes, lengths: np.ndarray) -> None:
        self.joined = joined
        self.bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, i):  # type: ignore[override]
        return self.joined[self.bounds[i]:self.bounds[i + 1]].decode("utf-8")
