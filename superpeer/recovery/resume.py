"""A subscription planned again after a failure resumes where its input stood, instead of
recomputing every result from its first item (issue 31).

``replanning`` recomputes a subscription's results from the first item of the chain it read:
exact for any plan, but then a fault costs the whole history again — on the backbone, at the
stream's super-peer and at the subscriber's — a day's stream replayed for one crash, and no new
result until the replay has caught up. Where every operator before the subscription's runtime
is per-item (selection, projection: each output depends on its own input item alone, and says
which item of the original it came from), the results from the next item on do not depend on
the items before it. The same runtime then goes on, with its post-processing state and its
result numbering, and the new plan's copy of the original starts at the item after the last
one it was fed (``SubscriptionRuntime.resume_at``): no gap, no duplicate, and only the items
after that cross the backbone again.

Not resumed (recomputed as before, and ``plan_history`` says why): windows or aggregates
computed in the network (their state went with the failed plan), samples, window joins, a
subscription being switched between plans (``reoptimisation``), and one that was fed an item
whose origin is not known (one Spark handed on again after a restart) or nothing yet. A subscription over the past
resumes too: its new copy goes on from where its replay stood.
"""

from __future__ import annotations

from sharing.planner import Plan

from ..subscriptions.record import SubscriptionRecord
from ..subscriptions.track_switch import TrackSwitch


def resume_points(record: SubscriptionRecord, deliveries: dict, moving: bool) -> tuple[dict[str, int], str]:
    """Per input variable, the original's item the new plan starts at; or {} and why it is
    recomputed instead. Called with the peer's lock held (``deliveries``: ``PeerState``'s)."""
    runtime = record.runtime
    if moving:
        return {}, "it was being switched to another plan"
    if record.sample != 1:
        return {}, "it reads a sample"
    if runtime.joins:
        return {}, "it joins its inputs within windows"
    for inp in runtime.analysis.properties.inputs:
        chain = record.chains.get(inp.variable)
        if not inp.per_item or (chain is not None and not all(lv.properties.per_item for lv in chain.levels)):
            return {}, f"${inp.variable}'s operators are not per-item"
    for stream in record.inputs.values():
        for consumer, _ in deliveries.get(stream, ()):
            switch = getattr(consumer, "switch", None)
            if isinstance(switch, TrackSwitch) and switch.runtime is runtime and not (switch.complete and not switch.failed):
                return {}, "it was being switched to another plan"
    points: dict[str, int] = {}
    for inp in runtime.analysis.properties.inputs:
        at = runtime.resume_at.get(inp.variable)
        if at is None:
            return {}, (f"${inp.variable} has not received an item yet" if inp.variable not in runtime.resume_at
                        else f"an item of ${inp.variable} did not say which item of the original it came from")
        points[inp.variable] = at
    return points, ""


def resume_starts(plan: Plan, points: dict[str, int]) -> dict[str, int]:
    """Where each new copy of a replay plan (``Planner.replay_plan``) starts: at the resume
    point of its input. Its operators' streams drop nothing (they run from that item on)."""
    return {p.new_streams[0].id: points[p.input_properties.variable] for p in plan.parts}
