"""A VOEvent broker's events as a StreamGlobe stream: subscribe over VTP, publish each as an item.

``VoEventBridge`` is the library form of ``streamglobe connect voevent``: it subscribes to a
broker's broadcasting port (``vtp.VtpSubscriber``), makes an item of every VOEvent
(``shape.voevent_item``) and publishes it to a stream registered at one super-peer, acknowledging
the event to the broker once the super-peer has taken it. A packet that is not a VOEvent is
refused with a ``nak`` giving the reason, and the bridge goes on.

Exactly once across restarts. Every event is published at its own stream-wide *position*
(``SuperPeerClient.publish(position=N)``), and the super-peer takes each position once. Before
events are published, a line ``N IVORN`` per event is appended to a journal in the bridge's state
directory (and synced, with the items saved as the *pending* batch), so a bridge started again
knows, from the position ``register_stream`` says comes next, which journal entries the
super-peer took: their IVORNs are skipped when they arrive again (the same event from another
broker, or re-sent); entries it did not take are the events in flight when the bridge stopped,
published then from the pending batch at their positions. The journal keeps the last
``journal_keep`` IVORNs.

One event at a time while they come one at a time (an alert is not held back); the events that
wait while the super-peer takes a batch go together in the next (one journal write, one Publish),
so a burst does not cost a round trip per event.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from thinpeer.sinks.base import StateFile, sync_directory
from thinpeer.voevent.shape import ITEM, ROOT, NotVoEvent, ivorn_and_item
from thinpeer.voevent.transport import DEFAULT_LOCAL_IVO, Stopped
from thinpeer.voevent.vtp import VtpSubscriber

if TYPE_CHECKING:
    from thinpeer.client import SuperPeerClient

JOURNAL = "journal"
PENDING = "pending.json"
JOURNAL_KEEP = 100_000
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class BridgeProgress:
    """What the bridge has done since it started: events ``received`` from the broker,
    ``published`` to the stream (``recovered``: of them, the one in flight at the last stop),
    ``duplicates`` skipped (their IVORN was published before), ``rejected`` (not VOEvents, or
    refused by the super-peer); ``next_position``: the stream-wide number of the next item."""

    received: int
    published: int
    duplicates: int
    rejected: int
    recovered: int
    next_position: int
    connected: bool


class VoEventBridge:
    def __init__(self, client: SuperPeerClient, stream: str, remote: str, state_dir: Path,
                 local_ivo: str = DEFAULT_LOCAL_IVO, history: str = "",
                 say: Callable[[str], None] = lambda message: None,
                 journal_keep: int = JOURNAL_KEEP, alive_timeout_s: float = 150.0) -> None:
        """``remote``: the broker's broadcasting port, HOST:PORT; ``state_dir``: where the journal
        is kept (one directory per stream); ``history``: as ``register_stream`` takes it."""
        self.client = client
        self.stream = stream
        self.remote = remote
        self.state_dir = Path(state_dir)
        self.history = history
        self.say = say
        self.journal_keep = max(1, journal_keep)
        self.subscriber = VtpSubscriber(remote, local_ivo=local_ivo, say=say,
                                        alive_timeout_s=alive_timeout_s, batch_handler=self._handle)
        self._published: OrderedDict[str, int] = OrderedDict()  # IVORN → position, oldest first
        self._journal_lines = 0
        self._next = 0
        self._counts = {"received": 0, "published": 0, "duplicates": 0, "rejected": 0, "recovered": 0}
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        """Register the stream, publish the event in flight at the last stop (if the super-peer
        did not take it), and subscribe in the background."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._next = self.client.register_stream(self.stream, ROOT, ITEM, history=self.history)
        self._recover()
        self.subscriber.start()

    def run(self) -> None:
        """``start``, then wait until ``stop`` (or an error, raised)."""
        self.start()
        self.join()

    def stop(self) -> None:
        self._stopping.set()
        self.subscriber.stop()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the bridge to end; raises what ended it, if it was not ``stop``."""
        self.subscriber.join(timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.join()

    @property
    def connected(self) -> threading.Event:
        return self.subscriber.connected

    def progress(self) -> BridgeProgress:
        counts = dict(self._counts)
        refused = self.subscriber.refused  # not VOEvents: refused before they reach the bridge
        counts["received"] += refused
        counts["rejected"] += refused
        return BridgeProgress(**counts, next_position=self._next,
                              connected=self.subscriber.connected.is_set())

    # ------------------------------------------------------------------ events

    def _handle(self, packets: list[bytes]) -> list[str | None]:
        """The subscriber's handler, for the events waiting (one, or a burst): returns once the
        new ones are in the stream, with None (ack) or a nak's reason for each."""
        answers: list[str | None] = [None] * len(packets)
        fresh: list[tuple[int, str, str]] = []  # (index in packets, IVORN, item)
        for k, packet in enumerate(packets):
            self._counts["received"] += 1
            try:
                ivorn, item = ivorn_and_item(packet)
                if any(c in ivorn for c in "\r\n"):
                    raise NotVoEvent("not a VOEvent: its ivorn spans lines")
            except NotVoEvent as exc:
                self._counts["rejected"] += 1
                answers[k] = str(exc)
                continue
            if ivorn in self._published or any(ivorn == i for _, i, _ in fresh):
                self._counts["duplicates"] += 1
                continue
            fresh.append((k, ivorn, item))
        if fresh:
            first = self._next
            events = [(ivorn, item) for _, ivorn, item in fresh]
            StateFile(self.state_dir / PENDING).save({"position": first, "events": events})
            self._append([(first + j, ivorn) for j, (ivorn, _) in enumerate(events)])
            for j, reason in self._publish(first, events).items():
                answers[fresh[j][0]] = reason
        return answers

    def _publish(self, first: int, events: list[tuple[str, str]]) -> dict[int, str]:
        """Publish ``events`` at positions ``first``, … (again while the super-peer is
        unreachable: it takes each position once); {index: nak reason} of those it refused."""
        from thinpeer.client import TRANSIENT, ThinPeerError

        delay = FIRST_BACKOFF_S
        while True:
            try:
                summary = self.client.publish(self.stream, [item for _, item in events], position=first,
                                              linger_s=None, retry_s=0.0)
                break
            except ThinPeerError as exc:
                if exc.code not in TRANSIENT:
                    raise
                self.say(f"super-peer {self.client.address}: {exc}; publishing {len(events)} event(s) "
                         f"again in {delay:.1f} s")
            if self._stopping.wait(delay):
                raise Stopped()
            delay = min(delay * 2, MAX_BACKOFF_S)
        self._next = first + len(events)  # a refused item takes its position too
        refused: dict[int, str] = {}
        for reason in summary.reasons or []:  # "item N: why", N the stream-wide position
            number, _, why = reason.partition(": ")
            if number.startswith("item ") and number[5:].isdigit() and 0 <= int(number[5:]) - first < len(events):
                refused[int(number[5:]) - first] = f"StreamGlobe refused it: {why}"
        for j, (ivorn, _) in enumerate(events):
            self._remember(ivorn, first + j)
        self._counts["rejected"] += len(refused)
        self._counts["published"] += len(events) - len(refused)
        return refused

    # ------------------------------------------------------------------ the journal

    def _remember(self, ivorn: str, position: int) -> None:
        self._published[ivorn] = position
        self._published.move_to_end(ivorn)
        while len(self._published) > self.journal_keep:
            self._published.popitem(last=False)

    def _append(self, entries: list[tuple[int, str]]) -> None:
        if self._journal_lines >= 2 * self.journal_keep:
            self._rewrite()
        with open(self.state_dir / JOURNAL, "a", encoding="utf-8") as f:
            f.writelines(f"{position} {ivorn}\n" for position, ivorn in entries)
            f.flush()
            os.fsync(f.fileno())
        self._journal_lines += len(entries)

    def _rewrite(self) -> None:
        """The journal with only what it must remember, replaced atomically."""
        path = self.state_dir / JOURNAL
        aside = path.with_name(JOURNAL + ".partial")
        with open(aside, "w", encoding="utf-8") as f:
            f.writelines(f"{n} {ivorn}\n" for ivorn, n in self._published.items())
            f.flush()
            os.fsync(f.fileno())
        aside.replace(path)
        sync_directory(self.state_dir)
        self._journal_lines = len(self._published)

    def _recover(self) -> None:
        """Read the journal against the stream's next position (see the module's docstring)."""
        entries: list[tuple[int, str]] = []
        try:
            with open(self.state_dir / JOURNAL, encoding="utf-8", errors="replace") as f:
                for line in f:
                    number, _, ivorn = line.rstrip("\n").partition(" ")
                    if line.endswith("\n") and number.isdigit() and ivorn:  # (a torn last line: not taken)
                        entries.append((int(number), ivorn))
        except FileNotFoundError:
            pass
        untaken = {n: ivorn for n, ivorn in entries if n >= self._next}
        for n, ivorn in entries:
            if n < self._next:
                self._remember(ivorn, n)
        pending = StateFile(self.state_dir / PENDING).load()
        self._rewrite()
        # the events of the last batch that the super-peer did not take: a suffix of it (whether
        # or not their journal lines were written: the pending batch is saved before them)
        first = pending.get("position")
        events = [tuple(e) for e in pending.get("events", [])]
        if isinstance(first, int) and first <= self._next < first + len(events):
            again = events[self._next - first:]
            self.say(f"publishing {len(again)} event(s), in flight when the bridge stopped, from "
                     f"position {self._next}")
            self._append([(self._next + j, ivorn) for j, (ivorn, _) in enumerate(again)])
            self._publish(self._next, again)  # type: ignore[arg-type]
            self._counts["recovered"] += len(again)
        elif untaken:
            self.say(f"{len(untaken)} event(s) of the journal were not taken by the super-peer "
                     f"(its stream starts again at {self._next}): forgotten")


def describe(progress: BridgeProgress) -> str:
    """One progress line, for people."""
    return (f"received {progress.received}, published {progress.published}"
            + (f" ({progress.recovered} recovered)" if progress.recovered else "")
            + f", duplicates {progress.duplicates}, rejected {progress.rejected}; next position "
              f"{progress.next_position}; {'connected' if progress.connected else 'not connected'}")

