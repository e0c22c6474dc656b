"""A plan's result streams delivered to its subscription at the subscriber's super-peer, before
the plan is committed (``control_plane``, and a re-plan after a failure: ``recovery.replanning``)."""

from __future__ import annotations

from functools import partial

from sharing.planner import Plan
from sharing.stream_properties import joined_by

from ..data.positions import StreamPositions
from ..peer_state import PeerState
from ..subscriptions.record import SubscriptionRecord


def _join_began(state: PeerState, record: SubscriptionRecord, starts: dict[str, int]) -> None:
    """Where the joined stream it reads began for it, kept with its plan: a re-plan after a
    failure or a restart here computes its join from there (``SubscriptionRuntime.join_starts``)."""
    if starts:
        record.starts.update(starts)
        record.store_plan(state.store)


def take_inputs(state: PeerState, positions: StreamPositions, record: SubscriptionRecord, plan: Plan) -> dict[str, int]:
    """Deliver the plan's result streams to the subscription here, before anything is
    committed: every item and the end of a new stream reach it. A stream that already ended
    here (a reused one) will not end again, so the subscription's input ends now. Returns
    the number of the first item it will read (``positions``) of each stream that already
    flows here."""
    # (a part feeding a join placed in the network is taken there; the joined stream comes here)
    inputs = {p.input_properties.variable: p.result_stream for p in plan.parts if not p.feeds_join}
    reads: dict[str, int] = {}
    with state.lock:
        record.plan = plan
        record.inputs = inputs
        # (before anything is fed: whether it reads a joined stream's groups, this plan decides)
        joined = next((p for p in plan.parts if joined_by(p.input_properties)), None)
        record.runtime.join_upstream(joined is not None, joined.on_groups if joined is not None else None)
        record.runtime.on_join_start = partial(_join_began, state, record) if joined is not None else None
        for variable, stream in inputs.items():
            if state.table.has_ended(stream):
                record.runtime.feed(variable, [], end=True)
                continue
            state.deliveries.setdefault(stream, []).append((record.runtime, variable))
            original = state.originals.get(stream)
            at = (original.logged if original is not None
                  else positions.next.get(stream))
            if at is not None:
                reads[stream] = at
    return reads
