"""Topology files (shipped in ``thinpeer/data/topologies/``, or any file of that form):
super-peers with addresses and capacities, links with bandwidths. Parsed here (I/O), turned into a ``sharing.backbone.Backbone``."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from sharing.backbone import Backbone, TopologyError


@dataclass(frozen=True)
class Topology:
    backbone: Backbone
    addresses: dict[str, str]

    def address(self, peer: str) -> str:
        try:
            return self.addresses[peer]
        except KeyError:
            raise TopologyError(f"unknown super-peer {peer}") from None


def load_topology(path: str | Path) -> Topology:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TopologyError(f"{p}: no such topology file") from None
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{p}: not valid TOML: {exc}") from None
    backbone = Backbone.from_mapping(data)
    addresses = {}
    for entry in data.get("superpeer", []):
        address = str(entry.get("address", ""))
        if ":" not in address:
            raise TopologyError(f"{p}: super-peer {entry.get('id')} needs address = \"host:port\"")
        addresses[str(entry["id"])] = address
    return Topology(backbone, addresses)
