"""The results of a subscription at its super-peer, waiting for their reader.

Results wait in a buffer bounded in items; a thin peer reads them from an offset, in replies
bounded in bytes, and can come back later (resume). Once the stream has ended and the evaluation
is over, the results are released when a reader has read them all or after
``finished_retention_s``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import weakref
from dataclasses import dataclass, field

from ..data.items import utf8_size
from ..data.limits import ENVELOPE, MESSAGE_LIMIT, DataLimits
from ..history.state_store import StateStore

MAX_RESULT_ITEM_BYTES = MESSAGE_LIMIT - ENVELOPE  # what one ReadResults reply can carry


FORGET_EVERY = 1000  # stored results dropped by retention are deleted in steps of this many


STORE_EVERY = 256  # results stored in one transaction


class ResultTooLarge(Exception):
    """A result item no ReadResults reply could carry."""


class Held:
    """The results a buffer holds, oldest first: appended at the end, dropped at the front, and
    read by position in constant time (a deque walks to the middle: a read of 1,000 results
    from the middle of 200,000 took 6 ms)."""

    __slots__ = ("_head", "_list")

    def __init__(self, items=()) -> None:
        self._list = list(items)
        self._head = 0

    def __len__(self) -> int:
        return len(self._list) - self._head

    def __getitem__(self, i: int):
        return self._list[self._head + i]

    def extend(self, values) -> None:
        self._list.extend(values)

    def popleft(self):
        value = self._list[self._head]
        self._list[self._head] = None
        self._head += 1
        if self._head >= 4096 and 2 * self._head >= len(self._list):  # (the dropped front, freed now and then)
            del self._list[:self._head]
            self._head = 0
        return value

    def between(self, i: int, j: int) -> list:
        return self._list[self._head + i:self._head + j]


@dataclass
class ResultBuffer:
    """Serialized result items with offsets; the oldest are dropped beyond ``retention``.

    A read returns at most ``max_read_bytes`` (but always one item, if there is one), so that a
    reply stays below the gRPC message limit whatever the items' sizes. A failed subscription
    keeps its error and the gRPC status code that says what kind of failure it was.
    """

    retention: int
    root: str
    max_read_bytes: int = DataLimits.max_read_bytes
    base: int = 0  # offset of items[0]
    items: Held = field(default_factory=Held)
    sizes: Held = field(default_factory=Held)  # UTF-8 bytes of each item
    held_bytes: int = 0
    closed: bool = False
    error: str = ""
    code: str = ""  # gRPC status code name of ``error``
    dropped: int = 0  # by the retention bound
    released: int = 0  # after the end, read or kept for the retention period
    delivered: int = 0  # the subscriber's offset: every result before it was read
    cond: threading.Condition = field(default_factory=threading.Condition)
    # where the results survive a restart (``state_store``), and under which subscription;
    # stored in batches: results are a function of the replayed inputs, so those a crash loses
    # before they are stored are recomputed after the restart (and read at the same offsets)
    store: StateStore | None = None
    sid: str = ""
    # the results not stored yet, as runs of consecutive ones: (the number of the first, the results)
    unstored: list[tuple[int, list[str]]] = field(default_factory=list)
    unstored_count: int = 0
    # (variable, the original's item after the one the last result came from), when known: stored
    # with the results (``StateStore.add_result_runs``), where a restart resumes (``restore``)
    resume: tuple[str, int] | None = None
    store_on_read: bool = False  # results handed to a reader are stored first (approximate ones)

    @property
    def end(self) -> int:
        """The number the next result gets."""
        return self.base + len(self.items)

    def append(self, item: str) -> None:
        self.offer(self.end, item)

    def offer(self, index: int, item: str) -> bool:
        """Add result number ``index`` unless it is already here: a subscription planned again
        recomputes its results from the stream's first item, and those it had are skipped.
        (Results are a deterministic function of the inputs, so number ``index`` is the same
        item whoever computes it.)"""
        return self.offer_all(index, [item]) > 0

    def offer_all(self, index: int, items: list[str], resume: tuple[str, int] | None = None) -> int:
        """Results number ``index``, ``index + 1``, … (as ``offer``) under one lock, with one
        wake-up of the readers; how many were added. A result too large for any reply raises
        ``ResultTooLarge`` once those before it are added. ``resume``: where the input stands
        after the last of them (``resume``)."""
        sizes = [utf8_size(x) for x in items]
        too_large = next((k for k, n in enumerate(sizes) if n > MAX_RESULT_ITEM_BYTES), None)
        if too_large is not None:
            self.offer_all(index, items[:too_large])
            raise ResultTooLarge(f"result item {index + too_large} is {sizes[too_large]:,} bytes; a "
                                 f"reply carries at most {MAX_RESULT_ITEM_BYTES:,}")
        with self.cond:
            skip = self.end - index
            if self.closed or skip < 0 or skip >= len(items):
                return 0
            if skip:
                items, sizes = items[skip:], sizes[skip:]
            self.resume = resume
            if self.store is not None:
                last = self.unstored[-1] if self.unstored else None
                if last is not None and last[0] + len(last[1]) == self.end:
                    last[1].extend(items)
                else:
                    self.unstored.append((self.end, list(items)))
                self.unstored_count += len(items)
                if self.unstored_count >= STORE_EVERY:
                    self._store()
            self.items.extend(items)
            self.sizes.extend(sizes)
            self.held_bytes += sum(sizes)
            while len(self.items) > self.retention:
                self._pop()
                self.dropped += 1
                if self.store is not None and self.base % FORGET_EVERY == 0:
                    self._store()
                    self.store.forget_results(self.sid, self.base)
            self.cond.notify_all()
            return len(items)

    def restore(self, base: int, items: list[str], closed: bool, error: str, code: str) -> None:
        """Take back what a restarted super-peer had stored."""
        with self.cond:
            self.base = base
            self.items = Held(items)
            self.sizes = Held(utf8_size(x) for x in items)
            self.held_bytes = sum(self.sizes)
            self.closed, self.error, self.code = closed, error, code

    def _pop(self) -> None:
        self.items.popleft()
        self.held_bytes -= self.sizes.popleft()
        self.base += 1

    def close(self, error: str = "", code: str = "") -> None:
        """End the results, once: a later close (the post-processing thread finishing after
        the subscription failed) keeps the first reason."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
            if error or not self.error:  # a later, clean end does not hide an earlier failure
                self.error = error
                self.code = code or ("INTERNAL" if error else "")
            if self.store is not None:
                self._store()
                self.store.end_subscription(self.sid, self.error, self.code)
            self.cond.notify_all()

    def release(self) -> None:
        """Free the results of an ended subscription (offsets stay: later reads are told how
        many items they missed, as for retention drops)."""
        with self.cond:
            self.released += len(self.items)
            while self.items:
                self._pop()
            if self.store is not None:
                self._store()
                self.store.forget_results(self.sid, self.base)
            self.cond.notify_all()

    def _store(self) -> None:
        """Called with ``cond`` held."""
        if self.unstored and self.store is not None:
            self.store.add_result_runs(self.sid, self.unstored, self.resume)
            self.unstored, self.unstored_count = [], 0

    def read(self, offset: int, max_items: int, wait_s: float, peek: bool = False
             ) -> tuple[int, list[str], bool, int]:
        """(offset of the first returned item, items, closed-and-drained, dropped before it).
        A read from the end of an ended subscription confirms everything was read: the
        results are released. A ``peek`` (someone looking on) confirms nothing."""
        with self.cond:
            if not peek:
                self.delivered = max(self.delivered, offset)
            end = self.base + len(self.items)
            if offset >= end and not self.closed and wait_s > 0:
                self.cond.wait_for(lambda: self.base + len(self.items) > offset or self.closed,
                                   timeout=wait_s)
                end = self.base + len(self.items)
            if self.closed and offset >= end and self.items and not peek:
                self.release()
            start = max(offset, self.base)
            lost = max(0, self.base - offset)
            first = start - self.base
            count, size = 0, 0
            for n in self.sizes.between(first, min(end - self.base, first + max_items)):
                size += n
                if count and size > self.max_read_bytes:
                    break
                count += 1
            chunk: list[str] = self.items.between(first, first + count)
            if self.store_on_read and chunk and self.unstored and self.unstored[0][0] < start + len(chunk):
                # what a reader has is stored first: a super-peer started again resumes past it
                # (an approximate subscription's later windows come with the reader's next read)
                self._store()
            drained = self.closed and start + len(chunk) >= end
            return start, chunk, drained, lost

    def status(self) -> dict:
        return {"results": self.base + len(self.items), "delivered": self.delivered,
                "closed": self.closed, "error": self.error,
                "held": len(self.items), "held_bytes": self.held_bytes,
                "dropped_by_retention": self.dropped, "released_after_end": self.released}


class _Releases:
    """One thread that releases ended subscriptions' results when their retention is over
    (a weak reference each: an unsubscribed buffer goes away on its own)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, weakref.ref]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def schedule(self, buffer: ResultBuffer, after_s: float) -> None:
        if after_s <= 0:
            buffer.release()
            return
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + after_s, next(self._seq), weakref.ref(buffer)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="release-results", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, ref = heapq.heappop(self._heap)
            buffer = ref()
            if buffer is not None:
                buffer.release()


RELEASES = _Releases()


def subscription_buffer(retention: int, analysis, max_read_bytes: int, store, sid: str) -> ResultBuffer:
    """A subscription's results (under its query's root element), stored as they come in
    ``store`` when that is durable."""
    buffer = ResultBuffer(retention, analysis.query.root_name or "results", max_read_bytes)
    if store.durable:
        buffer.store, buffer.sid = store, sid
    return buffer
