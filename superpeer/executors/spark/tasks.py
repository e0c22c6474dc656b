"""What runs inside Spark: the scan tasks of a micro-batch, which evaluate the operators.

A micro-batch is one Spark job (``jobs``) whose tasks run in Spark's Python worker
processes, not in the super-peer. Each task fetches its range of one input stream's buffered
items from the super-peer's feed (``feed``; a connection per worker process, kept across tasks)
and carries the chains installed on that stream with their cursors (planned by the driver right
before the batch runs, after the previous batch was applied), so the task that fetched the items
parses them once and evaluates every chain on them (``wxquery.operators.chains``). It returns
items, per-pane partial aggregates, records and the chains' cursors as one picklable object;
the raw items never cross into the JVM and back, and nothing is converted to rows.

A large batch of one stream is cut into consecutive ranges, one per task slot, each evaluated by
every chain (``partition_tasks``): every item is parsed once for all chains. A window chain's
piece starts from the clock the batch started with; the driver joins the pieces exactly
(``wxquery.operators.pieces``).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Client
from typing import Iterable, Iterator

import numpy as np

from wxquery.operators.batch import ItemBatch
from wxquery.operators.chains import Chain, ChainOutput, evaluate_chain
from wxquery.operators.pieces import Piece
from wxquery.operators.predicate_index import NO_ROWS, PredicateIndex, Selected
from wxquery.operators.windows import WindowClock

from .collection import cycle_collection_paused
from .feed import FeedLog, FeedSlice, no_delay


@dataclass(frozen=True)
class FeedAddress:
    """Where a task fetches its items: the feed's address and its secret (hex)."""

    host: str
    port: int
    authkey: str


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

    A large batch of one stream is cut into up to ``parallelism`` consecutive ranges of at least
    ``TASK_MIN_ITEMS`` items, each with every chain: each item is parsed once however many
    chains there are (dealing the chains out in groups over the whole range instead parsed
    every item once per group, and parsing is most of the work). Every range is a piece
    (``wxquery.operators.pieces``): a chain's cursor gives only the admission threshold of its
    time window, so the cursors may be a batch behind (the driver numbers count windows and
    corrects late admissions when it merges).
    """
    tasks = []
    for src, count in sources:
        mine = tuple(chains.get(src, []))
        state = {c.id: WindowClock(high=cursors[c.id].high) for c in mine if c.id in cursors}
        k = min(parallelism, max(count // TASK_MIN_ITEMS, 1))
        bounds = [start + (end - start) * i // k for i in range(k + 1)]
        tasks.extend(FeedTask(src, a, b, mine, state, lateness) for a, b in zip(bounds, bounds[1:]))
    return tasks


def plan_batch(feed: FeedLog, chains: list[Chain], cursors: dict[int, WindowClock], start: int, end: int,
               lateness: float, parallelism: int) -> list[FeedTask]:
    """The partitions of the micro-batch over feed range ``[start, end)`` (``partition_tasks``);
    streams without chains are skipped."""
    by_src: dict[int, list[Chain]] = {}
    for c in sorted(chains, key=lambda c: c.id):
        if c.parent in feed.ids:
            by_src.setdefault(feed.ids[c.parent], []).append(c)
    sources = [(src, n) for src, n in feed.plan(start, end) if src in by_src]
    return partition_tasks(sources, start, end, by_src, cursors, lateness, parallelism)


def redo_piece(feed: FeedLog, chain: Chain, piece: Piece, clock: WindowClock,
               lateness: float) -> tuple[ChainOutput, WindowClock]:
    """A chain's piece of a batch evaluated again, in the driver, from the clock the pieces
    before it left (``wxquery.operators.pieces``: rare — its first items were late against them)."""
    task = FeedTask(feed.ids[chain.parent], piece.start, piece.end, (chain,), {chain.id: clock}, lateness)
    result = evaluate_task(task, feed.read(task.src, task.start, task.end))
    return result.outputs.get(chain.id) or ChainOutput(), result.cursors.get(chain.id, clock)


_CLIENTS: dict[FeedAddress, "_FeedClient"] = {}


class _FeedClient:
    def __init__(self, feed: FeedAddress) -> None:
        self.address = (feed.host, feed.port)
        self.authkey = bytes.fromhex(feed.authkey)
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
    def shared(cls, feed: FeedAddress) -> "_FeedClient":
        """This worker process's connection to the feed: Python workers are reused across tasks,
        and a connection per task would pay the connection and authentication round trips."""
        client = _CLIENTS.get(feed)
        if client is None:
            client = _CLIENTS[feed] = cls(feed)
        return client

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class TaskResult:
    """What one task hands back to the driver: per chain its output (``ChainOutput``), the
    clocks of the chains whose windows keep state, and whether the stream ended in the range."""

    src: int
    start: int
    end: int
    outputs: dict[int, ChainOutput] = field(default_factory=dict)
    cursors: dict[int, WindowClock] = field(default_factory=dict)
    ended: bool = False
    seconds: tuple[float, float, float] = (0.0, 0.0, 0.0)  # began, items fetched, done (``time.time``)


def run_task(feed: FeedAddress, tasks: list[FeedTask], index: int, _: Iterable) -> Iterator[bytes]:
    """Spark partition ``index`` of a micro-batch: fetch task ``index``'s items, evaluate. The
    result goes back pickled by ``pickle`` itself: Spark's own serializer (cloudpickle) calls a
    hook per object, which for tens of thousands of output items and panes took longer than the
    chains that made them."""
    task = tasks[index]
    client = _FeedClient.shared(feed)
    began = time.time()
    try:
        items: FeedSlice = client.call("read", task.src, task.start, task.end)
    except BaseException:
        client.close()  # a broken connection is not reused
        raise
    fetched = time.time()
    with cycle_collection_paused():
        result = evaluate_task(task, items)
    result.seconds = (began, fetched, time.time())
    yield pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def warm_up(feed: FeedAddress, index: int, _: Iterable) -> Iterator[int]:
    """A first job's task: imports the task code and opens the worker's feed connection, so that
    the first micro-batch with operators pays neither."""
    yield _FeedClient.shared(feed).call("base")


def evaluate_task(task: FeedTask, items: FeedSlice) -> TaskResult:
    """Every chain of the partition over its items."""
    local = {cid: WindowClock.from_dict(c.to_dict()) for cid, c in task.cursors.items()}
    result = TaskResult(task.src, task.start, task.end, ended=items.ended)
    if len(items.offsets) and task.chains:
        batch = ItemBatch(item_texts(items.joined, items.lengths))
        batch.prepare(p for chain in task.chains for p in chain.paths())
        # (many chains on one stream share a sorted key column: ``predicate_index``)
        index = PredicateIndex((c.id, c.atoms) for c in task.chains if c.input_kind == "items")
        selected = index.select(batch) if index.keys else Selected(frozenset(), {})
        for chain in task.chains:
            candidates = (selected.rows.get(chain.id, (NO_ROWS, ())) if chain.id in selected.covered
                          else None)
            result.outputs[chain.id] = evaluate_chain(chain, batch, items.offsets,
                                                      local.setdefault(chain.id, WindowClock()), task.lateness,
                                                      piece=True, candidates=candidates)
    for chain in task.chains:
        if chain.id in local and chain.output_kind == "records":  # per-item chains keep no state
            result.cursors[chain.id] = local[chain.id]
    return result


def item_texts(joined: bytes, lengths: np.ndarray) -> list[str]:
    """The items of a feed slice as strings. Decoding them is cheaper than what it buys: items of
    a known shape have their columns and projections read off their text by one regular
    expression, 3–4× faster than through a tree (``wxquery.operators.shapes``)."""
    bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
    whole = joined.decode("utf-8")
    if len(whole) == len(joined):  # ASCII: byte and character offsets agree
        return [whole[a:b] for a, b in zip(bounds, bounds[1:])]
    return [joined[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]
