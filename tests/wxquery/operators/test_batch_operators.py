"""The Spark executor's batch operators and pane state equal the inline operators, item by item,
however the stream is cut into micro-batches (no Spark needed: these are the tasks' functions)."""

from __future__ import annotations

import dataclasses
import math
import random
from fractions import Fraction as F

import numpy as np
import pytest
from lxml import etree

from wxquery.operators.batch import ItemBatch
from wxquery.operators.chains import evaluate_chain, normalise
from wxquery.operators.panes import ChainState
from wxquery.operators import definitions as alg
from operator_cases import CHAINS, EN, T, assert_same, atom, photons
from per_item_operators import Pipeline, WindowRecord, serialize
from wxquery.operators.windows import key_order


def run_batched(ops, kind: str, texts: list[str], rng: random.Random, lateness: float = 0.0) -> list[str]:
    chain = normalise(0, "s", "p", kind, ops, 0)
    state = ChainState(chain)
    out: list[str] = []
    at = 0
    while True:
        size = rng.choice([1, 2, 7, 50, 333, 1000])
        chunk = texts[at: at + size]
        end = at + size >= len(texts)
        cursor = dataclasses.replace(state.clock)
        result = evaluate_chain(chain, ItemBatch(chunk), np.arange(at, at + len(chunk)), cursor, lateness)
        out.extend(state.apply([x for _, x in result.items], result.panes,
                               [x for _, x in result.records], cursor, lateness, end))
        at += size
        if end:
            return out


@pytest.mark.parametrize("messy", [False, True])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_batch_chain_equals_inline(name: str, messy: bool) -> None:
    texts = photons(3000, seed=len(name), messy=messy)
    ops = CHAINS[name]
    expected = [serialize(v) for v in Pipeline(ops).run(etree.fromstring(t) for t in texts)]
    assert expected or name == "repeated"
    for seed in range(3):
        assert_same(expected, run_batched(ops, "items", texts, random.Random(seed)))


def test_lateness_counts_as_inline() -> None:
    texts = photons(2000, seed=5, messy=True)
    ops = CHAINS["time-tumbling"]
    pipeline = Pipeline(ops, lateness=3.0)
    expected = [serialize(v) for v in pipeline.run(etree.fromstring(t) for t in texts)]
    assert_same(expected, run_batched(ops, "items", texts, random.Random(1), lateness=3.0))


@pytest.mark.parametrize("kind", ["diff", "count"])
def test_combine_and_filter_on_records(kind: str) -> None:
    texts = photons(3000, seed=9, messy=False)
    fine = (alg.WindowSpec("diff", F(5), F(5), T) if kind == "diff" else alg.WindowSpec("count", F(5), F(5)))
    coarse = (alg.WindowSpec("diff", F(20), F(10), T) if kind == "diff" else alg.WindowSpec("count", F(20), F(10)))
    partials = (("sum", EN), ("count", EN))
    records = [serialize(v) for v in Pipeline([alg.WindowAggregate(fine, partials)]).run(
        etree.fromstring(t) for t in texts)]
    ops = [alg.CombineWindows(fine, coarse, partials), alg.AggregateFilter((atom("avg(en)", ">", "1.2"),))]
    expected = [serialize(v) for v in Pipeline(ops).run(WindowRecord.from_xml(r) for r in records)]
    assert expected
    assert_same(expected, run_batched(ops, "records", records, random.Random(3)))


KEYED = {
    "count": alg.WindowSpec("count", F(3), F(1), key="phc"),
    "time": alg.WindowSpec("diff", F(10), F(5), T, key="phc"),
    "time-attribute": alg.WindowSpec("diff", F(5), F(5), T, key="@band"),
    "count-two-keys": alg.WindowSpec("count", F(3), F(2), key="phc, @band"),
    "time-two-keys": alg.WindowSpec("diff", F(10), F(5), T, key="@band, phc"),
}


def banded(texts: list[str]) -> list[str]:
    """Photons with a band attribute, a few without."""
    bands = ["soft", "hard", "soft ", None]
    return [t if bands[i % 4] is None else t.replace("<photon>", f'<photon band="{bands[i % 4]}">', 1)
            for i, t in enumerate(texts)]


@pytest.mark.parametrize("messy", [False, True])
@pytest.mark.parametrize("name", sorted(KEYED))
def test_partitioned_windows_equal_inline(name: str, messy: bool) -> None:
    """The windows the per-item operators give, in their very order: time windows by window,
    then key; count windows by the items that close them — however the items were batched."""
    texts = banded(photons(3000, seed=3, messy=messy))
    spec = KEYED[name]
    ops = [alg.WindowAggregate(spec, (("sum", EN), ("count", "."), ("max", EN)))]
    expected = [serialize(v) for v in Pipeline(ops).run(etree.fromstring(t) for t in texts)]
    assert len({WindowRecord.from_xml(r).key for r in expected}) > 3
    for seed in range(3):
        assert_same(expected, run_batched(ops, "items", texts, random.Random(seed)))


def per_key(records: list[str]) -> list[str]:
    """Records grouped by key, each key's in their order."""
    return sorted(records, key=lambda r: key_order(WindowRecord.from_xml(r).key))


@pytest.mark.parametrize("kind", ["diff", "count"])
def test_partitioned_windows_combine_per_key(kind: str) -> None:
    texts = photons(3000, seed=9, messy=False)
    fine = (alg.WindowSpec("diff", F(5), F(5), T, "phc") if kind == "diff" else alg.WindowSpec("count", F(2), F(2), key="phc"))
    coarse = (alg.WindowSpec("diff", F(20), F(10), T, "phc") if kind == "diff"
              else alg.WindowSpec("count", F(4), F(2), key="phc"))
    partials = (("sum", EN), ("count", EN))
    records = [serialize(v) for v in Pipeline([alg.WindowAggregate(fine, partials)]).run(
        etree.fromstring(t) for t in texts)]
    direct = [serialize(v) for v in Pipeline([alg.WindowAggregate(coarse, partials)]).run(
        etree.fromstring(t) for t in texts)]
    ops = [alg.CombineWindows(fine, coarse, partials)]
    expected = [serialize(v) for v in Pipeline(ops).run(WindowRecord.from_xml(r) for r in records)]
    assert_same(per_key(expected), per_key(direct))  # (combined per key: as if computed directly)
    got = run_batched(ops, "records", records, random.Random(3))
    assert_same(direct, got)  # (in the order of the windows computed directly, whatever the batches)
    if kind == "diff":  # every key's windows merged: the windows over all items
        everything = alg.WindowSpec("diff", F(20), F(10), T)
        direct = [serialize(v) for v in Pipeline([alg.WindowAggregate(everything, partials)]).run(
            etree.fromstring(t) for t in texts)]
        merged = [alg.CombineWindows(fine, everything, partials)]
        assert_same(direct, [serialize(v) for v in Pipeline(merged).run(WindowRecord.from_xml(r) for r in records)])
        assert_same(direct, run_batched(merged, "records", records, random.Random(4)))


@pytest.mark.parametrize("kind, fine_keys, keys", [
    ("diff", "phc, @band", "@band, phc"), ("count", "phc, @band", "@band, phc"),
    ("diff", "phc, @band", "@band"), ("diff", "@band, phc", "phc"),
])
def test_windows_per_keys_combine_into_other_key_orders_and_fewer_keys(kind: str, fine_keys: str, keys: str) -> None:
    """From windows per several keys, those per the same keys in another order (count windows
    too: the same items), and time windows per fewer keys (the finer keys' merged): in the order
    of the windows computed directly, whatever the batches."""
    texts = banded(photons(3000, seed=9, messy=False))
    fine = (alg.WindowSpec("diff", F(5), F(5), T, fine_keys) if kind == "diff"
            else alg.WindowSpec("count", F(2), F(2), key=fine_keys))
    coarse = (alg.WindowSpec("diff", F(20), F(10), T, keys) if kind == "diff"
              else alg.WindowSpec("count", F(4), F(2), key=keys))
    partials = (("sum", EN), ("count", EN), ("min", EN))
    records = [serialize(v) for v in Pipeline([alg.WindowAggregate(fine, partials)]).run(
        etree.fromstring(t) for t in texts)]
    for target in (coarse, dataclasses.replace(coarse, size=fine.size, step=fine.step)):  # (coarser, the same)
        direct = [serialize(v) for v in Pipeline([alg.WindowAggregate(target, partials)]).run(
            etree.fromstring(t) for t in texts)]
        assert len({WindowRecord.from_xml(r).key for r in direct}) > 3
        ops = [alg.CombineWindows(fine, target, partials)]
        expected = [serialize(v) for v in Pipeline(ops).run(WindowRecord.from_xml(r) for r in records)]
        assert_same(per_key(expected), per_key(direct))
        for seed in range(2):
            assert_same(direct, run_batched(ops, "records", records, random.Random(seed)))


def test_count_windows_per_keys_are_not_combined_across_key_sets() -> None:
    with pytest.raises(ValueError, match="only time windows"):
        alg.CombineWindows(alg.WindowSpec("count", F(2), F(2), key="phc, @band"),
                           alg.WindowSpec("count", F(4), F(2), key="phc"), (("sum", EN),))
    with pytest.raises(ValueError, match="only time windows"):
        alg.CombineWindows(alg.WindowSpec("diff", F(5), F(5), T, "phc"),
                           alg.WindowSpec("diff", F(10), F(5), T, "phc, @band"), (("sum", EN),))


def test_chain_shapes_the_planner_never_makes_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot run"):
        normalise(0, "s", "p", "items", [alg.AggregateFilter((atom("sum(en)", ">", "1"),))], 0)


AWKWARD = [
    # the path's last name also nested elsewhere, repeated, missing, or not a plain number
    "<p><x>1</x><y><x>9</x></y><t>1</t></p>",
    "<p><x>2</x><x>3</x><t>2</t></p>",
    "<p><t>3</t></p>",
    "<p><x> 4.5 </x><t>4</t></p>",
    "<p><x>inf</x><t>5</t></p>",
    "<p><x>INF</x><t>6</t></p>",
    "<p><x>1_0</x><t>7</t></p>",
    "<p><x>\u0661</x><t>8</t></p>",
    "<p><x>1e1</x><t>9</t></p>",
    "<p><x>.5</x><t>10</t></p>",
    "<p><x>5.</x><t>11</t></p>",
    "<p><x><!-- c -->6</x><t>12</t></p>",
    "<p><x>7<i>0</i></x><t>13</t></p>",
    "<p><x>NaN</x><t>14</t></p>",
    "<p><x>-0</x><t>15</t></p>",
    "<p><x></x><t>16</t></p>",
]
AWKWARD_CHAINS = {
    "select": [alg.Select((atom("x", ">", "1"),))],
    "select-nested": [alg.Select((atom("y/x", ">", "1"),))],
    "window": [alg.WindowAggregate(alg.WindowSpec("diff", F(4), F(2), "t"),
                                   (("sum", "x"), ("count", "x"), ("min", "x"), ("max", "x")))],
    "count-window": [alg.WindowAggregate(alg.WindowSpec("count", F(3), F(3)), (("sum", "x"), ("max", "x")))],
}


@pytest.mark.parametrize("name", sorted(AWKWARD_CHAINS))
@pytest.mark.parametrize("uniform", [False, True])
def test_columns_of_awkward_items_equal_inline(name: str, uniform: bool) -> None:
    """Repeated, nested, missing and non-numeric elements; and batches in which every item has
    the path once (the one-pass fast path) next to batches where it does not."""
    texts = [AWKWARD[i % len(AWKWARD)] for i in range(200)]
    if uniform:  # every item has x once: the fast path, with odd numbers in it
        texts = [f"<p><x>{v}</x><t>{i}</t></p>"
                 for i, v in enumerate(["1", " 2 ", "inf", "-INF", "1_0", "\u0661", "3e0", ".5", "NaN", "x"] * 20)]
    ops = AWKWARD_CHAINS[name]
    expected = [serialize(v) for v in Pipeline(ops).run(etree.fromstring(t) for t in texts)]
    assert expected or (uniform and name == "select-nested")  # no y/x in the uniform items
    for seed in range(3):
        assert_same(expected, run_batched(ops, "items", texts, random.Random(seed)))


@pytest.mark.parametrize("texts", [
    [p for p in photons(300, seed=4, messy=True)],
    ['<p a="1"><c k="v"><d>1 &amp; &lt;2&gt;</d><e/></c><!-- note --><f>x<![CDATA[<y>]]></f><?pi x?></p>'] * 3,
    ['<p xmlns:q="urn:q"><c><d>1</d><q:e>2</q:e></c><f>3</f></p>', '<p><c><d>4</d></c><f>5</f></p>'],
    ['<p xmlns="urn:d"><c><d>1</d></c><f>2</f></p>'],
    ['<p>\n  <c><d>1</d> <e></e></c>\n  <f>x</f>\n</p>', '<p><c><d>2</d><e/></c><f>y</f><f/></p>',
     '<p><c><d>1&gt;2</d></c><f>a>b</f></p>', '<p><c><d>\r</d></c></p>', '<p><c><d>1</d></c><f>y</f></p>'],
])
def test_projection_text_is_the_inline_text(texts: list[str]) -> None:
    """Projection written straight to text gives exactly the inline operator's serialisation."""
    for paths in [{"c/d", "f"}, {"c"}, {"coord/cel", "en"}, {"nothing"}]:
        project = alg.Project(frozenset(paths))
        expected = [serialize(v) for v in Pipeline([project]).run(etree.fromstring(t) for t in texts)]
        batch = ItemBatch(texts)
        assert [batch.projector(frozenset(paths))(row) for row in range(batch.n)] == expected


@pytest.mark.parametrize("order", [("0", "-0"), ("-0", "0"), ("1", "-0", "0"), ("-0", "2", "0")])
def test_min_and_max_keep_the_first_of_tied_zeros(order) -> None:
    """0 and -0 compare equal: like fn:min and fn:max, the first one in stream order wins, in the
    vectorised pane reduction as in the per-item fold."""
    texts = [f"<p><en>{v}</en></p>" for v in order]
    ops = [alg.WindowAggregate(alg.WindowSpec("count", F(len(texts)), F(len(texts))), (("min", EN), ("max", EN)))]
    expected = Pipeline(ops).run(etree.fromstring(t) for t in texts)[0].values
    actual = WindowRecord.from_xml(run_batched(ops, "items", texts, random.Random(0))[0]).values
    assert {k: (v, math.copysign(1, v)) for k, v in actual.items()} == \
        {k: (v, math.copysign(1, v)) for k, v in expected.items()}
