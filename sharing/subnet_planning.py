"""Planning subnet by subnet (issue 37): each subnet is optimised separately, and a stream
crosses subnets through gateways.

A subscription is planned by SUBSCRIBE inside its super-peer's subnet only, over a view
(``SubnetView``) that holds the subnet's peers and links and the streams flowing there, so a
registration's cost is bounded by the subnet's size, not the network's. An original stream
registered in another subnet enters the subnet whole, once, by a *relay*: a copy from the
nearest peer that already carries it whole (its own peer, or a relay of it on the way to another
subnet) to the nearest gateway of the subnet, installed with the first plan that needs it.
Inside the subnet, the relay stands for the original: the search starts at its gateway, and
every subscription of the subnet derives its streams from it, sharing as the flat planner
would. The relay is then a stream like any other: its users are the subscriptions that read
it, and it is removed along its route when the last of them ends.

The same planner serves the simulator (over its ``NetworkState``) and the super-peers (over a
``RemotePlanningView``'s snapshot, when the topology declares ``[[subnet]]``s). What the
hierarchy costs against the flat optimum: a relay carries the whole original, where a flat plan
could bring only a filtered stream across, and its route is chosen before the subscriptions it
serves. ``streamglobe simulate random --peers N --subnets K`` measures that gap.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping

from .backbone import Backbone, TopologyError
from .estimates import with_sample
from .planner import Plan, Planner, Strategy
from .planning_view import PlanningView
from .plans import PlanPart
from .properties import InputProperties, InputStream, Properties
from .statistics import StreamStatistics
from .stream_table import NetworkStream
from .subnets import Subnet, Subnets


def is_relay(stream: NetworkStream, subnets: Subnets) -> bool:
    """A copy of an original, whole, from one subnet into another."""
    return not stream.original and not stream.operators and len({subnets.of.get(p) for p in stream.route}) > 1


class SubnetView:
    """A ``PlanningView`` of one subnet over the whole network's: its backbone, the parts of
    streams' routes inside it, and the stream each original enters it by (``entries``: input ->
    (stream, the peer where it enters)); an entry may be a relay not installed yet
    (``relays``), seen as if it ran already."""

    def __init__(self, view: PlanningView, subnet: Subnet, backbone: Backbone,
                 entries: Mapping[InputStream, tuple[str, str]],
                 relays: Mapping[str, NetworkStream] | None = None) -> None:
        self.state, self.subnet, self.backbone = view, subnet, backbone
        self.entries, self.relays = entries, relays or {}
        self._clipped: dict[str, tuple[tuple[str, ...], NetworkStream]] = {}

    @property
    def link_used(self) -> Mapping[frozenset[str], float]:
        return self.state.link_used

    @property
    def peer_used(self) -> Mapping[str, float]:
        return self.state.peer_used

    @property
    def statistics(self) -> Mapping[str, StreamStatistics]:
        return self.state.statistics

    @property
    def streams(self) -> Mapping[str, NetworkStream]:
        return self.state.streams

    def original(self, input_stream: InputStream) -> NetworkStream:
        entry = self.entries.get(input_stream)
        if entry is None:
            self.state.original(input_stream)  # (unknown: its reason)
            raise KeyError(f'stream "{input_stream.stream}" has not entered subnet {self.subnet.id}')
        sid, peer = entry
        relay = self.relays.get(sid)
        if relay is not None:
            return dataclasses.replace(relay, origin=peer, route=(peer,))
        stream = self.state.streams[sid]
        route = stream.route[stream.route.index(peer):]
        return dataclasses.replace(self._clip(stream), origin=peer, route=self._inside(route))

    def groups_at(self, peer: str, input_stream: InputStream
                  ) -> dict[InputProperties, dict[str, NetworkStream]]:
        """The streams at ``peer`` as the subnet sees them, and a relay not installed yet
        where it enters (the search may then filter at the gateway, as on a relay running)."""
        if peer not in self.subnet.peers:
            return {}
        groups = {props: {sid: self._clip(s) for sid, s in group.items()}
                  for props, group in self.state.groups_at(peer, input_stream).items()}
        entry = self.entries.get(input_stream)
        if entry is not None and entry[0] in self.relays and entry[1] == peer:
            relay = self.original(input_stream)
            groups.setdefault(relay.properties, {})[relay.id] = relay
        return groups

    def new_stream_id(self) -> str:
        return self.state.new_stream_id()

    def reached(self, peer: str, stream_id: str) -> int | None:
        return self.state.reached(peer, stream_id)

    def _clip(self, stream: NetworkStream) -> NetworkStream:
        """The stream as the subnet sees it: its route's part inside the subnet (a relay passing
        through from another subnet is reusable here, from where it enters)."""
        if all(p in self.subnet.peers for p in stream.route):
            return stream
        cached = self._clipped.get(stream.id)
        if cached is not None and cached[0] == stream.route:
            return cached[1]
        route = self._inside(stream.route)
        clipped = dataclasses.replace(stream, origin=route[0] if stream.origin not in self.subnet.peers
                                      else stream.origin, route=route)
        self._clipped[stream.id] = (stream.route, clipped)
        return clipped

    def _inside(self, route: tuple[str, ...]) -> tuple[str, ...]:
        """The first run of ``route``'s peers inside the subnet."""
        start = next(i for i, p in enumerate(route) if p in self.subnet.peers)
        end = next((i for i in range(start, len(route)) if route[i] not in self.subnet.peers), len(route))
        return route[start:end]


def planner_within(view: PlanningView, subnets: Subnets | None, target: str, properties: Properties,
                   or_whole: bool = False) -> Planner:
    """The planner that offers a running subscription at ``target`` its candidate moves: inside
    its subnet onto what runs there (it makes no relay), or over the whole view without subnets.
    ``or_whole``: over the whole view too when an input does not enter the subnet by a stream
    it may move onto — the only reader of a relay, which the view sets aside as its own (a
    sample that must change under pressure; a re-optimisation keeps such a plan instead)."""
    if subnets is not None:
        inside = SubnetPlanner(view, subnets).inside(target, properties)
        if not or_whole or all(inp.input in inside.state.entries  # type: ignore[attr-defined]
                               for inp in properties.inputs):
            return inside
    return Planner(view)


def whole_copies(view: PlanningView, original: NetworkStream) -> list[NetworkStream]:
    """The original and the running streams that carry it whole (copies without operators:
    relays, and data shipping's copies) that the view offers for reuse — not those a planner
    set aside (a subscription's own, planning its move) — in a fixed order."""
    return sorted((s for s in view.streams.values()
                   if s.input == original.input and s.properties == original.properties
                   and s.kind == original.kind and not s.operators and not s.past
                   and (s.original or any(s.id in g for g in view.groups_at(s.origin, s.input).values()))),
                  key=lambda s: (not s.original, s.id))


class SubnetPlanner:
    """SUBSCRIBE inside the subscriber's subnet, over the whole network's ``view``.

    An input registered in another subnet enters by a stream already carrying it whole into the
    subnet, if one does; else by a new **relay** from the nearest peer carrying it whole to the
    nearest gateway, installed with the plan as the first of its part's new streams. The relay
    is then a stream like any other: later subscriptions of the subnet derive from it, and it
    is removed along its route when the last of them ends. The plan is priced over the whole
    view (the relay's links included), so admission sees everything it takes."""

    def __init__(self, view: PlanningView, subnets: Subnets) -> None:
        self.view, self.subnets = view, subnets
        self.whole = Planner(view)

    def subscribe(self, subscription: str, properties: Properties, target: str,
                  strategy: Strategy = Strategy.SHARING, approximate: bool = False, coarsest: int = 64) -> Plan:
        sid = self.subnets.of.get(target)
        if strategy is not Strategy.SHARING or sid is None:
            return self.whole.subscribe(subscription, properties, target, strategy, approximate, coarsest)
        relays: dict[str, NetworkStream] = {}
        inside = self.inside(target, properties, relays)
        plan = inside.subscribe(subscription, properties, target, strategy, approximate, coarsest)
        if len([p for p in plan.parts if p.reused in relays]) > len(relays):
            # (a join of a stream with itself, both inputs from a new relay: one plan cannot
            # install a stream twice — planned over the whole network, as without subnets)
            return self.whole.subscribe(subscription, properties, target, strategy, approximate, coarsest)
        parts = iter([self._relayed(p, relays, sid) for p in plan.parts])  # (one per input, in order)
        planned = properties if plan.sample == 1 else with_sample(properties, plan.sample)
        priced = self.whole.plan(subscription, planned, target, strategy,
                                 lambda inp, original, t: self.whole.finish(next(parts)))
        priced.sample = plan.sample
        return priced

    def inside(self, target: str, properties: Properties,
               relays: dict[str, NetworkStream] | None = None) -> Planner:
        """SUBSCRIBE's planner over ``target``'s subnet: each input enters by a stream already
        carrying it in, else by a new relay, added to ``relays`` (without ``relays``, none is
        made: re-optimisation moves a running subscription onto what runs). No widening: a
        stream that enters from outside is seen clipped, and could not be widened whole."""
        subnet = self.subnets.by_id[self.subnets.of[target]]
        entries: dict[InputStream, tuple[str, str]] = {}
        for inp in properties.inputs:
            if inp.input in entries:
                continue  # (a stream joined with itself enters once)
            try:
                original = self.view.original(inp.input)
            except KeyError:
                continue  # (unknown: SUBSCRIBE says so)
            copies = whole_copies(self.view, original)
            entry = self.entry(subnet, original, copies)
            if entry is None and relays is not None:
                relay = self.relay(subnet, original, copies)
                relays[relay.id] = relay
                entry = (relay.id, relay.route[-1])
            if entry is not None:
                entries[inp.input] = entry
        return Planner(SubnetView(self.view, subnet, self._backbone(subnet), entries, relays))

    def _backbone(self, subnet: Subnet) -> Backbone:
        """The subnet's peers and links, routed around what the view's backbone routes around
        (a re-optimisation while peers or links are down)."""
        inside, whole = self.subnets.backbone_of(subnet.id), self.view.backbone
        if whole is self.subnets.backbone:
            return inside
        down = [p for p in subnet.peers if p not in whole.graph]
        cut = [k for k in inside.links if not whole.graph.has_edge(*k)]
        return inside.routing_around(down, cut) if down or cut else inside

    def _relayed(self, part: PlanPart, relays: Mapping[str, NetworkStream], subnet: str) -> PlanPart:
        """``part`` and the alternatives it priced, each with the relay it starts from (if not
        installed yet), priced over the whole view."""
        alternatives = [self.whole.finish(_with_relay(a, relays, subnet)) for a in part.alternatives]
        return dataclasses.replace(_with_relay(part, relays, subnet), alternatives=alternatives)

    def install(self, plan: Plan) -> None:
        """Into the view itself (the simulator's ``NetworkState``; a super-peer installs in two phases)."""
        self.whole.install(plan)

    def replay_plan(self, *args, **kwargs) -> Plan:
        """A replay copies each original from its own peer (``Planner.replay_plan``): across
        subnets, as a recovery does."""
        return self.whole.replay_plan(*args, **kwargs)

    def entry(self, subnet: Subnet, original: NetworkStream,
              copies: list[NetworkStream] | None = None) -> tuple[str, str] | None:
        """(a stream carrying ``original`` whole into ``subnet``, the peer where it enters).
        ``copies``: its ``whole_copies``, if the caller has them."""
        for s in whole_copies(self.view, original) if copies is None else copies:
            peer = next((p for p in s.route if p in subnet.peers), None)
            if peer is not None:
                return s.id, peer
        return None

    def relay(self, subnet: Subnet, original: NetworkStream,
              copies: list[NetworkStream] | None = None) -> NetworkStream:
        """A new relay of ``original`` from the nearest peer carrying it whole (of ``copies``,
        its ``whole_copies``) to the nearest gateway of ``subnet``."""
        carriers: dict[str, NetworkStream] = {}
        for s in whole_copies(self.view, original) if copies is None else copies:
            for p in s.route:
                carriers.setdefault(p, s)
        path = nearest(self.view.backbone, carriers, subnet.gateways)
        parent = carriers[path[0]]
        return self.whole.new_stream(parent.properties, parent.kind, path[0], parent, (), tuple(path))


def _with_relay(part: PlanPart, relays: Mapping[str, NetworkStream], subnet: str) -> PlanPart:
    """``part`` with the relay it starts from (if it is one not installed yet) as its first
    new stream: reused at the relay's parent, its route the relay's and then the part's."""
    relay = relays.get(part.reused)
    if relay is None:
        return part
    return dataclasses.replace(part, reused=relay.parent or "", reuse_peer=relay.origin,
                               route=relay.route + part.route[1:], new_streams=[relay, *part.new_streams],
                               result_stream=part.result_stream if part.new_streams else relay.id,
                               usage=relay.usage.merge(part.usage), relayed=subnet)


def nearest(backbone: Backbone, sources: Mapping[str, object], targets: frozenset[str]) -> list[str]:
    """The shortest path (by hops) from any of ``sources`` to any of ``targets``: a
    breadth-first search from all sources at once, in a fixed order."""
    parent: dict[str, str | None] = {}
    queue: deque[str] = deque()
    for s in sources:
        parent[s] = None
        queue.append(s)
    while queue:
        v = queue.popleft()
        if v in targets:
            path = [v]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])  # type: ignore[arg-type]
            return path[::-1]
        for n in backbone.graph.neighbors(v):
            if n not in parent:
                parent[n] = v
                queue.append(n)
    raise TopologyError(f"no route to a gateway of {sorted(targets)[:3]}")
