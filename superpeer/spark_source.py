"""What runs inside Spark: the feed data source and the micro-batch task.

Both run in Spark's Python worker processes, not in the super-peer: the reader fetches the
super-peer's buffered items over the feed's loopback connection (``spark_feed``), with real
offsets so that Spark's checkpoint can replay a batch; the task evaluates every chain installed
on the batch's input stream (``batch_operators``) and returns items, per-pane partial aggregates,
records and the chains' cursors as one Arrow table. One partition per input stream keeps each
stream's items in order inside one task, so count windows and lateness are exact; a stream
whose operators are all per-item (selections, projections) is split across tasks.
"""

from __future__ import annotations

import json
from multiprocessing.connection import Client
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from .batch_operators import Chain, Cursor, ItemBatch, evaluate_chain

SOURCE_NAME = "streamglobe_feed"
SOURCE_SCHEMA = "off long, src int, xml string, eos boolean"
TASK_SCHEMA = "chain int, kind int, off long, text string"
ITEM, PANE, RECORD, CURSOR, EOS = range(5)


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


class FeedReader(DataSourceStreamReader):
    def __init__(self, options: dict) -> None:
        self.options = dict(options)
        self.client = _FeedClient(self.options)

    def initialOffset(self) -> dict:
        return {"offset": self.client.call("base")}

    def latestOffset(self) -> dict:
        return {"offset": self.client.call("latest")}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = start["offset"], end["offset"]
        return [InputPartition(part) for part in self.client.call("plan", s, e)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        src, start, end = partition.value
        client = _FeedClient(self.options)
        offsets, texts = client.call("read", src, start, end)
        client.conn.close()
        yield pa.RecordBatch.from_arrays(
            [pa.array(offsets, pa.int64()), pa.array([src] * len(offsets), pa.int32()),
             pa.array(texts, pa.string()), pa.array([t is None for t in texts], pa.bool_())],
            names=["off", "src", "xml", "eos"])

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


class ArrowTexts(Sequence[str]):
    """An Arrow string column as a sequence of str, converting only the items that are read."""

    def __init__(self, column: pa.Array) -> None:
        self.column = column

    def __len__(self) -> int:
        return len(self.column)

    def __getitem__(self, i):  # type: ignore[override]
        return self.column[i].as_py()


def joined_utf8(column: pa.Array) -> bytes:
    """All strings of an Arrow string column concatenated: a slice of its data buffer."""
    if len(column) == 0:
        return b""
    _, offsets_buffer, data = column.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if pa.types.is_large_string(column.type) else np.int32)
    first, last = int(offsets[column.offset]), int(offsets[column.offset + len(column)])
    return data.slice(first, last - first).to_pybytes() if last > first else b""


def make_task(chains_by_src: dict[int, list[Chain]], cursors: dict[int, Cursor], lateness: float):
    """The function ``mapInArrow`` runs on every partition (one input stream) of a micro-batch."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        local = {cid: Cursor(**vars(c)) for cid, c in cursors.items()}
        rows: list[tuple[int, int, int, str | None]] = []
        src = None
        for rb in batches:
            if rb.num_rows == 0:
                continue
            src = rb.column("src")[0].as_py()
            offs = rb.column("off").to_numpy(zero_copy_only=False)
            eos = rb.column("eos").to_numpy(zero_copy_only=False)
            # items before an end marker, then the marker (a stream ends at most once)
            cut = int(np.argmax(eos)) if eos.any() else rb.num_rows
            xml = rb.column("xml").slice(0, cut)
            batch = ItemBatch(ArrowTexts(xml), joined_utf8(xml)) if cut else None
            chains = chains_by_src.get(src, ())
            if batch is not None:
                batch.prepare(p for chain in chains for p in chain.paths())
            for chain in chains:
                if batch is None:
                    break
                out = evaluate_chain(chain, batch, offs[:cut], local.setdefault(chain.id, Cursor()), lateness)
                rows.extend((chain.id, ITEM, o, x) for o, x in out.items)
                rows.extend((chain.id, PANE, p, json.dumps(v)) for p, v in out.panes)
                rows.extend((chain.id, RECORD, o, x) for o, x in out.records)
            if cut < rb.num_rows:
                rows.append((-1, EOS, src, None))
        if src is not None:
            for chain in chains_by_src.get(src, ()):
                if chain.id in local and chain.output_kind == "records":  # per-item chains keep no state
                    rows.append((chain.id, CURSOR, 0, json.dumps(vars(local[chain.id]))))
        if rows:
            chain_ids, kinds, offs_out, texts = zip(*rows)
            yield pa.RecordBatch.from_arrays(
                [pa.array(chain_ids, pa.int32()), pa.array(kinds, pa.int32()),
                 pa.array(offs_out, pa.int64()), pa.array(texts, pa.string())],
                names=["chain", "kind", "off", "text"])

    return task
