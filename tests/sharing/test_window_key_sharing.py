"""Sharing windows per several keys, checked by running it (hypothesis): for random pairs of
window aggregates partitioned by ordered sets of key paths, whenever matching lets the first's
stream serve the second, the residual operators over the stream's records give exactly the
records computed directly (sound); and it shares exactly where the rules say it may — the same
key set in any order, or time windows per fewer keys, with divisible windows; from a stream
filtered on its aggregates, only the same window and keys (not wasteful)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from lxml import etree

from per_item_operators import Pipeline, WindowRecord, serialize
from sharing.analysis import analyze
from sharing.matching import match_subscriptions
from wxquery.operators import definitions as alg
from wxquery.operators.batch import ItemBatch
from wxquery.operators.chains import evaluate_chain, normalise
from wxquery.operators.panes import ChainState

PATHS = ["a", "@b", "c/d"]
KEY_SETS = [list(p) for n in range(4) for c in itertools.combinations(PATHS, n) for p in itertools.permutations(c)]


@st.composite
def items(draw) -> list[str]:
    out, t = [], 0
    for _ in range(draw(st.integers(1, 60))):
        t += draw(st.sampled_from([0, 1, 1, 2, 3]))
        a = draw(st.sampled_from(["x", "y", " x", None]))
        b = draw(st.sampled_from(["1", "2", None]))
        d = draw(st.sampled_from(["p", None]))
        out.append("<photon" + ("" if b is None else f' b="{b}"') + ">" + ("" if a is None else f"<a>{a}</a>")
                   + ("" if d is None else f"<c><d>{d}</d></c>") + f"<en>{draw(st.integers(0, 9))}</en><t>{t}</t></photon>")
    return out


@st.composite
def windows(draw, of: list[str] | None = None) -> str:
    """A window; ``of``: its keys drawn from these (a subscription's from a stream's)."""
    kind = draw(st.sampled_from(["count", "diff"]))
    size = draw(st.sampled_from([1, 2, 4]))
    step = draw(st.sampled_from([s for s in (1, 2, 4) if s <= size]))
    keys = draw(st.sampled_from([k for k in KEY_SETS if of is None or set(k) <= set(of)]))
    by = f" by {', '.join(keys)}" if keys else ""
    return (f"|count {size} step {step}{by}|" if kind == "count" else f"|t diff {size} step {step}{by}|")


def analyze_props(window: str, where: str = ""):
    return analyze(f'<r>{{ for $w in stream("p")/p/photon {window} let $s := sum($w/en) let $m := max($w/en) '
                   f'{where} return <w>{{ $s }}{{ $m }}</w> }}</r>').properties


def operators(inp) -> list:
    """What the network computes for an input: its window aggregate, then its filter on them."""
    ops: list = [alg.WindowAggregate(inp.window, partials(inp))]
    if inp.aggregate_selection is not None:
        ops.append(alg.AggregateFilter(inp.aggregate_selection.atoms))
    return ops


def partials(inp) -> tuple:
    return tuple(dict.fromkeys(p for a in inp.aggregates for p in alg.partials_of(a.function, a.element)))


def through(ops: list, texts: list[str]) -> list[str]:
    """Records through the residual operators as an executor runs them, two batches."""
    if not ops:
        return texts
    state = ChainState(normalise(0, "s", "p", "records", ops, 0))
    out: list[str] = []
    for part, end in ((texts[: len(texts) // 2], False), (texts[len(texts) // 2:], True)):
        cursor = dataclasses.replace(state.clock)
        result = evaluate_chain(state.chain, ItemBatch(part), np.arange(len(part)), cursor, 0.0)
        out.extend(state.apply([], result.panes, [x for _, x in result.records], cursor, 0.0, end))
    return out


def may_share(old: alg.WindowSpec, new: alg.WindowSpec, old_filter: int | None, new_filter: int | None) -> bool:
    """The rules: same kind, divisible windows over a tiling stream; the same key set, or time
    windows per a subset of the stream's keys. A stream filtered on its aggregates (``sum > f``)
    serves only the same window and key set, filtered at least as much."""
    if old.kind != new.kind or (new.size / old.size).denominator != 1 or not old.tiles \
            or (new.step / old.step).denominator != 1:
        return False
    if old_filter is not None:
        return ((old.size, old.step, old.key_set) == (new.size, new.step, new.key_set)
                and new_filter is not None and new_filter >= old_filter)
    return old.key_set == new.key_set or (old.kind == "diff" and new.key_set < old.key_set)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=items(), pair=st.data())
def test_a_stream_per_keys_serves_exactly_what_it_soundly_can(texts, pair) -> None:
    old = pair.draw(windows())
    new = pair.draw(st.one_of(windows(), windows(of=old.partition(" by ")[2].rstrip("|").split(", "))))
    old_filter, new_filter = (pair.draw(st.sampled_from([None, None, 10, 20])) for _ in range(2))
    old_props = analyze_props(old, "" if old_filter is None else f"where $s > {old_filter}")
    new_props = analyze_props(new, "" if new_filter is None else f"where $s > {new_filter}")
    o, n = old_props.inputs[0], new_props.inputs[0]
    match = match_subscriptions(old_props, new_props)
    event(f"shared {o.window.kind}, keys {'same' if o.window.key_set == n.window.key_set else 'fewer'}"
          + (", filtered" if old_filter is not None else "") if match.shareable else "not shared")
    assert match.shareable == may_share(o.window, n.window, old_filter, new_filter), match.reason
    if not match.shareable:
        return
    elements = [etree.fromstring(t) for t in texts]
    stream = [serialize(v) for v in Pipeline(operators(o)).run(elements)]
    direct = [WindowRecord.from_xml(serialize(v)) for v in Pipeline(operators(n)).run(elements)]
    got = [WindowRecord.from_xml(t) for t in through(list(match.residual), stream)]
    wanted = partials(n)
    assert [(r.index, r.key, {p: r.values.get(p) for p in wanted}) for r in got] == \
           [(r.index, r.key, {p: r.values.get(p) for p in wanted}) for r in direct]


def test_the_rules_hold_for_named_pairs() -> None:
    def shares(old: str, new: str) -> bool:
        return match_subscriptions(analyze_props(old), analyze_props(new)).shareable

    assert shares("|t diff 1 by a, @b|", "|t diff 2 by @b, a|")
    assert shares("|count 2 by a, @b|", "|count 4 step 2 by @b, a|")
    assert shares("|t diff 1 by a, @b|", "|t diff 1 by a|") and shares("|t diff 1 by a, @b|", "|t diff 2|")
    assert not shares("|count 2 by a, @b|", "|count 2 by a|")
    assert not shares("|t diff 1 by a|", "|t diff 1 by a, @b|")
    assert not shares("|t diff 1 by a, @b|", "|t diff 1 by a, c/d|")
    filtered = analyze_props("|t diff 1 by a, @b|", "where $s > 10")
    assert match_subscriptions(filtered, analyze_props("|count 1 by a, @b|", "where $s > 10")).shareable is False
    assert match_subscriptions(filtered, analyze_props("|t diff 1 by @b, a|", "where $s > 20")).shareable
    assert not match_subscriptions(filtered, analyze_props("|t diff 1 by a|", "where $s > 20")).shareable
