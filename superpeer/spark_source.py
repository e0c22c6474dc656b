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
from typing import Iterator

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


def make_task(chains_by_src: dict[int, list[Chain]], cursors: dict[int, Cursor], lateness: float):
    """The function ``mapInArrow`` runs on every partition (one input stream) of a micro-batch."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        local = {cid: Cursor(**vars(c)) for cid, c in cursors.items()}
        rows: list[tuple[int, int, int, str | None]] = []
        src = None
        for rb in batches:
            if rb.num_rows == 0:
                continue
            columns = rb.to_pydict()
            src = columns["src"][0]
            offs, texts, eos = columns["off"], columns["xml"], columns["eos"]
            # items before an end marker, then the marker (a stream ends at most once)
            cut = eos.index(True) if True in eos else len(texts)
            item_offsets = np.array(offs[:cut], dtype=np.int64)
            batch = ItemBatch(texts[:cut]) if cut else None
            for chain in chains_by_src.get(src, ()):
                if batch is None:
                    break
                out = evaluate_chain(chain, batch, item_offsets, local.setdefault(chain.id, Cursor()),
                                     lateness)
                rows.extend((chain.id, ITEM, o, x) for o, x in out.items)
                rows.extend((chain.id, PANE, p, json.dumps(v)) for p, v in out.panes)
                rows.extend((chain.id, RECORD, o, x) for o, x in out.records)
            if cut < len(texts):
                rows.append((-1, EOS, src, None))
        if src is not None:
            for chain in chains_by_src.get(src, ()):
                if chain.id in local:
                    rows.append((chain.id, CURSOR, 0, json.dumps(vars(local[chain.id]))))
        if rows:
            chain_ids, kinds, offs, texts = zip(*rows)
            yield pa.RecordBatch.from_arrays(
                [pa.array(chain_ids, pa.int32()), pa.array(kinds, pa.int32()),
                 pa.array(offs, pa.int64()), pa.array(texts, pa.string())],
                names=["chain", "kind", "off", "text"])

    return task
