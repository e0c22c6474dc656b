"""A batch cut into pieces evaluated apart and joined (``pieces.merge_pieces``) gives what the
whole batch gives: the same outputs, windows and clocks, over messy streams (late items,
non-numbers, repeated and missing elements), any cut points and any state left by earlier
batches. This is what lets the Spark executor spread one stream's batch over its task slots."""

from __future__ import annotations

import math
import pickle
import random
from fractions import Fraction as F

import numpy as np
from hypothesis import given, settings, strategies as st

from operator_cases import CHAINS, EN, RA, assert_same, atom, photons
from wxquery.operators import definitions as alg
from wxquery.operators.batch import ItemBatch
from wxquery.operators.chains import evaluate_chain, normalise
from wxquery.operators.panes import ChainState
from wxquery.operators.pieces import Piece, merge_pieces
from wxquery.operators.windows import WindowClock

CASES = {
    **CHAINS,
    "count-repeated": [alg.WindowAggregate(alg.WindowSpec("count", F(5), F(2)),
                                           (("sum", "phc"), ("min", "phc"), ("count", ".")))],
    # few rows reach it (their own values cross, not whole columns); phc repeated in some items
    "count-sparse": [alg.Select((atom("phc", "=", "7"),)),
                     alg.WindowAggregate(alg.WindowSpec("count", F(3), F(1)), (("sum", "phc"), ("count", ".")))],
    "time-late": [alg.WindowAggregate(alg.WindowSpec("diff", F(4), F(2), "det_time"),
                                      (("sum", "en"), ("count", "."), ("max", "phc")))],
    # partitioned by phc (some items have two, the first is the key)
    "count-keyed": [alg.WindowAggregate(alg.WindowSpec("count", F(2), F(1), key="phc"),
                                        (("sum", "en"), ("count", ".")))],
    "time-keyed": [alg.WindowAggregate(alg.WindowSpec("diff", F(4), F(2), "det_time", key="phc"),
                                       (("sum", "en"), ("count", "."), ("max", "phc")))],
    # partitioned by two paths (a photon has no ``coord/chip``: the first key is always missing)
    "count-keys": [alg.WindowAggregate(alg.WindowSpec("count", F(2), F(1), key="coord/chip, phc"),
                                       (("sum", "en"), ("count", ".")))],
    "time-keys": [alg.WindowAggregate(alg.WindowSpec("diff", F(4), F(2), "det_time", key="phc, coord/chip"),
                                      (("sum", "en"), ("count", "."), ("max", "phc")))],
}


def jittered(texts: list[str], seed: int, swaps: int) -> list[str]:
    """Neighbours swapped at random: items a little late, near any cut point."""
    rng = random.Random(seed)
    out = list(texts)
    for _ in range(swaps):
        k = rng.randrange(len(out) - 3)
        j = k + rng.randrange(1, 4)
        out[k], out[j] = out[j], out[k]
    return out


def whole(state: ChainState, texts: list[str], first: int, lateness: float) -> list[str]:
    offsets = np.arange(first, first + len(texts))
    out = evaluate_chain(state.chain, ItemBatch(texts), offsets, state.clock, lateness)
    return state.apply([x for _, x in out.items], out.panes, [x for _, x in out.records], None, lateness, False)


def in_pieces(state: ChainState, texts: list[str], first: int, cuts: list[int], lateness: float,
              behind: float | None = None) -> list[str]:
    """``behind``: the pieces' admission threshold lags the chain's clock by this much (None:
    none at all), as for a batch planned before the one ahead of it was merged."""
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(texts))), len(texts)]
    redone = []

    def evaluate(a: int, b: int, clock):
        out = evaluate_chain(state.chain, ItemBatch(texts[a:b]), np.arange(first + a, first + b), clock,
                             lateness, piece=True)
        return pickle.loads(pickle.dumps(out)), clock  # as a task's result reaches the driver

    def redo(piece: Piece, clock):
        redone.append(piece.start)
        return evaluate(piece.start - first, piece.end - first, clock)

    high = state.clock.high if behind is None else state.clock.high - behind
    pieces = [Piece(first + a, first + b, *evaluate(a, b, WindowClock(high=high)))
              for a, b in zip(bounds, bounds[1:])]
    merged, clock = merge_pieces(state.chain, state.clock, pieces, lateness, redo)
    return state.apply([x for _, x in merged.items], merged.panes, [x for _, x in merged.records],
                       clock if state.chain.output_kind == "records" else None, lateness, False)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), seed=st.integers(0, 10_000),
       cuts=st.lists(st.integers(0, 400), max_size=5), prefix=st.integers(0, 150),
       lateness=st.sampled_from([0.0, 0.05, 0.5, 5.0]), swaps=st.integers(0, 60),
       behind=st.sampled_from([None, 0.5, 30.0, math.inf]))
def test_a_batch_in_pieces_equals_the_whole_batch(name, seed, cuts, prefix, lateness, swaps, behind) -> None:
    texts = jittered(photons(400 + prefix + 200, seed=seed, messy=True), seed, swaps)
    chain = normalise(0, "s", "p", "items", tuple(CASES[name]), 0)
    one, two = ChainState(chain), ChainState(chain)
    expected = whole(one, texts[:prefix], 0, lateness) if prefix else []
    got = whole(two, texts[:prefix], 0, lateness) if prefix else []
    expected += whole(one, texts[prefix:prefix + 400], prefix, lateness)
    got += in_pieces(two, texts[prefix:prefix + 400], prefix, cuts, lateness, behind)
    expected += whole(one, texts[prefix + 400:], prefix + 400, lateness)  # the state carries on
    got += whole(two, texts[prefix + 400:], prefix + 400, lateness)
    expected += one.apply([], [], [], None, lateness, True)
    got += two.apply([], [], [], None, lateness, True)
    assert_same(expected, got)
    assert one.clock == two.clock


def test_a_piece_whose_first_item_is_late_against_an_earlier_piece_is_evaluated_again() -> None:
    chain = normalise(0, "s", "p", "items", tuple(CASES["time-late"]), 0)
    texts = [f"<photon><en>1</en><phc>2</phc><det_time>{t}</det_time></photon>" for t in (1, 2, 9, 3, 10, 11)]
    one, two = ChainState(chain), ChainState(chain)
    expected = whole(one, texts, 0, 0.0) + one.apply([], [], [], None, 0.0, True)
    got = in_pieces(two, texts, 0, [3], 0.0) + two.apply([], [], [], None, 0.0, True)
    assert_same(expected, got)
    assert one.clock.late_items == two.clock.late_items == 1  # 3 came after 9: late in both


def test_count_windows_of_one_piece_send_a_shared_column_once() -> None:
    """Ten count-window chains over the same element, most rows reaching each: the piece's
    column crosses to the driver once, not once per chain (a task's result is one pickle)."""
    texts = photons(5000, seed=3, messy=False)
    batch = ItemBatch(texts)

    def chain(i: int):
        return normalise(i, "s", "p", "items", (
            alg.Select((atom(RA, ">", str(120 + i / 100)),)),
            alg.WindowAggregate(alg.WindowSpec("count", F(10), F(5)), (("sum", EN), ("count", EN)))), 0)

    outputs = [evaluate_chain(chain(i), batch, np.arange(5000), WindowClock(), 0.0, piece=True) for i in range(10)]
    assert all(o.reached > 4000 for o in outputs)
    one, ten = len(pickle.dumps(outputs[:1])), len(pickle.dumps(outputs))
    assert ten < 1.5 * one, (one, ten)
