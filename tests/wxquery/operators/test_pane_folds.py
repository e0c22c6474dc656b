"""Count windows folded from their panes as arrays (``pane_folds``) equal, to the last bit,
merging each window's panes one after the other (``aggregates.merge``): sums in pane order,
NaN winning min and max, the first of 0 and -0 kept, missing panes and empty partials skipped."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.aggregates import merge
from wxquery.operators.pane_folds import fold_count_windows

FUNCTIONS = ["count", "sum", "min", "max", "sumsq"]
DOUBLES = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.sampled_from([0.0, -0.0, 1e308, -1e308, 0.1, 0.2]))


PANE = st.tuples(st.integers(0, 20), *[st.none() | (st.integers(0, 1000) if fn == "count" else DOUBLES)
                                        for fn in FUNCTIONS])  # (pane number, its partials)


def same_value(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b) and type(a) is type(b)


@settings(max_examples=300, deadline=None)
@given(st.lists(PANE, max_size=30), st.integers(0, 3), st.integers(1, 6), st.integers(1, 5),
       st.integers(1, 4))
def test_folding_windows_at_once_equals_merging_their_panes_one_by_one(rows, first, windows, per_window, per_step):
    panes = {p: list(values) for p, *values in rows}
    got = fold_count_windows(panes, FUNCTIONS, first, windows, per_window, per_step)
    assert len(got) == windows
    for w, row in enumerate(got):
        k = first + w
        members = [p for p in range(k * per_step, k * per_step + per_window) if p in panes]
        expected = list(panes[members[0]]) if members else [None] * len(FUNCTIONS)
        for p in members[1:]:
            expected = [merge(fn, a, b) for fn, a, b in zip(FUNCTIONS, expected, panes[p])]
        expected = [(v or 0) if fn == "count" else v for fn, v in zip(FUNCTIONS, expected)]
        row = [(v or 0) if fn == "count" else v for fn, v in zip(FUNCTIONS, row)]
        assert all(same_value(a, b) for a, b in zip(row, expected)), (k, row, expected)
