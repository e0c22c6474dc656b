"""Count windows folded from their panes as arrays (``pane_folds``) equal, to the last bit,
merging each window's panes one after the other (``aggregates.merge``): sums in pane order,
NaN winning min and max, the first of 0 and -0 kept, missing panes and empty partials skipped."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.aggregates import merge
from wxquery.operators.pane_folds import fold_windows

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
    got = fold_windows(panes, FUNCTIONS, first, windows, per_window, per_step)
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


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), DOUBLES), min_size=1, max_size=300),
       st.integers(1, 6), st.integers(1, 6), st.lists(st.integers(0, 420), min_size=1, max_size=6))
def test_time_windows_closed_from_arrays_equal_closing_them_one_by_one(items, size, step, watermarks):
    """A time window chain's records, closed at each watermark: by ``fold_windows`` when many
    close at once (sparse panes, far-apart windows, an end) as one by one."""
    from fractions import Fraction

    from wxquery.operators import panes as module
    from wxquery.operators.chains import normalise
    from wxquery.operators.definitions import WindowAggregate, WindowSpec

    window = WindowAggregate(WindowSpec("diff", Fraction(size, 2), Fraction(step, 2), "t"),
                             (("sum", "v"), ("count", "v"), ("min", "v"), ("max", "v")))
    chain = normalise(1, "out", "in", "items", (window,))
    g = module.assigner_for(window.window).pane

    def run(fold_at: int) -> list[str]:
        saved, module.FOLD_AT_LEAST = module.FOLD_AT_LEAST, fold_at
        try:
            state, out, high = module.ChainState(chain), [], 0.0
            for mark in sorted(watermarks):
                batch = sorted((p, v) for p, v in items if high <= p * g < mark)
                panes: dict[int, list] = {}
                for p, v in batch:
                    row = [v, 1, v, v]
                    panes[p] = row if p not in panes else [module.merge(fn, a, b) for fn, a, b
                                                          in zip(("sum", "count", "min", "max"), panes[p], row)]
                state.add_panes(sorted(panes.items()))
                state.clock.high = high = float(mark)
                out += [r.to_xml() for r in state.close(0.0, False)]
            state.add_panes([])
            return out + [r.to_xml() for r in state.close(0.0, True)]
        finally:
            module.FOLD_AT_LEAST = saved

    assert run(1) == run(10**9)


def test_time_windows_far_apart_in_fine_panes_are_closed_one_by_one():
    """|t diff 0.001 step 1000000|: a pane is 1/1000, a step a billion panes; twenty windows of one
    item each closing at once span 2·10^10 panes, which no array is made for."""
    from fractions import Fraction

    from wxquery.operators import panes as module
    from wxquery.operators.chains import normalise
    from wxquery.operators.definitions import WindowAggregate, WindowSpec

    window = WindowAggregate(WindowSpec("diff", Fraction(1, 1000), Fraction(10**6), "t"), (("sum", "v"),))
    state = module.ChainState(normalise(1, "out", "in", "items", (window,)))
    per_step = module.assigner_for(window.window).panes_per_step
    state.add_panes([(k * per_step, [float(k)]) for k in range(20)])
    state.clock.high = 30 * 10**6
    assert [r.values[("sum", "v")] for r in state.close(0.0, False)] == [float(k) for k in range(20)]
