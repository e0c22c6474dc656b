"""Membership by gossip between real daemons: each super-peer asks only its neighbours and one
other peer a round, yet every peer learns every other's record, a crash far away, and a new
stream through the catalogue's homes; a silent neighbour that others reach is a cut link, not a
crash. Real gRPC servers, one process each as the daemon runs them (in this process)."""

from __future__ import annotations

from pathlib import Path

from network_harness import until
from test_failure_detector import LINE

from photons.generator import generate
from sharing.scenarios import grid_backbone
from superpeer.control.announcements import homes
from superpeer.recovery.failure_detector import HeartbeatSettings
from superpeer.rpc.server import start_superpeer
from superpeer.topology import load_topology
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import free_ports

FAST = HeartbeatSettings(0.2, misses=2)


def _grid(tmp_path: Path, k: int) -> Path:
    backbone = grid_backbone(k)
    ports = free_ports(k * k)
    text = "".join(f'[[superpeer]]\nid = "{p}"\naddress = "127.0.0.1:{port}"\n'
                   for p, port in zip(backbone.peers, ports))
    text += "".join(f'[[link]]\na = "{link.a}"\nb = "{link.b}"\nbandwidth = 1e8\n' for link in backbone.links.values())
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_a_grid_learns_streams_and_crashes_by_gossip(tmp_path: Path) -> None:
    topology = load_topology(_grid(tmp_path, 3))
    peers = {p: start_superpeer(topology, p, heartbeats=FAST) for p in topology.backbone.peers}
    clients = {p: SuperPeerClient(topology.address(p)) for p in peers}
    try:
        for p, client in clients.items():  # every record everywhere, each peer asking 3 to 5 a round
            membership = until(lambda c=client: (m := c.status()["membership"])["records"] == 9 and m, seconds=30)
            assert membership["asks_per_round"] == len(list(topology.backbone.graph.neighbors(p))) + 1
        waiting = clients["SP8"].subscribe(
            '<r>{ for $p in stream("photons")/photons/photon where $p/en >= 2 return $p/en }</r>',
            wait_for_streams=True)
        # SP0 hears that SP8 waits for the stream (pushed the moment it began to wait), and tells
        # SP8 when the stream is registered: its subscription is planned before the registration ends
        until(lambda: clients["SP0"].status()["membership"]["waiting"].get("SP8") == ["photons"], seconds=10)
        clients["SP0"].register_stream("photons", "photons", "photon", rate=100)
        assert clients["SP8"].status()["subscriptions"][waiting.subscription]["plan"]
        # asked at once anywhere: a peer that is neither a home of the name nor waiting asks the homes
        elsewhere = next(p for p in ("SP2", "SP6", "SP5", "SP7")
                         if p not in homes("photons", peers))
        sub = clients[elsewhere].subscribe('<r>{ for $p in stream("photons")/photons/photon return $p/en }</r>')
        assert sub.plan.admitted
        photons = [p.to_xml() for p in generate(50, seed=3)]
        clients["SP0"].publish("photons", photons)
        clients["SP0"].close_stream("photons")
        got = list(clients[elsewhere].results(sub.subscription, idle_timeout=10))
        assert len(got) == 50
        # the centre crashes: the far corners are not its neighbours, and hear of it from them
        peers.pop("SP4").stop(grace=0)
        for corner in ("SP0", "SP8"):
            state = until(lambda c=corner: (d := clients[c].status()["failure_detector"]["peers"]["SP4"])["state"]
                          == "down" and d, seconds=15)
            assert "declared down by" in state["reason"], state
    finally:
        for running in peers.values():
            running.stop(grace=0)


def test_a_leaf_cut_off_from_its_only_neighbour_is_reached_through_another_peer(tmp_path: Path) -> None:
    a, b, c = free_ports(3)
    path = tmp_path / "line.toml"
    path.write_text(LINE.format(a=a, b=b, c=c))
    topology = load_topology(path)
    peers = {p: start_superpeer(topology, p, heartbeats=FAST) for p in ("A", "B", "C")}
    try:
        sp_a, sp_b = SuperPeerClient(topology.address("A")), SuperPeerClient(topology.address("B"))
        until(lambda: sp_b.status()["failure_detector"]["links"]["B–C"]["state"] == "up", seconds=15)
        peers["B"].node.cut_link("C", True)
        peers["C"].node.cut_link("B", True)
        # C has no other neighbour to hear it: B asks A, which reaches C — only the link is cut
        link = until(lambda: (l := sp_b.status()["failure_detector"]["links"]["B–C"])["state"] == "down" and l,
                     seconds=15)
        until(lambda: sp_b.status()["failure_detector"]["peers"]["C"]["state"] == "unreachable", seconds=15)
        assert "the link is cut" in sp_b.status()["failure_detector"]["links"]["B–C"]["reason"], link
        assert sp_a.status()["failure_detector"]["peers"]["C"]["state"] == "up"
        peers["C"].stop(grace=0)  # now it is gone: nobody reaches it
        until(lambda: sp_b.status()["failure_detector"]["peers"]["C"]["state"] == "down", seconds=15)
        until(lambda: sp_a.status()["failure_detector"]["peers"]["C"]["state"] == "down", seconds=15)
    finally:
        for running in peers.values():
            running.stop(grace=0)
