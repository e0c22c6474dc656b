"""``with_free_ports`` gives a test's network free loopback ports; a free port may equal the port
another super-peer lists in the shipped file (the ephemeral range covers them), which once made
a topology with a duplicate key (CI, issue 15's stop)."""

from __future__ import annotations

import tomllib

import thinpeer.ops.ports as network
from thinpeer.ops.topologies import shipped_topology


def test_free_ports_equal_to_listed_ones_give_each_peer_its_own(tmp_path, monkeypatch) -> None:
    listed = [peer["address"] for peer in
              tomllib.loads(shipped_topology("paper-example").read_text(encoding="utf-8"))["superpeer"]]
    taken = [int(address.rsplit(":", 1)[1]) for address in listed]
    # the worst case: each peer given the next one's listed port, and peer ports the same way
    chosen = [port for pair in zip(taken[1:] + taken[:1], [p + 1000 for p in taken]) for port in pair]
    monkeypatch.setattr(network, "free_ports", lambda n: chosen[:n])
    path = network.with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    peers = tomllib.loads(path.read_text(encoding="utf-8"))["superpeer"]
    assert [p["address"] for p in peers] == [f"127.0.0.1:{port}" for port in chosen[::2]]
    assert [p["peer_address"] for p in peers] == [f"127.0.0.1:{port}" for port in chosen[1::2]]
    again = network.with_free_ports(path, tmp_path / "again.toml")  # a file with peer addresses
    assert len(tomllib.loads(again.read_text(encoding="utf-8"))["superpeer"]) == len(peers)


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    """Outside the range no JVM's or client's ``bind(0)`` can take them before a daemon binds."""
    import socket

    ports = network.free_ports(40)
    assert len(set(ports)) == 40
    assert all(1024 <= port < network._ephemeral_low() for port in ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
