"""Where SUBSCRIBE puts a window join (issue 36, deliverable 4), on the paper's example network:
photons at SP4, alerts at SP3, subscribers at SP1 and SP7. The cost model decides between the
subscriber's super-peer and a peer where the inputs meet; a later subscription with the same
join reuses the joined stream; what cannot be placed says why."""

from __future__ import annotations

from test_planner import PHOTONS, network

from sharing.analysis import analyze
from sharing.matching import raw_properties
from sharing.network_state import NetworkState
from sharing.planner import Planner, Strategy
from sharing.properties import InputStream
from sharing.statistics import StreamStatistics
from wxquery.operators import definitions as alg
from wxquery.stream_document import StreamDocument

ALERTS = InputStream("alerts", ("alerts", "alert"))


def _join(low: str = "- 0.3", high: str = "+ 0.1", extra: str = "", en: str = "1.2") -> str:
    return ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
            f'where $a/det_time >= $p/det_time {low} and $a/det_time <= $p/det_time {high} '
            f'and $p/en > {en}{extra} return <m>{{ $p/en }}{{ $a/id }}</m> }}</r>')


def _with_alerts(every: float, rate: float, pad: int = 0, phc: bool = False) -> tuple[NetworkState, Planner]:
    """``phc``: the alerts name a photon count, as the photons do (a key: ``$a/phc = $p/phc``)."""
    state, planner = network()
    stats = StreamStatistics(frequency=rate)
    items = "".join(f"<alert><id>{k}</id><det_time>{k * every:.2f}</det_time><pad>{'x' * pad}</pad>"
                    + (f"<phc>{100 + k % 80}</phc>" if phc else "") + "</alert>" for k in range(300))
    for item in StreamDocument.from_text(f"<alerts>{items}</alerts>").items("alerts", "alert"):
        stats.observe(item)
    state.register_original(ALERTS, "SP3", raw_properties(ALERTS), stats)
    return state, planner


def _local_cost(planner: Planner, text: str, target: str) -> float:
    """Today's plan: both inputs to the subscriber, joined there."""
    props = analyze(text).properties
    return planner.plan("local", props, target, Strategy.SHARING, planner._subscribe_input).cost


def test_a_selective_join_is_placed_where_its_inputs_meet() -> None:
    state, planner = _with_alerts(every=5.0, rate=0.2)
    plan = planner.subscribe("j1", analyze(_join()).properties, "SP1")
    assert plan.admitted and plan.join.startswith("join placed at SP4"), plan.describe()
    outer, inner, joined = plan.parts
    assert outer.feeds_join == inner.feeds_join == joined.result_stream
    assert outer.route[-1] == inner.route[-1] == "SP4" and joined.route == ("SP4", "SP5", "SP1")
    (stream,) = joined.new_streams
    (op,) = stream.operators
    assert isinstance(op, alg.BandJoin) and op.inner == inner.result_stream and stream.parent == outer.result_stream
    assert plan.cost < _local_cost(planner, _join(), "SP1")
    assert "joined at SP4" in plan.describe() and "(into the join at SP4)" in plan.describe()


def test_a_join_whose_output_outweighs_its_inputs_stays_at_the_subscriber() -> None:
    state, planner = _with_alerts(every=0.1, rate=10.0, pad=300)
    text = _join("- 50", "+ 50")
    plan = planner.subscribe("j1", analyze(text).properties, "SP1")
    assert plan.join.startswith("join at SP1 (the subscriber's super-peer): cheapest there"), plan.join
    assert len(plan.parts) == 2 and not any(p.feeds_join for p in plan.parts)


def test_the_same_join_reuses_the_joined_stream_and_another_band_does_not() -> None:
    state, planner = _with_alerts(every=5.0, rate=0.2)
    first = planner.subscribe("j1", analyze(_join()).properties, "SP1")
    planner.install(first)
    joined = first.parts[-1].result_stream
    same = planner.subscribe("j2", analyze(_join()).properties, "SP7")
    (part,) = same.parts
    assert (part.reused, part.reuse_peer, part.route) == (joined, "SP5", ("SP5", "SP7")), same.describe()
    assert same.join == f"join reused: {joined}, joined at SP4, taken at SP5"
    planner.install(same)
    # other conditions between the inputs are evaluated at the subscriber: the joined stream serves them
    more = planner.subscribe("j4", analyze(_join(extra=" and $a/id > $p/en + 0")).properties, "SP1")
    assert [p.reused for p in more.parts] == [joined], more.describe()
    for other in (_join("- 0.4"), _join(en="1.1")):  # (another band; a wider selection of photons)
        plan = planner.subscribe("j3", analyze(other).properties, "SP7")
        assert all(p.reused != joined for p in plan.parts), plan.describe()
    # a further selection on either input: the groups narrowed at the subscriber
    narrower = planner.subscribe("j5", analyze(_join(en="1.5", extra=" and $a/id > 3")).properties, "SP1")
    (part,) = narrower.parts
    assert part.reused == joined and [list(map(str, a)) for a in part.on_groups] == [["en > 1.5"], ["id > 3"]]
    assert "σ[en > 1.5] on its outer items; σ[id > 3] on its inner items at SP1" in narrower.describe()
    # the joined stream's inner input lives as long as a reader of the join does
    planner.unsubscribe("j1")
    inner = state.streams[first.parts[1].result_stream]
    assert joined in state.streams and inner.route == first.parts[1].new_streams[-1].route  # (not cut back)
    planner.unsubscribe("j2")
    assert {s.id for s in state.streams.values() if not s.original} == set()


def test_a_join_the_network_cannot_run_stays_at_the_subscriber_and_says_why() -> None:
    state, planner = _with_alerts(every=5.0, rate=0.2)
    unbanded = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
                'where $a/det_time = $p/det_time return <m>{ $p/en }</m> }</r>')  # (compared as strings)
    plan = planner.subscribe("j1", analyze(unbanded).properties, "SP1")
    assert plan.join.startswith("join at SP1 (the subscriber's super-peer): ")
    state.join_peers = frozenset({"SP1"})  # (as if every other peer ran with --no-network-joins)
    plan = planner.subscribe("j2", analyze(_join()).properties, "SP1")
    assert "runs joins in the network (super-peers do, unless started with --no-network-joins" in plan.join, \
        plan.join
    assert PHOTONS in {p.input_properties.input for p in plan.parts}


def test_a_join_keyed_on_an_equality_shrinks_and_serves_only_joins_with_its_key() -> None:
    """``$a/phc = $p/phc`` (compared as strings) is applied where the join runs: its joined
    stream is priced smaller, says its key, and serves a later join only if that one requires
    the key too; a joined stream without a key serves a join with one."""
    keyed = _join(extra=" and $a/phc = $p/phc")
    state, planner = _with_alerts(every=5.0, rate=0.2, phc=True)
    unkeyed_plan = planner.subscribe("u", analyze(_join()).properties, "SP1")
    plan = planner.subscribe("k1", analyze(keyed).properties, "SP1")
    joined = plan.parts[-1].result_stream
    assert plan.join == f"join placed at SP4 (as {joined}; its inputs meet there; key $a/phc = $p/phc)", plan.join
    (stream,) = plan.parts[-1].new_streams
    (op,) = stream.operators
    assert [str(k) for k in op.keys] == ["phc = phc"] and "key phc = phc" in plan.describe()
    (plain,) = unkeyed_plan.parts[-1].new_streams
    assert stream.estimate.bits_per_second < plain.estimate.bits_per_second / 5  # (about 1 in 80 phc values)
    planner.install(plan)
    # the same key, with more conditions between the inputs: reused, the rest tested at SP7
    same = planner.subscribe("k2", analyze(_join(extra=" and $a/phc = $p/phc and $a/id > $p/en + 0")).properties,
                             "SP7")
    assert [p.reused for p in same.parts] == [joined], same.describe()
    assert same.join == f"join reused: {joined}, joined at SP4, taken at SP5; key $a/phc = $p/phc"
    # without the key (its elements projected the same): its groups hold too little
    plan = planner.subscribe("u2", analyze(_join(extra=" and $a/phc != $p/phc")).properties, "SP7")
    assert all(p.reused != joined for p in plan.parts), plan.describe()
    # a running joined stream without a key (its elements projected the same) serves a join with one
    state, planner = _with_alerts(every=5.0, rate=0.2, phc=True)
    first = planner.subscribe("u", analyze(_join(extra=" and $a/phc != $p/phc")).properties, "SP1")
    assert "key" not in first.join, first.join
    planner.install(first)
    plan = planner.subscribe("k", analyze(keyed).properties, "SP7")
    assert [p.reused for p in plan.parts] == [first.parts[-1].result_stream], plan.describe()
