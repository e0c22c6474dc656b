"""SUBSCRIBE on the paper's example network: reuse, placement, rejection, unsubscribe."""

from __future__ import annotations

import math

import pytest

from conftest import photon_document
from sharing.analysis import analyze
from sharing.backbone import Backbone, Link, Peer, TopologyError
from sharing.cost_model import CostModel, Usage
from sharing.matching import raw_properties
from sharing.network_state import NetworkState
from sharing.planner import Planner, RegistrationError, Strategy
from sharing.properties import InputStream
from sharing.scenarios import paper_example_backbone, paper_query
from sharing.statistics import StreamStatistics
from wxquery.stream_document import StreamDocument

PHOTONS = InputStream("photons", ("photons", "photon"))


def network(backbone: Backbone | None = None, rate: float = 150.0,
            source: str = "SP4") -> tuple[NetworkState, Planner]:
    state = NetworkState(backbone or paper_example_backbone())
    stats = StreamStatistics(frequency=rate)
    for item in StreamDocument.from_text(photon_document(1500, seed=3)).items("photons", "photon"):
        stats.observe(item)
    state.register_original(PHOTONS, source, raw_properties(PHOTONS), stats)
    return state, Planner(state)


def register(planner: Planner, qid: str, text: str, peer: str, strategy=Strategy.SHARING):
    plan = planner.subscribe(qid, analyze(text).properties, peer, strategy)
    if plan.admitted:
        planner.install(plan)
    return plan


def test_paper_example_query2_reuses_query1_at_sp5():
    state, planner = network()
    p1 = register(planner, "q1", paper_query(1), "SP1")
    (part1,) = p1.parts
    assert part1.reuse_peer == "SP4" and part1.route == ("SP4", "SP5", "SP1")
    q1_stream = part1.result_stream
    p2 = register(planner, "q2", paper_query(2), "SP7")
    (part2,) = p2.parts
    assert (part2.reused, part2.reuse_peer, part2.operator_peer) == (q1_stream, "SP5", "SP5")
    assert part2.route == ("SP5", "SP7")
    assert any("Select" in type(op).__name__ for op in part2.operators)


def test_query4_reuses_query3_windows():
    state, planner = network()
    p3 = register(planner, "q3", paper_query(3), "SP0")
    p4 = register(planner, "q4", paper_query(4), "SP6")
    (part,) = p4.parts
    assert part.reused in {s.id for s in p3.parts[0].new_streams}
    assert "combine" in str(part.operators[0])


def test_baseline_placements():
    _, planner = network()
    ds = register(planner, "a", paper_query(1), "SP1", Strategy.DATA_SHIPPING)
    assert ds.parts[0].operator_peer == "SP1" and ds.parts[0].reuse_peer == "SP4"
    qs = register(planner, "b", paper_query(1), "SP1", Strategy.QUERY_SHIPPING)
    assert qs.parts[0].operator_peer == "SP4"
    # baselines never reuse another subscription's stream
    qs2 = register(planner, "c", paper_query(2), "SP7", Strategy.QUERY_SHIPPING)
    assert qs2.parts[0].reused == "photons"


def test_identical_subscription_costs_nothing_new_where_already_delivered():
    _, planner = network()
    register(planner, "q1", paper_query(1), "SP1")
    again = register(planner, "q1b", paper_query(1), "SP1")
    assert again.parts[0].new_streams == [] and again.usage.links == {}


def test_unsubscribe_releases_only_unused_streams():
    state, planner = network()
    register(planner, "q1", paper_query(1), "SP1")
    register(planner, "q2", paper_query(2), "SP7")
    sp5_sp1 = frozenset(("SP5", "SP1"))
    assert state.link_used[sp5_sp1] > 0
    planner.unsubscribe("q1")
    # q2 still needs q1's stream up to SP5: the stream stays, cut back to SP4→SP5
    q2_lineage = state.lineage(next(iter(state.subscription_streams["q2"])))
    assert all(s.id in state.streams for s in q2_lineage)
    assert q2_lineage[1].route == ("SP4", "SP5")
    assert math.isclose(state.link_used[sp5_sp1], 0.0, abs_tol=1e-9)
    assert state.link_used[frozenset(("SP4", "SP5"))] > 0
    planner.unsubscribe("q2")
    assert [s for s in state.streams.values() if not s.original] == []
    assert all(math.isclose(v, 0.0, abs_tol=1e-9) for v in state.link_used.values())
    assert all(math.isclose(v, 0.0, abs_tol=1e-9) for v in state.peer_used.values())


def test_overload_is_rejected_with_reason():
    tiny = Backbone([Peer("A", 0.0001), Peer("B", 1.0)], [Link("A", "B", 1e3)])
    state, planner = network(tiny, rate=5000.0, source="A")
    plan = planner.subscribe("q", analyze(paper_query(1)).properties, "B")
    assert not plan.admitted and "rejected:" in plan.reason and "capacity" in plan.reason
    with pytest.raises(RegistrationError):
        planner.install(plan)


def test_unknown_stream_and_peer():
    _, planner = network()
    props = analyze('<r>{ for $p in stream("nope")/a/b return $p }</r>').properties
    with pytest.raises(RegistrationError, match='unknown stream "nope"'):
        planner.subscribe("x", props, "SP1")
    with pytest.raises(RegistrationError, match="unknown super-peer"):
        planner.subscribe("x", analyze(paper_query(1)).properties, "SP99")


def test_cost_function_penalty():
    model = CostModel(gamma=0.5)
    usage = Usage()
    usage.add_link("A", "B", 500.0)
    usage.add_peer("A", 0.5)
    bw = {frozenset(("A", "B")): 1000.0}
    cost, over = model.cost(usage, bw, {}, {"A": 1.0}, {})
    assert math.isclose(cost, 0.5 * 0.5 + 0.5 * 0.5) and over == []
    cost2, over2 = model.cost(usage, bw, {frozenset(("A", "B")): 800.0}, {"A": 1.0}, {})
    # u_b = 0.5, a_b = 0.2: 0.5 + 0.3·e^0.3
    assert math.isclose(cost2, 0.5 * (0.5 + 0.3 * math.exp(0.3)) + 0.25)
    assert [o.kind for o in over2] == ["link"]


def test_topology_errors():
    with pytest.raises(TopologyError, match="unknown super-peer"):
        Backbone([Peer("A")], [Link("A", "B", 1.0)])
    with pytest.raises(TopologyError, match="no \\[\\[superpeer\\]\\]"):
        Backbone.from_mapping({})
    b = Backbone.from_mapping({"superpeer": [{"id": "A"}, {"id": "B"}], "link": [{"a": "A", "b": "B", "bandwidth": 1e6}]})
    assert b.route("A", "B") == ("A", "B")


def test_a_sample_is_taken_over_whole_items_never_over_a_projection():
    """An item is kept in a sample by a hash of its text: a projected stream hashes otherwise, so
    a sampled plan never samples one — it samples the original (or a filtered copy of it)."""
    from sharing.estimates import with_sample
    from sharing.matching import match_properties
    from wxquery.operators.definitions import WHOLE_ITEM

    state, planner = network()
    p1 = register(planner, "q1", paper_query(1), "SP1")  # (a projection of the photons to SP1)
    projected = state.streams[p1.parts[0].result_stream].properties
    sampled = with_sample(analyze(paper_query(1)).properties, 4)
    match = match_properties(projected, sampled.inputs[0])
    assert not match.shareable and "whole items" in match.reason
    plan = planner.subscribe("q1s", sampled, "SP1")
    for part in plan.parts:
        for s in part.new_streams:
            if any(type(op).__name__ == "Sample" for op in s.operators):
                parent = state.streams.get(s.parent)
                assert parent is None or WHOLE_ITEM in parent.properties.projection.output, s.describe()
