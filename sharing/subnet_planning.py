"""Planning subnet by subnet (issue 37): each subnet is optimised separately, and a stream
crosses subnets through gateways.

A subscription is planned by SUBSCRIBE inside its super-peer's subnet only, over a view
(``SubnetView``) that holds the subnet's peers and links and the streams flowing there, so a
registration's cost is bounded by the subnet's size, not the network's. An original stream
registered in another subnet is first brought to the subnet once, whole, as a *relay*: a copy
from the nearest peer that already carries it (its own peer, or a relay of it on the way to
another subnet) to the nearest gateway of the subnet. Inside the subnet, the relay stands for
the original: the search starts at its gateway, and every subscription of the subnet derives
its streams from it, sharing as the flat planner would.

What the hierarchy costs against the flat optimum: a relay carries the whole original, where a
flat plan could bring only a filtered stream across, and its route is chosen before the
subscriptions it serves. ``streamglobe simulate random --peers N --subnets K`` measures that gap.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping

from .backbone import Backbone, TopologyError
from .cost_model import Usage
from .network_state import NetworkState
from .planner import Plan, Planner, Strategy
from .properties import InputProperties, InputStream, Properties
from .statistics import StreamStatistics
from .stream_table import NetworkStream
from .subnets import Subnet, Subnets

RELAY = "relay:"  # the user a relay is installed for: what keeps it flowing


def is_relay(stream: NetworkStream) -> bool:
    return any(u.startswith(RELAY) for u in stream.users)


class SubnetView:
    """A ``PlanningView`` of one subnet over the whole network's state: its backbone, the parts
    of streams' routes inside it, and the stream each original enters it by."""

    def __init__(self, state: NetworkState, subnet: Subnet, backbone: Backbone,
                 entries: Mapping[InputStream, tuple[str, str]]) -> None:
        self.state, self.subnet, self.backbone = state, subnet, backbone
        self.entries = entries  # input -> (the stream it enters by, the peer where it enters)
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
        stream = self.state.streams[sid]
        route = stream.route[stream.route.index(peer):]
        return dataclasses.replace(self._clip(stream), origin=peer, route=self._inside(route))

    def groups_at(self, peer: str, input_stream: InputStream
                  ) -> dict[InputProperties, dict[str, NetworkStream]]:
        if peer not in self.subnet.peers:
            return {}
        return {props: {sid: self._clip(s) for sid, s in group.items()}
                for props, group in self.state.groups_at(peer, input_stream).items()}

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


class SubnetPlanner:
    """SUBSCRIBE per subnet, and the relays that bring originals into subnets; installs into one
    ``NetworkState`` (the simulator's), so traffic is measured over the whole network."""

    def __init__(self, state: NetworkState, subnets: Subnets) -> None:
        self.state, self.subnets = state, subnets
        self.whole = Planner(state)  # (prices the relays over the whole backbone; installs plans)
        self.entries: dict[str, dict[InputStream, tuple[str, str]]] = {sid: {} for sid in subnets.by_id}
        self.planners = {sid: Planner(SubnetView(state, subnets.by_id[sid], subnets.backbone_of(sid),
                                                 self.entries[sid]))
                         for sid in subnets.by_id}
        self.relays: list[NetworkStream] = []

    def subscribe(self, subscription: str, properties: Properties, target: str,
                  strategy: Strategy = Strategy.SHARING) -> Plan:
        subnet = self.subnets.of.get(target)
        if subnet is None:
            return self.whole.subscribe(subscription, properties, target, strategy)  # (its error)
        for inp in properties.inputs:
            if inp.input not in self.entries[subnet]:
                try:
                    self.enter(subnet, inp.input)
                except KeyError:
                    pass  # (unknown stream: SUBSCRIBE says so)
        return self.planners[subnet].subscribe(subscription, properties, target, strategy)

    def install(self, plan: Plan) -> None:
        self.whole.install(plan)

    def enter(self, subnet: str, input_stream: InputStream) -> None:
        """Bring ``input_stream``'s original into ``subnet``: a relay from the nearest peer that
        carries it whole to the nearest gateway (nothing, if it is registered there or a relay
        already passes a gateway)."""
        original = self.state.original(input_stream)
        entries = self.entries[subnet]
        if self.subnets.of[original.origin] == subnet:
            entries[input_stream] = (original.id, original.origin)
            return
        carriers: dict[str, str] = {original.origin: original.id}  # peer -> a stream carrying it whole
        for relay in self.relays:
            if relay.input == input_stream:
                for p in relay.route:
                    carriers.setdefault(p, relay.id)
        path = nearest(self.state.backbone, carriers, self.subnets.by_id[subnet].gateways)
        source, gateway = path[0], path[-1]
        if len(path) == 1:  # (a relay to another subnet passes this one's gateway)
            entries[input_stream] = (carriers[source], gateway)
            return
        parent = self.state.streams[carriers[source]]
        relay = self.whole.new_stream(parent.properties, "items", source, parent, (), tuple(path))
        self.state.install(f"{RELAY}{input_stream.stream}>{subnet}", [relay], [parent.id], Usage())
        self.relays.append(relay)
        for other in (self.subnets.of[p] for p in relay.route):  # (every subnet it passes may start from it)
            self.entries[other].setdefault(input_stream, (relay.id, next(
                p for p in relay.route if self.subnets.of[p] == other)))


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
