"""Selectivities and window rates measured on the data itself (issue 31, measured statistics).

The cost model used to combine one histogram per element under independence, and to guess a
window record's size and how often a filter on aggregates passes. On the photon streams that was
0.3–1.8× off: energy and position are correlated, window records print shorter values than the
guess, and ``avg(en) >= 1.3`` passes far fewer windows than half. Every estimate here is taken
from the reservoir sample of the original stream instead, the same way for a running stream and
for a candidate, so that comparing two plans compares like with like:

* a **selection** is evaluated on the sampled items (one column per element, vectorised): the
  fraction of the sample it keeps. Under ``MIN_KEPT`` kept items the sample says too little and
  the histograms' estimate is used, bounded by what the sample allows;
* a **window** is estimated from pseudo-windows: sampled items drawn at random into windows of the
  size the stream's rate gives (Poisson for time windows, exact for count windows), aggregated,
  filtered by the aggregate selection and printed as the records the executors print. The
  records' share that passes gives the rate, their mean length the size.

Sampled items are exchangeable, so a pseudo-window's aggregates follow the distribution a real
window's have when items are independent of each other in time (photons are).
"""

from __future__ import annotations

import math
import random
from typing import Protocol

import numpy as np
import numpy.random  # (loaded with the module, 10 ms, not on a registration's first plan)

from wxquery.operators import definitions as alg
from wxquery.operators.comparisons import Comparison
from wxquery.operators.definitions import KeyValue
from wxquery.operators.items import item_key
from wxquery.operators.panes import aggregate_filter
from wxquery.operators.records import WindowRecord, key_attributes

from .properties import InputProperties, Selection


class StreamStatistics(Protocol):
    """What these estimates read of ``statistics.StreamStatistics`` (which calls them)."""

    frequency: float
    items: int
    sample: list[dict[str, float]]
    increments: dict

    @property
    def repeated_elements(self) -> frozenset[str]: ...

    def columns(self) -> dict[str, np.ndarray]: ...

    def sampled_items(self) -> list: ...

    def avg_increment(self, path: str) -> float | None: ...

MIN_KEPT = 8  # fewer sampled items kept than this: the sample's fraction is too noisy alone
PSEUDO_WINDOWS = 64  # windows drawn per estimate
MAX_DRAWN = 256  # items drawn per pseudo-window at most (counts and sums scaled up from them)
MIN_SAMPLED_A_WINDOW = 5  # sampled items a window holds on average, for its own aggregates to be used


def sample_columns(stats: StreamStatistics) -> dict[str, np.ndarray]:
    """Per element, its (first) value in each sampled item (NaN where absent or not a number)."""
    columns: dict[str, np.ndarray] = {}
    for row, values in enumerate(stats.sample):
        for path, value in values.items():
            column = columns.get(path)
            if column is None:
                column = columns[path] = np.full(len(stats.sample), math.nan)
            column[row] = value
    return columns


def kept_rows(stats: StreamStatistics, selection: Selection | None) -> np.ndarray | None:
    """Which sampled items ``selection`` keeps (a boolean mask), or None when it compares a
    repeated element or a string (then only the items' own values say, ``statistics``
    evaluates those)."""
    n = len(stats.sample)
    mask = np.ones(n, bool)
    if selection is None:
        return mask
    if selection.elements & stats.repeated_elements or any(a.on_string or "[" in a.left for a in selection.atoms):
        return None  # (the sample's columns are doubles by path: strings and name tests on its items)
    columns = stats.columns()
    absent = np.full(n, math.nan)
    with np.errstate(invalid="ignore"):
        for atom in selection.atoms:
            comparison = Comparison(atom.op, atom.constant)
            left = columns.get(atom.left, absent)
            right = None if atom.right is None else columns.get(atom.right, absent)
            mask &= comparison.mask(left, right)
    return mask


def sampled_selectivity(stats: StreamStatistics, selection: Selection, independent: float) -> float | None:
    """The fraction of the sample ``selection`` keeps; with few kept, the ``independent``
    estimate bounded by the sample (at most ``MIN_KEPT`` of its items); None: not measurable."""
    mask = kept_rows(stats, selection)
    if mask is None or not mask.size:
        return None
    kept = int(np.count_nonzero(mask))
    if kept >= MIN_KEPT:
        return kept / mask.size
    return min(max(independent, kept / mask.size, 0.5 / mask.size), MIN_KEPT / mask.size)


def window_rate_and_size(stats: StreamStatistics, props: InputProperties, share_kept: float) -> tuple[float, float, float]:
    """``props``' window stream over this original, ``share_kept`` being the share of the
    original's items that reach the window: records per item of the original, records per second
    besides (while the original has shown no order), and bytes per record. Per item, not per
    second, because the original's rate is measured anew with each batch and these are not."""
    window = props.window
    assert window is not None
    partials = tuple(dict.fromkeys(p for a in props.aggregates for p in alg.partials_of(a.function, a.element)))
    per_item, fixed = 0.0, 0.0
    if window.kind == "count":
        per_item = share_kept / float(window.step)
        per_window = float(window.size)
        index = stats.items * share_kept / float(window.step)
    else:
        assert window.ref is not None
        increment = stats.avg_increment(window.ref)
        if not increment:  # (no order seen yet: a window a step, each holding what arrives)
            fixed, per_window, index = 1.0 / float(window.step), max(stats.frequency, 1.0) * share_kept, 0.0
        else:
            per_item = increment / float(window.step)
            per_window = share_kept * float(window.size) / increment
            index = (stats.increments[window.ref].last or 0.0) / float(window.step)
    index = int(index) if math.isfinite(index) else 0
    drawn = None
    if window.kind == "diff" and props.aggregate_selection is not None:
        drawn = sampled_windows(stats, props, partials)
    if drawn is None:
        drawn = pseudo_records(stats, props, partials, per_window, window.kind == "count", index)
    records, windows = drawn
    keep = aggregate_filter(props.aggregate_selection.atoms) if props.aggregate_selection is not None else None
    kept = [r for r in records if keep is None or keep(r)]
    share = max(len(kept), 0.5) / max(windows, 1)
    shown = kept or records or [WindowRecord(index)]
    size = sum(len(r.to_xml()) for r in shown) / len(shown)
    if window.key is not None:
        keys, key_bytes = keys_per_window(stats, props, per_window)
        size += key_bytes
        if window.kind == "diff":  # (a count window per key closes as often per item as one over all)
            share *= keys
    return per_item * share, fixed * share, size


def keys_per_window(stats: StreamStatistics, props: InputProperties, per_window: float) -> tuple[float, float]:
    """A window partitioned by a key: how many keys a window of ``per_window`` items holds on
    average (Σ 1 - (1 - p)^n over the keys' shares p of the sampled items that reach it), and
    the bytes the key adds to a record."""
    paths = props.window.key_paths  # type: ignore[union-attr]
    mask = kept_rows(stats, props.selection)
    items = [item for k, item in enumerate(stats.sampled_items()) if mask is None or mask[k]]
    keys: dict[KeyValue, int] = {}
    for item in items:
        key = item_key(item, paths)
        keys[key] = keys.get(key, 0) + 1
    if not items:
        return 1.0, 12.0
    n = max(per_window, 1.0)
    held = sum(1 - (1 - c / len(items)) ** n for c in keys.values())
    written = sum(c * len(key_attributes(k)) for k, c in keys.items()) / len(items)
    return max(held, 1.0), written


def sampled_windows(stats: StreamStatistics, props: InputProperties, partials: tuple
                    ) -> tuple[list[WindowRecord], int] | None:
    """``PSEUDO_WINDOWS`` of the stream's own time windows, spread evenly over the span the
    sample covers, each aggregated over the sampled items it holds (counts and sums scaled by
    the sample's share of the stream): a filter on aggregates passes windows that differ in time
    (a flare's windows have a high average energy), which windows of items drawn at random from
    the whole sample do not show. With the number of windows looked at; None when the sample holds too few items a window
    (``MIN_SAMPLED_A_WINDOW``) for its aggregates to mean anything."""
    window = props.window
    assert window is not None and window.ref is not None
    columns = stats.columns()
    mask = kept_rows(stats, props.selection)
    times = columns.get(window.ref)
    if mask is None or times is None or not stats.sample:
        return None
    rows = np.flatnonzero(mask & ~np.isnan(times))
    if rows.size < MIN_KEPT:
        return None
    order = rows[np.argsort(times[rows], kind="stable")]
    t = times[order]
    size, step = float(window.size), float(window.step)
    first, last = math.floor(t[0] / step), math.floor(t[-1] / step) - math.ceil(size / step) + 1
    if last < first or rows.size * size / max(t[-1] - t[0], 1e-9) < MIN_SAMPLED_A_WINDOW:
        return None
    windows = np.unique(np.linspace(first, last, PSEUDO_WINDOWS).round().astype(int))
    lo = np.searchsorted(t, windows * step, side="left")
    hi = np.searchsorted(t, windows * step + size, side="left")
    held = hi - lo
    width = int(held.max())
    inside = np.arange(width)[None, :] < held[:, None]
    picks = order[np.minimum(lo[:, None] + np.arange(width)[None, :], order.size - 1)]
    items = held * (stats.items / len(stats.sample))
    return _records(columns, partials, picks, inside, items, windows), len(windows)


def pseudo_records(stats: StreamStatistics, props: InputProperties, partials: tuple, per_window: float,
                   exact: bool, index: int) -> tuple[list[WindowRecord], int]:
    """``PSEUDO_WINDOWS`` window records of sampled items that pass the selection, ``per_window``
    items each (``exact``) or a Poisson number of them; empty windows print no record."""
    mask = kept_rows(stats, props.selection)
    columns = stats.columns()
    rows = np.flatnonzero(mask) if mask is not None else np.arange(len(stats.sample))
    rng = np.random.default_rng(random.Random(repr(props)).getrandbits(32))
    sizes = (np.full(PSEUDO_WINDOWS, round(per_window)) if exact
             else rng.poisson(max(per_window, 0.0), PSEUDO_WINDOWS))
    drawn = np.minimum(sizes, MAX_DRAWN)
    width = int(drawn.max()) if rows.size else 0
    picks = rows[rng.integers(0, rows.size, (PSEUDO_WINDOWS, width))] if width else None
    inside = np.arange(width)[None, :] < drawn[:, None]
    return _records(columns, partials, picks, inside, sizes, np.full(PSEUDO_WINDOWS, index)), PSEUDO_WINDOWS


def _records(columns: dict[str, np.ndarray], partials: tuple, picks: np.ndarray | None, inside: np.ndarray,
             items: np.ndarray, indexes: np.ndarray) -> list[WindowRecord]:
    """Per window (a row of ``picks``: sampled rows, those ``inside`` it), the record of the
    ``items`` items they stand for — counts and sums scaled up to them, minima and maxima as
    sampled — with its index; windows of no items print none."""
    taken = inside.sum(axis=1)
    scale = np.divide(items, taken, out=np.zeros(len(items)), where=taken > 0)
    finals: dict = {}
    with np.errstate(invalid="ignore"):
        for fn, element in partials:
            column = columns.get(element) if picks is not None else None
            if element == alg.WHOLE_ITEM or column is None:
                finals[(fn, element)] = (items if element == alg.WHOLE_ITEM else np.zeros(len(items)), None)
                continue
            x = column[picks]
            present = inside & ~np.isnan(x)
            seen = present.sum(axis=1)
            if fn == "count":
                finals[(fn, element)] = (seen * scale, None)
            elif fn == "sum":
                finals[(fn, element)] = (np.where(present, x, 0.0).sum(axis=1) * scale, seen)
            else:
                pick = np.where(present, x, math.inf if fn == "min" else -math.inf)
                finals[(fn, element)] = (pick.min(axis=1) if fn == "min" else pick.max(axis=1), seen)
    out: list[WindowRecord] = []
    for w in np.flatnonzero(items > 0):
        values: dict = {}
        for partial, (value, seen) in finals.items():
            if partial[0] == "count":
                values[partial] = round(value[w])
            else:
                values[partial] = None if seen is not None and not seen[w] else float(value[w])
        out.append(WindowRecord(int(indexes[w]), values))
    return out
