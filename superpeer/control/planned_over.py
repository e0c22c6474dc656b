"""What a re-optimisation round planned a subscription over: a periodic round plans it again only
once that has changed (issue 31: the rounds' cost; issue 37: a control plane whose idle cost
does not grow with what runs on it).

SUBSCRIBE's answer for a running subscription depends on the tables of the super-peers its
scoped lookup reached (its input's streams, their routes, the reservations there), on the
statistics and load it priced with, and on the subscription's own state (its inputs, sample and
the streams it leaves for its followers). Every change to a peer's table or reservations
changes that peer's ``version``; and every new stream of an original is made at a peer that a
stream of it already passes, so a stream of the input that was added, moved or removed changes
the version of a peer the last lookup reached. Each peer reports its version with its heartbeat
(``PeerState.usage_report``).

So, while every peer the last plan read still reports the version it was read at and the
subscription is as it was, planning it again would give the same answer: a periodic round skips
it — its lookups at other peers and SUBSCRIBE — and so does a round woken by measured rates that
drifted (prices do not use them). At most for ``RECONSIDER_S``: the statistics and the measured
load, which no version counts, may have moved meanwhile. Rounds woken by an event that changes
what plans read (a registration or an unsubscription, a failure, a peer back) plan every
subscription.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..peer_state import PeerState
from ..subscriptions.record import SubscriptionRecord

RECONSIDER_S = 30.0  # a subscription skipped as unchanged is planned again after this long anyway


@dataclass(frozen=True)
class PlannedOver:
    versions: tuple[tuple[str, int], ...]  # (peer, version its table was read at), the peers asked
    own: tuple  # the subscription's own state the plan depended on
    at: float  # when (monotonic)


def own_state(record: SubscriptionRecord) -> tuple:
    return (tuple(sorted(record.inputs.items())), record.sample, record.plan_id, record.held_off())


def planned_over(versions: Mapping[str, int], record: SubscriptionRecord) -> PlannedOver:
    """``versions``: the planning view's (``RemotePlanningView.versions``)."""
    return PlannedOver(tuple(sorted(versions.items())), own_state(record), time.monotonic())


def unchanged(over: PlannedOver | None, record: SubscriptionRecord, state: PeerState) -> bool:
    """Whether the subscription is still as ``over`` planned it, and so is every peer asked then
    (as last heard: its heartbeat or a lookup; this peer as it is)."""
    if over is None or time.monotonic() - over.at >= RECONSIDER_S or own_state(record) != over.own:
        return False
    return all((state.version if peer == state.id else state.peer_usage.get(peer, {}).get("version")) == version
               for peer, version in over.versions)
