"""The residuals in front of a widened stream's old readers (``superpeer.data.narrowing``): a
reader of a stream widened twice has two, and a switch of plans taking over its delivery keeps
both in front of it."""

from __future__ import annotations

from fractions import Fraction

from superpeer.data.narrowing import NarrowedDelivery, inner, residual_chain, rewrapped
from wxquery.operators import definitions as alg
from wxquery.operators.chains import Chain

ITEMS = [f"<photon><en>{en}</en><ra>{ra}</ra></photon>" for en, ra in ((0.5, 121), (1.5, 124), (2.5, 127), (1.8, 130))]


class Reader:
    wants_text = True

    def __init__(self) -> None:
        self.got: list[str] = []

    def feed(self, variable, items, end, origins=None) -> None:
        self.got.extend(items)


def residual(path: str, op: str, value: int) -> Chain:
    return residual_chain((alg.Select((alg.Atom(path, op, None, Fraction(value)),)),))


def test_a_reader_taken_over_keeps_every_residual_in_front_of_it() -> None:
    first, later = Reader(), Reader()
    twice = NarrowedDelivery(NarrowedDelivery(first, residual("ra", "<=", 125)), residual("en", ">=", 1))
    twice.feed("p", ITEMS, False, range(4))
    assert first.got == [ITEMS[1]] and inner(twice) is first
    taken = rewrapped(twice, later)  # (a switch's side in the reader's place)
    assert inner(taken) is later
    taken.feed("p", ITEMS, False, range(4))
    assert later.got == [ITEMS[1]]  # (both residuals: ra <= 125 and en >= 1)
