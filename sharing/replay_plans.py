"""Plans that fill a subscription's inputs from the past (issues 13 and 15): after a failure cut
its route, or over ``subscribe --since`` / ``--from-start``.

Only a copy can be filled from a stream's log (its origin sends it logged items without running
operators), so every input gets a *new* copy of its original at the original's super-peer.
The operators the input read — the chain of computed streams (``sharing.replay``) or its own
operators — run either at the subscriber's super-peer, the copy carrying the whole stream
there, or at the origin over a copy that crosses no link, only their result travelling. The
first is preferred (it is how the subscription was computed before, and it adds no load to the
origin); the second is taken when the first would overload the network: a subscription
admitted on a sample (``--approximate``) samples the replay at the origin instead of shipping
every item of the log to sample them at its super-peer.

A subscription over the past (not a recovery) may instead **share a replay that is running**:
a copy another past subscription's replay is filling from an earlier item, taken at a peer of
its route on to the subscriber (``shared_replay_parts``) — the log crosses the links up to
there once. Whether that copy has not yet sent the item the new subscription starts at is
known only where it is filled, at its origin, which checks it and holds the replay there until
the new copy is installed (``superpeer.history.log_replay``); if it has, the reservation is refused
and the subscription is planned again without that copy (``avoid``).
"""

from __future__ import annotations

from collections.abc import Mapping

from .cost_model import Usage
from .matching import match_properties
from .network_state import NetworkStream
from .plans import Plan, PlanBuilder, PlanPart, RegistrationError, Strategy
from .properties import InputProperties, Properties
from .replay import ReplayInput


def replay_plan(planner: PlanBuilder, subscription: str, properties: Properties, target: str,
                chains: Mapping[str, ReplayInput] | None = None, share: bool = False,
                avoid: frozenset[str] = frozenset()) -> Plan:
    """``Planner.replay_plan``; ``share``: a running replay may serve an input (not those in
    ``avoid``), where that is cheaper."""
    if target not in planner.state.backbone.peers:
        raise RegistrationError(f"{target} is not in the backbone that remains")

    streams = {inp.input.stream for inp in properties.inputs}

    def part_for(at_origin: bool):
        def fresh_copy(inp: InputProperties, original: NetworkStream, target: str) -> PlanPart:
            if original.origin not in planner.state.backbone.peers:
                raise RegistrationError(f"{original.origin}, where stream \"{inp.input.stream}\" "
                                        f"is registered, is down")
            chain = (chains or {}).get(inp.variable)
            if chain is None:
                match = match_properties(original.properties, inp)
                levels = [(inp, match.kind, match.residual)]
            else:
                levels = [(level.properties, level.kind, level.operators) for level in chain.levels]
            fresh = replay_part(planner, original, target, inp, levels, at_origin)
            if not share or chain is not None or len(streams) < len(properties.inputs):
                return fresh  # (a stream read twice: both inputs start where one replay says)
            shared = shared_replay_parts(planner, original, target, inp, avoid)
            return min([fresh, *shared], key=lambda p: (bool(p.overloads), p.cost))
        return fresh_copy

    plan = planner.plan(subscription, properties, target, Strategy.DATA_SHIPPING, part_for(False))
    if not plan.admitted:
        at_origin = planner.plan(subscription, properties, target, Strategy.DATA_SHIPPING, part_for(True))
        if at_origin.admitted:
            plan = at_origin
    for part in plan.parts:
        for stream in part.new_streams:
            stream.past = True
    return plan


def replay_part(planner: PlanBuilder, original: NetworkStream, target: str, inp: InputProperties,
                levels: list[tuple[InputProperties, str, tuple]], at_origin: bool) -> PlanPart:
    """A new copy of the original, then one computed stream per level (properties, kind,
    operators): the copy routed to ``target`` and the levels there, or (``at_origin``) the copy
    and the levels at the origin and the last level routed to ``target``."""
    origin = original.origin
    route = planner.state.backbone.route(origin, target)
    here = origin if at_origin and any(ops for _, _, ops in levels) else target
    streams = [planner.new_stream(original.properties, original.kind, origin, original, (),
                                   (origin,) if here == origin else route)]
    for i, (props, kind, operators) in enumerate(levels):
        last = i == len(levels) - 1
        streams.append(planner.new_stream(props, kind, here, streams[-1], operators,
                                           route if here == origin and last else (here,)))
    usage = Usage()
    for s in streams:
        usage = usage.merge(s.usage)
    operators = tuple(op for _, _, ops in levels for op in ops)
    return planner.finish(PlanPart(inp, original.id, origin, here, operators, route, streams,
                                    streams[-1].id, usage))


def running_replays(planner: PlanBuilder, original: NetworkStream) -> list[NetworkStream]:
    """The copies of ``original`` being filled from its past, as far as the view knows: made
    at its origin for a past subscription, no operators, not caught up with the log yet."""
    return sorted((s for s in planner.state.streams.values()
                   if s.past and not s.operators and s.parent == original.id and s.origin == original.origin
                   and s.live_from is None and len(s.route) > 1),
                  key=lambda s: s.id)


def shared_replay_parts(planner: PlanBuilder, original: NetworkStream, target: str, inp: InputProperties,
                        avoid: frozenset[str] = frozenset()) -> list[PlanPart]:
    """An input served from a running replay (``running_replays``): at each peer of its route
    past the origin, a new copy of it routed to ``target``, the input's own operators there.
    The new copy takes the replay's items from the subscription's first item on (the origin
    says which at reservation); ``PlanPart.reused`` is the running copy."""
    parts = []
    match = match_properties(original.properties, inp)
    for running in running_replays(planner, original):
        if running.id in avoid:
            continue
        for v in running.route[1:]:
            route = planner.state.backbone.route(v, target)
            copy = planner.new_stream(original.properties, original.kind, v, running, (), route)
            result = planner.new_stream(inp, match.kind, target, copy, match.residual, (target,))
            copy.past = result.past = True
            parts.append(planner.finish(PlanPart(inp, running.id, v, target, match.residual, route,
                                                  [copy, result], result.id, copy.usage.merge(result.usage),
                                                  reason=match.reason)))
    return parts


def shared_replays(plan: Plan) -> dict[str, str]:
    """Per part of a past subscription's plan served from a running replay, the new copy ->
    the running copy it takes items from."""
    return {p.new_streams[0].id: p.reused for p in plan.parts
            if p.new_streams and p.new_streams[0].past and p.reused != p.input_properties.input.stream}
