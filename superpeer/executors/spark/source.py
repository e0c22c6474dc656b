"""What runs inside Spark: the feed data source, whose scan tasks evaluate the operators.

Both halves of a micro-batch's work run in Spark's Python worker processes, not in the
super-peer. The reader fetches the super-peer's buffered items over the feed's loopback
connection (``feed``), with real offsets so that Spark's checkpoint can replay a batch. The
operators are pushed down into that scan: each partition carries the chains installed on its
input stream and their cursors (planned by the driver right before the batch runs, after the
previous batch was applied), so the task that fetched the items parses them once and evaluates
every chain on them (``wxquery.operators.chains``). It returns items, per-pane partial aggregates, records
and the chains' cursors as rows; the raw items never cross into the JVM and back.

Every chain sees its stream's items in order inside one task, so count windows and lateness are
exact; a large batch is still spread over the task slots, by ranges when a stream's chains are
all per-item, by groups of chains otherwise (``partition_tasks``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from multiprocessing.connection import Client
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from wxquery.operators.batch import ItemBatch
from wxquery.operators.chains import Chain, evaluate_chain
from wxquery.operators.windows import WindowClock

from .feed import FeedSlice, no_delay

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
    cursors: dict[int, WindowClock]
    lateness: float


# A stream's batch is spread over tasks only if each gets this many items: below, a second task
# would cost more than it saves.
TASK_MIN_ITEMS = 2000


def partition_tasks(sources: list[tuple[int, int]], start: int, end: int,
                    chains: dict[int, list[Chain]], cursors: dict[int, WindowClock], lateness: float,
                    parallelism: int) -> list[FeedTask]:
    """A micro-batch's partitions: per input stream, its range and the chains to run on it.

    A large batch of one stream is spread over the task slots in one of two ways that keep every
    chain's items in one task and in order: when all its chains are per-item (no state), the
    range is cut into pieces with every chain; otherwise the chains are dealt into groups that
    each see the whole range (the items are then parsed once per group, worth it only when there
    are several chains per group).
    """
    tasks = []
    for src, count in sources:
        mine = chains.get(src, [])
        state = {c.id: cursors[c.id] for c in mine if c.id in cursors}
        k = min(parallelism, max(count // TASK_MIN_ITEMS, 1))
        if k > 1 and mine and all(c.output_kind == "items" and c.input_kind == "items" for c in mine):
            bounds = [start + (end - start) * i // k for i in range(k + 1)]
            tasks.extend(FeedTask(src, a, b, tuple(mine), state, lateness) for a, b in zip(bounds, bounds[1:]))
        elif k > 1 and len(mine) >= 2 * k:
            for g in range(k):
                group = tuple(mine[g::k])
                tasks.append(FeedTask(src, start, end, group, {c.id: state[c.id] for c in group if c.id in state},
                                      lateness))
        else:
            tasks.append(FeedTask(src, start, end, tuple(mine), state, lateness))
    return tasks


_CLIENTS: dict[tuple[str, str, str], "_FeedClient"] = {}


class _FeedClient:
    def __init__(self, options: dict) -> None:
        self.address = (options["host"], int(options["port"]))
        self.authkey = bytes.fromhex(options["authkey"])
        self.conn = None

    def call(self, method: str, *args):
        if self.conn is None:
            self.conn = Client(self.address, authkey=self.authkey)
            no_delay(self.conn)
        self.conn.send((method, *args))
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"StreamGlobe feed: {value}")
        return value

    @classmethod
    def shared(cls, options: dict) -> "_FeedClient":
        """This worker process's connection to the feed: Python workers are reused across tasks,
        and a connection per task would pay the connection and authentication round trips."""
        key = (options["host"], options["port"], options["authkey"])
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = cls(options)
        return client

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
        client = _FeedClient.shared(self.options)
        try:
            items: FeedSlice = client.call("read", task.src, task.start, task.end)
        except BaseException:
            client.close()  # a broken connection is not reused
            raise
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
    local = {cid: WindowClock.from_dict(c.to_dict()) for cid, c in task.cursors.items()}
    rows: list[tuple[int, int, int, str | None]] = []
    if len(items.offsets) and task.chains:
        batch = ItemBatch(JoinedTexts(items.joined, items.lengths), items.joined)
        batch.prepare(p for chain in task.chains for p in chain.paths())
        for chain in task.chains:
            out = evaluate_chain(chain, batch, items.offsets, local.setdefault(chain.id, WindowClock()), task.lateness)
            rows.extend((chain.id, ITEM, o, x) for o, x in out.items)
            rows.extend((chain.id, PANE, p, json.dumps(v)) for p, v in out.panes)
            rows.extend((chain.id, RECORD, o, x) for o, x in out.records)
    if items.ended:  # after the stream's last items
        rows.append((-1, EOS, task.src, None))
    for chain in task.chains:
        if chain.id in local and chain.output_kind == "records":  # per-item chains keep no state
            rows.append((chain.id, CURSOR, 0, json.dumps(local[chain.id].to_dict())))
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
