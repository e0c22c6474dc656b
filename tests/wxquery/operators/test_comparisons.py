"""The comparison's two entry points agree: ``mask`` over columns is ``holds`` row by row."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.comparisons import THETA, Comparison

VALUES = st.one_of(st.floats(-5, 5), st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf]))
CONSTANTS = st.one_of(st.sampled_from([Fraction(0), Fraction(3, 2), Fraction(-1, 10)]),
                      st.fractions(-5, 5, max_denominator=1000))


@settings(deadline=None)
@given(st.sampled_from(sorted(THETA)), CONSTANTS, st.lists(st.tuples(VALUES, VALUES), max_size=30),
       st.booleans())
def test_the_vectorised_entry_point_equals_the_scalar_one_row_by_row(op, constant, rows, against_path):
    comparison = Comparison(op, constant)
    xs = np.array([x for x, _ in rows], dtype=np.float64)
    ys = np.array([y for _, y in rows], dtype=np.float64) if against_path else None
    want = [comparison.holds([x], [y] if against_path else None) for x, y in rows]
    assert comparison.mask(xs, ys).tolist() == want


def test_existential_over_repeated_values_and_false_without_any() -> None:
    greater = Comparison(">", Fraction(1))
    assert greater.holds([0.0, 5.0], [3.0, 1.0])  # 5 > 1 + 1
    assert not greater.holds([0.0, 2.0], [3.0, 1.0])
    assert not greater.holds([], None) and not greater.holds([5.0], [])
    assert not Comparison("=", Fraction(0)).holds([math.nan], [math.nan])
    assert Comparison("=", Fraction(0)).holds([-0.0], [0.0])
