"""A column's texts cast to xs:double all at once give what casting each one gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wxquery.operators.batch import _doubles
from wxquery.values import cast_double

numberish = st.text(alphabet="0123456789.eE+- \t\nINFaf_x\u0663", max_size=12)
numbers = st.floats(allow_nan=False).map(repr)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(numberish, numbers), min_size=1, max_size=20))
def test_a_column_cast_at_once_equals_each_text_cast(texts):
    got = _doubles(texts)
    want = np.array([cast_double(t) for t in texts], dtype=np.float64)
    assert got.dtype == np.float64 and got.flags.writeable
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@settings(deadline=None)
@given(st.lists(numbers.filter(lambda t: "n" not in t), min_size=1, max_size=50))
def test_plain_numbers_take_the_fast_path_and_keep_every_bit(texts):
    import pyarrow as pa

    from wxquery.operators import batch as module

    calls = []
    real = pa.array
    module.pa.array = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        assert _doubles(texts).tolist() == [float(t) for t in texts]
    finally:
        module.pa.array = real
    assert calls, "plain numbers were not cast by Arrow"
