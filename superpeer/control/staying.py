"""Which subscriptions keep their plans whatever is cheaper, and which wait before they may
move (issue 31).

A re-optimisation round at one super-peer credits a move with what the other readers of its
chain would save by moving next (``sharing.reoptimisation.follow_gain``). Readers that will
never move save nothing: joins, those registered with another strategy, and every
subscription of a super-peer that does not re-optimise or whose executor cannot say where items
come from. Each peer names its own in its usage report (``staying``).
The others then plan over that list (``PlanningSnapshot.staying``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from sharing.planner import Strategy

from ..subscriptions.record import SubscriptionRecord, past_progress, past_text


def stays(record: SubscriptionRecord, synchronous: bool) -> str:
    """Why this subscription keeps its plan whatever is cheaper ("" if it may move).
    ``synchronous``: this peer's executor hands a push's outputs on, with where each came from,
    before it returns (the inline one), as a switch between plans needs."""
    if record.strategy != Strategy.SHARING:
        return f"registered with strategy {record.strategy.value}"
    if len(record.runtime.analysis.properties.inputs) != 1:
        return "reads several inputs (joins are not moved between plans yet)"
    if not synchronous:
        return "this peer's executor hands its outputs on after it took the items (only the inline one does at once)"
    return ""


def staying_here(peer: str, records: Iterable[SubscriptionRecord], moves: bool, synchronous: bool,
                 cooldown_s: float | None = None, now: float | None = None) -> frozenset[str]:
    """What a peer tells the others stays: its id if nothing moves there (``moves``: its
    re-optimisation is on), else the subscriptions that stay — for now, those over the past
    not seen caught up yet too (``replaying_its_past``: they cannot follow a move yet), and
    those that damping holds for more than a cool-down yet (``held_back``)."""
    if not (moves and synchronous):
        return frozenset({peer})
    now = time.time() if now is None else now
    return frozenset(r.runtime.id for r in records
                     if stays(r, synchronous) or (r.from_start and not r.caught_up)
                     or (cooldown_s is not None and held_back(r, cooldown_s, now)))


def held_back(record: SubscriptionRecord, cooldown_s: float, now: float) -> bool:
    """Whether damping (or the back-off after cancelled moves) keeps this subscription from
    moving for more than one more cool-down.
    Another peer's look-ahead credits a move with what the followers save by moving next; a
    follower that moved often lately waits up to 16 cool-downs, so the credited move happened
    and the saving did not (the misses of ``benchmarks/sharing_over_time.py``: a subscription
    took a stream of its own for its followers' sake, and they stayed). Reported as staying,
    it is credited with nothing until its wait is nearly over."""
    wait, _ = cool_down(record, cooldown_s, now)
    return record.last_replan + wait - now > cooldown_s  # (``last_replan`` lies ahead after cancelled moves)


def replaying_its_past(record: SubscriptionRecord, reached: Mapping[str, int]) -> str:
    """Why a subscription over the past waits before it may move ("" once its replay has caught
    up, as seen here: ``reached``, the next item of each stream passing this peer): until then
    it reads a copy of its own, filled from the log."""
    if not record.from_start or record.caught_up:
        return ""
    if not record.past:
        return "over the past, replayed where its stream is registered (its progress is not seen here)"
    behind = past_progress(record, reached)
    if behind:
        return f"replaying its past ({past_text(behind)})"
    record.caught_up = True
    return ""


FLAP_MEMORY = 16  # a move counts towards the next one's wait for this many cool-downs
MAX_DOUBLINGS = 4  # the wait doubles with each move so counted, up to 2**4 cool-downs


def cool_down(record: SubscriptionRecord, cooldown_s: float, now: float) -> tuple[float, int]:
    """(How long after its last move this subscription waits before the next, the moves that
    count.) A move that one round at one peer judges cheaper can be undone by moves that rounds
    at other peers make meanwhile, over views of the same moment: in the live grid
    (``benchmarks/sharing_over_time.py``) subscriptions moved every cool-down, back and forth,
    each switch carrying both plans while it ran. So each move within ``FLAP_MEMORY`` cool-downs
    doubles the wait; a subscription that moves once waits one cool-down, as before, and a
    failure's re-plan starts the count again, and so does any peer or link going down or coming
    back (``recovery.replanning``)."""
    recent = sum(1 for t in record.moves if now - t < FLAP_MEMORY * cooldown_s)
    return cooldown_s * 2 ** min(max(recent - 1, 0), MAX_DOUBLINGS), recent


def cooling(record: SubscriptionRecord, cooldown_s: float) -> str:
    """Why it waits after its last move ("" if it does not)."""
    now = time.time()
    wait, moves = cool_down(record, cooldown_s, now)
    if now - record.last_replan >= wait:
        return ""
    return (f"re-planned {now - record.last_replan:.0f} s ago (cool-down {wait:g} s"
            + (f": moved {moves} times in the last {FLAP_MEMORY * cooldown_s:g} s)" if moves > 1 else ")"))


def note_move(record: SubscriptionRecord, cooldown_s: float, now: float) -> None:
    record.moves = [t for t in record.moves if now - t < FLAP_MEMORY * cooldown_s] + [now]


def backing_off(record: SubscriptionRecord) -> str:
    """Why it waits after cancelled moves ("" if it does not): raised samples wait too."""
    if record.cancels and time.time() < record.last_replan:
        return (f"{record.cancels} move(s) cancelled in a row: the next try in "
                f"{record.last_replan - time.time():.0f} s")
    return ""
