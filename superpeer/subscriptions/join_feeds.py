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
shown in ``status`` (``join``), never silent:

- an outer item below an earlier one (``late_outer``) is dropped: the inner items of its band
  may be forgotten already;
- an inner item below an earlier one (``late_inner``) is kept for the outer items still to
  come, but those already answered did not see it.

Items without a numeric band value match nothing (their band comparisons are false), so they
are not kept and not counted.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator

from wxquery.join_band import Band
from wxquery.operators.items import path_strings
from wxquery.values import cast_double

from .feeds import BlockingFeed

SLACK = 1e-9  # relative: the band is widened by it, so that rounding never hides a match


def band_value(item: object, path: str) -> float:
    """An item's band value: its first value at ``path`` as a double (NaN if none)."""
    try:
        texts = path_strings(item, path)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return cast_double(texts[0]) if texts else math.nan


class OuterFeed(BlockingFeed):
    """A join's outer input, read once: it remembers the band value of the item the evaluation
    is at (``current``), and drops items below the highest one before them."""

    def __init__(self, path: str) -> None:
        super().__init__(replay=False)
        self.path = path
        self.current = math.nan
        self.high = -math.inf
        self.late = 0

    def _drain(self) -> Iterator:
        for item in super()._drain():
            t = band_value(item, self.path)
            if t < self.high:
                self.late += 1
                continue
            self.high = max(self.high, t)
            self.current = t  # (NaN: the item matches nothing)
            yield item


class InnerFeed(BlockingFeed):
    """A join's inner input: per outer item, the inner items within its band, in arrival order,
    once the input has passed the band's end or ended."""

    def __init__(self, band: Band, outer: OuterFeed) -> None:
        super().__init__(replay=True)
        self.band, self.outer = band, outer
        self.low, self.high_offset = float(band.low), float(band.high)
        self._kept: deque[tuple[float, object]] = deque()
        self.high = -math.inf  # the highest band value received
        self.late = 0

    def feed(self, values: list, end: bool = False) -> None:
        keyed = [(band_value(v, self.band.inner_path), v) for v in values]
        with self._cond:
            if self._discarded:
                return
            for t, v in keyed:
                if math.isnan(t):
                    continue
                if t < self.high:
                    self.late += 1
                else:
                    self.high = t
                self._kept.append((t, v))
            self._ended = self._ended or end
            self._cond.notify_all()

    def discard(self) -> None:
        super().discard()
        with self._cond:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator:
        t = self.outer.current
        if math.isnan(t):
            return iter(())
        slack = SLACK * max(1.0, abs(t))
        lo, hi = t + self.low - slack, t + self.high_offset + slack
        forget_below = self.outer.high + self.low - slack  # (no outer item to come is lower)
        with self._cond:
            kept = self._kept
            while kept and kept[0][0] < forget_below:
                kept.popleft()
            waits = not self._ended and self.high <= hi
        if waits and self.before_wait is not None:
            self.before_wait()  # (the results so far leave before the wait)
        with self._cond:
            while not self._ended and self.high <= hi:
                self._cond.wait()
            return iter([v for k, v in self._kept if lo <= k <= hi])

    def status(self) -> dict:
        return {"band": str(self.band), "kept_inner_items": len(self._kept),
                "late_outer_items": self.outer.late, "late_inner_items": self.late}
