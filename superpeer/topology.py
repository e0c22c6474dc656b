"""Topology files (shipped in ``thinpeer/data/topologies/``, or any file of that form):
super-peers with addresses and capacities, links with bandwidths. Parsed here (I/O), turned into a ``sharing.backbone.Backbone``.

A super-peer has two addresses (``superpeer.security.tls``): ``address``, where thin peers reach it,
and ``peer_address``, where the other super-peers do (mutual TLS). Without ``peer_address`` it
is the same host, port ``PEER_PORT_OFFSET`` above ``address``'s."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from sharing.backbone import Backbone, TopologyError

PEER_PORT_OFFSET = 1000


@dataclass(frozen=True)
class Topology:
    backbone: Backbone
    addresses: dict[str, str]  # for thin peers
    peer_addresses: dict[str, str] = field(default_factory=dict)  # for the other super-peers
    positions: dict[str, tuple[float, float]] = field(default_factory=dict)  # where a drawing puts them

    def to_mapping(self) -> dict:
        """The backbone in a topology file's shape (``Backbone.from_mapping`` reads it back):
        what a tool that reached one super-peer needs to find and draw all the others."""
        return {"superpeer": [{"id": p.id, "address": self.addresses.get(p.id, ""),
                               "load_capacity": p.load_capacity, "pindex": p.pindex,
                               **({"position": list(self.positions[p.id])} if p.id in self.positions else {})}
                              for p in self.backbone.peers.values()],
                "link": [{"a": link.a, "b": link.b, "bandwidth": link.bandwidth}
                         for link in self.backbone.links.values()]}

    def address(self, peer: str) -> str:
        try:
            return self.addresses[peer]
        except KeyError:
            raise TopologyError(f"unknown super-peer {peer}") from None

    def peer_address(self, peer: str) -> str:
        if peer in self.peer_addresses:
            return self.peer_addresses[peer]
        return derived_peer_address(self.address(peer))


def derived_peer_address(address: str) -> str:
    host, _, port = address.rpartition(":")
    return f"{host}:{int(port) + PEER_PORT_OFFSET}"


def load_topology(path: str | Path) -> Topology:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TopologyError(f"{p}: no such topology file") from None
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{p}: not valid TOML: {exc}") from None
    backbone = Backbone.from_mapping(data)
    addresses, peer_addresses = {}, {}
    for entry in data.get("superpeer", []):
        for key, table in (("address", addresses), ("peer_address", peer_addresses)):
            address = str(entry.get(key, ""))
            if not address and key == "peer_address":
                continue
            host, _, port = address.rpartition(":")
            top = 65536 - (PEER_PORT_OFFSET if key == "address" and "peer_address" not in entry else 0)
            if not host or not port.isdigit() or not 0 < int(port) < top:
                raise TopologyError(f"{p}: super-peer {entry.get('id')} needs {key} = \"host:port\" "
                                    f"(a port below {top}), not {address!r}")
            table[str(entry["id"])] = address
    return Topology(backbone, addresses, peer_addresses, positions_of(p, data))


def positions_of(path: Path, data: dict) -> dict[str, tuple[float, float]]:
    """Optional ``position = [x, y]`` of each super-peer (a drawing's layout, e.g. the paper's
    figure); peers without one are placed by the drawing."""
    positions = {}
    for entry in data.get("superpeer", []):
        if "position" not in entry:
            continue
        xy = entry["position"]
        if not (isinstance(xy, list) and len(xy) == 2 and all(isinstance(v, (int, float)) for v in xy)):
            raise TopologyError(f"{path}: super-peer {entry.get('id')} needs position = [x, y] (two numbers), "
                                f"not {xy!r}")
        positions[str(entry["id"])] = (float(xy[0]), float(xy[1]))
    return positions
