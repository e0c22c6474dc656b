"""Subnets in the live network (issue 37): a topology that declares ``[[subnet]]``s is planned
subnet by subnet by the super-peers themselves — a stream registered in another subnet enters
by one relay through a gateway, installed with the first subscription that needs it, reused by
the next ones and removed with the last. Real gRPC daemons (in this process), real parsing of
the topology file, results checked item by item."""

from __future__ import annotations

from pathlib import Path

import pytest
from superpeer_fakes import buffered_results, in_process_network

from photons.generator import generate
from sharing.backbone import Backbone, Link, Peer, TopologyError
from superpeer.recovery.failure_detector import HeartbeatSettings
from superpeer.rpc.server import start_superpeer
from superpeer.topology import load_topology
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import free_ports

LINE = """\
[[superpeer]]
id = "SP0"
address = "127.0.0.1:{0}"
[[superpeer]]
id = "SP1"
address = "127.0.0.1:{1}"
[[superpeer]]
id = "SP2"
address = "127.0.0.1:{2}"
[[superpeer]]
id = "SP3"
address = "127.0.0.1:{3}"
[[link]]
a = "SP0"
b = "SP1"
bandwidth = "100Mbit"
[[link]]
a = "SP1"
b = "SP2"
bandwidth = "100Mbit"
[[link]]
a = "SP2"
b = "SP3"
bandwidth = "100Mbit"
"""
SUBNETS = """\
[[subnet]]
id = "west"
peers = ["SP0", "SP1"]
[[subnet]]
id = "east"
peers = ["SP2", "SP3"]
"""
QUERY = '<r>{{ for $p in stream("photons")/photons/photon where $p/en >= {0} return $p/en }}</r>'


def test_subscriptions_are_planned_in_their_subnet_and_share_one_relay(tmp_path: Path) -> None:
    path = tmp_path / "line.toml"
    path.write_text(LINE.format(*free_ports(4)) + SUBNETS)
    topology = load_topology(path)
    assert topology.subnets is not None and topology.subnets.by_id["east"].gateways == {"SP2"}
    peers = {p: start_superpeer(topology, p, heartbeats=HeartbeatSettings(0.2, misses=3)) for p in topology.backbone.peers}
    clients = {p: SuperPeerClient(topology.address(p)) for p in peers}
    try:
        assert [s["id"] for s in clients["SP3"].status()["backbone"]["subnet"]] == ["west", "east"]
        photons = list(generate(300, seed=11))
        clients["SP0"].register_stream("photons", "photons", "photon", rate=100)
        clients["SP0"].publish("photons", [p.to_xml() for p in photons[:100]])  # (statistics)
        first = clients["SP3"].subscribe(QUERY.format(2))
        part = first.plan.parts[0]  # the original relayed whole to the gateway, filtered inside the subnet
        assert part.reused_stream == "photons" and part.route[:3] == ("SP0", "SP1", "SP2"), part
        assert part.operator_peer in {"SP2", "SP3"} and len(part.new_streams) >= 2, part
        assert part.relayed == "east" and "relayed whole into subnet east at SP2" in first.description
        second = clients["SP2"].subscribe(QUERY.format(3))
        other = second.plan.parts[0]  # (it derives from the relay, inside its subnet)
        assert second.plan.admitted and other.reused_stream in part.new_streams and not other.relayed, other
        assert set(other.route) <= {"SP2", "SP3"} and other.reuse_peer in {"SP2", "SP3"}, other
        tail = photons[100:]
        clients["SP0"].publish("photons", [p.to_xml() for p in tail])
        clients["SP0"].close_stream("photons")
        for client, sub, least in ((clients["SP3"], first, 2), (clients["SP2"], second, 3)):
            got = [float(x.split(">")[1].split("<")[0]) for _, x, _ in client.results(sub.subscription, idle_timeout=15)]
            assert got == [round(p.en, 4) for p in tail if round(p.en, 4) >= least]
    finally:
        for running in peers.values():
            running.stop(grace=0)


def test_the_relay_is_removed_with_the_last_subscription_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "line.toml"
    path.write_text(LINE.format(*free_ports(4)) + SUBNETS)
    topology = load_topology(path)
    peers = {p: start_superpeer(topology, p, heartbeats=HeartbeatSettings(0.2, misses=3)) for p in topology.backbone.peers}
    clients = {p: SuperPeerClient(topology.address(p)) for p in peers}
    try:
        clients["SP0"].register_stream("photons", "photons", "photon", rate=100)
        clients["SP0"].publish("photons", [p.to_xml() for p in generate(50, seed=2)])
        a = clients["SP3"].subscribe(QUERY.format(2))
        relay = a.plan.parts[0].new_streams[0]
        b = clients["SP3"].subscribe(QUERY.format(1))
        assert relay not in clients["SP3"].unsubscribe(a.subscription)  # (b still reads it)
        assert relay in clients["SP3"].unsubscribe(b.subscription)
    finally:
        for running in peers.values():
            running.stop(grace=0)


@pytest.mark.parametrize("subnets, words", [
    (SUBNETS.replace('"SP2", "SP3"', '"SP2"'), "SP3 is in no subnet"),
    (SUBNETS.replace('"SP2", "SP3"', '"SP2", "SP7"'), ":30: [[subnet]] east: peers names no super-peer"),
    (SUBNETS.replace('peers = ["SP0", "SP1"]', 'peers = "SP0"'), ":27: [[subnet]] west: peers must be a list"),
    (SUBNETS.replace('id = "east"', 'id = "east"\ngateway = ["SP2"]'), "unknown key 'gateway' (did you mean 'gateways'?)"),
    (SUBNETS + '[[subnet]]\nid = "x"\n', "[[subnet]] x: missing key 'peers'"),
])
def test_a_bad_subnet_is_refused_with_the_file_and_line(tmp_path: Path, subnets: str, words: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(LINE.format(*free_ports(4)) + subnets)
    with pytest.raises(TopologyError) as refused:
        load_topology(path)
    assert words in str(refused.value) and str(path) in str(refused.value)


def test_re_optimisation_keeps_a_subscription_inside_its_subnet(tmp_path: Path) -> None:
    line = Backbone([Peer(f"SP{i}") for i in range(4)], [Link(f"SP{i}", f"SP{i + 1}", 1e8) for i in range(3)])
    net = in_process_network(line, [{"id": "west", "peers": ["SP0", "SP1"]},
                                       {"id": "east", "peers": ["SP2", "SP3"]}])
    try:
        net.peers["SP0"].control.register_stream("photons", "photons", "photon", rate=100)
        photons = list(generate(200, seed=5))
        net.peers["SP0"].data.publish("photons", [p.to_xml() for p in photons[:100]])
        sp3 = net.peers["SP3"]
        wide = sp3.control.subscribe(QUERY.format(1))
        narrow = sp3.control.subscribe(QUERY.format(2))
        sp3.reoptimiser.round("test")  # priced over the whole view, candidates inside the subnet
        for record in (wide, narrow):
            assert record.reoptimisation.startswith(("kept", "re-planned")), record.reoptimisation
            for part in record.plan.parts:
                assert not {"SP0", "SP1"} & {p for s in part.new_streams[1:] for p in s.route}
        net.peers["SP0"].data.publish("photons", [p.to_xml() for p in photons[100:]])
        net.peers["SP0"].data.close_stream("photons")
        got = [float(x.split(">")[1].split("<")[0]) for x in buffered_results(narrow)]
        assert got == [round(p.en, 4) for p in photons[100:] if round(p.en, 4) >= 2]
    finally:
        for node in net.peers.values():
            node.stop()
