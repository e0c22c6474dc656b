"""When the driver starts a micro-batch's job: what a Spark job costs decides it.

A job costs ~75 ms on ``local[2]`` however few items it has (scheduling its tasks, handing the
function to the Python workers, collecting the results through the JVM) — as much as evaluating
tens of thousands of items. Two consequences, measured on a burst of 200,000 photons with 30
chains (``benchmarks/spark_executor.py``):

* **linger**: a batch started by the first items of a burst held 1,000 items, and the burst's
  other 199,000 waited for its job (~100 ms) before theirs began. When items come after an idle
  spell (the trigger interval had passed), the driver waits while they keep arriving (the feed
  grew in the last ``QUIET_S``), up to a full batch or one trigger interval — an item alone
  starts a batch 2 ms later at most. A steady stream does not linger: its items gathered while
  the driver waited out the interval.
* **two jobs in flight**: the next batch's job is queued behind the running one as soon as the
  trigger interval allows and enough items wait (``AHEAD_ITEMS``), so that Spark's fixed cost per
  job overlaps with the other's tasks instead of leaving the task slots idle (``ahead``). Not for
  a few items: two jobs share the task slots, and under a steady load that outruns the machine
  (eight super-peers on two cores) a job started early for a trickle made many small batches,
  each paying the fixed cost.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import wait
from typing import Callable

from .jobs import Batch

log = logging.getLogger(__name__)
QUIET_S = 0.002  # no item for this long: the burst is over, the batch starts
AHEAD_ITEMS = 4000  # items that must wait before a job is started ahead (two full tasks' worth)
AHEAD_POLL_S = 0.01  # how often ``ahead`` looks again for them (the driver's thread, mid-job)


def linger(end: Callable[[], int], start: int, most_items: int, most_s: float,
           stopped: Callable[[], bool]) -> None:
    """Waits while the feed (its ``end``) keeps growing, until ``most_items`` wait from
    ``start`` or ``most_s`` have passed."""
    deadline = time.monotonic() + most_s
    last = end()
    while last - start < most_items and not stopped():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(QUIET_S, left))
        now = end()
        if now == last:
            return
        last = now


def ahead(batch: Batch, interval: float, waiting: Callable[[int], int], submit: Callable[[], Batch],
          stopped: Callable[[], bool]) -> None:
    """While ``batch``'s job runs: once ``interval`` has passed since it began and
    ``AHEAD_ITEMS`` wait after it (``waiting(batch.end)``), the next batch's job (``submit``) is
    queued behind it (``batch.next``). Returns when that is done, or when ``batch``'s job is."""
    while batch.next is None and not stopped():
        left = batch.began + interval - time.monotonic()
        if left <= 0 and waiting(batch.end) >= AHEAD_ITEMS:
            try:
                batch.next = submit()
            except Exception:  # noqa: BLE001 — not this batch's failure: planned after its merge
                log.exception("planning a micro-batch ahead failed")
            return
        if wait([batch.future], timeout=max(left, AHEAD_POLL_S)).done:
            return
