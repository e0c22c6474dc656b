"""Back-pressure: a batch enters this super-peer only when the links it will leave on have room.

Without it, a link slower than its input had its sender queue grow to millions of items and then
drop them (lost for every subscription downstream), holding gigabytes meanwhile. Here each
outbound link holds at most ``LinkBuffer`` (bytes and items, queued and in flight together); a
batch that would go out on a full link waits *before* it is taken — before a publisher's batch is
logged, before a neighbour's batch is acknowledged — so nothing is ever dropped and the pressure
travels upstream hop by hop: an unacknowledged batch stops its sender's window, the sender's link
fills, its own inputs wait, and at the stream's first super-peer the publisher is told to wait
(``HELD_BACK``) and tries again. Flink's credit-based flow control and Kafka's bounded producer
buffer answer the same problem the same way: slow the source, lose nothing.

What a batch of stream S must wait for: every link that S, or a stream computed or copied here
from S (recursively), leaves this peer on. A link whose neighbour cannot be reached is not waited
for (its queue is the replay buffer of a failure, planned around by recovery); a subscriber's
results are bounded by its retention, never by the network. Overshoot is at most one batch per
link: a batch is admitted when the link is below its bound, whatever the batch's size, so an item
larger than the bound still travels.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

#: the start of the reason a publisher is told to wait (``RESOURCE_EXHAUSTED``): nothing of its
#: batch was taken, and the same batch may be sent again
HELD_BACK = "held back: "
TICK_S = 5.0  # how often a wait says it is still waiting (a neighbour's sender restarts its clock)


@dataclass(frozen=True)
class LinkBuffer:
    """What one outbound link may hold, queued and in flight: above either bound, batches bound
    for it wait (``DataLimits.link_buffer_bytes`` and ``link_buffer_items``)."""

    max_bytes: int = 4 << 20
    max_items: int = 200_000


class Room(Protocol):
    """Where a batch goes next, as back-pressure sees it: an outbound link (``LinkRoom``) or an
    executor with a backlog of its own (Spark's feed)."""

    name: str  # for people: "the link to SP5", "the Spark executor"

    def has_room(self, timeout_s: float) -> bool:
        """Whether it holds less than its bound (waiting up to ``timeout_s`` for it to)."""

    def fullness(self) -> str:
        """What it holds, for people ("3.9 MiB in 21,000 items")."""

    @property
    def reachable(self) -> bool:
        """False while it cannot take anything at all (waiting would wait for recovery)."""


class Link(Protocol):
    """An outbound link's queue (``forwarding.Forwarder``)."""

    neighbour: str
    reachable: bool

    def wait_for_room(self, bound: LinkBuffer, timeout_s: float) -> bool: ...

    def fullness(self) -> str: ...


@dataclass(frozen=True)
class LinkRoom:
    """An outbound link with the bound this peer puts on it."""

    link: Link
    bound: LinkBuffer

    @property
    def name(self) -> str:
        return f"the link to {self.link.neighbour}"

    def has_room(self, timeout_s: float) -> bool:
        return self.link.wait_for_room(self.bound, timeout_s)

    def fullness(self) -> str:
        return f"{self.link.fullness()} (bound {self.bound.max_bytes / (1 << 20):.1f} MiB)"

    @property
    def reachable(self) -> bool:
        return self.link.reachable


@dataclass
class HeldBack:
    """How long a stream's batches waited here, in all, and for what last."""

    seconds: float = 0.0
    waits: int = 0
    reason: str = ""
    since: float | None = None  # monotonic: waiting now since then (None: not waiting)


@dataclass(frozen=True)
class Waited:
    """What a wait came to: ``room`` (the batch may go), how long it took, and what it waited
    for ("" when it did not)."""

    room: bool
    seconds: float = 0.0
    reason: str = ""


NO_WAIT = Waited(True)


@dataclass
class Backpressure:
    """The waits of one super-peer's inputs. ``rooms(stream)`` (called without the node's lock:
    it takes it) gives where a batch of ``stream`` would go next: links, an executor."""

    rooms: Callable[[str], list[Room]]
    held: dict[str, HeldBack] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, stream: str, until: float | None) -> Waited:
        """Wait until every link a batch of ``stream`` reaches has room, or ``until``
        (monotonic; None: no limit) has passed. The links are looked up again every ``TICK_S``
        of waiting: a re-plan may have moved the stream off a slow or failed link meanwhile."""
        started, reason = None, ""
        try:
            while True:
                rooms = [room for room in self.rooms(stream) if room.reachable]
                waiting = next((room for room in rooms if not room.has_room(0.0)), None)
                if waiting is None:
                    return NO_WAIT if started is None else Waited(True, time.monotonic() - started, reason)
                now = time.monotonic()
                if started is None:
                    started = now
                    self._begin(stream, now)
                reason = f"stream {stream} waits for {waiting.name}, which holds {waiting.fullness()}"
                self._note(stream, reason)
                left = TICK_S if until is None else min(TICK_S, until - now)
                if left <= 0:
                    return Waited(False, now - started, reason)
                waiting.has_room(left)
        finally:
            if started is not None:
                self._end(stream, time.monotonic() - started)

    def _begin(self, stream: str, now: float) -> None:
        with self.lock:
            held = self.held.setdefault(stream, HeldBack())
            held.waits += 1
            held.since = now

    def _note(self, stream: str, reason: str) -> None:
        with self.lock:
            self.held.setdefault(stream, HeldBack()).reason = reason

    def _end(self, stream: str, seconds: float) -> None:
        with self.lock:
            held = self.held.setdefault(stream, HeldBack())
            held.seconds += seconds
            held.since = None

    def forget(self, stream: str) -> None:
        """A stream removed here: its record goes (one waiting now puts it back when done)."""
        with self.lock:
            held = self.held.get(stream)
            if held is not None and held.since is None:
                del self.held[stream]

    def status(self) -> dict:
        """Per stream that ever waited here: for how long in all, how often, why last, and
        whether it waits now."""
        now = time.monotonic()
        with self.lock:
            return {"streams": {s: {"held_back_s": round(h.seconds + (now - h.since if h.since else 0.0), 3),
                                    "waits": h.waits, "waiting": h.since is not None, "reason": h.reason}
                                for s, h in sorted(self.held.items())}}


def downstream(table, here: str, derived: Callable[[str], list[str]], is_copy: Callable[[str], bool],
               stream: str) -> tuple[set[str], bool]:
    """Where items of ``stream`` go from this peer (called with the node's lock): the
    neighbours that it and every stream computed or copied here from it (recursively) leave
    for, and whether the executor here computes one of those streams."""
    links: set[str] = set()
    computed = False
    stack, seen = [stream], set()
    while stack:
        sid = stack.pop()
        if sid in seen:
            continue
        seen.add(sid)
        entry = table.get(sid)
        if entry is not None:
            links.update(entry.next_hops(here))
        for child in derived(sid):
            computed = computed or not is_copy(child)
            stack.append(child)
    return links, computed
