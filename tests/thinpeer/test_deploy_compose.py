"""The compose project written for a topology: fixed addresses, the containers' topology, shaped
links at both ends, and the rates the CLI reads. No Docker needed."""

from __future__ import annotations

import json

import pytest

from superpeer.topology import load_topology
from thinpeer.cli.command import CliError
from thinpeer.cli.deploy import parse_rate
from thinpeer.deploy.compose import Deployment, compose_file, container_topology, place
from thinpeer.topologies import shipped_topology


def test_every_link_is_shaped_at_both_ends_and_the_containers_topology_loads(tmp_path) -> None:
    source = load_topology(str(shipped_topology("grid-4x4")))
    data, placements = place(shipped_topology("grid-4x4"), "10.9.0.0/24")
    assert len({p.ip for p in placements.values()}) == len(placements) == len(source.backbone.peers)
    for link in data["link"]:
        a, b = link["a"], link["b"]
        assert placements[a].links[b][1] == placements[b].links[a][1] == int(float(link["bandwidth"]))
    for p in placements.values():  # one htb class per link of a peer
        assert len({cls for cls, _ in p.links.values()}) == len(p.links)
    path = tmp_path / "topology.toml"
    path.write_text(container_topology(data, placements))
    inside = load_topology(path)
    assert inside.addresses == {p: f"{placements[p].ip}:50051" for p in placements}
    assert inside.backbone.peers.keys() == source.backbone.peers.keys()
    assert {(l.a, l.b, l.bandwidth) for l in inside.backbone.links.values()} == \
        {(l.a, l.b, l.bandwidth) for l in source.backbone.links.values()}


def test_compose_file_publishes_each_peer_on_loopback_and_round_trips(tmp_path) -> None:
    data, placements = place(shipped_topology("paper-example"), "10.9.0.0/24")
    deployment = Deployment("p", str(tmp_path), "inline", placements)
    project = compose_file(deployment, "streamglobe:x", "10.9.0.0/24", ["--executor", "inline"])
    sp4 = project["services"]["sp4"]
    assert sp4["ports"] == ["127.0.0.1::50051"] and "NET_ADMIN" in sp4["cap_add"]
    assert sp4["command"][:4] == ["--topology", "/etc/streamglobe/topology.toml", "--id", "SP4"]
    assert "--listen" in sp4["command"]
    shaped = dict((ip, rate) for _, ip, rate in (e.split() for e in sp4["environment"]["SG_LINKS"].split(";")))
    assert shaped == {placements[n].ip: str(r) for n, (_, r) in placements["SP4"].links.items()}
    json.dumps(project)  # written as JSON (which is YAML)
    deployment.save()
    assert Deployment.load(tmp_path) == deployment


def test_a_subnet_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        place(shipped_topology("paper-example"), "10.9.0.0/29")


@pytest.mark.parametrize("text,rate", [("100e6", 100_000_000), ("10mbit", 10_000_000),
                                       ("1.5Gbit", 1_500_000_000), ("500kbit", 500_000), ("64000", 64000)])
def test_rates(text: str, rate: int) -> None:
    assert parse_rate(text) == rate


def test_a_rate_that_does_not_read_is_an_error() -> None:
    with pytest.raises(CliError, match="cannot read the rate"):
        parse_rate("fast")


def test_a_scenario_backbone_becomes_a_topology_the_containers_read(tmp_path) -> None:
    from sharing.scenarios import SCENARIOS
    from thinpeer.deploy.live_simulation import topology_toml

    scenario = SCENARIOS["paper-grid-constrained"](1)
    path = tmp_path / "grid.toml"
    path.write_text(topology_toml(scenario))
    data, placements = place(path, "10.9.0.0/24")
    path.write_text(container_topology(data, placements))
    backbone = load_topology(path).backbone
    assert {p: (v.load_capacity, v.pindex) for p, v in backbone.peers.items()} == \
        {p: (v.load_capacity, v.pindex) for p, v in scenario.backbone.peers.items()}
    assert {e: l.bandwidth for e, l in backbone.links.items()} == \
        {e: l.bandwidth for e, l in scenario.backbone.links.items()}
