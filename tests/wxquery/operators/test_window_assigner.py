"""Which windows a pane belongs to, in integers, against the definition in fractions."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from wxquery.operators.definitions import WindowSpec
from wxquery.operators.windows import WindowAssigner

widths = st.fractions(min_value=Fraction(1, 1000), max_value=1000, max_denominator=1000)


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
