"""The reference of ``sharing_over_time``: what a FRESH network would carry per published item,
computed in process with the daemons' own planner, instead of measured on a fresh network of
daemons after every event.

Why in process: ``sharing.planner.Planner`` over a ``NetworkState`` is the code every super-peer
plans with, and pushing the photons actually published through the streams of its plans with
the daemons' operators (``run_operators``) gives, per link, the UTF-8 bytes of every item on
every hop — what a daemon's link counter counts (``superpeer.data.forwarding``: the sum of the
items' UTF-8 sizes). A fresh network of 16 daemons per event would add ~9 s of start-up and 16
more processes competing for the two cores each time, for the same figure. The one thing the
model cannot know is whether the daemons' byte counts match it: ``sharing_over_time`` checks
that by replaying the frozen phase's registrations in their order here and setting the result
beside the frozen network's measured bytes (``frozen model`` in its output).

Planning statistics come from the first published photons, as the source super-peer's do.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from lxml import etree

from sharing.analysis import analyze
from sharing.backbone import Backbone
from sharing.matching import raw_properties
from sharing.network_state import NetworkState
from sharing.planner import Planner, Strategy
from sharing.properties import InputStream, Properties
from sharing.statistics import StreamStatistics
from wxquery.operators.runner import run_operators

from sharing_workload import BY_NAME, SOURCE_PEER, STREAM, Busiest, widest_first

Op = tuple[str, str]  # ("subscribe" | "unsubscribe", selection name)


def link_name(a: str, b: str) -> str:
    """A backbone link, the same whichever way it is named (``SP2–SP10``, by number)."""
    x, y = sorted((a, b), key=lambda p: int(p[2:]))
    return f"{x}–{y}"


@dataclass
class ModelResult:
    """Bytes a set of plans carries over the backbone for ``items`` published photons."""

    items: int
    link_bytes: dict[str, int] = field(default_factory=dict)
    plans: dict[str, str] = field(default_factory=dict)  # selection -> "reuse … at …; route …"
    rejected: list[str] = field(default_factory=list)

    @property
    def bytes_per_item(self) -> float:
        return sum(self.link_bytes.values()) / self.items if self.items else float("nan")

    def peer_bytes(self, peer: str) -> int:
        """Bytes on the links of ``peer``: what passes through it, or starts or ends there."""
        return sum(b for link, b in self.link_bytes.items() if peer in link.split("–"))


class SharingModel:
    """The planner and operators in process over ``backbone``, the ``photons`` stream at the
    source corner with statistics from ``sample`` (published photons' texts)."""

    def __init__(self, backbone: Backbone, sample: Sequence[str], rate: float) -> None:
        self.backbone = backbone
        self.statistics = StreamStatistics(frequency=rate)
        for text in sample:
            self.statistics.observe(etree.fromstring(text.encode()))
        self._properties: dict[str, Properties] = {}

    def properties(self, name: str) -> Properties:
        if name not in self._properties:
            self._properties[name] = analyze(BY_NAME[name].text()).properties
        return self._properties[name]

    def run(self, ops: Iterable[Op], items: Sequence[str], strategy: Strategy = Strategy.SHARING,
            down_peers: Iterable[str] = (), cut_links: Iterable[tuple[str, str]] = ()) -> ModelResult:
        """Register and remove selections in the order of ``ops`` on a fresh network (without
        ``down_peers`` and ``cut_links``; a selection registered at a peer that is down is
        left out), then push ``items`` through what is installed and count the bytes."""
        down = set(down_peers)
        backbone = self.backbone.without(down, [frozenset(link) for link in cut_links])
        state = NetworkState(backbone)
        source = InputStream(STREAM, ("photons", "photon"))
        state.register_original(source, SOURCE_PEER, raw_properties(source), copy.deepcopy(self.statistics))
        planner = Planner(state)
        result = ModelResult(len(items))
        installed: set[str] = set()
        for op, name in ops:
            selection = BY_NAME[name]
            if op == "unsubscribe":
                if name in installed:
                    planner.unsubscribe(name)
                    installed.discard(name)
                    result.plans.pop(name, None)
                continue
            if selection.peer in down:
                continue
            plan = planner.subscribe(name, self.properties(name), selection.peer, strategy)
            if not plan.admitted:
                result.rejected.append(f"{name}: {plan.reason}")
                continue
            planner.install(plan)
            installed.add(name)
            result.plans[name] = "; ".join(
                f"{p.reused} at {p.reuse_peer}, ops at {p.operator_peer}, route {'→'.join(p.route)}"
                for p in plan.parts)
        result.link_bytes = push(state, items)
        return result

    def reference(self, live: Sequence[str], items: Sequence[str], width: Callable[[str], float],
                  strategy: Strategy = Strategy.SHARING, down_peers: Iterable[str] = (),
                  cut_links: Iterable[tuple[str, str]] = ()) -> ModelResult:
        """The live selections registered on a fresh network in the best order: widest first."""
        order = widest_first(live, width)
        return self.run([("subscribe", n) for n in order], items, strategy, down_peers, cut_links)


def push(state: NetworkState, items: Sequence[str]) -> dict[str, int]:
    """Every installed stream computed once from its parent (as the network does: parents are
    installed first), and its items' UTF-8 bytes counted on every hop of its route."""
    content: dict[str, list[str]] = {}
    out: dict[str, int] = {}
    for sid, stream in state.streams.items():
        if stream.original:
            content[sid] = list(items)
            continue
        parent = content[stream.parent]  # type: ignore[index]
        values = parent
        if stream.operators:
            values = run_operators(stream.operators, state.streams[stream.parent].kind, parent)  # type: ignore[index]
        content[sid] = values
        if len(stream.route) > 1:
            total = sum(len(v.encode()) for v in values)
            for a, b in zip(stream.route, stream.route[1:]):
                out[link_name(a, b)] = out.get(link_name(a, b), 0) + total
    return out


def busiest(model: SharingModel, items: Sequence[str], width: Callable[[str], float]) -> Busiest:
    """The intermediate peer (not the source, not a live selection's subscriber) and the link
    that carry most bytes when the live selections are planned best: the crash and the cut
    that hurt sharing most."""

    def choose(live: tuple[str, ...]) -> tuple[str, tuple[str, str]]:
        result = model.reference(live, items, width)
        targets = {BY_NAME[n].peer for n in live} | {SOURCE_PEER}
        peers = [p for p in model.backbone.peers if p not in targets]
        peer = max(peers, key=lambda p: (result.peer_bytes(p), p))
        link = max(result.link_bytes, key=lambda k: (result.link_bytes[k], k))
        a, b = link.split("–")
        return peer, (a, b)

    return choose
