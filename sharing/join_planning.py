"""Where a window join runs: at the subscriber's super-peer, or placed in the network.

A subscription over two streams whose join streams within a band (``wxquery.join_band.
network_band``) may have its join computed at another super-peer J, where both inputs —
filtered and projected as the subscription needs them, each planned to J by SUBSCRIBE, reusing
what flows — meet. J makes a **joined stream** (``alg.BandJoin``, two parents): per outer
item, the item and the inner items within its band (``wxquery.band_join``). It flows from J
to the subscriber's super-peer, whose post-processing evaluates the whole query over those
groups: exactly the nested loop's results, as if it had joined the two streams itself.

The joined stream is an entry of the stream tables like any other, under the outer input, with
the outer input's properties and one unknown operator that names the join (the inner input's
stream, selection and projection, and the band: ``joined_properties``). So matching keeps it
apart from every single-input subscription (an unknown operator serves only a subscription that
has it), and a later subscription with the same join — the same two inputs with the same
selections and projections, the same band — reuses it at the peer of its route nearest its own
super-peer instead of joining again — or with further conditions on an input (its groups
narrowed at the subscriber: ``residual_on_groups``).

**Keys.** The equalities between the two inputs in the where clause's top-level 'and'
(``wxquery.join_band.network_keys``: ``$a/author = $p/src`` as strings, ``$a/id = $p/id + 0``
as numbers) are applied at J too: each group keeps only the inner items equal to its outer
item on every key, so the joined stream shrinks by what the streams' samples say the keys
leave (``key_selectivity``). The keys are part of the joined stream's properties: it serves a
later join that requires every one of them (and perhaps more, tested with the whole where
clause at its subscriber), and a joined stream without keys serves a join with keys.

The planner prices, as its cost model says (``C(P)``): today's plan (both inputs to the
subscriber, joined there), each peer of the inputs' routes to the subscriber as J, and every
running joined stream of the same join; the cheapest admitted one wins, and the plan says
where its join runs and why (``Plan.join``). A join is placed only at peers that run joins in
the network (``PlanningView.join_peers``: those not started with ``--no-network-joins``).

Pure: plans are built over a ``PlanningView``; nothing is installed here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from wxquery.band_join import key_selectivity
from wxquery.join_band import Band, key_text
from wxquery.operators import definitions as alg

from .backbone import TopologyError
from .cost_model import Usage
from .matching import match_properties
from .network_state import NetworkStream
from .plans import Plan, PlanBuilder, PlanPart, Strategy
from .properties import InputProperties, Properties, UnknownOperator
from .serialization import atom_from_json, atom_to_json, properties_from_json, properties_to_json
from .statistics import StreamEstimate
from .stream_properties import JOIN_OPERATOR, joined_by

GROUP_BYTES = 13  # ``<join></join>`` around each group

BestPart = Callable[[InputProperties, str], PlanPart]  # SUBSCRIBE for one input to a peer


def joined_properties(outer: InputProperties, inner: InputProperties, band: Band,
                      keys: tuple[alg.Atom, ...] = ()) -> InputProperties:
    """The properties of the joined stream of ``outer`` and ``inner`` within ``band``: the
    outer input's, and the join as an unknown operator (equal parameters, equal groups): the
    band, then the inner input's properties (``serialization``, its variable left out), then
    the keys its groups are equal on (``wxquery.join_band.network_keys``; none: ``[]``)."""
    params = (band.outer_path, band.inner_path, str(band.low), str(band.high), inner.input.stream,
              json.dumps(properties_to_json(replace(inner, variable="")), sort_keys=True),
              json.dumps([atom_to_json(k) for k in keys]))
    return replace(outer, unknown=(*outer.unknown, UnknownOperator(JOIN_OPERATOR, params)))


def inner_of(join: UnknownOperator) -> InputProperties:
    """The inner input's properties a joined stream's operator spells."""
    return properties_from_json(json.loads(join.params[5]))


def keys_of(join: UnknownOperator) -> frozenset[alg.Atom]:
    """The keys a joined stream's groups are equal on, as its operator spells them."""
    return frozenset(atom_from_json(k) for k in json.loads(join.params[6])) if len(join.params) > 6 else frozenset()


def residual_on_groups(stream: InputProperties, joined: InputProperties) -> tuple[tuple, tuple] | None:
    """What makes a running joined stream's groups those of ``joined`` (the same band, each
    input's selection implied by the stream's and its projection the same, and every key the
    stream applied one ``joined`` requires — a key it requires more is tested with the whole
    where clause at the subscriber): the atoms still to test on each group's outer item and on
    its inner items, at the subscriber (None: it does not serve it)."""
    have, want = joined_by(stream), joined_by(joined)
    if have is None or want is None or have.params[:5] != want.params[:5] or not keys_of(have) <= keys_of(want):
        return None
    residuals = []
    for have_side, want_side in ((replace(stream, unknown=(), variable=""), replace(joined, unknown=(), variable="")),
                                 (inner_of(have), inner_of(want))):
        if have_side == want_side:  # (the same: nothing to add — matching would ask for elements
            residuals.append(())     # a condition applied upstream no longer needs)
            continue
        match = match_properties(have_side, want_side)
        if not match.shareable or not all(isinstance(op, alg.Select) for op in match.residual):
            return None  # (another projection, a sample: not on groups)
        residuals.append(tuple(a for op in match.residual for a in op.atoms))  # type: ignore[union-attr]
    return residuals[0], residuals[1]


def unplaceable(properties: Properties) -> str:
    """Why this subscription's join cannot leave its super-peer ("" if it can be placed)."""
    band = properties.post_processing.network_join
    if band is None:
        return ("its two for clauses are not the only clauses of one FLWR with a band between them "
                "(only such a join is computed in the network)")
    for inp in properties.inputs:
        if not inp.per_item or inp.unknown:
            return f"${inp.variable} is windowed or sampled (a joined stream's inputs are items)"
    return ""


def place_join(builder: PlanBuilder, best_part: BestPart, subscription: str, properties: Properties,
               target: str, local: Plan) -> Plan:
    """The cheapest plan for a subscription over two streams: ``local`` (the join at
    ``target``), a new join at a peer upstream, or a running joined stream reused."""
    why = unplaceable(properties)
    if why:
        local.join = f"join at {target} (the subscriber's super-peer): {why}"
        return local
    band = properties.post_processing.network_join
    assert band is not None
    outer = next(i for i in properties.inputs if i.variable == band.outer)
    inner = next(i for i in properties.inputs if i.variable == band.inner)
    keys = properties.post_processing.network_join_keys
    joined = joined_properties(outer, inner, band, keys)
    widening, builder.widening = builder.widening, False  # (a feeder never widens a running stream)
    reasons: list[str] = []
    try:
        plans = [*_reused(builder, subscription, properties, joined, band, target),
                 *_placed(builder, best_part, subscription, properties, outer, inner, joined, band, keys, target,
                          reasons)]
    except (LookupError, TopologyError) as exc:  # (a view that lacks a peer or a path: today's plan stands)
        plans, reasons = [], [f"it could not be placed ({exc})"]
    finally:
        builder.widening = widening
    best = min((p for p in plans if p.admitted), key=lambda p: p.cost, default=None)
    if best is None:
        local.join = f"join at {target} (the subscriber's super-peer): " + ("; ".join(reasons) or
                                                                          "no peer upstream can carry it")
        return local
    if local.admitted and local.cost <= best.cost:
        local.join = (f"join at {target} (the subscriber's super-peer): cheapest there (cost {local.cost:.4g}; "
                      f"the best elsewhere, {best.join}, {best.cost:.4g})")
        return local
    return best


def _reused(builder: PlanBuilder, subscription: str, properties: Properties, joined: InputProperties,
            band: Band, target: str) -> list[Plan]:
    """A plan per running joined stream of the same join (its keys among this one's): taken at
    the peer of its route nearest ``target``, copied from there."""
    distance = builder.state.backbone.distances_to(target)
    plans = []
    for s in list(builder.state.streams.values()):
        if s.past or joined_by(s.properties) is None:
            continue
        residual = residual_on_groups(s.properties, joined)
        peers = [p for p in s.route if p in distance]
        if residual is None or not peers:
            continue
        v = min(peers, key=lambda p: distance[p])
        route = builder.state.backbone.route(v, target)
        if route == (v,):
            part = PlanPart(joined, s.id, v, v, (), route, [], s.id, Usage())
        else:
            copy = builder.new_stream(s.properties, s.kind, v, s, (), route)
            part = PlanPart(joined, s.id, v, v, (), route, [copy], copy.id, copy.usage)
        part.reason = f"the same join runs as {s.id}"
        part.on_groups = residual if any(residual) else None
        plan = _plan(builder, subscription, properties, target, [builder.finish(part)])
        keys = "".join(f"; key {key_text(band, k)}" for k in sorted(keys_of(joined_by(s.properties)), key=str))
        plan.join = f"join reused: {s.id}, joined at {s.origin}, taken at {v}{keys}" + (
            "; its groups narrowed at " + target if part.on_groups else "")
        plans.append(plan)
    return plans


def _placed(builder: PlanBuilder, best_part: BestPart, subscription: str, properties: Properties,
            outer: InputProperties, inner: InputProperties, joined: InputProperties, band: Band,
            keys: tuple[alg.Atom, ...], target: str, reasons: list[str]) -> list[Plan]:
    """A plan per peer J of the inputs' routes to ``target`` (not ``target``): both inputs
    planned to J, the joined stream made there and routed to ``target``."""
    state = builder.state
    backbone = state.backbone
    peers = dict.fromkeys([*backbone.route(state.original(outer.input).origin, target),
                           *backbone.route(state.original(inner.input).origin, target)])
    peers.pop(target, None)
    allowed = getattr(state, "join_peers", None)
    if allowed is not None and peers and not set(peers) & allowed:
        reasons.append(f"no peer upstream ({', '.join(peers)}) runs joins in the network "
                       "(super-peers do, unless started with --no-network-joins)")
    plans = []
    for j in peers:
        if allowed is not None and j not in allowed:
            continue
        feeders = best_part(outer, j), best_part(inner, j)
        joins = _joined_stream(builder, joined, band, keys, j, target, *feeders)
        if joins is None:
            reasons.append(f"the join's output cannot be priced: no increments of {band.inner_path} "
                           f"measured in {inner.input.stream} yet")
            return []
        part = PlanPart(joined, joins.id, j, j, joins.operators, joins.route, [joins], joins.id, joins.usage,
                        reason=f"joined at {j}")
        for f in feeders:
            f.feeds_join = joins.id
        plan = _plan(builder, subscription, properties, target, [*feeders, builder.finish(part)])
        plan.join = f"join placed at {j} (as {joins.id}; its inputs meet there" + "".join(
            f"; key {key_text(band, k)}" for k in keys) + ")"
        plans.append(plan)
    return plans


def _delivered(builder: PlanBuilder, part: PlanPart) -> NetworkStream:
    return next((s for s in part.new_streams if s.id == part.result_stream), None) or \
        builder.state.streams[part.result_stream]


def _joined_stream(builder: PlanBuilder, joined: InputProperties, band: Band, keys: tuple[alg.Atom, ...], j: str,
                   target: str, outer: PlanPart, inner: PlanPart) -> NetworkStream | None:
    """The joined stream made at ``j`` from the two feeders' streams, priced: per outer item
    with an inner item in its band (and equal on its keys, as the streams' samples say), one
    group (None: no measure of the inner items' spacing)."""
    o, i = _delivered(builder, outer), _delivered(builder, inner)
    stats = builder.state.statistics.get(inner.input_properties.input.stream)
    spacing = stats.avg_increment(band.inner_path) if stats is not None else None
    if not spacing or spacing <= 0 or not stats.frequency:
        return None
    per_unit = (i.estimate.freq / stats.frequency) / spacing  # inner items kept per unit of the band element
    expected = float(band.high - band.low) * per_unit  # … within one outer item's band
    outer_stats = builder.state.statistics.get(outer.input_properties.input.stream)
    if keys and outer_stats is not None:  # (… and equal to it on the keys)
        expected *= key_selectivity(outer_stats.sampled_items(), stats.sampled_items(), keys) or 1.0
    op = alg.BandJoin(i.id, band.outer_path, band.inner_path, band.low, band.high, keys)
    estimate = StreamEstimate(o.estimate.freq * min(1.0, expected),
                              GROUP_BYTES + o.estimate.size + max(1.0, expected) * i.estimate.size)
    route = builder.state.backbone.route(j, target)
    stream = NetworkStream(id=builder.state.new_stream_id(), input=joined.input, properties=joined, kind="items",
                           origin=j, parent=o.id, operators=(op,), route=route, estimate=estimate)
    peers = builder.state.backbone.peers
    usage = Usage()
    usage.add_peer(j, builder.calibration.operator(op) * peers[j].pindex * (o.estimate.freq + i.estimate.freq))
    if len(route) > 1:
        for p in route:
            usage.add_peer(p, builder.calibration.forward * peers[p].pindex * estimate.freq)
        for a, b in zip(route, route[1:]):
            usage.add_link(a, b, estimate.bits_per_second)
    stream.usage = usage
    return stream


def _plan(builder: PlanBuilder, subscription: str, properties: Properties, target: str,
          parts: list[PlanPart]) -> Plan:
    """A plan of these parts: their usage, the post-processing of what reaches ``target``."""
    usage = Usage()
    for part in parts:
        usage = usage.merge(part.usage)
    delivered = _delivered(builder, parts[-1])
    pindex = builder.state.backbone.peers[target].pindex
    usage.add_peer(target, builder.calibration.post_process * pindex * delivered.estimate.freq)
    cost, overloads = builder.cost(usage)
    return Plan(subscription, target, Strategy.SHARING, parts, properties.post_processing, usage, cost, overloads)
