"""Which subscriptions keep their plans whatever is cheaper (issue 31).

A re-optimisation round at one super-peer credits a move with what the other readers of its
chain would save by moving next (``sharing.reoptimisation.follow_gain``). Readers that will
never move save nothing: joins, those registered with another strategy, and every
subscription of a super-peer that does not re-optimise or whose executor cannot say where items
come from. Each peer names its own in its usage report (``staying``).
The others then plan over that list (``PlanningSnapshot.staying``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sharing.planner import Strategy

from ..subscriptions.record import SubscriptionRecord


def stays(record: SubscriptionRecord, synchronous: bool) -> str:
    """Why this subscription keeps its plan whatever is cheaper ("" if it may move).
    ``synchronous``: this peer's executor says where each output came from (the inline one)."""
    if record.strategy != Strategy.SHARING:
        return f"registered with strategy {record.strategy.value}"
    if len(record.runtime.analysis.properties.inputs) != 1:
        return "reads several inputs (joins are not moved between plans yet)"
    if not synchronous:
        return "this peer's executor does not say where items come from (only the inline one does)"
    return ""


def staying_here(peer: str, records: Iterable[SubscriptionRecord], moves: bool, synchronous: bool) -> frozenset[str]:
    """What a peer tells the others stays: its id if nothing moves there (``moves``: its
    re-optimisation is on), else the subscriptions that stay."""
    if not (moves and synchronous):
        return frozenset({peer})
    return frozenset(r.runtime.id for r in records if stays(r, synchronous))
