"""A subscription at its super-peer: live post-processing and the result buffer thin peers read.

The subscriber's super-peer runs the subscription's post-processing (restructuring, conditions
not applied upstream, joins) with the reference evaluator over *live* inputs: each input is a
blocking feed the data plane appends to, so results appear while the stream flows. Results wait
in a bounded buffer; a thin peer reads them from an offset and can come back later (resume).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

from sharing.analysis import Analysis
from wxquery.evaluator import post_process

_END = object()


class BlockingFeed:
    """An iterable input that blocks for more items until the stream ends.

    It can be iterated several times (a join's inner input): later iterations replay what was
    already received, then wait for more like the first.
    """

    def __init__(self) -> None:
        self._items: list = []
        self._ended = False
        self._cond = threading.Condition()

    def feed(self, values: list, end: bool = False) -> None:
        with self._cond:
            self._items.extend(values)
            self._ended = self._ended or end
            self._cond.notify_all()

    def __iter__(self) -> Iterator:
        i = 0
        while True:
            with self._cond:
                while i >= len(self._items) and not self._ended:
                    self._cond.wait()
                if i >= len(self._items):
                    return
                batch = self._items[i:]
            i += len(batch)
            yield from batch


@dataclass
class ResultBuffer:
    """Serialized result items with offsets; the oldest are dropped beyond ``retention``."""

    retention: int
    root: str
    base: int = 0  # offset of items[0]
    items: deque = field(default_factory=deque)
    closed: bool = False
    error: str = ""
    dropped: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)

    def append(self, item: str) -> None:
        with self.cond:
            self.items.append(item)
            while len(self.items) > self.retention:
                self.items.popleft()
                self.base += 1
                self.dropped += 1
            self.cond.notify_all()

    def close(self, error: str = "") -> None:
        """End the results, once: a later close (the post-processing thread finishing after
        the subscription failed) keeps the first reason."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.error = error
            self.cond.notify_all()

    def read(self, offset: int, max_items: int, wait_s: float) -> tuple[int, list[str], bool, int]:
        """(offset of the first returned item, items, closed-and-drained, dropped before it)."""
        with self.cond:
            end = self.base + len(self.items)
            if offset >= end and not self.closed and wait_s > 0:
                self.cond.wait_for(lambda: self.base + len(self.items) > offset or self.closed,
                                   timeout=wait_s)
                end = self.base + len(self.items)
            start = max(offset, self.base)
            lost = max(0, self.base - offset)
            chunk = [self.items[i - self.base] for i in range(start, min(end, start + max_items))]
            drained = self.closed and start + len(chunk) >= end
            return start, chunk, drained, lost


class SubscriptionRuntime:
    """Post-processing of one subscription over its live inputs, in its own thread."""

    def __init__(self, sid: str, analysis: Analysis, retention: int) -> None:
        self.id = sid
        self.analysis = analysis
        props = analysis.properties
        self.clauses = {b.name: b.clause for b in analysis.checked.clauses.values()
                        if b.kind != "aggregate"}
        self.feeds = {inp.variable: BlockingFeed() for inp in props.inputs}
        root = analysis.query.root_name or "results"
        self.buffer = ResultBuffer(retention, root)
        self._evaluation = post_process(
            analysis.checked, {id(self.clauses[v]): f for v, f in self.feeds.items()},
            props.applied_upstream, props.aggregated_upstream)
        self.thread = threading.Thread(target=self._run, name=f"post-{sid}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def feed(self, variable: str, values: list, end: bool) -> None:
        self.feeds[variable].feed(values, end)

    def stop(self) -> None:
        for f in self.feeds.values():
            f.feed([], end=True)

    def _run(self) -> None:
        try:
            for item in self._evaluation.serialized_items():
                self.buffer.append(item)
            self.buffer.close()
        except Exception as exc:  # a bad item must not kill the daemon; the reader is told
            self.buffer.close(f"post-processing failed: {exc}")
