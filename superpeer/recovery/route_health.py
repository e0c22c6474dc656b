"""Whether a subscription's items can reach it: the super-peers and links they pass, checked
against the failure detector.

At installation the subscription's registering super-peer records, per input, the path its items
take: along each ancestor of the reused stream from the original's origin (each up to where its
child is computed), then the plan's own route to this peer. While a peer on that path is down,
or a link of it is down (seen from here, or — between two other peers — the sender no longer
hears the receiver), the subscription is **degraded**, with the reason and since when; it is
healthy again once the path is whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

from sharing.backbone import Backbone
from sharing.planner import Plan
from sharing.planning_view import PlanningSnapshot
from sharing.stream_table import NetworkStream

from .failure_detector import FailureDetector

Path = tuple[str, ...]


def data_paths(plan: Plan, lineage: Callable[[str], list[NetworkStream]]) -> tuple[Path, ...]:
    """Per plan part, the peers its items pass in order, the original's origin first."""
    paths = []
    for part in plan.parts:
        chain = list(reversed(lineage(part.reused)))  # the original first
        hops: list[str] = []
        for k, stream in enumerate(chain):
            end = chain[k + 1].origin if k + 1 < len(chain) else part.reuse_peer
            route = list(stream.route)
            hops += route[:route.index(end) + 1] if end in route else route
        # (a part widening its stream in place keeps that stream's whole route, from its
        # origin: its items join the path where the part takes the stream)
        route = part.route[part.route.index(part.reuse_peer):] if part.reuse_peer in part.route else part.route
        hops += route
        paths.append(tuple(p for i, p in enumerate(hops) if i == 0 or hops[i - 1] != p))
    return tuple(paths)


def broken(paths: Sequence[Path], detector: FailureDetector) -> str:
    """Why the items cannot pass now ("" when every peer and link of the paths is up)."""
    me = detector.me
    for path in paths:
        for peer in path:
            if peer != me and detector.peer_state(peer) == "down":
                return f"{peer} on its route is down ({'→'.join(path)})"
        for a, b in zip(path, path[1:]):
            why = link_down(a, b, detector)
            if why:
                return f"the link {a}–{b} on its route is {why} ({'→'.join(path)})"
    return ""


def link_down(a: str, b: str, detector: FailureDetector) -> str:
    """Why the link a–b is down as seen from here ("" if it is not known to be): one end is
    this peer and the other does not answer, or the sender no longer hears the receiver."""
    me = detector.me
    if me in (a, b):
        return "down" if detector.link_down(b if a == me else a) else ""
    for x, y in ((a, b), (b, a)):
        sender = detector.peers.get(x)
        if (sender is not None and sender.up and sender.hears  # (empty: not reported yet)
                and detector.peer_state(y) == "up" and y not in sender.hears):
            return f"cut: {x} does not hear {y}"
    return ""


def restarted(incarnations: dict[str, str], detector: FailureDetector) -> str:
    """Why the streams of a path are gone: a peer on it answers as a new process."""
    for peer, known in sorted(incarnations.items()):
        now = detector.incarnation(peer)
        if known and now and now != known:
            return f"{peer} on its route restarted (the streams it held are gone)"
    return ""


def down_parts(backbone: Backbone, detector: FailureDetector) -> tuple[list[str], list[frozenset[str]]]:
    """(The peers, the links) known to be down. A peer this one cannot reach counts as down
    (it could not take part in installing)."""
    gone = [p for p in backbone.peers if p != detector.me
            and detector.peer_state(p) in ("down", "unreachable")]
    cut = [key for key, link in backbone.links.items() if link_down(link.a, link.b, detector)]
    return gone, cut


def remaining_backbone(backbone: Backbone, detector: FailureDetector) -> Backbone:
    """The backbone without the peers and links known to be down: where a new plan may go."""
    return backbone.without(*down_parts(backbone, detector))


@lru_cache(maxsize=8)
def routed_around(backbone: Backbone, gone: tuple[str, ...], cut: tuple[frozenset[str], ...]) -> Backbone:
    """``backbone.routing_around``, made once per failure seen: every subscription of a round
    plans over it, and its routes are cached in it."""
    return backbone.routing_around(gone, cut)


def around_failures(snapshot: PlanningSnapshot, detector: FailureDetector) -> dict[str, NetworkStream]:
    """Make ``snapshot`` a view of the network as it is now: its backbone routes around what is
    down (as a failure's re-plan's do; what streams take there is still priced), and each
    stream is reusable only on the part of its route that its items still reach (its parent
    delivers at its origin, and no peer or link before is down); the streams they reach
    nowhere are returned, for the caller to take out. A re-optimisation round planned over the
    whole routes chose plans that reuse a stream behind a dead peer — listed still by the
    tables of the peers it had passed — found the plan broken, and kept the running one for as
    long as the peer stayed down
    (``benchmarks/sharing_over_time.py``'s crash window)."""
    gone, cut = down_parts(snapshot.backbone, detector)
    if not gone and not cut:
        return {}
    snapshot.backbone = routed_around(snapshot.backbone, tuple(gone), tuple(cut))
    down, cut_links = set(gone), set(cut)
    reach: dict[str, tuple[str, ...]] = {}

    def reached(s: NetworkStream) -> tuple[str, ...]:
        if s.id not in reach:
            parent = snapshot.streams.get(s.parent or "")
            if parent is not None and s.origin not in reached(parent):
                reach[s.id] = ()
            else:
                n = 0
                while n < len(s.route) and s.route[n] not in down and (
                        n == 0 or frozenset(s.route[n - 1:n + 1]) not in cut_links):
                    n += 1
                reach[s.id] = s.route[:n]
        return reach[s.id]

    dead, clipped = {}, {}
    for s in list(snapshot.streams.values()):
        route = reached(s)
        if not route:
            dead[s.id] = s
        elif route != s.route:
            clipped[s.id] = snapshot.streams[s.id] = replace(s, route=route)
    for key, found in snapshot.tables.items():
        peer = key[0]
        snapshot.tables[key] = [clipped.get(s.id, s) for s in found
                                if s.id not in clipped or peer in clipped[s.id].route]
    return dead
