"""The Spark executor: one Structured Streaming query per super-peer runs all its operators.

DESIGN.md §6 measured that N streaming queries cost N times the scheduling and memory of one, so
every operator chain a super-peer hosts is evaluated by a single query: the feed source
(``source``) plans a micro-batch's partitions per input stream, and the scan task that fetches a
partition's items evaluates every chain on them (``wxquery.operators.chains``); one ``toArrow``
collects the result — one Spark job per micro-batch, whatever the number of chains. The driver
(this process) merges per-pane partials into window state (``wxquery.operators.panes``) and hands
the new items of every derived stream to the node.

Installing or removing a chain changes the registry the next micro-batch reads; the query keeps
running. A chain sees the feed from the offset at which it was installed.

**Exactly once.** The feed is durable (``feed``); after every micro-batch the driver writes
its window state, the chains' output sequence numbers and the batch's outputs atomically to the
checkpoint directory *before* handing them on, and skips a batch Spark replays that it already
applied. After a restart with the same directory it re-hands the last batch's outputs with their
sequence numbers (a consumer drops numbers it has seen) and Spark replays the uncommitted offsets
from the feed: no output is lost or produced twice.

**Per-batch overhead.** Hadoop's local file system forks ``chmod`` for every checkpoint file
unless it has native libraries; the raw local file system with the file-system-based checkpoint
manager creates files without setting permissions, so no process is forked per batch. Python
workers are started with this interpreter (no shell shims) and reused.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import tempfile
import threading
import time
from pathlib import Path

from wxquery.operators import definitions as alg

from wxquery.operators.chains import Chain, normalise
from wxquery.operators.panes import ChainState
from wxquery.operators.windows import WindowClock, WindowCounters

from ..base import Deliver
from .driver_state import DriverState, PendingWatermarks  # (pickled checkpoints name DriverState here)
from .feed import FeedLog, FeedServer
from .session import cores_of, first_line, is_cluster, spark_session

log = logging.getLogger(__name__)

class SparkExecutor:
    name = "spark"
    wants_text = True
    synchronous = False  # outputs come from the streaming query's micro-batches

    def __init__(self, peer: str, master: str = "local[2]", checkpoint_dir: str | Path | None = None,
                 trigger_ms: int = 100, lateness: float = 0.0, max_batch: int = 200_000,
                 feed_host: str | None = None, cores: int | None = None) -> None:
        """``feed_host``: the address Spark's workers reach this super-peer at, for its feed
        and its driver (default: loopback for a local master, this host's address for a
        cluster). ``cores``: task slots of a micro-batch (default: N of ``local[N]``, else 2)."""
        self.peer = peer
        self.master = master
        self.trigger = f"{int(trigger_ms)} milliseconds"
        self.lateness = lateness
        self.parallelism = cores if cores and cores > 0 else cores_of(master)
        self.temporary = checkpoint_dir is None
        self.directory = Path(checkpoint_dir or tempfile.mkdtemp(prefix=f"streamglobe-{peer}-"))
        (self.directory / "driver").mkdir(parents=True, exist_ok=True)
        self.feed = FeedLog(self.directory / "feed", max_batch)
        if feed_host is None:
            feed_host = "0.0.0.0" if is_cluster(master) else "127.0.0.1"
        self.server = FeedServer(self.feed, self._plan, listen=feed_host)
        self.lock = threading.RLock()
        self.deliver: Deliver = lambda stream, seq, texts, end: None
        self.chains: dict[int, Chain] = {}
        self.by_stream: dict[str, int] = {}
        self.copies: set[str] = set()
        self.next_chain = 0
        self.state = DriverState()
        self.query = None
        self.error: str | None = None
        self.batches = 0
        self.processed = 0
        self.last_batch_ms = 0.0
        # The driver's state (micro-batches, watermarks); outputs are delivered in order under
        # ``deliver_lock``, taken before ``driver_lock`` is let go and never held by a caller of
        # ``push``/``advance`` (the node's lock): deliveries take that lock.
        self.driver_lock = threading.Lock()
        self.deliver_lock = threading.Lock()
        self.watermarks = PendingWatermarks()
        self._starting = False
        self.restarts = 0
        self._stopped = False
        self._load()

    # ------------------------------------------------------------------ registry

    def _load(self) -> None:
        chains = self.directory / "driver" / "chains.pkl"
        if chains.exists():
            saved = pickle.loads(chains.read_bytes())
            self.chains, self.next_chain = saved["chains"], saved["next"]
            self.by_stream = {c.stream: c.id for c in self.chains.values()}
        state = self.directory / "driver" / "state.pkl"
        if state.exists():
            self.state = pickle.loads(state.read_bytes())

    def _write(self, name: str, payload: object) -> None:
        path = self.directory / "driver" / name
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(payload))
        os.replace(tmp, path)

    def _save_chains(self) -> None:
        self._write("chains.pkl", {"chains": self.chains, "next": self.next_chain})

    def set_deliver(self, deliver: Deliver) -> None:
        """Where outputs go; after a restart, the last checkpointed batch's outputs go there again
        (with their sequence numbers) and the query resumes from Spark's checkpoint."""
        self.deliver = deliver
        with self.lock:
            for stream, seq, texts, end in self.state.outputs:
                deliver(stream, seq, texts, end)
            if self.chains:
                self._start_async()

    def install(self, stream: str, operators: tuple[alg.Operator, ...], parent: str | None = None,
                parent_kind: str = "items") -> None:
        if not operators:
            self.copies.add(stream)
            return
        assert parent is not None, "a computed stream has a parent"
        with self.lock:
            if stream in self.by_stream:
                return
            chain = normalise(self.next_chain, stream, parent, parent_kind, operators, self.feed.end)
            self.next_chain += 1
            self.chains[chain.id] = chain
            self.by_stream[stream] = chain.id
            self._save_chains()
            self._start_async()

    def remove(self, stream: str) -> None:
        self.copies.discard(stream)
        with self.lock:
            cid = self.by_stream.pop(stream, None)
            if cid is not None:
                self.chains.pop(cid, None)
                self._save_chains()

    def is_copy(self, stream: str) -> bool:
        return stream in self.copies

    def needs_values(self, stream: str) -> bool:
        return False  # tasks parse the wire text themselves

    def installed(self) -> list[str]:
        return sorted(self.copies) + sorted(self.by_stream)

    def push(self, parent: str, values: list, texts: list[str] | None, end: bool) -> None:
        if texts or end:
            self.feed.append(parent, texts, end)

    def advance(self, parent: str, path: str, value: float) -> None:
        """A watermark on ``parent``: the driver applies it to the time windows over ``path``
        once every item pushed before it has been through a micro-batch — at once for an idle
        stream (in a thread: a micro-batch may be running), else after the batch that takes the
        last of them. The driver's clocks are the tasks' next cursors, so an item that comes
        later below it is late in the tasks, as in the inline executor."""
        self.watermarks.add(self.feed.end, parent, path, value)
        threading.Thread(target=self._due_watermarks, name=f"watermark-{self.peer}", daemon=True).start()

    def _due_watermarks(self) -> None:
        outputs = []
        with self.driver_lock:
            for _, parent, path, value in self.watermarks.due(self.processed):
                outputs += self.state.advance(self.chains, parent, path, value, self.lateness)
            if outputs:
                self._write("state.pkl", self.state)
            self.deliver_lock.acquire()
        self._deliver(outputs)

    def _deliver(self, outputs: list) -> None:
        """Called holding ``deliver_lock`` (taken under ``driver_lock``): in sequence order."""
        try:
            for stream, seq, texts, end in outputs:
                self.deliver(stream, seq, texts, end)
        finally:
            self.deliver_lock.release()

    def accepted(self, parent: str) -> int:
        return self.feed.accepted(parent)

    # ------------------------------------------------------------------ the streaming query

    def _start_async(self) -> None:
        if self.query is not None or self._starting or self._stopped:
            return
        self._starting = True
        threading.Thread(target=self._start, name=f"spark-start-{self.peer}", daemon=True).start()

    def _start(self) -> None:
        query = None
        try:
            host, port = self.server.address
            spark = spark_session(self.master, host, self.parallelism)
            reader = (spark.readStream.format("streamglobe_feed").option("host", host)
                      .option("port", str(port)).option("authkey", self.server.authkey.hex()).load())
            query = (reader.writeStream.foreachBatch(self._batch)
                     .option("checkpointLocation", str(self.directory / "spark"))
                     .queryName(f"streamglobe-{self.peer}-{id(self)}")
                     .trigger(processingTime=self.trigger).start())
            with self.lock:
                self.query = query
                if self._stopped:
                    query.stop()
        except Exception as exc:  # noqa: BLE001 — shown in status; items stay in the feed
            self.error = f"Spark did not start: {first_line(exc)}"
            log.exception("Spark executor of %s did not start", self.peer)
        finally:
            self._starting = False
        threading.Thread(target=self._supervise, args=(query,), name=f"spark-watch-{self.peer}",
                         daemon=True).start()

    def _supervise(self, query) -> None:
        """Restart a query that died (or never started), after a growing pause.

        The feed is durable and the driver state is checkpointed with every batch, so a new
        query on the same checkpoint resumes exactly where the dead one stopped; meanwhile
        ``status`` shows why it died. (On a loaded machine Spark gives a new query's Python
        source process 10 s to connect back, and a batch can fail for a worker that died.)
        """
        if query is not None:
            try:
                query.awaitTermination()
                reason = "it stopped"
            except Exception as exc:  # noqa: BLE001 — the reason is reported, then we restart
                reason = first_line(exc)
            with self.lock:
                if self._stopped or self.query is not query:
                    return
                self.query = None
                self.error = f"the streaming query died ({reason}); restarting"
        log.warning("Spark executor of %s: %s", self.peer, self.error)
        self.restarts += 1
        time.sleep(min(30.0, 0.5 * 2 ** min(self.restarts, 6)))
        with self.lock:
            if not self._stopped:
                self._start_async()

    def _plan(self, start: int, end: int) -> list:
        """The next micro-batch's partitions (``source.partition_tasks``), each with its
        chains and their cursors. Spark plans a batch after the previous one's ``foreachBatch``
        returned, so the cursors are those of the last applied batch (also on a replay)."""
        from .source import partition_tasks

        with self.lock:
            chains = sorted(self.chains.values(), key=lambda c: c.id)
            cursors = {cid: s.clock for cid, s in self.state.states.items() if cid in self.chains}
        by_src: dict[int, list[Chain]] = {}
        for c in chains:
            if c.parent in self.feed.ids:
                by_src.setdefault(self.feed.ids[c.parent], []).append(c)
        return partition_tasks(self.feed.plan(start, end), start, end, by_src, cursors, self.lateness,
                               self.parallelism)

    def _batch(self, df, batch_id: int) -> None:
        started = time.perf_counter()
        planned = self.feed.planned
        try:
            with self.driver_lock:
                outputs = self._apply(df, batch_id)
                self.processed = planned
                self.deliver_lock.acquire()
            self._deliver(outputs)
        except Exception as exc:
            self.error = f"batch {batch_id}: {exc}"
            log.exception("micro-batch %s at %s failed", batch_id, self.peer)
            raise
        self.batches += 1
        if self.watermarks:
            self._due_watermarks()
        self.error = None
        self.last_batch_ms = 1000 * (time.perf_counter() - started)

    def _apply(self, df, batch_id: int) -> list:
        """Fold one micro-batch into the driver's state; the outputs to deliver, in order."""
        from .source import CURSOR, EOS, ITEM, PANE, RECORD

        if batch_id <= self.state.last_batch:
            return []  # replayed after a restart: applied and checkpointed already
        with self.lock:
            chains = dict(self.chains)
        table = df.toArrow()
        columns = table.to_pydict()
        items: dict[int, list] = {}
        panes: dict[int, list] = {}
        records: dict[int, list] = {}
        new_cursors: dict[int, WindowClock] = {}
        ended: set[int] = set()
        for cid, kind, off, text in zip(columns["chain"], columns["kind"], columns["off"], columns["text"]):
            if kind == ITEM:
                items.setdefault(cid, []).append(text)
            elif kind == PANE:
                panes.setdefault(cid, []).append((off, json.loads(text)))
            elif kind == RECORD:
                records.setdefault(cid, []).append(text)
            elif kind == CURSOR:
                new_cursors[cid] = WindowClock.from_dict(json.loads(text))
            elif kind == EOS:
                ended.add(off)
        state = self.state
        states = {cid: s for cid, s in state.states.items() if cid in chains}
        outputs = []
        for cid, chain in sorted(chains.items()):
            st = states.get(cid)
            if st is None:
                st = states[cid] = ChainState(chain)
            if st.ended:
                continue
            end = self.feed.ids.get(chain.parent) in ended
            texts = st.apply(items.get(cid, []), panes.get(cid, []), records.get(cid, []),
                             new_cursors.get(cid), self.lateness, end)
            st.ended = end
            if texts or end:
                seq = state.seqs.get(chain.stream, 0)
                outputs.append((chain.stream, seq, texts, end))
                state.seqs[chain.stream] = seq + len(texts)
        self.state = DriverState(batch_id, states, state.seqs, outputs)
        self._write("state.pkl", self.state)
        return outputs

    # ------------------------------------------------------------------ lifecycle

    def window_counters(self) -> dict[str, WindowCounters]:
        with self.lock:
            chains = dict(self.chains)
            states = dict(self.state.states)
        return {chain.stream: states[cid].clock.counters() if cid in states else WindowCounters()
                for cid, chain in chains.items() if chain.window is not None}

    def status(self) -> dict:
        return {"executor": "spark", "master": self.master, "running": self.query is not None,
                "chains": len(self.chains), "micro_batches": self.batches,
                "last_batch_ms": round(self.last_batch_ms, 1), "backlog_items": self.feed.backlog(),
                "checkpoint": str(self.directory), "restarts": self.restarts, "error": self.error,
                "feed": "%s:%d" % self.server.address, "feed_rejected": self.server.rejected,
                "watermarks": {"applied": self.watermarks.applied, "waiting": len(self.watermarks)},
                **self._cluster_status()}

    def _cluster_status(self) -> dict:
        """On a cluster: how many executors the application holds. None while the query is
        running is the one thing a user must see: the master has no free cores or memory for
        this super-peer, and its items wait in the feed until it has."""
        if not is_cluster(self.master) or self.query is None:
            return {}
        try:
            from pyspark import SparkContext

            context = SparkContext._active_spark_context
            infos = context.statusTracker().getExecutorInfos() if context is not None else []
        except Exception:  # noqa: BLE001 — the session is going down
            return {}
        executors = max(len(infos) - 1, 0)  # the driver is listed too
        shown: dict = {"cluster_executors": executors}
        if executors == 0:
            shown["warning"] = (f"no executors from {self.master} yet: the cluster has no free cores or "
                                "memory for this super-peer's application (items wait in the feed)")
        return shown

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Until every fed item is processed (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.processed >= self.feed.end or not self.chains:
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        with self.lock:
            self._stopped = True
            query = self.query
        if query is not None:
            try:
                query.stop()
            except Exception:  # noqa: BLE001 — the session may be going down already
                pass
        self.server.stop()
        self.feed.close()
        if self.temporary:
            shutil.rmtree(self.directory, ignore_errors=True)
