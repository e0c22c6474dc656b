"""Window assignment and event time, with the semantics of DESIGN.md §3, for every executor.

* ``WindowAssigner``: which windows a reference value falls in, and how windows split into
  **panes** — the largest intervals that never straddle a window boundary, ``g = gcd(Δ, μ)``:
  pane p holds references in ``[p·g, (p+1)·g)`` (time windows) or ordinals ``p·g … p·g+g-1``
  (count windows), and window k is the panes ``k·μ/g … (k·μ+Δ)/g - 1``. Bounds are exact
  fractions, compared as doubles the way XQuery compares untyped data with a decimal. It also
  holds the one rule of which windows are final: a count window once Δ items have reached it
  (``complete``), a time window once the watermark reaches its end or the input ends (``final``).
* ``WindowClock``: the event-time clock of one window operator — items seen (count windows), the
  highest accepted reference, and the one counter of items dropped as late or without a numeric
  reference. It is the one place event time is raised (``reach``, ``follow``) and an item is
  judged late or missing (its reference is ``first_reference``). It is plain data: executors
  snapshot it with their state and ship it to tasks.
* ``CountWindows`` / ``TimeWindows``: windows that collect their items, for the reference
  evaluator, whose window contents feed arbitrary return expressions. They assign, admit and
  close with the two objects above, so the evaluator closes the same windows as the executors
  (``panes.ChainState``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Generic, TypeVar

import numpy as np

from ..values import NAN
from .definitions import KeyValue, WindowSpec

T = TypeVar("T")


@dataclass
class WindowCounters:
    """Items a window operator dropped: reported, never silent."""

    late_items: int = 0
    missing_reference: int = 0

    def add(self, other: "WindowCounters") -> None:
        self.late_items += other.late_items
        self.missing_reference += other.missing_reference

    def warnings(self) -> list[str]:
        out = []
        if self.late_items:
            out.append(f"{self.late_items} item(s) arrived out of order beyond the allowed lateness "
                       "and were dropped from time windows")
        if self.missing_reference:
            out.append(f"{self.missing_reference} item(s) had no numeric window reference value "
                       "and were dropped from time windows")
        return out


def pane_width(window: WindowSpec) -> Fraction:
    """gcd(Δ, μ) of two fractions."""
    a, b = Fraction(window.size), Fraction(window.step)
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                    a.denominator * b.denominator)


class WindowAssigner:
    """Windows and panes of one window specification."""

    def __init__(self, spec: WindowSpec) -> None:
        self.spec = spec
        self.size, self.step = Fraction(spec.size), Fraction(spec.step)
        self.size_f, self.step_f = float(self.size), float(self.step)
        self.pane = pane_width(spec)
        self.panes_per_window = int(self.size / self.pane)
        self.panes_per_step = int(self.step / self.pane)
        self.bounds = lru_cache(maxsize=4096)(self._bounds)
        self.size_i, self.step_i = int(self.size), int(self.step)  # count windows: whole numbers

    def _bounds(self, k: int) -> tuple[float, float]:
        """Window k covers ``[k·μ, k·μ+Δ)``, as doubles."""
        return float(k * self.step), float(k * self.step + self.size)

    def complete(self, seen: int) -> int:
        """Count windows: how many are complete (windows 0 … n-1) once ``seen`` items reached
        them; window k holds items k·μ … k·μ+Δ-1, and one never completed produces nothing."""
        return max(0, (seen - self.size_i) // self.step_i + 1)

    def final(self, windows: Iterable[int], watermark: float, end: bool) -> list[int]:
        """Time windows: the leading ones of ``windows`` (ascending) that are final, those that
        end at or before ``watermark`` (``WindowClock.watermark``); every one at the input's end."""
        if end:
            return list(windows)
        out = []
        for k in windows:
            if self.bounds(k)[1] > watermark:
                break
            out.append(k)
        return out

    def windows_of(self, x: float) -> list[int]:
        """The time windows whose bounds contain reference value x."""
        hi = math.floor(x / self.step_f)
        lo = math.floor((x - self.size_f) / self.step_f)
        return [k for k in range(lo - 1, hi + 2) if self.bounds(k)[0] <= x < self.bounds(k)[1]]

    def panes_of_window(self, k: int) -> range:
        first = k * self.panes_per_step
        return range(first, first + self.panes_per_window)

    def windows_of_pane(self, p: int) -> range:
        """The windows pane p belongs to (pane boundaries are window boundaries). Δ and μ are
        whole numbers of panes, so this is integer arithmetic: the driver asks it of every pane
        it closes, and in fractions it was most of the closing."""
        return range((p - self.panes_per_window) // self.panes_per_step + 1, p // self.panes_per_step + 1)

    def first_window_of_pane(self, p: int) -> int:
        return p // self.panes_per_step

    def time_panes(self, refs: np.ndarray) -> np.ndarray:
        """Pane of each reference value, exactly as the window bounds compare (``float(p·g) ≤ x``)."""
        num, den = self.pane.numerator, self.pane.denominator
        p = np.floor(refs * den / num)
        p = np.where(refs < p * num / den, p - 1, p)
        p = np.where(refs >= (p + 1) * num / den, p + 1, p)
        return p.astype(np.int64)

    def count_panes(self, first_ordinal: int, n: int) -> np.ndarray:
        """Panes of the next n items of a count window, the first being item ``first_ordinal``."""
        return (first_ordinal + np.arange(n, dtype=np.int64)) // int(self.pane)


def watermark_floors(positions: np.ndarray, marks: list[tuple[int, float]]) -> np.ndarray:
    """Per row (archive positions ascending), the highest watermark sent before it (a watermark
    ``after`` = n was sent after the stream's first n items): the rows are evaluated in one pass,
    as the replay sends them between the watermarks, instead of in a segment per watermark."""
    raised = np.full(positions.size + 1, -np.inf)
    cuts = np.searchsorted(positions, [after for after, _ in marks], side="left")
    np.fmax.at(raised, cuts, [value for _, value in marks])  # a NaN watermark raises nothing, as max() ignores it
    return np.maximum.accumulate(raised)[:-1]


def first_reference(found: Sequence[T], value: Callable[[T], float]) -> float:
    """An item's window reference: the ``value`` of the first of what it has at the reference
    path, NaN when it has nothing there (``WindowClock.admit`` then drops it, counted missing)."""
    return value(found[0]) if found else NAN


@lru_cache(maxsize=1024)
def assigner_for(spec: WindowSpec) -> WindowAssigner:
    """One assigner per window specification, kept out of operator state (which is pickled)."""
    return WindowAssigner(spec)


@dataclass
class WindowClock:
    """Event time of one window operator; plain data, snapshot with ``to_dict``/``from_dict``."""

    seen: int = 0  # count windows: items that reached the window
    high: float = -math.inf  # time windows: highest reference accepted
    late_items: int = 0
    missing_reference: int = 0
    by_key: dict | None = None  # count windows partitioned by a key: items seen per key

    def watermark(self, lateness: float) -> float:
        """Windows ending at or before this are final."""
        return self.high - lateness

    def reach(self, value: float) -> None:
        """Event time has reached ``value`` (an admitted item's reference, a watermark, a clock
        that went further): it never goes back, and a NaN reaches nothing (as ``max`` ignores it)."""
        if value > self.high:
            self.high = value

    def follow(self, after: WindowClock, counted: bool = True) -> None:
        """Advanced past the items another clock went through after this one's (a piece of a
        batch, an archive chunk): their number and highest reference, and with ``counted`` the
        items it dropped (without: where the items leave the clock, as a starting point)."""
        self.seen += after.seen
        if after.by_key:
            mine = self.by_key = dict(self.by_key or {})
            for k, n in after.by_key.items():
                mine[k] = mine.get(k, 0) + n
        self.reach(after.high)
        if counted:
            self.late_items += after.late_items
            self.missing_reference += after.missing_reference

    def admit(self, x: float, lateness: float) -> bool:
        """Whether an item with reference x joins its windows; a dropped one is counted."""
        if math.isnan(x) or math.isinf(x):
            self.missing_reference += 1
            return False
        if x < self.watermark(lateness):
            self.late_items += 1
            return False
        self.reach(x)
        return True

    def admit_batch(self, refs: np.ndarray, lateness: float, floors: np.ndarray | None = None) -> np.ndarray:
        """``admit`` over a batch in order, vectorised: the mask of admitted rows. ``floors``
        (one per row, ascending): the event time watermarks sent before each row had raised the
        clock to — a batch with watermarks among its rows is admitted in one pass, as if the
        clock had been raised between them (an archive chunk of a bursty stream holds thousands)."""
        admitted = np.isfinite(refs)
        self.missing_reference += int(refs.size - admitted.sum())
        valid = refs[admitted]
        if valid.size:
            running = np.maximum.accumulate(valid)
            before = np.concatenate(([self.high], np.maximum(running[:-1], self.high)))
            if floors is not None:
                before = np.maximum(before, floors[admitted])
            on_time = ~(valid < before - lateness)
            self.late_items += int(valid.size - on_time.sum())
            self.reach(float(running[-1]))
            admitted[np.flatnonzero(admitted)] = on_time
        return admitted

    def counters(self) -> WindowCounters:
        return WindowCounters(self.late_items, self.missing_reference)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, state: dict) -> "WindowClock":
        return cls(**state)

    def key_ordinals(self, keys: Sequence[KeyValue]) -> np.ndarray:
        """Count windows partitioned by a key: each next item's number among its key's items
        (from 0), counted on (``by_key``)."""
        seen = self.by_key = dict(self.by_key or {})
        out = np.empty(len(keys), np.int64)
        for i, k in enumerate(keys):
            n = seen.get(k, 0)
            out[i] = n
            seen[k] = n + 1
        self.seen += len(keys)
        return out


# ============================================================================ collecting windows


@dataclass
class ClosedWindow(Generic[T]):
    """A window's index (k for time windows, window number for count windows) and contents;
    ``key``: of a partitioned window, the key its items share (None: they have none)."""

    index: int
    items: list[T]
    key: KeyValue = None


class CountWindows(Generic[T]):
    """A window starts at every μ-th item and holds Δ items; only complete windows are emitted."""

    def __init__(self, spec: WindowSpec) -> None:
        self.assigner = assigner_for(spec)
        self.step = self.assigner.step_i
        self.clock = WindowClock()
        self.open: list[ClosedWindow[T]] = []

    def push(self, item: T) -> list[ClosedWindow[T]]:
        seen = self.clock.seen
        if seen % self.step == 0:  # window k starts at item k·μ
            self.open.append(ClosedWindow(seen // self.step, []))
        self.clock.seen = seen + 1
        for w in self.open:
            w.items.append(item)
        complete = self.assigner.complete(seen + 1)
        closed = []
        while self.open and self.open[0].index < complete:
            closed.append(self.open.pop(0))
        return closed

    def flush(self) -> list[ClosedWindow[T]]:
        self.open.clear()  # incomplete count windows produce nothing
        return []


class TimeWindows(Generic[T]):
    """Windows over a reference value; closed by the watermark and at the end of the stream."""

    def __init__(self, spec: WindowSpec, reference: Callable[[T], float], lateness: float = 0.0,
                 clock: WindowClock | None = None) -> None:
        self.assigner = assigner_for(spec)
        self.reference = reference
        self.lateness = lateness
        self.clock = clock if clock is not None else WindowClock()
        self.open: dict[int, list[T]] = {}

    def push(self, item: T) -> list[ClosedWindow[T]]:
        x = self.reference(item)
        if not self.clock.admit(x, self.lateness):
            return []
        for k in self.assigner.windows_of(x):
            self.open.setdefault(k, []).append(item)
        return self._close(end=False)

    def flush(self) -> list[ClosedWindow[T]]:
        return self._close(end=True)

    def _close(self, end: bool) -> list[ClosedWindow[T]]:
        final = self.assigner.final(sorted(self.open), self.clock.watermark(self.lateness), end)
        return [ClosedWindow(k, self.open.pop(k)) for k in final]


def key_order(key: KeyValue) -> tuple:
    """How windows of different keys that close together are ordered: by key, by codepoint
    (items without the key first); by several keys, by the first, then the second…, an item
    without one of the paths before every value of it."""
    if isinstance(key, tuple):
        return tuple((k is not None, k or "") for k in key)
    return (key is not None, key or "")


class KeyedWindows(Generic[T]):
    """Windows partitioned by a key (``WindowSpec.key``): one window sequence per key value.

    A count window counts its key's items: it closes with the key's Δ-th item, so windows come
    out in the order of the items that close them. Time windows share the one event-time clock
    (lateness, watermark and the items dropped are the stream's), and the windows a watermark
    closes come out by window start, then key (``key_order``), so the order does not depend on
    how the items were batched."""

    def __init__(self, spec: WindowSpec, key: Callable[[T], KeyValue],
                 reference: Callable[[T], float] | None = None, lateness: float = 0.0,
                 clock: WindowClock | None = None) -> None:
        self.spec = spec.unkeyed()
        self.key = key
        self.reference = reference
        self.lateness = lateness
        self.clock = clock if clock is not None else WindowClock()
        self.counts: dict[KeyValue, CountWindows[T]] = {}
        self.open: dict[KeyValue, dict[int, list[T]]] = {}
        self.assigner = assigner_for(self.spec)
        self.first_end = math.inf  # time windows: the earliest end of an open window (none closes before)

    def push(self, item: T) -> list[ClosedWindow[T]]:
        k = self.key(item)
        if self.spec.kind == "count":
            windows = self.counts.get(k)
            if windows is None:
                windows = self.counts[k] = CountWindows(self.spec)
            self.clock.seen += 1
            return [ClosedWindow(w.index, w.items, k) for w in windows.push(item)]
        assert self.reference is not None, "time windows need a reference function"
        x = self.reference(item)
        if not self.clock.admit(x, self.lateness):
            return []
        opened = self.open.setdefault(k, {})
        for index in self.assigner.windows_of(x):
            opened.setdefault(index, []).append(item)
            self.first_end = min(self.first_end, self.assigner.bounds(index)[1])
        return self._close(end=False)

    def flush(self) -> list[ClosedWindow[T]]:
        self.counts.clear()  # incomplete count windows produce nothing
        return self._close(end=True)

    def _close(self, end: bool) -> list[ClosedWindow[T]]:
        watermark = self.clock.watermark(self.lateness)
        if not end and watermark < self.first_end:
            return []  # (looked at every key only when some window closes)
        closed: list[ClosedWindow[T]] = []
        for k, opened in list(self.open.items()):
            for index in self.assigner.final(sorted(opened), watermark, end):
                closed.append(ClosedWindow(index, opened.pop(index), k))
            if not opened:
                del self.open[k]
        self.first_end = min((self.assigner.bounds(min(o))[1] for o in self.open.values()), default=math.inf)
        closed.sort(key=lambda w: (w.index, key_order(w.key)))
        return closed


def collecting_windows(spec: WindowSpec, reference: Callable[[T], float] | None = None,
                       lateness: float = 0.0, clock: WindowClock | None = None,
                       key: Callable[[T], KeyValue] | None = None
                       ) -> CountWindows[T] | TimeWindows[T] | KeyedWindows[T]:
    if spec.key is not None:
        assert key is not None, "partitioned windows need a key function"
        return KeyedWindows(spec, key, reference, lateness, clock)
    if spec.kind == "count":
        return CountWindows(spec)
    assert reference is not None, "time windows need a reference function"
    return TimeWindows(spec, reference, lateness, clock)

