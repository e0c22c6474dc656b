"""The reading loop's rules, apart from how a read is made (blocking or awaited).

A reader of results must survive what a long-running subscription meets: its super-peer
restarting (it takes its subscriptions back from its state directory), a network blip, a replay
of the past that brings nothing for a while. ``Idle`` decides when a loop ends (the stream closed,
or nothing came for the idle timeout); ``Reconnect`` decides how long to wait before reading again
from the same offset after a transient failure, and when to give up. The synchronous client and
the ``asyncio`` one share both, so they behave the same.
"""

from __future__ import annotations

import time

from .replies import ResultBatch, ThinPeerError

#: how long a reader keeps trying to reach its super-peer again before it gives up (seconds)
RECONNECT_S = 60.0


class Reconnect:
    """Exponential back-off (0.1 s doubling to 2 s) for transient failures, until ``retry_s``
    have passed since the first failure in a row; any other failure is raised at once."""

    def __init__(self, retry_s: float = RECONNECT_S) -> None:
        self.retry_s = retry_s
        self.failing_since: float | None = None
        self.delay_s = 0.1

    def delay(self, error: ThinPeerError) -> float:
        """How long to wait before the next try, or ``error`` raised if there is none."""
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        if not error.transient or now + self.delay_s - self.failing_since > self.retry_s:
            raise error
        delay, self.delay_s = self.delay_s, min(self.delay_s * 2, 2.0)
        return delay

    def succeeded(self) -> bool:
        """Record a call that went through; whether it ended a run of failures (a reconnect)."""
        reconnected = self.failing_since is not None
        self.failing_since, self.delay_s = None, 0.1
        return reconnected


class Idle:
    """Where a reading loop stands: the next offset, and when something last happened.

    The idle clock restarts when items come, while the subscription is degraded (it is planned
    again or heals: it is waited for), while a replay of the past goes on (not idle, even while
    it brings no results), and after a reconnect."""

    def __init__(self, offset: int, idle_timeout: float | None) -> None:
        self.offset = offset
        self.idle_timeout = idle_timeout
        self.last = time.monotonic()
        self.past = ""

    def touch(self) -> None:
        self.last = time.monotonic()

    def after(self, batch: ResultBatch) -> str:
        """``"more"`` to read on, ``"closed"`` (the last batch: confirm it) or ``"idle"``."""
        if batch.items:
            self.offset = batch.next_offset
        if batch.items or batch.degraded or batch.past != self.past:
            self.touch()
        self.past = batch.past
        if batch.closed:
            return "closed"
        if self.idle_timeout is not None and time.monotonic() - self.last >= self.idle_timeout:
            return "idle"
        return "more"
