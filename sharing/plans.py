"""Plans and how they are built: the parts of a subscription's plan, priced by the cost model.

A plan serves each input of a subscription with one ``PlanPart`` — the stream reused, where
operators run, the route, the new streams it installs — and is priced as a whole. ``PlanBuilder``
holds what every way of planning shares (new streams with their estimated usage, a part's cost,
a plan over all inputs); the SUBSCRIBE search (``planner``) and the plans that fill inputs from
the past (``replay_plans``) are both built with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from wxquery.operators import definitions as alg

from .cost_model import Calibration, CostModel, Overload, Usage
from .network_state import NetworkStream
from .planning_view import PlanningView
from .properties import InputProperties, PostProcessing, Properties
from .stream_properties import joined_by
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


@dataclass(frozen=True)
class InPlace:
    """A running stream widened in place (``widening.in_place``): its entry once widened (same
    id, route and users; the hull's properties, operators, usage and estimate), as the plan saw
    it, and the residual that makes its items of the wide ones (what its readers get in front
    of them)."""

    wide: NetworkStream
    was: NetworkStream
    residual: tuple[alg.Operator, ...]


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
    widened: str = ""  # the running stream this part widens (``widening``): its consumers follow
    in_place: InPlace | None = None  # … widened in place, not by a stream beside it (``widening.in_place``)
    relayed: str = ""  # the subnet its first new stream brings the original into (``subnet_planning``)
    feeds_join: str = ""  # the joined stream it feeds where the join is placed, not the subscription (``join_planning``)
    # a reused joined stream's groups narrowed at the subscriber: the atoms on the outer item, on the inner items
    on_groups: tuple[tuple[alg.Atom, ...], tuple[alg.Atom, ...]] | None = None

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
            "widened": self.widened,
            "widened_in_place": self.in_place is not None,
            "relayed": self.relayed,
            "feeds_join": self.feeds_join,
            "on_groups": [[str(a) for a in atoms] for atoms in self.on_groups] if self.on_groups else None,
            "cost": round(self.cost, 6),
            "alternatives": [a.summary() for a in sorted(self.alternatives, key=lambda a: a.cost)[:MAX_ALTERNATIVES]],
        }

    def describe(self) -> str:
        ops = ", ".join(map(str, self.operators)) or "no operators"
        name = self.input_properties.input.stream
        into = f" (into the join at {self.route[-1]})" if self.feeds_join else ""
        join = joined_by(self.input_properties)
        if join is not None:  # (``join_planning``: the joined stream, made here or reused)
            inner = join.params[4]
            if self.new_streams and self.new_streams[0].id == self.reused:
                return (f"{name} ⋈ {inner}: joined at {self.operator_peer} as {self.reused} ({ops}); "
                        f"route {'→'.join(self.route)}")
            narrowed = "; ".join(f"σ[{' and '.join(map(str, atoms))}] on its {side}" for side, atoms
                                 in zip(("outer items", "inner items"), self.on_groups or ((), ())) if atoms)
            return (f"{name} ⋈ {inner}: reuse joined stream {self.reused} at {self.reuse_peer}; "
                    f"route {'→'.join(self.route)}" + (f"; {narrowed} at {self.route[-1]}" if narrowed else ""))
        if self.new_streams and self.new_streams[0].past:  # (``replay_plans``: from the log)
            source = (f"its log replayed at {self.reuse_peer} on a copy of its own" if self.reused == name else
                      f"a copy at {self.reuse_peer} of {self.reused}, a replay of its log already running")
        elif self.in_place is not None:
            source = (f"widened {self.widened} in place (at {self.in_place.wide.origin}; its readers keep "
                      f"their items), reused at {self.reuse_peer}")
        elif self.widened:
            source = (f"widened {self.widened} (as {self.new_streams[0].id}, from {self.reused} at "
                      f"{self.reuse_peer}; its consumers move onto it)")
        elif self.relayed:
            relay = self.new_streams[0]
            source = (f"reuse stream {self.reused} at {self.reuse_peer}, relayed whole into subnet "
                      f"{self.relayed} at {relay.route[-1]} (as {relay.id})")
        else:
            source = f"reuse stream {self.reused} at {self.reuse_peer}"
        return f"{name}: {source}; {ops} at {self.operator_peer}; route {'→'.join(self.route)}{into}"


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
    join: str = ""  # where its join runs and why there (``join_planning``; "": it has none)

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
                "post_processing_at": self.target, **({"join": self.join} if self.join else {})}

    def describe(self) -> str:
        past = any(s.past for p in self.parts for s in p.new_streams[:1])
        how = "from the streams' logs, then live" if past else self.strategy.value
        lines = [f"{self.subscription} at {self.target} ({how}): {self.reason}"]
        lines += ["  " + p.describe() for p in self.parts]
        if self.join:
            lines.append(f"  {self.join}")
        lines.append(f"  post-processing (restructuring) at {self.target}")
        return "\n".join(lines)


class PlanBuilder:
    """What every strategy builds plans with: new streams priced by the cost model, parts, plans.
    ``Planner`` searches with it (SUBSCRIBE); ``replay_plans`` builds plans from the past with it."""

    def __init__(self, state: PlanningView, cost_model: CostModel | None = None,
                 calibration: Calibration | None = None, widening: bool = False) -> None:
        """``widening``: offer to widen a running stream for a near miss (``sharing.widening``)."""
        self.state = state
        self.widening = widening
        self.cost_model = cost_model or CostModel()
        self.calibration = calibration or Calibration.load()
        self._estimate_cache: dict[int, tuple] = {}

    def plan(self, subscription: str, properties: Properties, target: str, strategy: Strategy,
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
        usage = usage.merge(self.post_processing_usage(parts, target))
        cost, overloads = self.cost(usage)
        return Plan(subscription, target, strategy, parts, properties.post_processing, usage,
                    cost, overloads)

    def estimates(self, props: InputProperties) -> tuple[StreamEstimate, float]:
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

    def new_stream(self, props: InputProperties, kind: str, origin: str, parent: NetworkStream,
                   operators: tuple[alg.Operator, ...], route: tuple[str, ...]) -> NetworkStream:
        estimate = self.estimates(props)[0] if operators else parent.estimate
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
        selected = self.estimates(props)[1] if stream.operators else freq
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

    def post_processing_usage(self, parts: list[PlanPart], target: str) -> Usage:
        """Restructuring at the subscriber's super-peer, at the rate its inputs arrive."""
        usage = Usage()
        pindex = self.state.backbone.peers[target].pindex
        for part in parts:
            delivered = next((s for s in part.new_streams if s.id == part.result_stream), None)
            freq = delivered.estimate.freq if delivered else self.state.streams[part.result_stream].estimate.freq
            usage.add_peer(target, self.calibration.post_process * pindex * freq)
        return usage

    def finish(self, part: PlanPart) -> PlanPart:
        """The part, priced: its cost and the links and peers it would overload."""
        part.cost, part.overloads = self.cost(part.usage)
        return part

    def cost(self, usage: Usage) -> tuple[float, list[Overload]]:
        """``C(P)`` of the paper over the view's backbone and what it already carries."""
        b = self.state.backbone
        return self.cost_model.cost(usage, b.bandwidth(), self.state.link_used, b.capacity(),
                                    self.state.peer_used)
