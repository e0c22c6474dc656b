"""The super-peer backbone: peers with load capacities, links with bandwidths (networkx).

Built from a plain mapping (the parsed topology file), so that this module does no I/O. Routes
are shortest paths by hop count, made deterministic by breaking ties on peer ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping

import networkx as nx

DISTANCES_KEPT = 1024  # targets whose hop counts a backbone keeps


def peer_order(peer: str) -> tuple:
    """Peers in the order people count them: SP2 before SP10."""
    digits = "".join(c for c in peer if c.isdigit())
    return (peer.rstrip("0123456789"), int(digits) if digits else 0)


class TopologyError(ValueError):
    """The topology description is inconsistent; the message names what is wrong."""


@dataclass(frozen=True)
class Peer:
    id: str
    load_capacity: float = 1.0  # cores (CPU-seconds per second) the peer may spend on streams
    pindex: float = 1.0  # performance index: 2.0 = twice as slow as the calibration machine
    address: str = ""


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    bandwidth: float  # bit/s

    @property
    def key(self) -> frozenset[str]:
        return frozenset((self.a, self.b))


class Backbone:
    def __init__(self, peers: Iterable[Peer], links: Iterable[Link]) -> None:
        self.graph = nx.Graph()
        self.peers: dict[str, Peer] = {}
        for p in peers:
            if p.id in self.peers:
                raise TopologyError(f"super-peer {p.id} is defined twice")
            if p.load_capacity <= 0 or p.pindex <= 0:
                raise TopologyError(f"super-peer {p.id}: load capacity and pindex must be positive")
            self.peers[p.id] = p
            self.graph.add_node(p.id)
        self.links: dict[frozenset[str], Link] = {}
        for link in links:
            for end in (link.a, link.b):
                if end not in self.peers:
                    raise TopologyError(f"link {link.a}–{link.b} names unknown super-peer {end}")
            if link.a == link.b:
                raise TopologyError(f"link {link.a}–{link.b} connects a peer to itself")
            if link.bandwidth <= 0:
                raise TopologyError(f"link {link.a}–{link.b}: bandwidth must be positive")
            self.links[link.key] = link
            self.graph.add_edge(link.a, link.b)
        self._paths_to = lru_cache(maxsize=None)(self._compute_paths_to)
        self._distances_to = lru_cache(maxsize=DISTANCES_KEPT)(self._compute_distances_to)
        self._bandwidth: dict[frozenset[str], float] | None = None
        self._capacity: dict[str, float] | None = None

    @classmethod
    def from_mapping(cls, data: Mapping) -> "Backbone":
        """From ``{"superpeer": [{id, address, load_capacity, pindex}], "link": [{a, b,
        bandwidth}]}`` — the shape of a topology TOML file."""
        try:
            peers = [Peer(str(p["id"]), float(p.get("load_capacity", 1.0)),
                          float(p.get("pindex", 1.0)), str(p.get("address", "")))
                     for p in data.get("superpeer", [])]
            links = [Link(str(l["a"]), str(l["b"]), float(l["bandwidth"]))
                     for l in data.get("link", [])]
        except KeyError as exc:
            raise TopologyError(f"missing key {exc} in topology") from None
        if not peers:
            raise TopologyError("topology has no [[superpeer]]")
        return cls(peers, links)

    def without(self, peers: Iterable[str] = (), links: Iterable[frozenset[str]] = ()) -> "Backbone":
        """The backbone that remains when ``peers`` (and their links) and ``links`` are down:
        what a plan made around a failure may use."""
        gone, cut = set(peers), set(links)
        return Backbone([p for p in self.peers.values() if p.id not in gone],
                        [l for k, l in self.links.items() if k not in cut and not (k & gone)])

    def routing_around(self, peers: Iterable[str] = (), links: Iterable[frozenset[str]] = ()) -> "Backbone":
        """The same peers and links — streams that pass them are still priced — but routes that
        avoid ``peers`` and ``links``: where a new stream may go while they are down."""
        out = Backbone(self.peers.values(), self.links.values())
        out.graph.remove_edges_from(tuple(link) for link in links)
        out.graph.remove_nodes_from(list(peers))
        return out

    def _compute_paths_to(self, b: str) -> dict[str, list[str]]:
        """Shortest paths from ``b`` to every peer (one BFS per destination, cached)."""
        return nx.single_source_shortest_path(self.graph, b)

    def distances_to(self, b: str) -> dict[str, int]:
        """Hop counts from every peer to ``b`` (shared between callers: not to be changed; the
        last ``DISTANCES_KEPT`` targets' are kept — every registration at a peer asks for them)."""
        return self._distances_to(b)

    def _compute_distances_to(self, b: str) -> dict[str, int]:
        return {p: len(path) - 1 for p, path in self._paths_to(b).items()}

    def route(self, a: str, b: str) -> tuple[str, ...]:
        """The route from ``a`` to ``b`` by hop count (deterministic: the same BFS order every
        time, so every peer computes the same route)."""
        if a == b:
            return (a,)
        path = self._paths_to(b).get(a)
        if path is None:
            raise TopologyError(f"no route from {a} to {b}")
        return tuple(reversed(path))

    def bandwidth(self) -> dict[frozenset[str], float]:
        """b(e) per link (the backbone is immutable, so this is computed once)."""
        if self._bandwidth is None:
            self._bandwidth = {k: l.bandwidth for k, l in self.links.items()}
        return self._bandwidth

    def capacity(self) -> dict[str, float]:
        """l(v) per peer."""
        if self._capacity is None:
            self._capacity = {k: p.load_capacity for k, p in self.peers.items()}
        return self._capacity
