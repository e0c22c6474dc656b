"""SUBSCRIBE (paper, Algorithm 1) and the three strategies of one planner (DESIGN.md §5).

For each input of a new subscription, a breadth-first search starts at the peer where the
original stream is registered and follows only streams whose properties match (pruning); at
every visited peer each matching stream is a candidate for reuse, and ``generate_plan`` builds the
plan that reuses it there: the residual operators installed at the reuse peer (or, as a second
option, at the subscriber's peer) and the route to the subscriber's super-peer. Plans are ranked
by the cost model; a subscription whose best plan overloads a link or peer is rejected with the
reason.

* ``sharing``: the search above; the initial plan is data shipping, as in the paper;
* ``data-shipping``: the original stream is shipped to the subscriber's peer for every
  subscription and evaluated there;
* ``query-shipping``: the subscription is evaluated where the original stream is registered
  and only its result is shipped.

The planner reads the network only through a ``PlanningView`` (``sharing.planning_view``): the
simulator passes its ``NetworkState``, a super-peer a snapshot it fetched before planning, so
no call ever leaves the process while a plan is computed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from wxquery.operators import definitions as alg

from . import replay_plans
from .cost_model import Calibration, CostModel, Overload, Usage
from .estimates import SAMPLE_RATES, samplable, with_sample
from .matching import Match, match_properties
from .network_state import NetworkState, NetworkStream
from .planning_view import PlanningView
from .properties import InputProperties, PostProcessing, Properties
from .replay import ReplayInput
from .statistics import StreamEstimate
from .stream_table import lineage


MAX_ALTERNATIVES = 8  # the cheapest rejected alternatives a plan reports


class Strategy(str, Enum):
    SHARING = "sharing"
    DATA_SHIPPING = "data-shipping"
    QUERY_SHIPPING = "query-shipping"


def where(part: "PlanPart") -> tuple:
    """What tells two priced plans of one input apart: the stream reused, where, and the route."""
    return part.reused, part.reuse_peer, part.operator_peer, part.route


def live_at(view: PlanningView, peer: str, stream: NetworkStream) -> bool:
    """Whether a stream filled from the past carries only live items at ``peer`` from now on:
    the copy its lineage begins with (the stream the log fills) has caught up with the log, and
    its items up to there have all passed ``peer`` — what a subscription reusing it there
    takes is then what it would take from a stream that was always live."""
    chain = lineage(view.streams, stream.id)
    copy = next((s for s in chain if s.past and not s.operators and s.parent is not None
                 and s.parent in view.streams and view.streams[s.parent].original), None)
    if copy is None or copy.live_from is None:
        return False
    reached = view.reached(peer, copy.id)
    return reached is not None and reached >= copy.live_from


class RegistrationError(Exception):
    """A subscription cannot be planned at all (unknown stream or peer); says why."""


@dataclass
class PlanPart:
    """How one input of a subscription is served."""

    input_properties: InputProperties
    reused: str
    reuse_peer: str
    operator_peer: str
    operators: tuple[alg.Operator, ...]
    route: tuple[str, ...]
    new_streams: list[NetworkStream]
    result_stream: str
    usage: Usage
    cost: float = 0.0
    overloads: list[Overload] = field(default_factory=list)
    reason: str = ""
    alternatives: list["PlanPart"] = field(default_factory=list, repr=False)  # priced, not chosen

    def summary(self) -> dict:
        """What a person comparing plans needs: where, which route, what it costs, why not."""
        return {"reused_stream": self.reused, "reuse_peer": self.reuse_peer,
                "operator_peer": self.operator_peer, "route": list(self.route),
                "operators": [str(o) for o in self.operators], "cost": round(self.cost, 6),
                "admitted": not self.overloads, "overloads": [str(o) for o in self.overloads]}

    def to_json(self) -> dict:
        return {
            "input": self.input_properties.input.stream,
            "variable": "$" + self.input_properties.variable,
            "reused_stream": self.reused,
            "reuse_peer": self.reuse_peer,
            "operator_peer": self.operator_peer,
            "operators": [str(o) for o in self.operators],
            "route": list(self.route),
            "new_streams": [s.id for s in self.new_streams],
            "delivered_stream": self.result_stream,
            "match": self.reason,
            "cost": round(self.cost, 6),
            "alternatives": [a.summary() for a in sorted(self.alternatives, key=lambda a: a.cost)[:MAX_ALTERNATIVES]],
        }

    def describe(self) -> str:
        ops = ", ".join(map(str, self.operators)) or "no operators"
        name = self.input_properties.input.stream
        if self.new_streams and self.new_streams[0].past:  # (``replay_plans``: from the log)
            source = (f"its log replayed at {self.reuse_peer} on a copy of its own" if self.reused == name else
                      f"a copy at {self.reuse_peer} of {self.reused}, a replay of its log already running")
        else:
            source = f"reuse stream {self.reused} at {self.reuse_peer}"
        return f"{name}: {source}; {ops} at {self.operator_peer}; route {'→'.join(self.route)}"


@dataclass
class Plan:
    subscription: str
    target: str
    strategy: Strategy
    parts: list[PlanPart]
    post_processing: PostProcessing
    usage: Usage
    cost: float
    overloads: list[Overload]
    sample: int = 1  # admitted on a 1/sample sample of its input (``approximate``); 1: every item

    @property
    def admitted(self) -> bool:
        return not self.overloads

    @property
    def reason(self) -> str:
        if self.admitted:
            return "admitted" if self.sample == 1 else f"admitted on a 1/{self.sample} sample (approximate)"
        return "rejected: " + "; ".join(map(str, self.overloads))

    def to_json(self) -> dict:
        return {"subscription": self.subscription, "target": self.target,
                "strategy": self.strategy.value, "admitted": self.admitted,
                "reason": self.reason, "cost": round(self.cost, 6), "sample": self.sample,
                "parts": [p.to_json() for p in self.parts],
                "post_processing_at": self.target}

    def describe(self) -> str:
        past = any(s.past for p in self.parts for s in p.new_streams[:1])
        how = "from the streams' logs, then live" if past else self.strategy.value
        lines = [f"{self.subscription} at {self.target} ({how}): {self.reason}"]
        lines += ["  " + p.describe() for p in self.parts]
        lines.append(f"  post-processing (restructuring) at {self.target}")
        return "\n".join(lines)


class Planner:
    def __init__(self, state: PlanningView, cost_model: CostModel | None = None,
                 calibration: Calibration | None = None) -> None:
        self.state = state
        self.cost_model = cost_model or CostModel()
        self.calibration = calibration or Calibration.load()
        self._estimate_cache: dict[int, tuple] = {}

    # ------------------------------------------------------------------ public

    def subscribe(self, subscription: str, properties: Properties, target: str,
                  strategy: Strategy = Strategy.SHARING, approximate: bool = False) -> Plan:
        """Plan a subscription registered at ``target``; nothing is installed yet.

        ``approximate``: a subscription whose plans all overload the network is planned on a
        sample of its input instead — the finest of 1/2 … 1/64 the network can carry (OSCAR's
        multiple resolutions, chosen by the resources available), its window aggregates scaled
        at the subscriber (``Plan.sample``). Not for several inputs (a join of samples is not a
        sample of the join) nor count windows (a count window over a sample is another window)."""
        if target not in self.state.backbone.peers:
            raise RegistrationError(f"unknown super-peer {target}")
        if strategy is Strategy.SHARING:
            part_for = self._subscribe_input
        elif strategy is Strategy.DATA_SHIPPING:
            part_for = self._data_shipping
        else:
            part_for = self._query_shipping
        plan = self._plan(subscription, properties, target, strategy, part_for)
        if plan.admitted or not approximate or not samplable(properties):
            return plan
        for rate in SAMPLE_RATES:
            sampled = self._plan(subscription, with_sample(properties, rate), target, strategy, part_for)
            if sampled.admitted:
                sampled.sample = rate
                return sampled
        return plan

    def replay_plan(self, subscription: str, properties: Properties, target: str,
                    chains: Mapping[str, ReplayInput] | None = None, share: bool = False,
                    avoid: frozenset[str] = frozenset()) -> Plan:
        """A plan whose every input is a *new* copy of its original stream from the original's
        super-peer, and the input's operators — the chain of computed streams it read
        (``chains``, by variable: one stream per level, ``sharing.replay``), else its own
        operators — at ``target``, or at the origin if only that fits (``replay_plans``).

        This is how a subscription is planned again after a failure cut its route: only a
        stream nobody else reads can be replayed from the original's log (the subscriber's
        results are then recomputed and what it already has is skipped), and a copy is the
        one stream the origin can fill from its log without running operators.

        ``share`` (a subscription over the past, not a recovery): an input may instead be
        served from a replay already running, where that is cheaper (``replay_plans``; not
        from the running copies in ``avoid``)."""
        return replay_plans.replay_plan(self, subscription, properties, target, chains, share, avoid)

    def _plan(self, subscription: str, properties: Properties, target: str, strategy: Strategy,
              part_for: Callable[[InputProperties, NetworkStream, str], PlanPart]) -> Plan:
        """One part per input (``part_for``), then the plan's usage and cost."""
        parts = []
        for inp in properties.inputs:
            try:
                original = self.state.original(inp.input)
            except KeyError as exc:  # unknown, or registered with other items: say which
                raise RegistrationError(exc.args[0]) from None
            parts.append(part_for(inp, original, target))
        usage = Usage()
        for part in parts:
            usage = usage.merge(part.usage)
        usage = usage.merge(self._post_processing_usage(parts, target))
        cost, overloads = self._cost(usage)
        return Plan(subscription, target, strategy, parts, properties.post_processing, usage,
                    cost, overloads)

    def _network(self) -> NetworkState:
        """Installing in process needs the whole network; a super-peer installs in two phases."""
        if not isinstance(self.state, NetworkState):
            raise TypeError("install and unsubscribe need a NetworkState; a super-peer installs "
                            "plans with its two-phase coordinator")
        return self.state

    def install(self, plan: Plan) -> None:
        if not plan.admitted:
            raise RegistrationError(plan.reason)
        new_streams = [s for p in plan.parts for s in p.new_streams]
        reused = [p.reused for p in plan.parts]
        self._network().install(plan.subscription, new_streams, reused,
                           self._post_processing_usage(plan.parts, plan.target),
                           [(p.result_stream, plan.target) for p in plan.parts])

    def unsubscribe(self, subscription: str) -> list[str]:
        """Remove the subscription's streams nothing else uses, and cut the routes of streams
        that others still use back to the last peer where they are still needed."""
        state = self._network()
        removed = state.unsubscribe(subscription)
        for stream in list(state.streams.values()):
            if stream.original:
                continue
            needed = state.needed_peers(stream.id)
            last = max((i for i, p in enumerate(stream.route) if p in needed), default=0)
            if last < len(stream.route) - 1:
                parent = state.streams[stream.parent]  # type: ignore[index]
                state.truncate(stream.id, stream.route[:last + 1],
                                    lambda s, parent=parent: self.stream_usage(s, parent))
        return removed

    # ------------------------------------------------------------------ SUBSCRIBE

    def _subscribe_input(self, inp: InputProperties, original: NetworkStream, target: str) -> PlanPart:
        """Algorithm 1 for one input: BFS from the original's peer, pruned by matching."""
        repeated = self._repeated(inp)
        best = self._data_shipping(inp, original, target)
        best_admissible = best if not best.overloads else None
        priced = [best]  # every plan priced: the chosen one's alternatives
        queue = deque([original.origin])
        queued = {original.origin}
        matches: dict[int, Match] = {}  # by properties: equal properties, equal content
        candidates: dict[int, dict[str, NetworkStream]] = {}
        distance = self.state.backbone.distances_to(target)
        while queue:
            v = queue.popleft()
            for props, group in self._groups_at(v, inp):
                match = matches.get(id(props))
                if match is None:
                    match = matches[id(props)] = match_properties(props, inp, repeated)
                if not match.shareable:
                    continue
                reached = candidates.setdefault(id(props), {})
                for stream in group:
                    reached[stream.id] = stream
                    for n in stream.next_hops(v):
                        if n not in queued:
                            queued.add(n)
                            queue.append(n)
        for key, streams in candidates.items():
            match = matches[key]
            # Reusing a stream nearer the target costs the same operators and fewer hops, and
            # streams of equal properties carry the same content: per group, only the two
            # (stream, peer) pairs nearest the target are priced (the second in case the nearest
            # is loaded).
            # (a stream filled from the past: only where its replayed items have all passed)
            pairs = sorted(((distance[p], p, s.id) for s in streams.values()
                            for p in dict.fromkeys(s.route) if not s.past or live_at(self.state, p, s)))[:2]
            for _, u, sid in pairs:
                for candidate in self.generate_plans(streams[sid], u, target, inp, match):
                    priced.append(candidate)
                    if candidate.cost < best.cost:
                        best = candidate
                    if not candidate.overloads and (best_admissible is None
                                                    or candidate.cost < best_admissible.cost):
                        best_admissible = candidate
        chosen = best_admissible or best
        seen = {where(chosen)}  # the same plan may be priced twice (data shipping is a candidate too)
        chosen.alternatives = [c for c in priced if where(c) not in seen and not seen.add(where(c))]
        return chosen

    def _groups_at(self, peer: str, inp: InputProperties):
        """The streams at ``peer`` a subscription may reuse, grouped by properties: not those
        filled from the past (``NetworkStream.past``), whose items would reach it out of time,
        unless every replayed item has passed ``peer`` (``live_at``; the search goes on from
        there, and a stream is reused only at peers of its route where that holds too)."""
        groups = ((props, [s for s in g.values() if not s.past or live_at(self.state, peer, s)])
                  for props, g in self.state.groups_at(peer, inp.input).items())
        return [(props, streams) for props, streams in groups if streams]

    def generate_plans(self, stream: NetworkStream, v: str, target: str, inp: InputProperties,
                       match: Match) -> list[PlanPart]:
        """generatePlan: reuse ``stream`` at ``v`` — residual operators at ``v`` and the result
        routed to ``target``; or the stream routed to ``target`` and the operators run there."""
        plans = [self._at_reuse(stream, v, target, inp, match)]
        if match.residual and v != target:
            plans.append(self._at_target(stream, v, target, inp, match))
        return plans

    def _data_shipping(self, inp: InputProperties, original: NetworkStream, target: str) -> PlanPart:
        match = match_properties(original.properties, inp)
        if original.origin == target:
            return self._at_reuse(original, target, target, inp, match)
        return self._at_target(original, original.origin, target, inp, match)

    def _query_shipping(self, inp: InputProperties, original: NetworkStream, target: str) -> PlanPart:
        match = match_properties(original.properties, inp)
        return self._at_reuse(original, original.origin, target, inp, match)

    # ------------------------------------------------------------------ plan construction

    def _at_reuse(self, stream: NetworkStream, v: str, target: str, inp: InputProperties,
                  match: Match) -> PlanPart:
        route = self.state.backbone.route(v, target)
        if not match.residual and route == (v,):
            usage = Usage()  # already delivered where it is needed
            return self._finish(PlanPart(inp, stream.id, v, v, (), route, [], stream.id, usage,
                                         reason=match.reason))
        props = inp if match.residual else stream.properties
        new = self._new_stream(props, match.kind if match.residual else stream.kind, v,
                               stream, match.residual, route)
        return self._finish(PlanPart(inp, stream.id, v, v, match.residual, route, [new], new.id,
                                     new.usage, reason=match.reason))

    def _at_target(self, stream: NetworkStream, v: str, target: str, inp: InputProperties,
                   match: Match) -> PlanPart:
        route = self.state.backbone.route(v, target)
        copy = self._new_stream(stream.properties, stream.kind, v, stream, (), route)
        result = self._new_stream(inp, match.kind, target, copy, match.residual, (target,))
        usage = copy.usage.merge(result.usage)
        return self._finish(PlanPart(inp, stream.id, v, target, match.residual, route,
                                     [copy, result], result.id, usage, reason=match.reason))

    def _estimates(self, props: InputProperties) -> tuple[StreamEstimate, float]:
        """(estimate of the stream ``props`` describes, items/s its selection keeps), memoized
        per subscription input: every candidate plan of one input needs the same numbers."""
        key = id(props)
        cached = self._estimate_cache.get(key)
        if cached is None or cached[0] is not props:
            stats = self.state.statistics[props.input.stream]
            cached = (props, stats.estimate(props),
                      stats.frequency * stats.selectivity(props.selection) / props.sample)
            self._estimate_cache = {key: cached}
        return cached[1], cached[2]

    def _new_stream(self, props: InputProperties, kind: str, origin: str, parent: NetworkStream,
                    operators: tuple[alg.Operator, ...], route: tuple[str, ...]) -> NetworkStream:
        estimate = self._estimates(props)[0] if operators else parent.estimate
        stream = NetworkStream(id=self.state.new_stream_id(), input=props.input, properties=props,
                               kind=kind, origin=origin, parent=parent.id, operators=operators,  # type: ignore[arg-type]
                               route=route, estimate=StreamEstimate(estimate.freq, estimate.size))
        stream.usage = self.stream_usage(stream, parent)
        return stream

    def stream_usage(self, stream: NetworkStream, parent: NetworkStream) -> Usage:
        """What a stream takes: its operators at the origin, each fed at the rate of what reaches
        it, forwarding at every peer of its route, and its bandwidth on every link."""
        props, origin, route, estimate = stream.properties, stream.origin, stream.route, stream.estimate
        usage = Usage()
        peers = self.state.backbone.peers
        freq = parent.estimate.freq
        selected = self._estimates(props)[1] if stream.operators else freq
        for op in stream.operators:
            usage.add_peer(origin, self.calibration.operator(op) * peers[origin].pindex * freq)
            if isinstance(op, alg.Sample):
                freq = freq / op.rate
            elif isinstance(op, alg.Select):
                freq = min(freq, selected)
            elif isinstance(op, (alg.WindowAggregate, alg.CombineWindows)):
                freq = estimate.freq
        if len(route) > 1:
            for peer in route:
                usage.add_peer(peer, self.calibration.forward * peers[peer].pindex * estimate.freq)
            for a, b in zip(route, route[1:]):
                usage.add_link(a, b, estimate.bits_per_second)
        return usage

    def _post_processing_usage(self, parts: list[PlanPart], target: str) -> Usage:
        usage = Usage()
        pindex = self.state.backbone.peers[target].pindex
        for part in parts:
            delivered = next((s for s in part.new_streams if s.id == part.result_stream), None)
            freq = delivered.estimate.freq if delivered else self.state.streams[part.result_stream].estimate.freq
            usage.add_peer(target, self.calibration.post_process * pindex * freq)
        return usage

    def _finish(self, part: PlanPart) -> PlanPart:
        part.cost, part.overloads = self._cost(part.usage)
        return part

    def _cost(self, usage: Usage) -> tuple[float, list[Overload]]:
        b = self.state.backbone
        return self.cost_model.cost(usage, b.bandwidth(), self.state.link_used, b.capacity(),
                                    self.state.peer_used)

    def _repeated(self, inp: InputProperties) -> frozenset[str]:
        stats = self.state.statistics.get(inp.input.stream)
        return stats.repeated_elements if stats is not None else frozenset()
