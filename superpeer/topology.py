"""Topology files (shipped in ``thinpeer/data/topologies/``, or any file of that form):
super-peers with addresses and capacities, links with bandwidths. Read here (I/O), checked
strictly (``topology_schema``: unknown keys, wrong types, values out of range are errors with
the file's line), turned into a ``sharing.backbone.Backbone``.

A super-peer has two addresses (``superpeer.security.tls``): ``address``, where thin peers reach it,
and ``peer_address``, where the other super-peers do (mutual TLS). Without ``peer_address`` it
is the same host, port ``PEER_PORT_OFFSET`` above ``address``'s."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from sharing.backbone import Backbone, TopologyError
from sharing.subnets import Subnets

from .topology_schema import PEER_PORT_OFFSET, check_topology


@dataclass(frozen=True)
class Topology:
    backbone: Backbone
    addresses: dict[str, str]  # for thin peers
    peer_addresses: dict[str, str] = field(default_factory=dict)  # for the other super-peers
    positions: dict[str, tuple[float, float]] = field(default_factory=dict)  # where a drawing puts them
    settings: dict[str, dict] = field(default_factory=dict)  # a super-peer's own serve settings
    subnets: Subnets | None = None  # ``[[subnet]]``s: each planned on its own (``sharing.subnet_planning``)

    def to_mapping(self) -> dict:
        """The backbone in a topology file's shape (``Backbone.from_mapping`` reads it back):
        what a tool that reached one super-peer needs to find and draw all the others."""
        return {"superpeer": [{"id": p.id, "address": self.addresses.get(p.id, ""),
                               "load_capacity": p.load_capacity, "pindex": p.pindex,
                               **({"position": list(self.positions[p.id])} if p.id in self.positions else {})}
                              for p in self.backbone.peers.values()],
                "link": [{"a": link.a, "b": link.b, "bandwidth": link.bandwidth}
                         for link in self.backbone.links.values()],
                **({"subnet": [{"id": s.id, "peers": sorted(s.peers), "gateways": sorted(s.gateways)}
                               for s in self.subnets.by_id.values()]} if self.subnets is not None else {})}

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
    """The topology file at ``path``, checked strictly (``topology_schema``): every fault is a
    ``TopologyError`` naming the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"{p}: no such topology file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{p}: not valid TOML: {exc}") from None
    checked = check_topology(p, text, data)
    backbone = Backbone.from_mapping(checked.mapping)
    try:
        subnets = Subnets.from_mapping(backbone, checked.subnets) if checked.subnets else None
    except TopologyError as exc:
        raise TopologyError(f"{p}: [[subnet]]: {exc}") from None
    return Topology(backbone, checked.addresses, checked.peer_addresses, checked.positions, checked.settings,
                    subnets)
