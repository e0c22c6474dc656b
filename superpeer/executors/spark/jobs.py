"""The Spark side of the executor's micro-batches: the session, and one Spark job per batch.

A micro-batch is ``parallelize(range(n), n).mapPartitionsWithIndex(run_task).collect()``: the
planned tasks travel inside the job's function (Spark ships it to its Python workers, local ones
or a cluster's), partition i runs task i, reads its items from the feed and evaluates its
chains, and the driver receives the pickled results. The partitions are a ``range``, not the
tasks themselves: PySpark hands a ``range`` to the JVM as its bounds, but a list through a
temporary file the JVM reads back, which cost ~250 ms per job (measured: a two-task job 300 ms
with a list, 60 ms with a range) — more than the work of a 50,000-item batch. No Python process
plans batches for the JVM: Structured Streaming's Python data source did, in a process Spark
starts per query and gives a fixed 10 s to connect back — on a machine running eight super-peers
it missed that deadline (``CANNOT_OPEN_SOCKET``) and the query died and was restarted. Offsets,
exactly-once and pacing are the driver's own (``executor``), on the durable feed.
"""

from __future__ import annotations

import functools
import itertools
import pickle
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from .session import first_line, forget_dead_jvm, spark_session
from .tasks import FeedAddress, FeedTask, TaskResult, run_task, warm_up

# Spark's Python daemon kills workers idle for a minute; a job now and then keeps them (and the
# modules they imported, and their feed connections) for the next micro-batch.
KEEP_WARM_S = 30.0
_GROUPS = itertools.count()


@dataclass
class Batch:
    """A micro-batch whose job was started: its feed range and the job's future results."""

    id: int
    start: int
    end: int
    future: Future
    began: float  # time.monotonic() at submission
    next: "Batch | None" = None  # the batch started while this one was merged


class SparkJobs:
    def __init__(self, master: str, driver_host: str, parallelism: int, feed: FeedAddress, peer: str) -> None:
        self.master = master
        self.driver_host = driver_host
        self.parallelism = parallelism
        self.feed = feed
        self.group = f"streamglobe-{peer}-{next(_GROUPS)}"  # cancels this executor's jobs only
        self.context = None
        self.last_job = 0.0
        # micro-batch jobs run here, so that the driver merges one batch while the next one runs;
        # two at a time: the next one's job queued behind the running one (``pacing``)
        self._thread = ThreadPoolExecutor(2, thread_name_prefix=f"spark-jobs-{peer}")

    def start(self) -> float:
        """Starts (or joins) the process's Spark session and runs a first job on every task slot;
        seconds it took."""
        began = time.monotonic()
        self.context = spark_session(self.master, self.driver_host, self.parallelism).sparkContext
        try:
            self._collect(self.parallelism, functools.partial(warm_up, self.feed))
        except Exception as exc:
            raise RuntimeError(f"Spark's workers could not run the warm-up job, which reaches this "
                               f"super-peer's feed at {self.feed.host}:{self.feed.port}: {job_error(exc)}") from exc
        return time.monotonic() - began

    def run(self, tasks: list[FeedTask]) -> list[TaskResult]:
        """One micro-batch: the tasks' results, in task order."""
        return [pickle.loads(r) for r in self._collect(len(tasks), functools.partial(run_task, self.feed, tasks))]

    def submit(self, tasks: list[FeedTask]) -> Future:
        """``run`` in the jobs thread (at once for no tasks)."""
        if tasks:
            return self._thread.submit(self.run, tasks)
        done: Future = Future()
        done.set_result([])
        return done

    def keep_warm(self) -> None:
        if time.monotonic() - self.last_job > KEEP_WARM_S:
            self._collect(self.parallelism, functools.partial(warm_up, self.feed))

    def revive(self) -> bool:
        """After a failed job: if the JVM is gone, the next job starts a new one (and its Python
        workers); True if it was gone."""
        return forget_dead_jvm()

    def _collect(self, partitions: int, work) -> list:
        """``work(index, iterator)`` on partitions ``0 … partitions-1``, their results in order."""
        if self.context is None or getattr(self.context, "_jsc", None) is None:  # a session restarted
            self.context = spark_session(self.master, self.driver_host, self.parallelism).sparkContext
        self.context.setJobGroup(self.group, "StreamGlobe micro-batch", interruptOnCancel=True)
        try:
            return self.context.parallelize(range(partitions), partitions).mapPartitionsWithIndex(work).collect()
        finally:
            self.last_job = time.monotonic()

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    def cancel(self) -> None:
        if self.context is not None:
            try:
                self.context.cancelJobGroup(self.group)
            except Exception:  # noqa: BLE001 — the session is going down
                pass


def job_error(exc: BaseException) -> str:
    """A failed job's reason in a line: the JVM's exception rather than py4j's call site, and of
    a Python traceback (a task's own error) its last line, which names the error."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None:  # the task's own error is the innermost one
                cause = cause.getCause()
            text = str(cause.toString())
        except Exception:  # noqa: BLE001 — the JVM is gone: py4j's message is all there is
            pass
    if "Traceback (most recent call last)" in text:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return lines[-1][:500]
    return first_line(RuntimeError(text)) if text.strip() else first_line(exc)
