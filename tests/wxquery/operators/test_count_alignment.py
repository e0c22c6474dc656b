"""A count window started later, held and aligned with a running one's (``count_alignment``):
from the first window that starts at or after the anchor on, it closes exactly the windows the
running one closes — whatever the batches, the window shape and where the anchor falls."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from photons.generator import generate
from wxquery.operators import definitions as alg
from wxquery.operators.chains import normalise
from wxquery.operators.count_alignment import Anchor, NotYet, Unalignable
from wxquery.operators.records import WindowRecord
from wxquery.operators.runner import ChainGroup

PHOTONS = [p.to_xml() for p in generate(1500, seed=5)]


def chain(stream: str, size: int, step: int, lo: float = 1.0):
    ops = (alg.Select((alg.Atom("en", ">=", None, Fraction(lo)),)),
           alg.WindowAggregate(alg.WindowSpec("count", Fraction(size), Fraction(step)),
                               (("sum", "en"), ("count", "en"), ("max", "en"))))
    return normalise(0, stream, "in", "items", ops)


def indexed(texts: list[str]) -> dict[int, str]:
    return {WindowRecord.from_xml(t).index: t for t in texts}


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 9), step=st.integers(1, 9), cuts=st.lists(st.integers(1, 200), min_size=4, max_size=12),
       held_at=st.integers(0, 3), anchored_at=st.integers(0, 3))
def test_a_held_window_aligned_closes_the_running_ones_windows(size, step, cuts, held_at, anchored_at):
    group = ChainGroup()
    group.add(chain("old", size, step))
    old: dict[int, str] = {}
    new: dict[int, str] = {}
    at, anchor = 0, None
    anchored_at = held_at + anchored_at
    for k, n in enumerate(cuts):
        if k == held_at:
            group.add(chain("new", size, step), held=True)
        if k >= anchored_at and anchor is None and group.anchor("old") is not None:
            try:  # (as the subscription's peer does: an anchor it cannot place yet, asked again)
                new.update(indexed(group.align("new", group.anchor("old"))))
                anchor = group.anchor("old")
            except NotYet:
                pass
        batch = PHOTONS[at:at + n]
        out = group.push(batch, False, range(1000 + at, 1000 + at + len(batch)))
        old.update(indexed(out["old"]))
        new.update(indexed(out.get("new", [])))
        at += n
    if anchor is None:
        return
    first = -(-anchor.ordinal // step)
    assert min(new, default=first) >= first
    assert new == {k: t for k, t in old.items() if k >= first and k <= max(new, default=-1)}
    assert set(old) - set(new) <= {k for k in old if k < first} | {k for k in old if k > max(new, default=-1)}


def test_an_anchor_before_the_first_held_item_is_not_yet_and_items_without_origins_never():
    group = ChainGroup()
    group.add(chain("old", 3, 3))
    group.push(PHOTONS[:50], False, range(50))
    early = group.anchor("old")
    group.add(chain("new", 3, 3), held=True)
    group.push(PHOTONS[50:60], False, range(50, 60))
    assert group.anchor("old") == Anchor(60, group.states["old"].clock.seen)
    with pytest.raises(NotYet):
        group.align("new", Anchor(early.origin - 1, early.ordinal))
    group.add(chain("blind", 3, 3), held=True)
    group.push(PHOTONS[60:70], False, None)
    with pytest.raises(Unalignable):
        group.align("blind", group.anchor("old") or Anchor(70, 0))
    assert group.anchor("old") is None  # (its last batch did not say where items came from)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 9), step=st.integers(1, 9), lag=st.integers(0, 400), start=st.integers(0, 300))
def test_a_held_window_behind_the_anchor_keeps_holding_until_it_reaches_it(size, step, lag, start):
    """The old and the new operator run at different peers: the new one may not have seen the
    items up to the anchor yet when it is given it. It holds on until it has, and then closes
    exactly the old one's windows — none of the items between counted twice."""
    old, new = ChainGroup(), ChainGroup()
    old.add(chain("s", size, step))
    new.add(chain("s", size, step), held=True)
    cut = 600 + lag
    old_out = indexed(old.push(PHOTONS[:cut], False, range(cut))["s"])
    new_out: dict[int, str] = {}
    new.push(PHOTONS[start:600], False, range(start, 600))
    anchor = old.anchor("s")
    assert new.align("s", anchor) == [] or lag == 0
    for k in range(600, 1500, 150):  # (the new one catches up; the old one goes on)
        new_out.update(indexed(new.push(PHOTONS[k:k + 150], False, range(k, k + 150))["s"]))
        if k + 150 > cut:
            old_out.update(indexed(old.push(PHOTONS[max(k, cut):k + 150], False, range(max(k, cut), k + 150))["s"]))
    first = -(-anchor.ordinal // step)
    assert new_out and min(new_out) == first
    assert new_out == {k: t for k, t in old_out.items() if k >= first}
