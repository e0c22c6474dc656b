"""Start real super-peers (gRPC servers on free loopback ports) for integration tests."""

from __future__ import annotations

import socket
import tomllib
from contextlib import contextmanager
from pathlib import Path

from superpeer.server import start_superpeer
from superpeer.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def topology_with_free_ports(source: Path, dest: Path) -> Path:
    """A copy of a topology file whose super-peers listen on free loopback ports."""
    data = tomllib.loads(source.read_text())
    ports = free_ports(len(data["superpeer"]))
    text = source.read_text()
    for peer, port in zip(data["superpeer"], ports):
        text = text.replace(f'address = "{peer["address"]}"', f'address = "127.0.0.1:{port}"')
    dest.write_text(text)
    return dest


@contextmanager
def running_network(tmp_path: Path, name: str = "paper-example.toml", retention: int = 100_000):
    path = topology_with_free_ports(ROOT / "deploy" / "topologies" / name, tmp_path / name)
    topology = load_topology(path)
    peers = {}
    try:
        for peer in topology.backbone.peers:
            peers[peer] = start_superpeer(topology, peer, retention=retention)
        for running in peers.values():
            running.node.heartbeat_once()
        yield topology, peers
    finally:
        for running in peers.values():
            running.stop(grace=0)
