"""A window join within a band, run on pushed items: what a super-peer computes when the planner
places a join in the network (``sharing.join_planning``), one step before the subscriber.

The subscriber's own join (``superpeer.subscriptions.join_feeds``) pulls: its evaluation asks
for the next outer item and waits for the inner items of that item's band. A join placed at
another super-peer is pushed batches of both inputs as they arrive, so it keeps the outer items
whose band the inner input has not passed yet, and hands each of them on, in arrival order,
once it has: as one **group** — the outer item and the inner items within its band (widened
by a few units in the last place, so rounding never hides a match), in arrival order; with
**keys** (equalities between the inputs of the where clause's top-level 'and',
``join_band.network_keys``), only the inner items equal to the outer item on each, compared
as the subscriber compares them (``operators.items.pair_test``): a pair they leave out fails
the where clause there anyway. Outer items with no inner item left are dropped: in the nested
loop they produce nothing.

The group carries candidates, not matches: the subscriber still evaluates the whole ``where``
clause over each (outer, inner) pair of a group, in the nested loop's order, so its results
are exactly XQuery's (``superpeer.subscriptions.join_feeds``, grouped mode). The contract and
its counters are the subscriber-side join's: both inputs in non-decreasing order of their band
elements; an outer item below an earlier one is dropped (``late_outer``), an inner one below an
earlier one is kept for the outer items to come (``late_inner``), infinite values are dropped
(``not_finite``), items without a number there match nothing.

Pure: no threads, no sockets; the caller serialises its calls.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from .operators.comparisons import comparison
from .operators.definitions import Atom
from .operators.items import pair_test, path_strings, path_values

ULPS = 8  # the band is widened by this many units in the last place: rounding never hides a match


def band_values(item: object, path: str) -> tuple[float, float] | None:
    """The least and the greatest number at ``path`` (None: no number there, nothing to match;
    ``(inf, inf)`` when a value is infinite)."""
    try:
        values = [v for v in path_values(item, path) if not math.isnan(v)]  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not values:
        return None
    if not all(map(math.isfinite, values)):
        return math.inf, math.inf
    return min(values), max(values)


def key_selectivity(outer: Sequence, inner: Sequence, keys: Sequence[Atom], most: int = 100) -> float | None:
    """The share of (outer, inner) pairs of two samples of items equal on every key, compared
    as ``pair_test`` compares them (None: no pair to tell): what a join's keys leave of its
    bands, as the planner prices it. Never 0: half a pair, for keys no sampled pair met."""
    outer, inner = list(outer)[:most], list(inner)[:most]
    if not outer or not inner:
        return None
    sides = []
    for k in keys:
        values = path_strings if k.on_string else path_values
        sides.append((comparison(k.op, k.constant), [values(i, k.left) for i in inner],  # type: ignore[operator]
                      [values(o, k.right) for o in outer]))  # type: ignore[operator]
    hits = sum(all(test.holds(iv[b], ov[a]) for test, iv, ov in sides)  # type: ignore[arg-type]
               for a in range(len(outer)) for b in range(len(inner)))
    return max(hits, 0.5) / (len(outer) * len(inner))


def slack(*magnitudes: float) -> float:
    return ULPS * math.ulp(max(1.0, *map(abs, magnitudes)))


@dataclass
class Group:
    """An outer item and the inner items within its band; ``origin``: the outer item's own
    origin (the original's item it came from), ``inner_origins`` the inner items', if known."""

    outer: object
    inner: list
    origin: int | None = None
    inner_origins: list | None = None


@dataclass
class BandJoinState:
    """The band join of an outer and an inner input on pushed batches (see the module)."""

    outer_path: str
    inner_path: str
    low: float
    high: float
    pending: deque = field(default_factory=deque)  # (least, greatest, item, origin): band not passed yet
    kept: deque = field(default_factory=deque)  # (least, greatest, item, origin): inner items that may match
    inner_high: float = -math.inf  # no inner item to come is below it (an item or a watermark)
    outer_floor: float = -math.inf  # no outer item to come is below it
    inner_ended: bool = False
    outer_ended: bool = False
    late_outer: int = 0
    late_inner: int = 0
    not_finite: int = 0
    keys: tuple[Atom, ...] = ()  # equalities each (outer, inner) pair of a group satisfies
    unequal: int = 0  # inner items within a band left out of its group by a key

    def __post_init__(self) -> None:
        self._tests = [pair_test(k) for k in self.keys]

    @property
    def ended(self) -> bool:
        """Every group has been handed on: the outer input ended and none waits."""
        return self.outer_ended and not self.pending

    def outer(self, items: Sequence, origins: Sequence[int] | None = None, end: bool = False) -> list[Group]:
        """The next outer items; the groups now complete."""
        for k, item in enumerate(items):
            where = band_values(item, self.outer_path)
            if where is None:
                continue
            least, greatest = where
            if math.isinf(least):
                self.not_finite += 1
                continue
            if least < self.outer_floor:
                self.late_outer += 1
                continue
            self.outer_floor = least
            self.pending.append((least, greatest, item, origins[k] if origins is not None else None))
        self.outer_ended = self.outer_ended or end
        return self._ready()

    def inner(self, items: Sequence, end: bool = False, origins: Sequence[int] | None = None) -> list[Group]:
        """The next inner items; the groups now complete."""
        for k, item in enumerate(items):
            where = band_values(item, self.inner_path)
            if where is None:
                continue
            least, greatest = where
            if math.isinf(least):
                self.not_finite += 1
                continue
            if least < self.inner_high:
                self.late_inner += 1
            else:
                self.inner_high = least
            self.kept.append((least, greatest, item, origins[k] if origins is not None else None))
        self.inner_ended = self.inner_ended or end
        return self._ready()

    def watermark(self, path: str, value: float, inner: bool) -> list[Group]:
        """Event time ``value`` at ``path`` reached an input: no later item is below it."""
        if not math.isfinite(value):
            return []
        if inner and path == self.inner_path and value > self.inner_high:
            self.inner_high = value
        elif not inner and path == self.outer_path:
            self.outer_floor = max(self.outer_floor, value)
        return self._ready()

    def _ready(self) -> list[Group]:
        """The waiting outer items, first to last, whose band the inner input has passed (or
        all, once it ended); then what no outer item to come can match is forgotten."""
        out: list[Group] = []
        while self.pending:
            least, greatest, item, origin = self.pending[0]
            hi = greatest + self.high + slack(greatest, self.high)
            if not self.inner_ended and self.inner_high <= hi:
                break
            self.pending.popleft()
            lo = least + self.low - slack(least, self.low)
            matched = [(v, o) for a, b, v, o in self.kept if b >= lo and a <= hi]
            if self._tests and matched:
                band = len(matched)
                matched = [(v, o) for v, o in matched if all(t(item, v) for t in self._tests)]
                self.unequal += band - len(matched)
            if matched:
                out.append(Group(item, [v for v, _ in matched], origin, [o for _, o in matched]))
        floor = self.pending[0][0] if self.pending else self.outer_floor
        if math.isfinite(floor):
            below = floor + self.low - slack(floor, self.low)
            while self.kept and self.kept[0][1] < below:
                self.kept.popleft()
        return out

    def status(self) -> dict:
        return {"waiting_outer_items": len(self.pending), "kept_inner_items": len(self.kept),
                "late_outer_items": self.late_outer, "late_inner_items": self.late_inner,
                "not_finite": self.not_finite, **({"unequal_inner_items": self.unequal} if self.keys else {})}
