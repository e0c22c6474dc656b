"""Closed windows written a column at a time are the very texts their records write."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.records import WindowRecord, window_texts
from wxquery.values import format_atomic, format_atomics

FUNCTIONS = ["count", "sum", "min", "max", "sumsq"]
VALUES = st.one_of(st.none(), st.floats(width=64), st.integers(-10**12, 10**12),
                   st.sampled_from([0.0, -0.0, 1e-4, 2e-5, 9.99999e5, 1e6, 1e-7, 123.0, -5.5]))


@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from(FUNCTIONS), st.sampled_from(["en", "a/b", 'x"&<'])), unique=True,
                max_size=4),
       st.lists(st.tuples(st.integers(-10, 10**9), st.lists(VALUES, min_size=4, max_size=4)), max_size=8))
def test_window_texts_equal_the_records_texts(partials, rows):
    rows = [(k, values[:len(partials)]) for k, values in rows]
    want = [WindowRecord(k, {p: (v or 0) if p[0] == "count" else v for p, v in zip(partials, values)}).to_xml()
            for k, values in rows]
    assert window_texts(partials, rows) == want


@given(st.lists(VALUES.filter(lambda v: v is not None), max_size=20))
def test_a_column_of_values_is_written_as_each_value_alone(values):
    assert format_atomics(values) == [format_atomic(v) for v in values]
