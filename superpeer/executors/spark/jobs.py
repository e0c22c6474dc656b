"""The Spark side of the executor's micro-batches: the session, and one Spark job per batch.

A micro-batch is ``parallelize(tasks).mapPartitions(run_tasks).collect()``: Spark ships the
planned tasks to its Python workers (local ones, or a cluster's), each task reads its items from
the feed and evaluates its chains, and the driver receives the pickled results. No Python process
plans batches for the JVM: Structured Streaming's Python data source did, in a process Spark
starts per query and gives a fixed 10 s to connect back — on a machine running eight super-peers
it missed that deadline (``CANNOT_OPEN_SOCKET``) and the query died and was restarted. Offsets,
exactly-once and pacing are the driver's own (``executor``), on the durable feed.
"""

from __future__ import annotations

import functools
import itertools
import time

from .session import first_line, spark_session
from .tasks import FeedAddress, FeedTask, TaskResult, run_tasks, warm_up

# Spark's Python daemon kills workers idle for a minute; a job now and then keeps them (and the
# modules they imported, and their feed connections) for the next micro-batch.
KEEP_WARM_S = 30.0
_GROUPS = itertools.count()


class SparkJobs:
    def __init__(self, master: str, driver_host: str, parallelism: int, feed: FeedAddress, peer: str) -> None:
        self.master = master
        self.driver_host = driver_host
        self.parallelism = parallelism
        self.feed = feed
        self.group = f"streamglobe-{peer}-{next(_GROUPS)}"  # cancels this executor's jobs only
        self.context = None
        self.last_job = 0.0

    def start(self) -> float:
        """Starts (or joins) the process's Spark session and runs a first job on every task slot;
        seconds it took."""
        began = time.monotonic()
        self.context = spark_session(self.master, self.driver_host, self.parallelism).sparkContext
        self._collect(range(self.parallelism), functools.partial(warm_up, self.feed))
        return time.monotonic() - began

    def run(self, tasks: list[FeedTask]) -> list[TaskResult]:
        """One micro-batch: the tasks' results, in task order."""
        return self._collect(tasks, functools.partial(run_tasks, self.feed))

    def keep_warm(self) -> None:
        if time.monotonic() - self.last_job > KEEP_WARM_S:
            self._collect(range(self.parallelism), functools.partial(warm_up, self.feed))

    def _collect(self, data, work) -> list:
        assert self.context is not None
        data = list(data)
        self.context.setJobGroup(self.group, "StreamGlobe micro-batch", interruptOnCancel=True)
        try:
            return self.context.parallelize(data, max(len(data), 1)).mapPartitions(work).collect()
        finally:
            self.last_job = time.monotonic()

    def cancel(self) -> None:
        if self.context is not None:
            try:
                self.context.cancelJobGroup(self.group)
            except Exception:  # noqa: BLE001 — the session is going down
                pass


def job_error(exc: BaseException) -> str:
    """A failed job's reason in a line: the JVM's exception rather than py4j's call site."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None:  # the task's own error is the innermost one
                cause = cause.getCause()
            return first_line(str(cause.toString()))
        except Exception:  # noqa: BLE001 — the JVM is gone: py4j's message is all there is
            pass
    return first_line(exc)
