"""A subscription moving live to a new plan (``reoptimisation``): what the re-optimiser keeps
while the switch is pending, so that it can finish the move or undo it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..data.narrowing import inner, rewrapped
from ..peer_state import PeerState
from ..subscriptions.record import SubscriptionRecord
from ..subscriptions.runtime import SubscriptionRuntime
from ..subscriptions.track_switch import TrackSwitch
from .count_handover import CountHandover

STALLED_S = 10.0  # a new plan that has delivered nothing this long after the move began …
STALLED_ITEMS = 100  # … while the old one delivered this many items (times its sample) is given up


@dataclass
class Move:
    """A subscription moving to a new plan: its switch, and what to remove or restore after."""

    switch: TrackSwitch
    record: SubscriptionRecord
    entry: dict  # its plan history entry (how the switch went)
    ids: list[str]  # the old plan's ids: removed once the switch is done
    peers: set[str]  # … at these peers
    paths: tuple  # the old plan's paths (a break there cancels the switch)
    restore: dict  # the record's fields before the move (a cancel puts them back)
    new_id: str
    new_peers: set[str]  # where the new plan is (a cancel removes it there)
    progress: str | None  # a stream here showing how far the old plan has come (``progress_stream``)
    handover: CountHandover | None = None  # a count window to align (``count_handover``)
    since: float = field(default_factory=time.monotonic)


def attach(state: PeerState, switch: TrackSwitch, runtime: SubscriptionRuntime) -> None:
    """Called with the lock held: the switch goes in front of the runtime on the old plan's
    stream, and takes the new plan's. It starts from what the old stream fed the runtime
    straight so far (``fed_high``), or from the item an earlier switch onto the old stream took
    over at (``took_over_at``: what the old stream still sends from before it is dropped, as
    that switch dropped it): the new plan's first item may be older than that — it reuses a
    stream that reaches this peer later — and must not be taken twice."""
    switch.fed_before(state.fed_high.get(switch.old_stream))
    resumed = runtime.resume_at.get(switch.variable)  # (a plan resumed after a failure: its
    if resumed is not None:  # stream has not fed what the failed one did, the runtime has it)
        switch.fed_before((resumed - 1, -1))
    entries = state.deliveries.get(switch.old_stream, [])
    for r, _ in entries:
        earlier = getattr(r, "switch", None)
        if earlier is not None and earlier.runtime is runtime and earlier.at is not None:
            switch.took_over_at(earlier.at)
    state.deliveries[switch.old_stream] = [(rewrapped(r, switch.old), v) if getattr(r, "runtime", r) is runtime
                                           and v == switch.variable else (r, v) for r, v in entries]
    if state.table.has_ended(switch.new_stream):
        switch.from_new([], True, None)
    else:
        state.deliveries.setdefault(switch.new_stream, []).append((switch.new, switch.variable))


def detach(state: PeerState, switch: TrackSwitch, old_to_runtime: bool, keep_new: bool) -> None:
    """Called with the lock held: the old plan's stream stops feeding the switch — and feeds
    the runtime alone again (``old_to_runtime``: the new plan failed) or not at all; the new
    plan's stream goes on through the switch (``keep_new``: it is done, and still drops what
    the new plan sends from before the switch item) or stops."""
    old = state.deliveries.get(switch.old_stream, [])
    state.deliveries[switch.old_stream] = [(rewrapped(r, switch.runtime), v) if inner(r) is switch.old else (r, v)
                                           for r, v in old if inner(r) is not switch.old or old_to_runtime]
    if not keep_new:
        state.deliveries[switch.new_stream] = [e for e in state.deliveries.get(switch.new_stream, [])
                                               if inner(e[0]) is not switch.new]


def restore(record: SubscriptionRecord, old: dict) -> None:
    """Called with the lock held: the record as it was before the move (a route broken on it
    is then seen, and planned around, as for any subscription)."""
    record.plan, record.inputs, record.owner, record.sample = old["plan"], old["inputs"], old["owner"], old["sample"]
    record.stale, record.paths, record.incarnations = old["stale"], old["paths"], old["incarnations"]


def stalled_new_plan(move: Move) -> str:
    """Why the new plan is given up before the switch's deadline ("" if it is not): it has
    delivered nothing while the old one, computing the same items, delivered many — it reuses a
    stream that was removed between its planning and its commit, say. The old plan goes on and
    the move is tried again later. Not a count window held until aligned, which delivers nothing
    until then; a coarser sample delivers fewer items, so it is given as many more."""
    switch = move.switch
    if switch.at is not None or move.handover is not None or switch.partial_windows:
        return ""
    enough = STALLED_ITEMS * max(1, switch.sample or 1)
    if switch.before_new < enough or time.monotonic() - move.since < STALLED_S:
        return ""
    return (f"the new plan delivered nothing in {time.monotonic() - move.since:.0f} s while the old one "
            f"delivered {switch.before_new} items")
