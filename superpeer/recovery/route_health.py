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

from sharing.backbone import Backbone
from sharing.planner import Plan
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
        hops += part.route
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


def remaining_backbone(backbone: Backbone, detector: FailureDetector) -> Backbone:
    """The backbone without the peers and links known to be down: where a new plan may go.
    A peer this one cannot reach is left out too (it could not take part in installing)."""
    gone = [p for p in backbone.peers if p != detector.me
            and detector.peer_state(p) in ("down", "unreachable")]
    cut = [key for key, link in backbone.links.items() if link_down(link.a, link.b, detector)]
    return backbone.without(gone, cut)
