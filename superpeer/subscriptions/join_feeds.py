"""The live inputs of a window join: the nested loop over two live streams, within a band.

A join's inner input (``feeds.BlockingFeed`` with replay) keeps every item it received and
hands each outer item all of them — and then waits for the inner stream to end, which a live
stream never does: the first outer item would never get its results. With a band
(``wxquery.join_band``), the outer feed says which outer item the evaluation is at, and the
inner feed hands it the inner items within that item's band once the inner input has passed
the band's end (or ended), forgetting those below the band of the latest outer item. The
evaluation still applies the whole where clause, so the results are the nested loop's, in its
order — given the contract of the band: both inputs come in non-decreasing order of their band
elements, as a time window's input does of its reference element. What breaks it is counted and
shown in ``status`` (``joins``), never silent:

- an outer item below an earlier one (``late_outer``) is dropped: the inner items of its band
  may be forgotten already;
- an inner item below an earlier one (``late_inner``) is kept for the outer items still to
  come, but those already answered did not see it.

A stream registered with an event time sends **watermarks** while it is idle
(``data.event_time``); on a band element they count as an item with that value: an idle inner
stream does not hold the outer items' results back, an idle outer one lets the inner forget.

Items without a numeric band value match nothing (their band comparisons are false), so they
are not kept and not counted. An element that repeats in an item compares existentially, as in
XQuery: the item is placed by the least and the greatest of its values (an inner item can match
while its greatest value reaches the band's start and its least the band's end), and it is in
order by its least value. Infinite values (``INF``) are no place in a band: such items are
dropped and counted (``not_finite``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator

from wxquery.band_join import band_values, slack
from wxquery.join_band import Band

from .feeds import BlockingFeed

class OuterFeed(BlockingFeed):
    """A join's outer input, read once: it remembers the band values of the item the evaluation
    is at (``current``: least and greatest, None if it has none), and drops items below the
    highest one before them (``floor``: no outer item to come is lower)."""

    def __init__(self, path: str) -> None:
        super().__init__(replay=False)
        self.path = path
        self.current: tuple[float, float] | None = None
        self.floor = -math.inf
        self.late = 0
        self.not_finite = 0
        # fed the groups of a join placed upstream (``wxquery.band_join``): each an outer item
        # and the inner items of its band, which ``group`` holds while the evaluation is at it
        self.grouped = False
        self.group: list = []
        # (a reused joined stream's groups narrowed to this subscription's: tests of the outer
        # item, tests of each inner item — the conditions on one input its own join would apply)
        self.narrow: tuple[list, list] = ([], [])
        # the items of the originals its first group came from (outer, the least inner): where
        # a recomputation from the logs begins, to give what this subscription was given (None
        # also when its first group did not say: never a later group's, which would skip some)
        self.began: tuple[int, int] | None = None
        self.first_group = True
        self.on_began: Callable[[], None] | None = None  # (told once, from the evaluation's thread)

    def advance(self, path: str, value: float) -> None:
        """A watermark: no outer item to come is below ``value`` at ``path``."""
        if path == self.path and math.isfinite(value):
            self.floor = max(self.floor, value)

    def _drain(self) -> Iterator:
        for item in super()._drain():
            if self.grouped:  # (checked where the join ran: each group is in order and complete)
                children = list(item)
                if self.first_group and item.get("o") is not None:
                    self.began = int(item.get("o")), min(map(int, item.get("i").split()))
                    if self.on_began is not None:
                        self.on_began()
                self.first_group = False
                outer_tests, inner_tests = self.narrow
                if not children or not all(t(children[0]) for t in outer_tests):
                    continue
                self.group = [i for i in children[1:] if all(t(i) for t in inner_tests)]
                if self.group:
                    yield children[0]
                continue
            values = band_values(item, self.path)
            if values is not None:
                if math.isinf(values[0]):
                    self.not_finite += 1
                    continue
                if values[0] < self.floor:
                    self.late += 1
                    continue
                self.floor = max(self.floor, values[0])  # (a watermark may have raised it meanwhile)
            self.current = values
            yield item


class InnerFeed(BlockingFeed):
    """A join's inner input: per outer item, the inner items that can be within its band, in
    arrival order, once the input has passed the band's end or ended."""

    def __init__(self, band: Band, outer: OuterFeed) -> None:
        super().__init__(replay=True)
        self.band, self.outer = band, outer
        self.low, self.high_offset = float(band.low), float(band.high)
        self._kept: deque[tuple[float, float, object]] = deque()  # (least, greatest, item)
        self.high = -math.inf  # the highest least value received: no inner item to come is lower
        self.late = 0
        self.not_finite = 0

    def feed(self, values: list, end: bool = False) -> None:
        placed = [(band_values(v, self.band.inner_path), v) for v in values]
        with self._cond:
            if self._discarded:
                return
            for where, v in placed:
                if where is None:
                    continue
                least, greatest = where
                if math.isinf(least):
                    self.not_finite += 1
                    continue
                if least < self.high:
                    self.late += 1
                else:
                    self.high = least
                self._kept.append((least, greatest, v))
            self._forget()
            self._ended = self._ended or end
            self._cond.notify_all()

    def advance(self, path: str, value: float) -> None:
        """A watermark: no inner item to come is below ``value`` at ``path``, so the outer items
        whose band ends below it have all their matches (an idle inner stream holds nothing up)."""
        if path != self.band.inner_path or not math.isfinite(value):
            return
        with self._cond:
            if value > self.high:
                self.high = value
                self._forget()
                self._cond.notify_all()

    def _forget(self) -> None:
        """Forget the first items that no outer item to come can match (under the lock)."""
        floor = self.outer.floor
        if math.isinf(floor):
            return
        below = floor + self.low - slack(floor, self.low)
        kept = self._kept
        while kept and kept[0][1] < below:
            kept.popleft()

    def discard(self) -> None:
        super().discard()
        with self._cond:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator:
        if self.outer.grouped:
            return iter(self.outer.group)
        current = self.outer.current
        if current is None:
            return iter(())
        least, greatest = current
        lo = least + self.low - slack(least, self.low)
        hi = greatest + self.high_offset + slack(greatest, self.high_offset)
        with self._cond:
            self._forget()
            waits = not self._ended and self.high <= hi
        if waits and self.before_wait is not None:
            self.before_wait()  # (the results so far leave before the wait)
        with self._cond:
            while not self._ended and self.high <= hi:
                self._cond.wait()
            return iter([v for a, b, v in self._kept if b >= lo and a <= hi])

    def status(self) -> dict:
        return {"band": str(self.band), "kept_inner_items": len(self._kept),
                "late_outer_items": self.outer.late, "late_inner_items": self.late,
                "not_finite": self.outer.not_finite + self.not_finite}
