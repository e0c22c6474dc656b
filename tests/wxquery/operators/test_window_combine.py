"""Coarser windows computed from a finer aggregate stream equal windows computed from items."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import photon_document
from wxquery.operators import definitions as alg
from per_item_operators import Pipeline
from wxquery.stream_document import StreamDocument

ITEMS = list(StreamDocument.from_text(photon_document(700, seed=12, rate=4.0)).items("photons", "photon"))
PARTIALS = (("sum", "en"), ("count", "en"), ("min", "phc"), ("max", "en"), ("count", "."))


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


@st.composite
def window_pairs(draw):
    kind = draw(st.sampled_from(["count", "diff"]))
    unit = Fraction(1) if kind == "count" else draw(st.sampled_from([Fraction(1), Fraction(1, 2), Fraction(5, 2)]))
    mu = unit * draw(st.integers(1, 6))
    delta = mu * draw(st.integers(1, 4))  # Δ mod μ = 0
    mu2 = mu * draw(st.integers(1, 5))  # μ' mod μ = 0
    delta2 = delta * draw(st.integers(1, 5))  # Δ' mod Δ = 0
    ref = "det_time" if kind == "diff" else None
    return alg.WindowSpec(kind, delta, mu, ref), alg.WindowSpec(kind, delta2, mu2, ref)


@settings(max_examples=150, deadline=None)
@given(window_pairs(), st.integers(0, 300))
def test_combined_windows_equal_direct_windows(pair, skip):
    fine, coarse = pair
    items = ITEMS[skip:]
    direct = Pipeline([alg.WindowAggregate(coarse, PARTIALS)]).run(items)
    finer = Pipeline([alg.WindowAggregate(fine, PARTIALS)]).run(items)
    combined = Pipeline([alg.CombineWindows(fine, coarse, PARTIALS)]).run(finer)
    assert [r.index for r in combined] == [r.index for r in direct], (fine, coarse)
    for a, b in zip(combined, direct):
        for p in PARTIALS:
            assert _close(a.values[p], b.values[p]), (fine, coarse, a.index, p)
