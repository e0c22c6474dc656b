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

import heapq
import weakref
from collections import deque
from collections.abc import Mapping

from . import replay_plans
from .cost_model import Usage
from .estimates import SAMPLE_RATES, samplable, with_sample
from .join_planning import place_join
from .matching import UNKNOWN, Match, Repetition, match_properties
from .network_state import NetworkState, NetworkStream
from .plans import Plan, PlanBuilder, PlanPart, RegistrationError, Strategy, live_at, where
from .properties import InputProperties, Properties
from .replay import ReplayInput
from .widening import hull

# A subscription's input properties, one object per value: ``match_properties`` remembers its
# answers by (stream, subscription) and compares a remembered key field by field unless it is
# the same object — properties asked for again by later subscriptions (templates) are that object.
_INPUTS: weakref.WeakValueDictionary[InputProperties, InputProperties] = weakref.WeakValueDictionary()

__all__ = ["Plan", "PlanPart", "Planner", "RegistrationError", "Strategy", "live_at", "where"]


class Planner(PlanBuilder):
    # ------------------------------------------------------------------ public

    def subscribe(self, subscription: str, properties: Properties, target: str,
                  strategy: Strategy = Strategy.SHARING, approximate: bool = False, coarsest: int = 64) -> Plan:
        """Plan a subscription registered at ``target``; nothing is installed yet.

        ``approximate``: a subscription whose plans all overload the network is planned on a
        sample of its input instead — the finest of 1/2 … 1/64 the network can carry (OSCAR's
        multiple resolutions, chosen by the resources available), its window aggregates scaled
        at the subscriber (``Plan.sample``). Not for several inputs (a join of samples is not a
        sample of the join) nor count windows (a count window over a sample is another window).
        ``coarsest``: no sample coarser than 1/coarsest (the subscription's bound, ``--min-rate``)."""
        if target not in self.state.backbone.peers:
            raise RegistrationError(f"unknown super-peer {target}")
        if strategy is Strategy.SHARING:
            part_for = self._subscribe_input
        elif strategy is Strategy.DATA_SHIPPING:
            part_for = self._data_shipping
        else:
            part_for = self._query_shipping
        plan = self.plan(subscription, properties, target, strategy, part_for)
        if strategy is Strategy.SHARING and len(properties.inputs) == 2:  # (a join: where it runs)
            plan = place_join(self, self.best_part, subscription, properties, target, plan)
        if plan.admitted or not approximate or not samplable(properties):
            return plan
        for rate in (r for r in SAMPLE_RATES if r <= coarsest):
            sampled = self.plan(subscription, with_sample(properties, rate), target, strategy, part_for)
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
        plan = replay_plans.replay_plan(self, subscription, properties, target, chains, share, avoid)
        if len(properties.inputs) == 2:  # (``join_planning``: not from the past, nor on a re-plan)
            plan.join = (f"join at {target} (the subscriber's super-peer): a join over the streams' logs "
                         "is not placed in the network")
        return plan

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
        delivered = [p for p in plan.parts if not p.feeds_join]  # (a join's inputs: taken where it runs)
        self._network().install(plan.subscription, new_streams, reused,
                           self.post_processing_usage(delivered, plan.target),
                           [(p.result_stream, p.route[-1] if p.feeds_join else plan.target) for p in plan.parts])

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

    def query_shipping_part(self, inp: InputProperties, original: NetworkStream, target: str) -> PlanPart:
        """The input's operators at its original's peer, the result routed to ``target``."""
        return self._query_shipping(inp, original, target)

    def best_part(self, inp: InputProperties, target: str) -> PlanPart:
        """SUBSCRIBE for one input alone (re-optimisation's look-ahead)."""
        return self._subscribe_input(inp, self.state.original(inp.input), target)

    def _subscribe_input(self, inp: InputProperties, original: NetworkStream, target: str) -> PlanPart:
        """Algorithm 1 for one input: BFS from the original's peer, pruned by matching."""
        inp = _INPUTS.setdefault(inp, inp)  # (so that remembered matches find it by identity)
        repetition = self._repetition(inp)
        best = self._data_shipping(inp, original, target)
        best_admissible = best if not best.overloads else None
        priced = [best]  # every plan priced: the chosen one's alternatives
        queue = deque([original.origin])
        queued = {original.origin}
        # per group (by properties: equal properties, equal content), its match and, if it
        # serves the input, the streams of it reached
        seen: dict[int, tuple[Match, dict[str, NetworkStream] | None]] = {}
        near: dict[str, NetworkStream] = {}  # streams that do not serve it: widened, perhaps
        distance = self.state.backbone.distances_to(target)
        tails: dict[str, int] = {}  # live stream -> where in its route the part already queued begins
        while queue:
            v = queue.popleft()
            # (streams filled from the past only where their replayed items have all passed:
            # ``usable``; a group is matched once, and its streams looked at only if it matches)
            for props, group in self.state.groups_at(v, inp.input).items():
                known = seen.get(id(props))
                if known is None:
                    match = match_properties(props, inp, repetition)
                    known = seen[id(props)] = (match, {} if match.shareable else None)
                reached = known[1]
                if reached is None:
                    if self.widening:
                        near.update((s.id, s) for s in group.values() if self._usable(v, s))
                    continue
                for stream in group.values():
                    if stream.past:  # (hop by hop: it is usable only where its past has passed)
                        if not self._usable(v, stream):
                            continue
                        reached[stream.id] = stream
                        hops = stream.next_hops(v)
                    else:  # (a live stream is followed to its route's end, each part once)
                        j = tails.get(stream.id)
                        if j == 0:
                            continue  # (met where it starts: all of its route is queued)
                        route = stream.route
                        i = route.index(v)
                        if j is not None and i >= j:
                            continue
                        j = len(route) if j is None else j
                        reached[stream.id] = stream
                        tails[stream.id] = i
                        hops = route[i + 1:j]
                    for n in hops:
                        if n not in queued:
                            queued.add(n)
                            queue.append(n)
        for match, streams in seen.values():
            if not streams:
                continue
            # Reusing a stream nearer the target costs the same operators and fewer hops, and
            # streams of equal properties carry the same content: per group, only the two
            # (stream, peer) pairs nearest the target are priced (the second in case the nearest
            # is loaded).
            # (a stream filled from the past: only where its replayed items have all passed)
            # (a peer with no route to the target, while links are down, offers nothing)
            pairs = heapq.nsmallest(2, ((distance[p], p, s.id) for s in streams.values() for p in dict.fromkeys(s.route)
                                        if p in distance and (not s.past or live_at(self.state, p, s))))
            for _, u, sid in pairs:
                for candidate in self.generate_plans(streams[sid], u, target, inp, match):
                    priced.append(candidate)
                    if candidate.cost < best.cost:
                        best = candidate
                    if not candidate.overloads and (best_admissible is None
                                                    or candidate.cost < best_admissible.cost):
                        best_admissible = candidate
        for candidate in (widened_parts(self, near, inp, target, distance) if near else ()):
            priced.append(candidate)  # (taken only if it saves: ``WIDEN_MARGIN``)
            if candidate.cost < best.cost * (1 - WIDEN_MARGIN):
                best = candidate
            if not candidate.overloads and (best_admissible is None
                                            or candidate.cost < best_admissible.cost * (1 - WIDEN_MARGIN)):
                best_admissible = candidate
        chosen = best_admissible or best
        seen = {where(chosen)}  # the same plan may be priced twice (data shipping is a candidate too)
        chosen.alternatives = [c for c in priced if where(c) not in seen and not seen.add(where(c))]
        return chosen

    def _usable(self, peer: str, stream: NetworkStream) -> bool:
        """Whether a subscription may reuse ``stream`` at ``peer``: not one filled from the past
        (``NetworkStream.past``), whose items would reach it out of time, unless every replayed
        item has passed ``peer`` (``live_at``; the search goes on from there, and a stream is
        reused only at peers of its route where that holds too)."""
        return not stream.past or live_at(self.state, peer, stream)

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

    def _at_reuse(self, stream: NetworkStream, v: str, target: str, inp: InputProperties,
                  match: Match) -> PlanPart:
        route = self.state.backbone.route(v, target)
        if not match.residual and route == (v,):
            usage = Usage()  # already delivered where it is needed
            return self.finish(PlanPart(inp, stream.id, v, v, (), route, [], stream.id, usage,
                                         reason=match.reason))
        props = inp if match.residual else stream.properties
        new = self.new_stream(props, match.kind if match.residual else stream.kind, v,
                               stream, match.residual, route)
        return self.finish(PlanPart(inp, stream.id, v, v, match.residual, route, [new], new.id,
                                     new.usage, reason=match.reason))

    def _at_target(self, stream: NetworkStream, v: str, target: str, inp: InputProperties,
                   match: Match) -> PlanPart:
        route = self.state.backbone.route(v, target)
        copy = self.new_stream(stream.properties, stream.kind, v, stream, (), route)
        result = self.new_stream(inp, match.kind, target, copy, match.residual, (target,))
        usage = copy.usage.merge(result.usage)
        return self.finish(PlanPart(inp, stream.id, v, target, match.residual, route,
                                     [copy, result], result.id, usage, reason=match.reason))

    def _repetition(self, inp: InputProperties) -> Repetition:
        """What the input's statistics have seen of its elements (nothing yet: any may repeat)."""
        stats = self.state.statistics.get(inp.input.stream)
        return Repetition(stats.single_elements) if stats is not None else UNKNOWN


# A widening couples the stream's readers with the newcomer (one stream for all; a sample of it
# lowered for one is lowered for all), so it is taken only where it saves this share of the
# best plan without it: a near miss whose hull is merely the union of two disjoint selections
# costs what two streams cost, and would couple them for nothing.
WIDEN_MARGIN = 0.1

def widened_parts(planner: PlanBuilder, near: dict[str, NetworkStream], inp: InputProperties, target: str,
                  distance: dict[str, int]) -> list[PlanPart]:
    """Per running stream that nearly serves ``inp``, the part that widens it (``widening``):
    ``W`` from its parent where it is computed, along its route; ``inp`` takes it at the peer
    of that route nearest ``target``; priced less what the running stream costs now."""
    parts = []
    repetition = planner._repetition(inp)
    for s in near.values():
        parent = planner.state.streams.get(s.parent or "")
        # (only a stream that crosses links: widening one that does not saves nothing)
        props = (hull(s.properties, inp, repetition) if parent is not None and not s.past and len(s.route) > 1
                 else None)
        if props is None or not match_properties(parent.properties, props, repetition).shareable:
            continue
        wide = planner.new_stream(props, "items", s.origin, parent,
                                  match_properties(parent.properties, props, repetition).residual, s.route)
        v = min(s.route, key=lambda p: (distance.get(p, len(distance)), s.route.index(p)))
        taken = planner._at_reuse(wide, v, target, inp, match_properties(props, inp, repetition))
        streams = [wide, *taken.new_streams]
        route = s.route[:s.route.index(v)] + taken.route  # (the peers its items pass from where W is made)
        part = PlanPart(inp, parent.id, s.origin, taken.operator_peer, taken.operators, route, streams,
                        taken.result_stream, wide.usage.merge(taken.usage), reason=f"widened {s.id}")
        planner.finish(part)
        part.widened = s.id
        part.cost -= planner.cost(s.usage)[0]
        parts.append(part)
    return parts
