"""Window assignment with the semantics of DESIGN.md §3, push-based.

One implementation serves the reference evaluator (which pulls items through it) and the
inline executor (which pushes items into it), so both close the same windows at the same time.

* count windows: a window starts at every μ-th item (1st, μ+1-th, …) the operator sees and
  holds Δ items; only complete windows are emitted;
* time windows: window k covers reference values in ``[k·μ, k·μ+Δ)`` (aligned at 0, bounds
  computed exactly, compared as doubles the way XQuery compares untyped data with a decimal);
  a window closes when an item at or past its end arrives (less the allowed lateness) and at the
  end of the stream; items later than the lateness, or without a numeric reference, are counted
  and dropped, never silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Generic, TypeVar

from .algebra import WindowSpec

T = TypeVar("T")


@dataclass
class WindowStats:
    late_items: int = 0
    missing_reference: int = 0


@dataclass
class ClosedWindow(Generic[T]):
    """A window's index (k for time windows, window number for count windows) and contents."""

    index: int
    items: list[T]


class CountWindows(Generic[T]):
    def __init__(self, size: int, step: int) -> None:
        self.size, self.step = size, step
        self.seen = 0
        self.open: list[ClosedWindow[T]] = []

    def push(self, item: T) -> list[ClosedWindow[T]]:
        if self.seen % self.step == 0:
            self.open.append(ClosedWindow(self.seen // self.step, []))
        self.seen += 1
        for w in self.open:
            w.items.append(item)
        if self.open and len(self.open[0].items) == self.size:
            return [self.open.pop(0)]
        return []

    def flush(self) -> list[ClosedWindow[T]]:
        self.open.clear()  # incomplete count windows produce nothing
        return []


class TimeWindows(Generic[T]):
    def __init__(self, size: Fraction, step: Fraction, reference: Callable[[T], float],
                 lateness: float = 0.0, stats: WindowStats | None = None) -> None:
        self.size, self.step = Fraction(size), Fraction(step)
        self.step_f, self.size_f = float(self.step), float(self.size)
        self.reference = reference
        self.lateness = lateness
        self.stats = stats if stats is not None else WindowStats()
        self.high = -math.inf
        self.open: dict[int, list[T]] = {}
        self.bounds = lru_cache(maxsize=4096)(self._bounds)

    def _bounds(self, k: int) -> tuple[float, float]:
        return float(k * self.step), float(k * self.step + self.size)

    def windows_of(self, x: float) -> list[int]:
        hi = math.floor(x / self.step_f)
        lo = math.floor((x - self.size_f) / self.step_f)
        out = []
        for k in range(lo - 1, hi + 2):
            start, end = self.bounds(k)
            if start <= x < end:
                out.append(k)
        return out

    def push(self, item: T) -> list[ClosedWindow[T]]:
        x = self.reference(item)
        if math.isnan(x) or math.isinf(x):
            self.stats.missing_reference += 1
            return []
        if x < self.high - self.lateness:
            self.stats.late_items += 1
            return []
        if x > self.high:
            self.high = x
        for k in self.windows_of(x):
            self.open.setdefault(k, []).append(item)
        return self.advance(self.high - self.lateness)

    def advance(self, watermark: float) -> list[ClosedWindow[T]]:
        """Close every window that ends at or before ``watermark`` (a heartbeat may call this)."""
        closed = []
        for k in sorted(self.open):
            if self.bounds(k)[1] <= watermark:
                closed.append(ClosedWindow(k, self.open.pop(k)))
            else:
                break
        return closed

    def flush(self) -> list[ClosedWindow[T]]:
        closed = [ClosedWindow(k, self.open[k]) for k in sorted(self.open)]
        self.open.clear()
        return closed


def make_windows(spec: WindowSpec, reference: Callable[[T], float] | None = None,
                 lateness: float = 0.0, stats: WindowStats | None = None
                 ) -> CountWindows[T] | TimeWindows[T]:
    if spec.kind == "count":
        return CountWindows(int(spec.size), int(spec.step))
    assert reference is not None, "time windows need a reference function"
    return TimeWindows(spec.size, spec.step, reference, lateness, stats)
