"""The two-phase transactions at one super-peer, in one place (DESIGN.md §5).

A planning super-peer installs a plan as one transaction: it *reserves* the plan's streams on
every peer they pass, then *commits* or *aborts* them (``control.two_phase``). At this peer a
transaction is one ``Transaction`` record:

* its **reservation**: the streams it holds reserved here until it commits or aborts — counted in
  this peer's usage, so that no other plan is promised the same capacity;
* its **lease**: a transaction whose coordinator never comes back (it stopped, or lost this
  peer) ends by itself after ``RESERVATION_TTL_S``, far longer than any installation takes; a
  commit that comes later is refused (the record stays a while as *expired*), never committed empty;
* its **holder**: the planning peer (its certified id; None on an insecure network or for this
  peer's own plans) and the subscription, which only that peer may commit or abort;
* its **pins**: the streams a plan reuses here (and their ancestors) stay here until it commits
  or aborts — the subscription is their user from the reservation on, so that the last other
  user leaving meanwhile does not remove a stream the plan is about to read (its tail is not
  cut back either); an abort or a lapsed lease lets them go (``Participant.unpin``);
* the **replays it holds**: a past subscription served from a replay of a stream registered here
  that is already running (``sharing.replay_plans``) holds that replay before the item it starts
  at (``history.log_replay``), until its new copy is installed downstream. Those holds outlast
  the commit here (the coordinator lets them go with a last abort, once every peer has
  committed) and end with the transaction's lease.

"Reserve" is about capacity, "hold" only about replays. Every method takes the peer state's lock
(the same re-entrant lock, mostly held by the caller already), so the data plane's replay
threads, the control plane and the services see one state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sharing.stream_table import NetworkStream

# A reservation whose coordinator never commits or aborts it (the coordinator stopped, or can no
# longer reach this peer) is dropped after this long: far longer than any installation takes.
RESERVATION_TTL_S = 60.0


@dataclass
class Transaction:
    """One installation's transaction at this peer."""

    id: str
    coordinator: str | None  # the peer that planned it (certified; None: insecure, or this peer)
    subscription: str
    lease_until: float  # ``time.monotonic()`` after which it ends by itself
    streams: list[NetworkStream] = field(default_factory=list)  # reserved here until commit or abort
    replays: dict[str, int] = field(default_factory=dict)  # running copy -> the item it is held before
    lapsed: set[str] = field(default_factory=set)  # running copies whose hold ended before the transaction
    pinned: list[str] = field(default_factory=list)  # reused streams kept here; the subscription is their user
    added: list[str] = field(default_factory=list)  # those of them it was not a user of before


class Transactions:
    def __init__(self, lock: threading.RLock, clock: Callable[[], float] = time.monotonic,
                 ttl_s: float | None = None) -> None:
        """``ttl_s``: a lease's length (default ``RESERVATION_TTL_S``, read when a lease begins)."""
        self.lock = lock
        self.clock = clock
        self._ttl_s = ttl_s
        self.open: dict[str, Transaction] = {}
        self.expired: dict[str, tuple[float, Transaction]] = {}  # txn -> (when, the record as it ended)
        self.granted = 0  # reservations granted here: each changes what planners read
        self.on_lapse: Callable[[Transaction], None] | None = None  # a lease ran out (its pins go)

    @property
    def ttl_s(self) -> float:
        return self._ttl_s if self._ttl_s is not None else RESERVATION_TTL_S

    # ------------------------------------------------------------------ reservations

    def reserve(self, txn: str, streams: list[NetworkStream], coordinator: str | None, subscription: str,
                pinned: list[str] = (), added: list[str] = ()) -> None:
        """``txn`` holds ``streams`` reserved here, for ``coordinator``'s ``subscription``, and keeps
        the ``pinned`` streams (the subscription was made a user of those ``added``). A reservation
        of pins only changes nothing a planner reads."""
        with self.lock:
            self.open[txn] = Transaction(txn, coordinator, subscription, self.clock() + self.ttl_s, list(streams),
                                         pinned=list(pinned), added=list(added))
            if streams:
                self.granted += 1

    def pinned(self) -> set[str]:
        """The streams open transactions keep here."""
        with self.lock:
            return {sid for t in self.open.values() for sid in t.pinned}

    def reserved(self) -> list[NetworkStream]:
        """The streams the open transactions hold reserved here, after ending those whose lease ran out."""
        with self.lock:
            self.sweep()
            return [s for t in self.open.values() for s in t.streams]

    def get(self, txn: str) -> Transaction | None:
        """The open transaction ``txn`` (reserved, or committed and still holding replays)."""
        with self.lock:
            return self.open.get(txn)

    def known(self, txn: str) -> Transaction | None:
        """``txn`` open here, or as it was when its lease ran out (None if unknown)."""
        with self.lock:
            self.sweep()
            return self.open.get(txn) or (self.expired[txn][1] if txn in self.expired else None)

    def is_expired(self, txn: str) -> bool:
        """Whether ``txn``'s lease ran out before it committed or aborted here."""
        with self.lock:
            self.sweep()
            return txn in self.expired

    def commit(self, txn: str) -> list[NetworkStream]:
        """The streams ``txn`` reserved, no longer reserved: they are being installed. The record
        stays while it holds replays (its coordinator's abort lets them go)."""
        with self.lock:
            t = self.open.get(txn)
            if t is None:
                return []
            streams, t.streams, t.pinned, t.added = t.streams, [], [], []
            if not t.replays and not t.lapsed:
                del self.open[txn]
            return streams

    def end(self, txn: str) -> Transaction | None:
        """``txn`` is over here (aborted, or let go after its commit): its reservation and the
        replays it held. Returns the record as it was (an expired one too), None if unknown."""
        with self.lock:
            self.sweep()
            t = self.open.pop(txn, None)
            if t is None and txn in self.expired:
                t = self.expired[txn][1]
            return t

    def sweep(self) -> None:
        """End the transactions whose lease ran out; forget those expired ten leases ago (a
        commit that late is long given up). Called with the lock held."""
        now = self.clock()
        for txn in [t for t, record in self.open.items() if record.lease_until < now]:
            record = self.open.pop(txn)
            record.lapsed |= set(record.replays)
            record.replays.clear()
            self.expired[txn] = (now, record)
            if record.pinned and self.on_lapse is not None:
                self.on_lapse(record)
        for txn in [t for t, (at, _) in self.expired.items() if at < now - 10 * self.ttl_s]:
            del self.expired[txn]

    def renew(self, txn: str) -> None:
        """``txn`` lasts another lease from now: the replay's origin, committing first, keeps its
        holds past every reservation the plan still has to commit elsewhere."""
        with self.lock:
            t = self.open.get(txn)
            if t is not None:
                t.lease_until = self.clock() + self.ttl_s

    # ------------------------------------------------------------------ replay holds

    def hold_replay(self, txn: str, copy: str, item: int) -> None:
        """The replay filling ``copy`` sends nothing from ``item`` on while ``txn`` is open."""
        with self.lock:
            t = self.open.get(txn)
            if t is None:
                raise KeyError(f"no transaction {txn} is open here to hold the replay filling {copy}")
            t.replays[copy] = item

    def replay_limit(self, copy: str) -> int | None:
        """The first item the replay filling ``copy`` may not send now (None: not held)."""
        with self.lock:
            self.sweep()
            return min((t.replays[copy] for t in self.open.values() if copy in t.replays), default=None)

    def holds_replay(self, txn: str, copy: str) -> bool:
        """Whether ``txn`` still holds the replay filling ``copy`` (its lease has not run out, the
        replay was not removed)."""
        with self.lock:
            self.sweep()
            t = self.open.get(txn)
            return t is not None and copy in t.replays

    def lost_replays(self, txn: str) -> list[str]:
        """The running copies ``txn`` held a replay of and holds no more (lapsed, or removed)."""
        t = self.known(txn)
        return sorted(t.lapsed) if t is not None else []

    def replay_gone(self, copy: str) -> None:
        """The replay filling ``copy`` ended (its copy was removed): no transaction holds it any more."""
        with self.lock:
            for t in self.open.values():
                if t.replays.pop(copy, None) is not None:
                    t.lapsed.add(copy)

    def held_by(self, txn: str) -> dict[str, int]:
        """Running copy -> the item ``txn`` holds its replay before."""
        with self.lock:
            t = self.open.get(txn)
            return dict(t.replays) if t is not None else {}
