"""The Spark executor: one micro-batch loop per super-peer runs all its operators.

DESIGN.md §6 measured that N streaming queries cost N times the scheduling and memory of one, so
every operator chain a super-peer hosts is evaluated by one Spark job per micro-batch: the driver
(this process) plans the batch's partitions per input stream (``tasks.partition_tasks``), and the
scan task that fetches a partition's items from the feed evaluates every chain on them
(``wxquery.operators.chains``); the tasks' results come back with the job (``jobs``). A large
batch is cut into consecutive ranges, one per task slot, so every item is parsed once for all
chains; the driver joins each chain's pieces (``wxquery.operators.pieces``), merges per-pane
partials into window state (``wxquery.operators.panes``) and hands the new items of every
derived stream to the node. The session and its Python workers start with the executor
(``warm``), so installing an operator never waits for a JVM. Installing or removing a chain
changes the registry the next micro-batch reads; a chain sees the feed from where it was installed.

**Exactly once.** The feed is durable (``feed``); after every micro-batch the driver writes its
window state, the chains' output sequence numbers, the batch's outputs and the feed offset it
ended at atomically to the checkpoint directory *before* handing the outputs on and letting the
feed drop the batch's items. After a restart with the same directory it re-hands the last batch's
outputs with their sequence numbers (a consumer drops numbers it has seen) and resumes at that
offset: no output is lost or produced twice. A job that fails (a worker killed, the cluster
gone) changes nothing and the same batch is run again.

**Pacing.** A batch starts when the feed has items, at most one per trigger interval (``pacing``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

from wxquery.operators import definitions as alg
from wxquery.operators.chains import Chain, ChainOutput, normalise
from wxquery.operators.pieces import Piece
from wxquery.operators.windows import WindowClock, WindowCounters

from ..base import Deliver, Passed, installs_a_copy
from ..spark import pacing
from .checkpoint import DriverCheckpoint
from .driver_state import DriverState, PendingWatermarks
from .feed import FeedLog, FeedRoom, FeedServer
from .jobs import Batch, SparkJobs, job_error
from .origins import FeedOrigins
from .session import cores_of, first_line, is_cluster
from .status import executor_status, wait_idle, window_counters
from .tasks import FeedAddress, plan_batch, redo_piece

log = logging.getLogger(__name__)


class SparkExecutor:
    name = "spark"
    wants_text = True
    synchronous = False  # outputs come from the micro-batches
    aligns_count_windows = False  # (its items do not say where they came from)

    def __init__(self, peer: str, master: str = "local[2]", checkpoint_dir: str | Path | None = None,
                 trigger_ms: int = 100, lateness: float = 0.0, max_batch: int = 100_000,
                 feed_host: str | None = None, cores: int | None = None, warm: bool = True,
                 deliver: Deliver | None = None, backlog: int = 64 << 20, passed: Passed | None = None) -> None:
        """``feed_host``: the address Spark's workers reach this super-peer at, for its feed
        and its driver (default: loopback for a local master, this host's address for a
        cluster). ``cores``: task slots of a micro-batch (default: N of ``local[N]``, else 2).
        ``deliver``: where outputs go. ``warm``: Spark starts with the executor, not with the
        first operator. ``max_batch``: items per micro-batch at most, which bounds a task's
        memory (at 30 operators: 1.3 GB for the process tree at 100,000, 2.2 GB at 200,000).
        ``backlog``: bytes of input not yet through a micro-batch before the batches for it wait
        (``room``: back-pressure), and at most ten micro-batches of items. ``passed``: ``advance``."""
        self.peer, self.master = peer, master
        self.backlog_bytes, self.backlog_items = backlog, 10 * max_batch
        self.interval = max(int(trigger_ms), 0) / 1000
        self.lateness = lateness
        self.warm = warm
        self.parallelism = cores if cores and cores > 0 else cores_of(master)
        self.temporary = checkpoint_dir is None
        self.directory = Path(checkpoint_dir or tempfile.mkdtemp(prefix=f"streamglobe-{peer}-"))
        self.feed = FeedLog(self.directory / "feed")
        self.max_batch = max_batch
        if feed_host is None:
            feed_host = "0.0.0.0" if is_cluster(master) else "127.0.0.1"
        self.server = FeedServer(self.feed, listen=feed_host)  # listening from ``start``
        self.jobs: SparkJobs | None = None  # with the feed's address, at ``start``
        self.lock = threading.RLock()
        self.deliver: Deliver = deliver or (lambda stream, seq, texts, end: None)
        self.passed: Passed = passed or (lambda stream, path, value: None)
        self.chains: dict[int, Chain] = {}
        self.by_stream: dict[str, int] = {}
        self.copies: set[str] = set()
        self.next_chain = 0
        self.state = DriverState()
        self.error: str | None = None
        self.batches = 0
        self.failed_batches = 0  # jobs that failed; the batch was run again
        self.redone_pieces = 0  # window pieces the driver evaluated again (``_redo``)
        self.start_failures, self.last_start_failure = 0, ""  # the reason stays after a success
        self.spark_restarts = 0  # JVMs found dead and replaced
        self.delivery_failures, self.delivery_error = 0, None  # outputs the node did not take (a restart resends)
        self.last_batch_ms, self.busy_s = 0.0, 0.0
        self.started_at = time.monotonic()
        self.ready_after_s: float | None = None  # from construction until the first job ran
        # The driver's state (micro-batches, watermarks); outputs are delivered in order under
        # ``deliver_lock``, taken before ``driver_lock`` is let go and never held by a caller of
        # ``push``/``advance`` (the node's lock): deliveries take that lock.
        self.driver_lock = threading.Lock()
        self.deliver_lock = threading.Lock()
        self.wake = threading.Condition()
        self.watermarks = PendingWatermarks()
        self.origins = FeedOrigins()  # (where the feed's items came from, until committed)
        self._loop: threading.Thread | None = None
        self._stopped = False
        self.checkpoint = DriverCheckpoint(self.directory, peer)
        self._load()
        self.processed = self.state.end

    # ------------------------------------------------------------------ registry

    def _load(self) -> None:
        saved = self.checkpoint.chains()
        if saved is not None:
            self.chains, self.next_chain = saved
            self.by_stream = {c.stream: c.id for c in self.chains.values()}
        state = self.checkpoint.state()
        if state is not None:
            self.state = state
            self.feed.commit(self.state.end)  # dropped only after the state was written
        # the feed keeps nothing before its base: what lies there was committed by an earlier run
        # (a checkpoint from before the state recorded its offset, or a fresh state over old feed)
        self.state.end = max(self.state.end, self.feed.base)
        self.checkpoint.remember(self.state)

    def _write_state(self, state: DriverState) -> None:
        """Checkpoints ``state`` (under ``driver_lock``); if that fails, the driver goes back to
        the state last written — folds change window states in place, and a batch run again
        over half-changed ones would count its items twice."""
        try:
            self.checkpoint.write_state(state)
        except BaseException:
            self.state = self.checkpoint.last_state()
            raise
        self.state = state

    def _save_chains(self) -> None:
        self.checkpoint.write_chains(self.chains, self.next_chain)

    def start(self) -> None:
        """After a restart, the last checkpointed batch's outputs go to ``deliver`` again (with
        their sequence numbers) and the loop resumes where that batch ended; Spark starts now
        (``warm``), or with the first operator."""
        host, port = self.server.start()
        self.jobs = SparkJobs(self.master, host, self.parallelism, FeedAddress(host, port, self.server.authkey.hex()),
                              self.peer)
        with self.lock:
            for stream, seq, texts, end in self.state.outputs:
                self.deliver(stream, seq, texts, end)
            if self.chains or self.warm:
                self._start()

    def install(self, stream: str, operators: tuple[alg.Operator, ...], parent: str | None = None,
                parent_kind: str = "items") -> None:
        if installs_a_copy(self.copies, stream, operators, parent):
            return
        with self.lock:
            if stream in self.by_stream:
                return
            chain = normalise(self.next_chain, stream, parent, parent_kind, operators, self.feed.end)
            self.next_chain += 1
            self.chains[chain.id] = chain
            self.by_stream[stream] = chain.id
            self._save_chains()
            self._start()

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

    def room(self) -> FeedRoom:
        """The executor's input as back-pressure sees it (``superpeer.data.backpressure``): a
        stopped or failing executor is not waited for."""
        return FeedRoom(self.feed, self.backlog_bytes, self.backlog_items,
                        lambda: not self._stopped and self.error is None)

    def push(self, parent: str, values: list, texts: list[str] | None, end: bool, origins=None) -> None:
        if texts or end:
            first = self.feed.append(parent, texts or [], end)
            if origins is not None and texts and len(origins) == len(texts):  # (``spark.origins``)
                self.origins.add(first, origins)
            with self.wake:
                self.wake.notify()

    def advance(self, parent: str, path: str, value: float) -> None:
        """A watermark on ``parent``: the driver applies it to the time windows over ``path``
        once every item pushed before it has been through a micro-batch — at once for an idle
        stream (in a thread: a micro-batch may be running), else after the batch that takes the
        last of them. The driver's clocks are the tasks' next cursors, so an item that comes
        later below it is late in the tasks, as in the inline executor. Then ``passed`` (stream,
        path, value) per chain over ``parent``, after its outputs: the node hands the mark on."""
        self.watermarks.add(self.feed.end, parent, path, value)
        threading.Thread(target=self._due_watermarks, name=f"watermark-{self.peer}", daemon=True).start()

    def _due_watermarks(self) -> None:
        """Applies the watermarks now due; their outputs join the last batch's in the checkpoint,
        so that a restart hands them on again like those."""
        outputs, marks = [], []
        with self.driver_lock:
            if self._stopped:
                return
            try:
                with self.lock:
                    chains = dict(self.chains)
                for _, parent, path, value in self.watermarks.due(self.processed):
                    outputs += self.state.advance(chains, parent, path, value, self.lateness)
                    marks += [(c.stream, path, value) for _, c in sorted(chains.items()) if c.parent == parent]
                if outputs:
                    self.state.outputs = [*self.state.outputs, *outputs]
                    self._write_state(self.state)
            except Exception as exc:  # noqa: BLE001 — a daemon thread: say it, never die silently
                self.error = f"a watermark could not be applied: {first_line(exc)}"
                log.exception("Spark executor of %s: watermark", self.peer)
                return
            self.deliver_lock.acquire()
        self._deliver(outputs)
        for stream, path, value in marks:  # (after the outputs of every item before them; later is safe)
            self.passed(stream, path, value)

    def _deliver(self, outputs: list, offsets: dict | None = None) -> None:
        """Called holding ``deliver_lock`` (taken under ``driver_lock``): in sequence order, with
        origins where known (``DriverState.offsets``). Checkpointed already: one the node cannot
        take is reported, and the others still go (a restart would hand all of them on again)."""
        try:
            for stream, seq, texts, end in outputs:
                picked = self.origins.of(offsets[stream]) if offsets and stream in offsets else None
                try:
                    self.deliver(stream, seq, texts, end, *([picked] if picked and len(picked) == len(texts) else []))
                except Exception as exc:  # noqa: BLE001 — the node's fault, not the batch's
                    self.delivery_failures += 1
                    self.delivery_error = f"outputs of {stream} could not be handed on: {first_line(exc)}"
                    log.exception("Spark executor of %s: delivering %s", self.peer, stream)
        finally:
            self.deliver_lock.release()

    def accepted(self, parent: str) -> int:
        return self.feed.accepted(parent)

    # ------------------------------------------------------------------ the micro-batch loop

    @property
    def ready(self) -> bool:
        """Spark is up and has run a job: a micro-batch starts as soon as items come."""
        return self.ready_after_s is not None

    def _start(self) -> None:
        with self.lock:
            if self._loop is not None or self._stopped or self.jobs is None:  # (not started: at ``start``)
                return
            self._loop = threading.Thread(target=self._run, name=f"spark-{self.peer}", daemon=True)
            self._loop.start()

    def _run(self) -> None:
        failures = 0
        while not self._stopped and self.ready_after_s is None:
            try:
                self.jobs.start()
                self.ready_after_s = round(time.monotonic() - self.started_at, 2)
                self.error = None
            except Exception as exc:  # noqa: BLE001 — shown in status; items wait in the feed
                if self._stopped:
                    return
                self.start_failures += 1
                failures += 1
                self.error = self.last_start_failure = f"Spark did not start: {job_error(exc)}; trying again"
                log.exception("Spark executor of %s did not start", self.peer)
                if self.jobs.revive():
                    self.spark_restarts += 1
                self._pause(min(30.0, 0.5 * 2 ** min(failures, 6)))
        failures = 0
        last_began = 0.0
        ahead: Batch | None = None  # the batch whose job runs while the one before is merged
        while not self._stopped:
            if ahead is None:
                with self.wake:
                    if self.feed.end <= self.state.end and not self._stopped:
                        self.wake.wait(timeout=1.0)
                if self._stopped:
                    return
                if self.feed.end <= self.state.end:
                    self._keep_warm()
                    continue
                if not self._pause(last_began + self.interval - time.monotonic()):  # else items gathered
                    pacing.linger(lambda: self.feed.end, self.state.end, self.max_batch, self.interval,
                                  lambda: self._stopped)
                ahead = self._submit(self.state.end, self.state.last_batch + 1)
            last_began = ahead.began
            batch, ahead = ahead, None
            try:
                ran = self._finish(batch, lambda: self._next(batch))
            except Exception as exc:  # noqa: BLE001 — a bug in the driver must not end the loop
                ran = False
                self.failed_batches += 1
                self.error = f"a micro-batch failed in the driver ({first_line(exc)}); running it again"
                log.exception("Spark executor of %s: micro-batch", self.peer)
            ahead = batch.next if ran else None  # a batch after a failed one is planned again
            if not ran and batch.next is not None:
                batch.next.future.cancel()  # if still queued, not run for nothing
            if ran:
                failures = 0
            elif not self._stopped:
                failures += 1
                self._pause(min(30.0, 0.2 * 2 ** min(failures, 7)))

    def _pause(self, seconds: float) -> bool:
        """Waits ``seconds`` unless stopped; whether there was anything to wait."""
        if seconds > 0:
            with self.wake:
                self.wake.wait_for(lambda: self._stopped, timeout=seconds)
        return seconds > 0

    def _keep_warm(self) -> None:
        try:
            self.jobs.keep_warm()
        except Exception as exc:  # noqa: BLE001 — the next micro-batch reports it if it lasts
            log.warning("Spark executor of %s: keep-warm job failed: %s", self.peer, first_line(exc))
            if self.jobs.revive():
                self.spark_restarts += 1

    def _plan(self, start: int, end: int) -> list:
        with self.lock:
            chains = list(self.chains.values())
            cursors = {cid: s.clock for cid, s in self.state.states.items() if cid in self.chains}
        return plan_batch(self.feed, chains, cursors, start, end, self.lateness, self.parallelism)

    def _submit(self, start: int, batch_id: int) -> Batch:
        """Plans the batch from ``start`` and starts its job (in the job thread). The chains'
        cursors may be a batch behind: the driver corrects that when it merges (``pieces``)."""
        end = min(self.feed.end, start + self.max_batch)
        return Batch(batch_id, start, end, self.jobs.submit(self._plan(start, end)), time.monotonic())

    def _next(self, batch: Batch) -> None:
        """Once ``batch``'s job is done, the next one's starts before ``batch`` is merged if items
        wait and the trigger interval has passed (else the loop starts it on time)."""
        if (batch.next is None and self.feed.end > batch.end and not self._stopped
                and time.monotonic() >= batch.began + self.interval):
            batch.next = self._submit(batch.end, batch.id + 1)

    def _finish(self, batch: Batch, then) -> bool:
        """Waits for the batch's job, calls ``then`` and merges the batch: its state written, its
        outputs delivered, the feed committed. False if the job failed (nothing changed: the
        batch runs again) or the executor stopped."""
        try:
            pacing.ahead(batch, self.interval, lambda end: self.feed.end - end,
                         lambda: self._submit(batch.end, batch.id + 1), lambda: self._stopped)
            results = batch.future.result()
        except Exception as exc:  # noqa: BLE001 — a worker died, the cluster went away, a stop
            if self._stopped:
                return False
            self.failed_batches += 1
            self.error = f"micro-batch {batch.id} failed ({job_error(exc)}); running it again"
            if self.jobs.revive():
                self.spark_restarts += 1
                self.error += " on a new Spark JVM: the last one died"
            log.warning("Spark executor of %s: %s", self.peer, self.error)
            return False
        then()
        with self.driver_lock:
            if self._stopped:  # the checkpoint may be gone, or taken by the next executor
                return False
            assert batch.start == self.state.end and batch.id == self.state.last_batch + 1
            with self.lock:
                chains = dict(self.chains)
            ended = {r.src for r in results if r.ended}
            try:
                state = self.state.fold(batch.id, batch.end, chains, results, ended, self.feed.ids,
                                        self.lateness, self._redo)
            except BaseException:
                self.state = self.checkpoint.last_state()
                raise
            self._write_state(state)
            self.processed = batch.end
            self.deliver_lock.acquire()
        self._deliver(state.outputs, state.offsets)
        self.feed.commit(batch.end)
        self.origins.trim(batch.end)
        self.batches += 1
        if self.watermarks:
            self._due_watermarks()
        self.error = None
        self.last_batch_ms = 1000 * (time.monotonic() - batch.began)
        self.busy_s += self.last_batch_ms / 1000  # (micro-batches back to back: a peer at capacity)
        return True

    def _redo(self, chain: Chain, piece: Piece, clock: WindowClock) -> tuple[ChainOutput, WindowClock]:
        self.redone_pieces += 1
        return redo_piece(self.feed, chain, piece, clock, self.lateness)

    # ------------------------------------------------------------------ lifecycle

    def window_counters(self) -> dict[str, WindowCounters]:
        return window_counters(self)

    def status(self) -> dict:
        return executor_status(self)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Until every fed item is processed (tests and benchmarks)."""
        return wait_idle(self, timeout)

    def stop(self) -> None:
        with self.lock:
            self._stopped = True
            loop = self._loop
        with self.wake:
            self.wake.notify_all()
        # a job submitted just as the first cancel went is cancelled by the next one; a JVM still
        # starting is left to the process exit (the loop writes nothing once it sees the stop)
        deadline = time.monotonic() + 10
        while self.jobs is not None:
            self.jobs.cancel()
            if loop is None or loop is threading.current_thread() or not loop.is_alive():
                break
            loop.join(timeout=0.5)
            if time.monotonic() > deadline:
                log.warning("Spark executor of %s: its loop did not stop within 10 s", self.peer)
                break
        if self.jobs is not None:
            self.jobs.close()
        self.server.stop()
        self.feed.close()
        if self.temporary:
            held = self.driver_lock.acquire(timeout=10)  # not while a batch writes its checkpoint
            try:
                shutil.rmtree(self.directory, ignore_errors=True)
            finally:
                if held:
                    self.driver_lock.release()

