"""Whether a running subscription should move to another plan, and to which (DESIGN.md §12).

Two prices for a plan of one input, both over the same snapshot, priced by the cost model:

* its **marginal** cost: what the network carries in addition for it — the new streams of a
  candidate; for the running plan, its *own* streams (those only this subscription uses: what
  the network saves when it moves);
* its **share**: every stream of its chain from the original, each divided among the
  subscriptions that use it (a shared stream is cheap for each of them).

A move is judged by what the whole network carries (the sum of every stream's cost): the
candidate's marginal cost, less the running plan's own streams, less what the other
subscriptions on the running plan's chain would save by moving next (a **look-ahead** of one
step: the streams only one of them would use then, against its own best plan on the network
after this move; or the streams only they use, all of them moving as a group — a stream
widened for a near miss is left by its readers one by one, though none frees it alone). It is
taken when that sum falls by the margin of the subscription's share. Without the look-ahead two
subscriptions sharing a detour after a failure keep it for good — each costs nothing at the
margin to keep, and the first move costs a little; with it, the first moves and the second
follows. A move never raises the network's cost for nothing, so nothing flaps: a narrow
subscription on a wide stream that must flow anyway stays there; and one that moved only for
what the others save by following does not take the streams it left again while they may
still follow (``choose``'s ``avoid``).

Candidates are the planner's plans of the input over a snapshot without the subscription's own
streams (``without``): the chosen one and the alternatives it priced.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace

from .cost_model import Usage
from .planning_view import PlanningSnapshot
from .plans import PlanBuilder, PlanPart
from .stream_table import NetworkStream, lineage


def base(plan_id: str) -> str:
    """The subscription a plan id is of (``sid`` and ``sid~xxxxxx``)."""
    return plan_id.split("~", 1)[0]


def own_streams(streams: Mapping[str, NetworkStream], sid: str | Collection[str]) -> dict[str, NetworkStream]:
    """The streams only this subscription's plans use: what its running plan costs at the margin
    (or only the plans of these subscriptions, a group, use)."""
    group = {sid} if isinstance(sid, str) else set(sid)
    return {s.id: s for s in streams.values()
            if not s.original and s.users and all(base(u) in group for u in s.users)}


def users_besides(stream: NetworkStream, sid: str) -> int:
    return len({base(u) for u in stream.users} - {sid})


@dataclass(frozen=True)
class Price:
    marginal: float
    share: float


def running_price(cost: Callable[[Usage], float], streams: Mapping[str, NetworkStream], delivered: str,
                  sid: str) -> Price:
    """The running plan's price: its own streams, and its share of its chain."""
    own = Usage()
    for s in own_streams(streams, sid).values():
        own = own.merge(s.usage)
    share = sum(cost(s.usage) / (users_besides(s, sid) + 1)
                for s in lineage(streams, delivered) if not s.original)
    return Price(cost(own), share)


def candidate_price(cost: Callable[[Usage], float], streams: Mapping[str, NetworkStream], part: PlanPart,
                    sid: str) -> Price:
    """A candidate's price: its new streams, and its share of the chain it reuses (with this
    subscription among the users)."""
    reused = sum(cost(s.usage) / (users_besides(s, sid) + 1)
                 for s in lineage(streams, part.reused) if not s.original)
    new = cost(part.usage)
    return Price(new, new + reused)


LOOK_AHEAD = 4  # candidates (the cheapest at the margin and by share) priced with the look-ahead


@dataclass(frozen=True)
class Move:
    part: PlanPart | None  # None: keep the running plan
    running: Price
    best: Price
    change: float  # what the network's cost changes by (negative: it falls)
    credited: bool = False  # taken for what the others save by following, not for itself


def choose(planner: PlanBuilder, chosen: PlanPart, delivered: str, sid: str, margin: float,
           streams: Mapping[str, NetworkStream], follow: Callable[[PlanningSnapshot, tuple[str, ...], float], float],
           avoid: frozenset[str] = frozenset()) -> Move:
    """The candidate to move to, by the network's cost after it and the moves it opens; of
    candidates within half the margin of the best, the one that sends the fewest bits (the cost
    model can price a raw copy and a filtered stream alike on idle links: the bytes decide).
    ``streams``: every stream of the view, this subscription's own included; ``follow``: what
    other subscriptions on the running chain save, on a snapshot, by moving next — one by one,
    or all of them as a group, whichever saves more (only if they would: by more than the
    margin). ``avoid``: streams it left for its followers' sake a little while ago — it does not
    take them again before they had time to follow (``Move.credited``): else the first reader of
    a widened stream moves back while the others are still on their way, and again and again."""
    cost = lambda u: planner.cost(u)[0]  # noqa: E731
    running = running_price(cost, streams, delivered, sid)
    # (not the plan it has under new names: a stream priced at its estimate would look cheaper
    # than the same one measured, and the subscription would move back and forth)
    running_shape = shape(streams, lineage(streams, delivered))
    candidates = [p for p in [chosen, *chosen.alternatives] if not p.overloads and p.result_stream != delivered
                  and shape(streams, [*p.new_streams, *lineage(streams, p.reused)]) != running_shape
                  and not avoid & {s.id for s in lineage(streams, p.reused)}]
    priced = [(candidate_price(cost, streams, p, sid), p) for p in candidates]
    if not priced:
        return Move(None, running, Price(float("inf"), float("inf")), 0.0)
    shortlist = {id(p): (price, p) for price, p in sorted(priced, key=lambda x: x[0].marginal)[:LOOK_AHEAD]}
    shortlist |= {id(p): (price, p) for price, p in sorted(priced, key=lambda x: x[0].share)[:LOOK_AHEAD]}
    chain = [s for s in lineage(streams, delivered) if not s.original]
    others = {base(u) for s in chain for u in s.users} - {sid}
    # One by one, only the readers this move leaves alone on a stream of the chain save by
    # following it: another reader's own streams are its own whatever this one does, and what it
    # would save by moving anyway is not this move's to count (counted, with a hundred readers of
    # one chain every move looked like a saving, each planned every other reader again, and the
    # subscriptions moved round and round: 2 cores busy, benchmarks/reoptimisation_idle_cost.py)
    left_alone = sorted({next(iter(rest)) for s in chain if len(rest := {base(u) for u in s.users} - {sid}) == 1})
    grouped = tuple(sorted(others)) if 1 < len(others) <= GROUP_AT_MOST else ()
    scale = margin * max(running.share, running.marginal)
    # a move the look-ahead alone justifies only climbs: to a stream at least as wide as the
    # widest it reads now (or the original) — two readers of equal streams would otherwise
    # swap places for ever, each expecting the other to follow
    top = max((s.estimate.bits_per_second for s in lineage(streams, delivered) if not s.original), default=0.0)
    moves = []
    for price, part in shortlist.values():
        change = price.marginal - running.marginal
        climbs = part.reused not in streams or streams[part.reused].original or reused_bits(streams, part) >= top
        if (left_alone or grouped) and climbs:
            after = moved(planner.state, streams, sid, part, planner.cost_model, planner.calibration)
            alone = sum(follow(after, (t,), margin) for t in left_alone)
            together = follow(after, grouped, margin) if grouped else 0.0
            change -= max(alone, together)
        moves.append(Move(part, running, price, change, credited=price.marginal - running.marginal >= -scale))
    least = min(m.change for m in moves)
    # (among near-equals: the fewest bits on the links, then the cheapest)
    best = min((m for m in moves if m.change <= least + scale / 2), key=lambda m: (bits(m.part), m.change))
    if best.change < -scale:
        return best
    return Move(None, running, best.best, best.change)


def shape(streams: Mapping[str, NetworkStream], chain: list[NetworkStream]) -> frozenset:
    """What a chain computes where, whatever its streams are called."""
    return frozenset((s.properties, s.origin, s.route, s.operators) for s in chain if not s.original)


def reused_bits(streams: Mapping[str, NetworkStream], part: PlanPart | None) -> float:
    reused = streams.get(part.reused) if part is not None else None
    return reused.estimate.bits_per_second if reused is not None else 0.0


def bits(part: PlanPart | None) -> float:
    return sum(part.usage.links.values()) if part is not None else 0.0


def moved(state, streams: Mapping[str, NetworkStream], sid: str, part: PlanPart, cost_model,
          calibration) -> PlanningSnapshot:
    """The planning view as it would be after the subscription moved to ``part``: it leaves its
    chain (streams nobody uses then are gone: its own, already out of ``state``), joins the
    reused chain, and the part's new streams flow."""
    copies = {k: replace(s, users={u for u in s.users if base(u) != sid}) for k, s in streams.items()}
    gone = {k for k, s in copies.items() if not s.original and not s.users}
    for s in lineage(copies, part.reused):
        s.users.add(sid)
    gone -= {s.id for s in lineage(copies, part.reused)}
    link_used, peer_used = dict(state.link_used), dict(state.peer_used)
    new = [replace(s, users={sid}) for s in part.new_streams]
    for s in new:
        copies[s.id] = s
        _add(link_used, peer_used, s.usage, +1)
    tables = {}
    for key, found in state.tables.items():
        tables[key] = [copies[s.id] for s in found if s.id in copies and s.id not in gone]
    for s in new:
        for peer in dict.fromkeys((s.origin, *s.route)):
            tables.setdefault((peer, s.input), []).append(s)
    return PlanningSnapshot(state.backbone, state.new_stream_id, link_used, peer_used, dict(state.statistics),
                            dict(state.originals), tables,
                            {k: s for k, s in copies.items() if k not in gone}, dict(state.positions),
                            state.staying)


def _add(link_used: dict, peer_used: dict, usage: Usage, sign: int) -> None:
    for link, bits in usage.links.items():
        link_used[link] = max(link_used.get(link, 0.0) + sign * bits, 0.0)
    for peer, cores in usage.peers.items():
        peer_used[peer] = max(peer_used.get(peer, 0.0) + sign * cores, 0.0)


def without(snapshot: PlanningSnapshot, streams: Mapping[str, NetworkStream]) -> None:
    """Plan as if these streams were gone: not reusable, their usage freed."""
    for key, found in list(snapshot.tables.items()):
        snapshot.tables[key] = [s for s in found if s.id not in streams]
    for s in streams.values():
        _add(snapshot.link_used, snapshot.peer_used, s.usage, -1)


GROUP_AT_MOST = 8  # the readers of a chain priced as one group move (each is planned)


def follow_gain(planner_for: Callable[[PlanningSnapshot], PlanBuilder],
                best_part) -> Callable[[PlanningSnapshot, tuple[str, ...], float], float]:
    """``choose``'s look-ahead: what the subscriptions ``ts`` save by moving next on a snapshot —
    the streams only they use there, less their best plans without them. One subscription alone
    is a single move; several are a **group**: the readers left on a shared stream, which none of
    them frees by moving alone (a stream widened for a near miss, with three consumers), priced as
    if all of them moved (each is then moved by its own round: every round finds the same group
    smaller). A subscription's target is its registering peer (the prefix of its id), what it needs is the
    properties of the deepest stream it reads. While it is itself moving it reads two (its old
    and its new plan's, alike): alone, each is priced with its own chain and the smaller saving
    counts (the old plan goes anyway); in a group it makes the group not move. A subscription
    that keeps its plan whatever is cheaper, or whose peer moves none (``snapshot.staying``),
    saves nothing, and makes its group save nothing."""
    def gain(snapshot: PlanningSnapshot, ts: tuple[str, ...], margin: float) -> float:
        own = own_streams(snapshot.streams, ts)
        if not own or len(set(ts)) > GROUP_AT_MOST:
            return 0.0
        needs = {}
        deepest_of = {}
        for t in ts:
            target = t.rsplit("-", 1)[0]
            if t in snapshot.staying or target in snapshot.staying:
                return 0.0  # (it would not move: it saves nothing)
            reads = [s for s in snapshot.streams.values() if any(base(u) == t for u in s.users)]
            parents = {s.parent for s in reads}
            deepest = [s for s in reads if s.id not in parents]
            if (target not in snapshot.backbone.peers or not deepest or len({d.properties for d in deepest}) != 1
                    or (len(ts) > 1 and len(deepest) > 1)):
                return 0.0
            wants = deepest[0].properties
            if (wants.window is not None and wants.window.kind == "count") or wants.sample > 1:
                return 0.0  # (it will not move: count windows keep their plan's alignment, samples their plan)
            needs[t], deepest_of[t] = (wants, target), deepest
        snapshot = PlanningSnapshot(snapshot.backbone, snapshot.new_stream_id, dict(snapshot.link_used),
                                    dict(snapshot.peer_used), snapshot.statistics, snapshot.originals,
                                    {k: list(v) for k, v in snapshot.tables.items()}, snapshot.streams,
                                    snapshot.positions, snapshot.staying)
        planner = planner_for(snapshot)
        if len(ts) == 1:
            saved = float("inf")
            for d in deepest_of[ts[0]]:
                mine = Usage()
                for s in lineage(snapshot.streams, d.id):
                    if s.id in own:
                        mine = mine.merge(s.usage)
                saved = min(saved, planner.cost(mine)[0])
        else:
            mine = Usage()
            for s in own.values():
                mine = mine.merge(s.usage)
            saved = planner.cost(mine)[0]
        without(snapshot, own)
        spent = 0.0
        for wants, target in needs.values():
            try:
                spent += best_part(planner, wants, target).cost
            except Exception:  # noqa: BLE001 - no plan for it: it saves nothing
                return 0.0
        gained = saved - spent
        return gained if gained > margin * saved else 0.0
    return gain
