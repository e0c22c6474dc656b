"""Start real super-peers (gRPC servers on free loopback ports) for integration tests."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from superpeer.server import start_superpeer
from superpeer.topology import load_topology
from thinpeer.network import with_free_ports

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def running_network(tmp_path: Path, name: str = "paper-example.toml", retention: int = 100_000,
                    executor: str = "inline"):
    path = with_free_ports(ROOT / "deploy" / "topologies" / name, tmp_path / name)
    topology = load_topology(path)
    peers = {}
    try:
        for peer in topology.backbone.peers:
            peers[peer] = start_superpeer(topology, peer, retention=retention, executor=executor)
        for running in peers.values():
            running.node.heartbeat_once()
        yield topology, peers
    finally:
        for running in peers.values():
            running.stop(grace=0)
