"""The path a subscription's items take, and when it is broken: a peer on it down, a link of
this peer down, or a link between two others that its sender no longer hears."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sharing.analysis import analyze
from sharing.planner import Planner
from sharing.reoptimisation import without
from sharing.scenarios import example_query
from sharing.stream_table import lineage
from superpeer.recovery.failure_detector import FailureDetector
from superpeer.recovery.route_health import broken, data_paths


def _stream(sid, origin, route, parent=None):
    return SimpleNamespace(id=sid, origin=origin, route=tuple(route), parent=parent)


def _lineage(streams):
    def lineage(sid):
        out = []
        while sid is not None:
            out.append(streams[sid])
            sid = streams[sid].parent
        return out
    return lineage


def test_the_path_follows_the_lineage_then_the_plans_route() -> None:
    # photons: SP4→SP5→SP1; derived SP1.3 computed at SP5 from it, routed SP5→SP1; reused at SP5
    streams = {"photons": _stream("photons", "SP4", ["SP4", "SP5", "SP1"]),
               "SP1.3": _stream("SP1.3", "SP5", ["SP5", "SP1"], parent="photons")}
    part = SimpleNamespace(reused="SP1.3", reuse_peer="SP5", route=("SP5", "SP7"))
    assert data_paths(SimpleNamespace(parts=[part]), _lineage(streams)) == (("SP4", "SP5", "SP7"),)


def test_a_stream_widened_in_place_is_passed_once() -> None:
    """A part that widens SP1.3 (SP4→SP5→SP1) in place keeps the stream's whole route and
    takes it at SP1: its items pass SP4, SP5, SP1, then SP0 — not SP1→SP4 back again (which
    is no link: the subscription was called degraded and recomputed from its first item)."""
    streams = {"photons": _stream("photons", "SP4", ["SP4"]),
               "SP1.3": _stream("SP1.3", "SP4", ["SP4", "SP5", "SP1"], parent="photons")}
    part = SimpleNamespace(reused="SP1.3", reuse_peer="SP1", route=("SP4", "SP5", "SP1", "SP0"))
    assert data_paths(SimpleNamespace(parts=[part]), _lineage(streams)) == (("SP4", "SP5", "SP1", "SP0"),)


def test_what_breaks_a_path() -> None:
    path = (("SP4", "SP5", "SP1"),)
    d = FailureDetector("SP1", frozenset({"SP5"}))
    for p in ("SP4", "SP5"):
        d.heard(p, 0.0, frozenset({"SP1", "SP4", "SP5"}))
    assert broken(path, d) == ""
    d.heard("SP4", 1.0, frozenset({"SP1"}))  # SP4 no longer hears SP5: their link is cut
    assert "SP4–SP5 on its route is cut" in broken(path, d)
    d.heard("SP4", 2.0, frozenset({"SP1", "SP5"}))
    for t in (3.0, 4.0, 5.0):
        d.missed("SP5", t, "UNAVAILABLE")
    # SP4 still reports hearing SP5: only the link from SP5 to here is down
    assert "the link SP5–SP1 on its route is down" in broken(path, d)
    d.heard("SP4", 6.0, frozenset({"SP1"}))  # nobody hears SP5: it is down
    assert "SP5 on its route is down" in broken(path, d)
    d.heard("SP5", 7.0, frozenset({"SP1", "SP4"}))
    d.heard("SP4", 7.0, frozenset({"SP1", "SP5"}))
    assert broken(path, d) == ""


def _planned_network():
    """The paper example's 25 subscriptions planned with sharing, as a planning snapshot."""
    from sharing.planner import Strategy
    from sharing.planning_view import PlanningSnapshot
    from sharing.scenarios import SCENARIOS
    from sharing.simulator import Simulation

    sim = Simulation(SCENARIOS["paper-example"](1), photons=300, verify=False)
    sim._push = lambda state, result: None  # type: ignore[method-assign]
    state = sim.run(Strategy.SHARING).state
    snapshot = PlanningSnapshot(state.backbone, state.new_stream_id, dict(state.link_used), dict(state.peer_used),
                                dict(state.statistics), {s.id: s for s in state.streams.values() if s.original},
                                streams=dict(state.streams))
    for s in state.streams.values():
        for peer in s.route:
            snapshot.tables.setdefault((peer, s.input), []).append(s)
    return snapshot


def _detector(me: str, down: set[str], cut: set[frozenset[str]], peers: list[str]) -> FailureDetector:
    """What ``me`` knows: ``down`` silent and heard by nobody; a cut link's ends do not hear
    each other."""
    d = FailureDetector(me, frozenset())
    for p in peers:
        if p != me and p not in down:
            d.heard(p, 0.0, frozenset(q for q in peers if q not in down and frozenset((p, q)) not in cut))
    for p in down:
        for t in (1.0, 2.0, 3.0):
            d.missed(p, t, "UNAVAILABLE")
    return d



@pytest.mark.parametrize("down, cut", [({"SP5"}, set()), (set(), {frozenset(("SP4", "SP5"))}),
                                       ({"SP3"}, {frozenset(("SP5", "SP7"))})])
def test_a_round_plans_over_each_stream_only_as_far_as_its_items_reach_now(down, cut) -> None:
    from superpeer.recovery.route_health import around_failures

    snapshot = _planned_network()
    before = dict(snapshot.streams)
    assert any(down & set(s.route) or any(frozenset(h) in cut for h in zip(s.route, s.route[1:]))
               for s in before.values()), "the failure touches planned streams"
    dead = around_failures(snapshot, _detector("SP1", down, cut, sorted(before[k].origin for k in before) +
                                               sorted(snapshot.backbone.peers)))
    graph = snapshot.backbone.graph  # (routes avoid what is down; prices still know it)
    assert not down & set(graph.nodes) and not any(graph.has_edge(*link) for link in cut)
    for sid, s in snapshot.streams.items():
        if sid in dead:
            parent = snapshot.streams.get(s.parent or "")
            assert s.origin in down or (parent is not None and (parent.id in dead or s.origin not in parent.route))
            continue
        route = s.route
        assert route == before[sid].route[:len(route)] and route, sid  # (a prefix of the route)
        assert not down & set(route) and not any(frozenset(h) in cut for h in zip(route, route[1:]))
        parent = snapshot.streams.get(s.parent or "")
        assert parent is None or (parent.id not in dead and s.origin in parent.route), sid
        if len(route) < len(before[sid].route):  # (cut where the next peer or link is down)
            nxt = before[sid].route[len(route)]
            assert nxt in down or frozenset((route[-1], nxt)) in cut
    for (peer, _), found in snapshot.tables.items():
        assert all(peer in s.route for s in found if s.id not in dead)
        assert all(s is snapshot.streams[s.id] for s in found if s.id not in dead)
    # planned over it, Query 1 at SP7 takes neither what is down nor a stream behind it
    without(snapshot, dead)
    planner = Planner(snapshot)
    for s in before.values():  # (a move is judged by what the streams it leaves and reuses cost)
        planner.cost(s.usage)
    plan = planner.subscribe("again", analyze(example_query("q1")).properties, "SP7")
    assert plan.admitted, plan.reason
    d = _detector("SP7", down, cut, sorted(snapshot.backbone.peers))
    assert broken(data_paths(plan, lambda sid: lineage(snapshot.streams, sid)), d) == ""


def test_nothing_down_leaves_the_snapshot_as_it_is() -> None:
    from superpeer.recovery.route_health import around_failures

    snapshot = _planned_network()
    backbone, streams = snapshot.backbone, dict(snapshot.streams)
    assert around_failures(snapshot, _detector("SP1", set(), set(), sorted(backbone.peers))) == {}
    assert snapshot.backbone is backbone and snapshot.streams == streams
