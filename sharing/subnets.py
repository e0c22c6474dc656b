"""Subnets of the backbone and their gateway super-peers (issue 37; the StreamGlobe paper's
Section 6: "a hierarchical network organization with several interconnected subnets where each
subnet is optimized separately").

A subnet is a connected set of super-peers; its gateways are the peers through which streams
enter and leave it. Every super-peer is in exactly one subnet, and a link between two subnets
joins a gateway of each: so a stream that comes from another subnet enters at a gateway, and
planning inside a subnet needs to know only that subnet's peers and links
(``sharing.subnet_planning``). A topology file declares them as

    [[subnet]]
    id = "east"
    peers = ["SP0", "SP1", "SP2"]
    gateways = ["SP2"]          # optional: by default, every peer with a link to another subnet

and ``partition`` cuts a backbone into ``k`` subnets for the random simulations.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import networkx as nx

from .backbone import Backbone, TopologyError, peer_order


@dataclass(frozen=True)
class Subnet:
    id: str
    peers: frozenset[str]
    gateways: frozenset[str]


class Subnets:
    """A backbone's subnets, checked against it: each peer in one subnet, each subnet connected,
    every link between subnets ending at gateways."""

    def __init__(self, backbone: Backbone, subnets: Iterable[Subnet]) -> None:
        self.backbone = backbone
        self.by_id: dict[str, Subnet] = {}
        self.of: dict[str, str] = {}  # peer -> its subnet's id
        for subnet in subnets:
            if subnet.id in self.by_id:
                raise TopologyError(f"subnet {subnet.id} is defined twice")
            if not subnet.peers:
                raise TopologyError(f"subnet {subnet.id} has no super-peers")
            for peer in sorted(subnet.peers):
                if peer not in backbone.peers:
                    raise TopologyError(f"subnet {subnet.id} names unknown super-peer {peer}")
                if peer in self.of:
                    raise TopologyError(f"super-peer {peer} is in subnets {self.of[peer]} and {subnet.id}")
                self.of[peer] = subnet.id
            stray = sorted(subnet.gateways - subnet.peers)
            if stray:
                raise TopologyError(f"subnet {subnet.id}: gateway {stray[0]} is not one of its super-peers")
            if not nx.is_connected(backbone.graph.subgraph(subnet.peers)):
                raise TopologyError(f"subnet {subnet.id} is not connected by its own links")
            self.by_id[subnet.id] = subnet
        missing = sorted(set(backbone.peers) - self.of.keys(), key=peer_order)
        if missing:
            raise TopologyError(f"super-peer {missing[0]} is in no subnet"
                                + (f" (nor are {len(missing) - 1} others)" if len(missing) > 1 else ""))
        for key in backbone.links:
            a, b = sorted(key)
            if self.of[a] == self.of[b]:
                continue
            for end, other in ((a, b), (b, a)):
                if end not in self.by_id[self.of[end]].gateways:
                    raise TopologyError(f"link {a}–{b} joins subnets {self.of[a]} and {self.of[b]}, but "
                                        f"{end} is not a gateway of {self.of[end]}")

    @classmethod
    def from_mapping(cls, backbone: Backbone, entries: Iterable[Mapping]) -> Subnets:
        """From the topology file's ``[[subnet]]`` tables (``id``, ``peers``, optional
        ``gateways``: by default every peer of it with a link to another subnet)."""
        declared = []
        for entry in entries:
            try:
                sid, peers = str(entry["id"]), frozenset(map(str, entry["peers"]))
            except KeyError as exc:
                raise TopologyError(f"[[subnet]] misses key {exc}") from None
            gateways = entry.get("gateways")
            declared.append((sid, peers, None if gateways is None else frozenset(map(str, gateways))))
        of = {p: sid for sid, peers, _ in declared for p in peers}
        return cls(backbone, [Subnet(sid, peers, gateways if gateways is not None else
                                     border(backbone, peers, of))
                              for sid, peers, gateways in declared])

    def backbone_of(self, subnet: str) -> Backbone:
        """The subnet's own peers and links: all that planning inside it reads."""
        return self._backbones[subnet]

    @cached_property
    def _backbones(self) -> dict[str, Backbone]:
        return {sid: Backbone([self.backbone.peers[p] for p in s.peers],
                              [link for key, link in self.backbone.links.items() if key <= s.peers])
                for sid, s in self.by_id.items()}

    def summary(self) -> dict:
        sizes = sorted(len(s.peers) for s in self.by_id.values())
        return {"subnets": len(sizes), "smallest": sizes[0], "largest": sizes[-1],
                "gateways": sum(len(s.gateways) for s in self.by_id.values()),
                "links_between_subnets": sum(1 for k in self.backbone.links
                                             if len({self.of[p] for p in k}) > 1)}


def border(backbone: Backbone, peers: frozenset[str], of: Mapping[str, str]) -> frozenset[str]:
    """The peers of ``peers`` with a link to a peer of another subnet."""
    return frozenset(p for p in peers if p in backbone.peers  # (an unknown one: ``Subnets`` says so)
                     and any(of.get(n) != of.get(p) for n in backbone.graph.neighbors(p)))


def partition(backbone: Backbone, k: int, seed: int) -> Subnets:
    """``k`` connected subnets of about equal size, grown from ``k`` seeded centres: the smallest
    subnet so far takes the next peer of its border, breadth first (a peer joins the subnet of
    a neighbour, so every subnet is connected); the gateways are the peers with a link to
    another subnet."""
    peers = sorted(backbone.peers, key=peer_order)
    if not 1 <= k <= len(peers):
        raise TopologyError(f"cannot cut {len(peers)} super-peers into {k} subnets")
    centres = random.Random(seed).sample(peers, k)
    of: dict[str, str] = {}
    border_of: dict[str, deque[str]] = {}
    heap: list[tuple[int, int, str]] = []
    for i, centre in enumerate(centres):
        sid = f"N{i}"
        of[centre] = sid
        border_of[sid] = deque(backbone.graph.neighbors(centre))
        heap.append((1, i, sid))
    heapq.heapify(heap)
    while heap:
        size, i, sid = heapq.heappop(heap)
        queue = border_of[sid]
        while queue and queue[0] in of:
            queue.popleft()
        if not queue:
            continue  # (walled in by the others: it stays this size)
        v = queue.popleft()
        of[v] = sid
        queue.extend(n for n in backbone.graph.neighbors(v) if n not in of)
        heapq.heappush(heap, (size + 1, i, sid))
    unreached = [p for p in peers if p not in of]
    if unreached:
        raise TopologyError(f"super-peer {unreached[0]} is not connected to the others")
    members: dict[str, set[str]] = {}
    for p, sid in of.items():
        members.setdefault(sid, set()).add(p)
    return Subnets(backbone, [Subnet(sid, frozenset(ps), border(backbone, frozenset(ps), of))
                              for sid, ps in sorted(members.items(), key=lambda kv: peer_order(kv[0]))])
