"""Subnets (issue 37): declared and cut subnets checked against the backbone, and sharing
planned subnet by subnet — each plan inside its subscriber's subnet, originals relayed through
gateways, every delivered result identical to the reference evaluator's."""

from __future__ import annotations

import json
import subprocess
import sys

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharing.backbone import Backbone, Link, Peer, TopologyError
from sharing.planner import RegistrationError, Strategy
from sharing.scenarios import SCENARIOS, grid_backbone, random_backbone
from sharing.simulator import Simulation, simulate
from sharing.subnet_planning import is_relay
from sharing.subnets import Subnets, partition

from conftest import ROOT  # the checkout


def line(n: int) -> Backbone:
    """SP0–SP1–…–SP(n-1)."""
    return Backbone([Peer(f"SP{i}") for i in range(n)], [Link(f"SP{i}", f"SP{i + 1}", 1e6) for i in range(n - 1)])


def test_declared_subnets_default_their_gateways_to_the_border():
    subnets = Subnets.from_mapping(line(4), [{"id": "west", "peers": ["SP0", "SP1"]},
                                             {"id": "east", "peers": ["SP2", "SP3"]}])
    assert subnets.by_id["west"].gateways == {"SP1"} and subnets.by_id["east"].gateways == {"SP2"}
    assert subnets.of["SP3"] == "east"
    assert sorted(subnets.backbone_of("west").peers) == ["SP0", "SP1"]
    assert list(subnets.backbone_of("west").links) == [frozenset({"SP0", "SP1"})]


@pytest.mark.parametrize("entries, words", [
    ([{"id": "a", "peers": ["SP0", "SP1"]}, {"id": "b", "peers": ["SP1", "SP2", "SP3"]}],
     "SP1 is in subnets a and b"),
    ([{"id": "a", "peers": ["SP0", "SP1"]}, {"id": "b", "peers": ["SP2"]}], "SP3 is in no subnet"),
    ([{"id": "a", "peers": ["SP0", "SP2"]}, {"id": "b", "peers": ["SP1", "SP3"]}], "not connected"),
    ([{"id": "a", "peers": ["SP0", "SP1"], "gateways": ["SP0"]}, {"id": "b", "peers": ["SP2", "SP3"]}],
     "SP1 is not a gateway of a"),
    ([{"id": "a", "peers": ["SP0", "SP1", "SP9"]}, {"id": "b", "peers": ["SP2", "SP3"]}], "unknown super-peer SP9"),
    ([{"id": "a", "peers": ["SP0", "SP1"], "gateways": ["SP1", "SP2"]}, {"id": "b", "peers": ["SP2", "SP3"]}],
     "gateway SP2 is not one of its super-peers"),
    ([{"id": "a", "peers": ["SP0", "SP1"]}, {"id": "a", "peers": ["SP2", "SP3"]}], "defined twice"),
    ([{"peers": ["SP0"]}], "misses key 'id'"),
])
def test_inconsistent_subnets_are_refused_with_the_reason(entries, words):
    with pytest.raises(TopologyError, match=words):
        Subnets.from_mapping(line(4), entries)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 120), k=st.integers(1, 12), seed=st.integers(0, 1000))
def test_a_cut_backbone_has_k_connected_subnets_of_about_equal_size(n, k, seed):
    backbone = random_backbone(n, seed)
    k = min(k, n)
    subnets = partition(backbone, k, seed)  # (``Subnets`` checks: one subnet each, connected, gateways)
    assert len(subnets.by_id) == k
    assert sum(len(s.peers) for s in subnets.by_id.values()) == n
    for s in subnets.by_id.values():
        assert nx.is_connected(backbone.graph.subgraph(s.peers))
        assert s.gateways == {p for p in s.peers if any(subnets.of[q] != s.id for q in backbone.graph.neighbors(p))}
    assert partition(backbone, k, seed).of == subnets.of  # (seeded)


def test_on_a_grid_the_subnets_are_balanced():
    summary = partition(grid_backbone(10), 10, 3).summary()
    assert summary["subnets"] == 10 and summary["largest"] <= 2 * summary["smallest"]
    with pytest.raises(TopologyError, match="cannot cut 16 super-peers into 17"):
        partition(grid_backbone(4), 17, 1)


def test_sharing_in_subnets_stays_inside_each_subnet_and_delivers_every_result():
    scenario = SCENARIOS["paper-grid"](1)
    subnets = partition(scenario.backbone, 4, 2)
    sim = Simulation(scenario, photons=600, verify=True)
    result = sim.run(Strategy.SHARING, subnets)
    assert result.label == "sharing-subnets" and result.mismatches == []
    assert result.verified == len(scenario.queries)  # (every subscription admitted, every result identical)
    relays = {s.id for s in result.state.streams.values() if is_relay(s, subnets)}
    assert relays, "originals registered in other subnets are relayed"
    for qid, plan in result.plans.items():
        home = subnets.of[plan.target]
        for part in plan.parts:
            for stream in part.new_streams:  # (a plan never leaves its subscriber's subnet but by a relay)
                if is_relay(stream, subnets):
                    assert stream is part.new_streams[0] and stream.route[-1] in subnets.by_id[home].gateways
                    continue
                assert {subnets.of[p] for p in stream.route} == {home}, (qid, stream.describe())
    for sid in relays:  # (relays carry the original whole, from a peer that has it to a gateway)
        relay = result.state.streams[sid]
        assert relay.operators == () and relay.properties == result.state.original(relay.input).properties
        assert relay.route[-1] in subnets.by_id[subnets.of[relay.route[-1]]].gateways


def test_one_subnet_plans_as_the_flat_planner_does():
    scenario = SCENARIOS["paper-example"](1)
    report = simulate(scenario, photons=300, strategies=[Strategy.SHARING],
                      subnets=partition(scenario.backbone, 1, 1))
    gap = report["subnets_against_flat"]
    assert gap["traffic"] == 1.0 and gap["registered"] == {"flat": 25, "subnets": 25}
    assert report["strategies"]["sharing-subnets"]["subnets"]["relays"] == 0


@pytest.mark.slow
def test_cli_reports_subnets_against_the_flat_plans(tmp_path):
    out = tmp_path / "sim"
    cmd = [sys.executable, "-m", "thinpeer.cli", "simulate", "random", "--peers", "60", "--queries", "20",
           "--photons", "300", "--strategies", "sharing", "--subnets", "4", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "planned in 4 subnets" in r.stdout and "the flat plans'" in r.stdout
    report = json.loads((out / "report.json").read_text())
    assert set(report["strategies"]) == {"sharing", "sharing-subnets"}
    assert report["strategies"]["sharing-subnets"]["verified"]["mismatches"] == []
    assert report["subnets_against_flat"]["traffic"] > 0
    bad = subprocess.run(cmd[:-4] + ["--subnets", "0"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode != 0 and "cannot cut 60 super-peers into 0 subnets" in bad.stderr


SELF_JOIN = """<pairs>{ for $p in stream("photons")/photons/photon
    for $q in stream("photons")/photons/photon
    where $q/det_time > $p/det_time + 0 and $q/det_time <= $p/det_time + 0.3 and $p/en > 1.5 and $q/en > 1.5
    return <pair>{ $p/det_time }{ $q/det_time }</pair> }</pairs>"""


def _line_network():
    from sharing.analysis import analyze
    from sharing.network_state import NetworkState
    from sharing.properties import InputStream
    from sharing.matching import raw_properties
    from sharing.statistics import StreamStatistics
    from sharing.subnet_planning import SubnetPlanner

    backbone = line(4)
    state = NetworkState(backbone)
    inp = InputStream("photons", ("photons", "photon"))
    state.register_original(inp, "SP0", raw_properties(inp), StreamStatistics(frequency=100))
    subnets = Subnets.from_mapping(backbone, [{"id": "west", "peers": ["SP0", "SP1"]},
                                              {"id": "east", "peers": ["SP2", "SP3"]}])
    return state, subnets, SubnetPlanner(state, subnets), analyze


def test_a_self_join_from_another_subnet_installs_each_stream_once_and_leaves_nothing_behind():
    state, subnets, planner, analyze = _line_network()
    plan = planner.subscribe("j", analyze(SELF_JOIN).properties, "SP3")
    assert plan.admitted
    ids = [s.id for p in plan.parts for s in p.new_streams]
    assert len(ids) == len(set(ids))  # (one relay installed twice would count its links twice)
    planner.install(plan)
    planner.whole.unsubscribe("j")
    assert not any(state.link_used.values()), state.link_used


def test_a_relay_set_aside_by_the_view_is_not_an_entry():
    state, subnets, planner, analyze = _line_network()
    first = planner.subscribe("a", analyze(
        '<r>{ for $p in stream("photons")/photons/photon where $p/en >= 2 return $p/en }</r>').properties, "SP3")
    planner.install(first)
    relay = first.parts[0].new_streams[0]
    assert is_relay(relay, subnets)
    east = subnets.by_id["east"]
    assert planner.entry(east, state.original(relay.input)) == (relay.id, "SP2")
    for key in list(state._tables):  # (as re-optimisation plans a move: its own streams left out)
        state._tables[key] = {props: {sid: s for sid, s in group.items() if sid != relay.id}
                              for props, group in state._tables[key].items()}
    assert planner.entry(east, state.original(relay.input)) is None


def test_inside_a_subnet_routes_avoid_what_the_view_routes_around():
    from sharing.analysis import analyze
    from sharing.matching import raw_properties
    from sharing.network_state import NetworkState
    from sharing.properties import InputStream
    from sharing.statistics import StreamStatistics
    from sharing.subnet_planning import SubnetPlanner

    backbone = grid_backbone(3)  # SP0 … SP8, SP4 the centre
    state = NetworkState(backbone)
    inp = InputStream("photons", ("photons", "photon"))
    state.register_original(inp, "SP1", raw_properties(inp), StreamStatistics(frequency=100))
    subnets = Subnets.from_mapping(backbone, [{"id": "all", "peers": sorted(backbone.peers)}])
    props = analyze('<r>{ for $p in stream("photons")/photons/photon where $p/en >= 2 return $p/en }</r>').properties
    assert "SP4" in SubnetPlanner(state, subnets).subscribe("a", props, "SP7").parts[0].route
    state.backbone = backbone.routing_around(["SP4"])  # (as re-optimisation plans while SP4 is down)
    part = SubnetPlanner(state, subnets).inside("SP7", props).subscribe("b", props, "SP7").parts[0]
    assert "SP4" not in part.route and part.route[-1] == "SP7", part.route


def test_the_only_reader_of_a_relay_may_change_its_sample_over_the_whole_network():
    from sharing.estimates import with_sample
    from sharing.reoptimisation import own_streams
    from sharing.subnet_planning import planner_within

    state, subnets, planner, analyze = _line_network()
    props = analyze('<r>{ for $p in stream("photons")/photons/photon where $p/en >= 2 return $p/en }</r>').properties
    planner.install(planner.subscribe("a", props, "SP3"))
    mine = own_streams(state.streams, "a")  # (the relay among them: set aside, as a move plans)
    for key in list(state._tables):
        state._tables[key] = {p: {sid: s for sid, s in g.items() if sid not in mine} for p, g in state._tables[key].items()}
    with pytest.raises(RegistrationError, match="has not entered subnet east"):
        planner_within(state, subnets, "SP3", props).subscribe("a~1", props, "SP3")  # (a move: kept)
    sampled = with_sample(props, 2)
    assert planner_within(state, subnets, "SP3", sampled, or_whole=True).subscribe("a~2", sampled, "SP3").admitted
