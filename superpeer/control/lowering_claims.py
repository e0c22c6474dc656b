"""Who lowers first on a link under pressure: the link's sender decides (issue 35).

Every super-peer adapts the samples of the approximate subscriptions registered at it
(``adaptive_sampling``). Subscriptions of several super-peers may cross one pressured link;
each peer, judging from the same measurements alone, would lower its own at once — all of them
in the same second, more than the link needed, and with no regard to the others' weights.

So a peer asks before it lowers: it **claims** the link from the peer that sends on it (the
only peer it needs to ask: that peer measures the link and holds its buffer), with its
subscription's priority — the share of its items it keeps for its weight, 1/(R·w), as in the
local choice. The sender gathers the claims for ``GATHER_S`` (longer than a sampling round, so
that every peer with a subscription on the link has claimed once), then grants the link to the
claim of the highest priority, ties broken by the subscription's id so that every peer would
pick the same; and to no other for ``SETTLE_S`` (the measured rates need that long to show the
change). After each settle the claims are gathered again for ``GATHER_S``, so that every claimant
has said its priority after the last change (the one just lowered counts at half its old one
until it claims again). A claim not renewed for ``FORGET_S`` is dropped: its pressure went, or
its peer stopped asking. A subscription whose move failed after its grant may try again within
the settle.

Pure: no sockets, no threads (the node locks around it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

GATHER_S = 2.0  # claims on a newly pressured link are gathered this long before the first grant
SETTLE_S = 4.0  # after a grant, the link is granted to no other for this long
MAX_CLAIMS = 1024  # per link: what one peer holds for the others at most
FORGET_S = 10.0  # a claim not renewed for this long is dropped (a peer asks again every few seconds)


@dataclass
class Claim:
    subscription: str
    priority: float  # the share of its items it keeps for its weight: the highest lowers first
    first: float  # when it was first claimed (in this episode of pressure)
    last: float  # when it was last renewed


@dataclass(frozen=True)
class Grant:
    granted: bool
    reason: str = ""  # why not (or who goes first)


class LoweringClaims:
    """At one super-peer: the claims on the links it sends on, by the neighbour at their end."""

    def __init__(self, me: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.me = me
        self.clock = clock
        self.claims: dict[str, dict[str, Claim]] = {}  # neighbour -> subscription -> its claim
        self.granted: dict[str, tuple[str, float]] = {}  # neighbour -> (subscription, when)
        self.grants = 0

    def claim(self, neighbour: str, subscription: str, priority: float) -> Grant:
        """May ``subscription`` lower its sample now for the link to ``neighbour``?"""
        if not (math.isfinite(priority) and priority > 0):
            raise ValueError(f"a claim's priority is a share kept per weight, above 0: not {priority!r}")
        now = self.clock()
        link = self.claims.setdefault(neighbour, {})
        for sid, c in list(link.items()):
            if now - c.last > FORGET_S:
                del link[sid]
        had = link.get(subscription)
        if had is None and len(link) >= MAX_CLAIMS:
            return Grant(False, f"link {self.me}–{neighbour} holds {MAX_CLAIMS} claims already")
        link[subscription] = Claim(subscription, priority, had.first if had else now, now)
        name = f"{self.me}–{neighbour}"
        last = self.granted.get(neighbour)
        if last is not None and now - last[1] < SETTLE_S:
            if last[0] == subscription:  # (its move failed after the grant: it may try again)
                return Grant(True)
            return Grant(False, f"{last[0]} lowered for link {name} {now - last[1]:.1f} s ago")
        # (claims gathered on a newly pressured link, and again after each settle: each claimant
        # says its priority now — the one just lowered keeps half its own until it does)
        since = min(c.first for c in link.values())  # (a new episode: its first claim)
        if last is not None:
            since = max(since, last[1] + SETTLE_S)
        if now - since < GATHER_S:
            return Grant(False, f"the claims on link {name} are being gathered")
        best = max(link.values(), key=lambda c: (self._priority(c, last), c.subscription))
        if best.subscription != subscription:
            return Grant(False, f"{best.subscription} goes first on link {name} (it keeps "
                                f"{self._priority(best, last):.3g} of its items per weight, this one {priority:.3g})")
        self.granted[neighbour] = (subscription, now)
        self.grants += 1
        return Grant(True)

    @staticmethod
    def _priority(claim: Claim, last: tuple[str, float] | None) -> float:
        """A claim's priority, or half of it for the subscription lowered last while it has not
        claimed since (its sample is twice as coarse: it keeps half as much per weight)."""
        if last is not None and claim.subscription == last[0] and claim.last <= last[1]:
            return claim.priority / 2
        return claim.priority

    def status(self) -> dict:
        now = self.clock()
        return {"grants": self.grants,
                "claims": {f"{self.me}–{n}": {sid: round(c.priority, 4) for sid, c in link.items()
                                              if now - c.last <= FORGET_S}
                           for n, link in self.claims.items() if link},
                "last_granted": {f"{self.me}–{n}": {"subscription": sid, "s_ago": round(now - at, 1)}
                                 for n, (sid, at) in self.granted.items() if now - at <= FORGET_S}}
