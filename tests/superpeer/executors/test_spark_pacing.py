"""When the Spark driver starts a micro-batch's job (``pacing``): a burst is gathered into one
batch, a lone item or a trickle is not held back, and the next job is queued behind a running
one once the trigger interval allows."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from superpeer.executors.spark.jobs import Batch
from superpeer.executors.spark.pacing import AHEAD_ITEMS, ahead, linger


class Feed:
    def __init__(self) -> None:
        self.end = 0
        self.reads = 0

    def read(self) -> int:
        self.reads += 1
        return self.end


def test_a_quiet_feed_starts_the_batch_at_once() -> None:
    feed = Feed()
    feed.end = 7
    linger(feed.read, 0, 100_000, 10.0, lambda: False)
    assert feed.reads == 2  # one look, one more after a quiet pause: no waiting for the bound


def test_a_burst_is_gathered_up_to_a_full_batch() -> None:
    feed, stop = Feed(), threading.Event()

    def burst() -> None:
        while not stop.is_set():
            feed.end += 100
            time.sleep(0.0002)

    thread = threading.Thread(target=burst, daemon=True)
    thread.start()
    try:
        linger(feed.read, 0, 5_000, 60.0, lambda: False)
        assert feed.end >= 5_000  # it waited for the full batch, not the first items
    finally:
        stop.set()
        thread.join()


def test_a_stop_ends_the_lingering() -> None:
    feed = Feed()
    feed.end = 1

    def growing() -> int:
        feed.end += 1
        return feed.end
    linger(growing, 0, 10**9, 60.0, lambda: feed.end > 50)
    assert feed.end <= 52


def test_the_next_job_is_queued_once_the_interval_has_passed_and_items_wait() -> None:
    running: Future = Future()
    batch = Batch(3, 100, 200, running, time.monotonic())
    queued = Batch(4, 200, 200 + AHEAD_ITEMS, Future(), time.monotonic())
    ahead(batch, 0.01, lambda end: AHEAD_ITEMS if end == 200 else 0, lambda: queued, lambda: False)
    assert batch.next is queued and not running.done()


def test_a_trickle_waits_for_the_running_job() -> None:
    """A few items waiting do not get a job of their own beside the running one."""
    done: Future = Future()
    batch = Batch(3, 100, 200, done, time.monotonic())
    threading.Timer(0.05, lambda: done.set_result([])).start()
    ahead(batch, 0.0, lambda end: AHEAD_ITEMS - 1, lambda: (_ for _ in ()).throw(AssertionError("submitted")),
          lambda: False)
    assert batch.next is None and done.done()


def test_a_job_done_before_items_wait_queues_nothing() -> None:
    done: Future = Future()
    batch = Batch(3, 100, 200, done, time.monotonic())
    threading.Timer(0.05, lambda: done.set_result([])).start()
    ahead(batch, 0.0, lambda end: 0, lambda: (_ for _ in ()).throw(AssertionError("submitted")),
          lambda: False)
    assert batch.next is None and done.done()


def test_a_batch_that_cannot_be_planned_ahead_is_left_to_the_loop() -> None:
    """Planning the next batch fails (a driver bug, a stop): not this batch's failure."""
    running: Future = Future()
    batch = Batch(3, 100, 200, running, time.monotonic())

    def broken() -> Batch:
        raise RuntimeError("cannot schedule new futures after shutdown")
    ahead(batch, 0.0, lambda end: AHEAD_ITEMS, broken, lambda: False)
    assert batch.next is None and not running.done()
