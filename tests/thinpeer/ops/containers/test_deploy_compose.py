"""The compose project written for a topology: fixed addresses, the containers' topology, shaped
links at both ends, and the rates the CLI reads. No Docker needed."""

from __future__ import annotations

import json

import pytest

from streamglobe.units import parse_bitrate
from superpeer.topology import load_topology
from thinpeer.cli import main
from thinpeer.ops.containers.compose import Deployment, compose_file, container_topology, place
from thinpeer.ops.topologies import shipped_topology


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
    assert inside.positions == source.positions and len(source.positions) == 16  # the web view's layout
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
    assert main(["deploy", "bandwidth", "--state-dir", "/nonexistent", "SP4", "SP5", text]) == 1  # (read, no deployment)
    assert parse_bitrate(text) == rate


@pytest.mark.parametrize("text, says", [("fast", "not a number with a unit"), ("10MB", "that is a size in bytes"),
                                         ("10m", "that is a duration")])
def test_a_bandwidth_that_is_no_bit_rate_is_an_error_naming_bits_per_second(text: str, says: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["deploy", "bandwidth", "SP4", "SP5", text])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "argument RATE: expected a bit rate in bits per second" in err and says in err, err


def test_a_scenario_backbone_becomes_a_topology_the_containers_read(tmp_path) -> None:
    from sharing.scenarios import SCENARIOS
    from thinpeer.ops.containers.live_simulation import topology_toml

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


def test_a_spark_cluster_joins_the_network_and_every_peer_runs_on_it(tmp_path) -> None:
    from thinpeer.ops.containers.spark_cluster import CORES_PER_APP, place_cluster

    data, placements = place(shipped_topology("paper-example"), "10.9.0.0/24")
    spark = place_cluster(2, "10.9.0.0/24", 9 + len(placements))
    deployment = Deployment("p", str(tmp_path), "spark", placements, spark)
    services = compose_file(deployment, "streamglobe:x", "10.9.0.0/24", ["--executor", "spark"])["services"]
    ips = [s["networks"]["backbone"]["ipv4_address"] for s in services.values()]
    assert len(set(ips)) == len(ips) == len(placements) + 3
    master = spark["spark-master"]
    assert services["spark-master"]["command"][:3] == ["master", master.ip, "7077"]
    workers = [services[f"spark-worker-{i}"] for i in (1, 2)]
    # every super-peer's application (CORES_PER_APP each) finds its cores on the workers at once
    assert sum(int(w["command"][3]) for w in workers) >= CORES_PER_APP * len(placements)
    assert all(w["command"][1] == f"spark://{master.ip}:7077" for w in workers)
    for peer, placement in placements.items():
        command = services[placement.service]["command"]
        assert command[command.index("--spark-master") + 1] == f"spark://{master.ip}:7077"
        assert command[command.index("--spark-feed-host") + 1] == placement.ip
    deployment.save()
    assert Deployment.load(tmp_path) == deployment


def test_a_spark_cluster_needs_the_spark_executor_and_a_worker(tmp_path) -> None:
    from thinpeer.ops.containers.images import DeployError
    from thinpeer.ops.containers.project import up

    with pytest.raises(DeployError, match="needs --executor spark"):
        up(shipped_topology("paper-example"), tmp_path, "p", "inline", [], "10.9.0.0/24", print, spark_workers=2)
    with pytest.raises(DeployError, match="at least one worker"):
        up(shipped_topology("paper-example"), tmp_path, "p", "spark", [], "10.9.0.0/24", print, spark_workers=-1)


def test_a_settings_file_reaches_every_container_checked_first(tmp_path) -> None:
    from thinpeer.cli.command import CliError
    from thinpeer.cli.deploy import use_settings

    _, placements = place(shipped_topology("paper-example"), "10.9.0.0/24")
    deployment = Deployment("p", str(tmp_path), "inline", placements)
    bad = tmp_path / "bad.toml"
    bad.write_text("metrics_prot = 9464\n")
    with pytest.raises(CliError, match="did you mean 'metrics_port'"):
        use_settings(bad, tmp_path)
    good = tmp_path / "good.toml"
    good.write_text('metrics_port = 9464\nmetrics_host = "0.0.0.0"\nlog_format = "json"\n')
    use_settings(good, tmp_path)
    sp4 = compose_file(deployment, "streamglobe:x", "10.9.0.0/24", ["--executor", "inline"])["services"]["sp4"]
    assert f"{tmp_path / 'settings.toml'}:/etc/streamglobe/settings.toml:ro" in sp4["volumes"]
    at = sp4["command"].index("--config")
    assert sp4["command"][at + 1] == "/etc/streamglobe/settings.toml"
    use_settings(None, tmp_path)  # (an up without it: the file of an earlier up goes)
    sp4 = compose_file(deployment, "streamglobe:x", "10.9.0.0/24", ["--executor", "inline"])["services"]["sp4"]
    assert "--config" not in sp4["command"] and len(sp4["volumes"]) == 1
