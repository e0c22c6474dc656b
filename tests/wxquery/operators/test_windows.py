"""Which windows a pane belongs to, in integers, against the definition in fractions; a batch
admitted with watermarks among its rows in one pass, against one row and watermark at a time."""

from __future__ import annotations

import math

import numpy as np
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.definitions import WindowSpec
from wxquery.operators.windows import WindowAssigner, WindowClock, watermark_floors

widths = st.fractions(min_value=Fraction(1, 1000), max_value=1000, max_denominator=1000)


@settings(deadline=None)
@given(widths, widths, st.integers(-10**6, 10**6))
def test_the_windows_of_a_pane_are_those_whose_bounds_hold_it(size, step, p):
    assigner = WindowAssigner(WindowSpec("diff", size, step, "t"))
    g = assigner.pane
    # window k = [k·μ, k·μ+Δ) holds pane p = [p·g, (p+1)·g) iff k·μ ≤ p·g and p·g < k·μ + Δ
    lo = math.floor((p * g - size) / step) + 1
    hi = math.floor(p * g / step) + 1
    assert assigner.windows_of_pane(p) == range(lo, hi)
    assert assigner.first_window_of_pane(p) == math.floor(p * g / step)
    for k in (lo - 1, lo, hi - 1, hi):
        assert (k in assigner.windows_of_pane(p)) == (k * step <= p * g < k * step + size)


REFS = st.one_of(st.floats(-50, 50), st.sampled_from([math.nan, math.inf, -math.inf]))


@settings(deadline=None)
@given(st.lists(REFS, max_size=40),
       st.lists(st.tuples(st.integers(0, 45), st.one_of(st.floats(-50, 60), st.just(math.nan))), max_size=8),
       st.sampled_from([0.0, 1.0, 7.5]), st.floats(-60, 10))
def test_a_batch_admitted_with_watermark_floors_equals_admitting_row_by_row(refs, marks, lateness, high):
    """Row i follows the watermarks with ``after`` ≤ its position (positions start at 3); a NaN
    watermark raises nothing (``max`` ignores it)."""
    positions = np.arange(3, 3 + len(refs), dtype=np.int64)
    marks = sorted(marks)
    one, each = WindowClock(high=high), WindowClock(high=high)
    floors = watermark_floors(positions, marks) if marks else None
    got = one.admit_batch(np.array(refs, dtype=np.float64), lateness, floors)
    want, pending = [], list(marks)
    for position, x in zip(positions.tolist(), refs):
        while pending and pending[0][0] <= position:
            each.high = max(each.high, pending.pop(0)[1])
        want.append(each.admit(x, lateness))
    while pending:  # the watermarks after the last row raise the clock too (``run_unit``)
        each.high = max(each.high, pending.pop(0)[1])
    for _, value in marks:
        one.high = max(one.high, value)
    assert got.tolist() == want
    assert one.high == each.high or (math.isnan(one.high) and math.isnan(each.high))
    assert (one.late_items, one.missing_reference) == (each.late_items, each.missing_reference)
