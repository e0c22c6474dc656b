"""Copies of a stream registered here being filled from its past (``subscribe --since`` /
``--from-start``, a re-plan after a failure): the archive's items, then the log's, then live,
read and sent by a thread per copy (``DataPlane.replay``).

A replay may be **held** before an item (``hold``): another past subscription is being installed
on a new copy of this one downstream, from that item on (``sharing.replay_plans``), and until it
is in, the item must not pass. A hold ends with the transaction (commit or abort here) or after
``RESERVATION_TTL_S`` if its coordinator never comes back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sharing.stream_table import NetworkStream

from ..peer_state import RESERVATION_TTL_S
from .history_source import HistorySource

if TYPE_CHECKING:
    from ..data.data_plane import DataPlane

REPLAY_BATCH = 1000  # log items read and pushed at a time
REPLAY_QUEUE_ITEMS = 50_000  # a replay waits while a next hop's queue holds more
log = logging.getLogger("streamglobe.superpeer")


@dataclass
class Replay:
    """A copy being filled from its stream's log (``LogReplays.start``)."""

    original: str
    next: int  # the next log item to send
    error: str = ""  # why it stopped (the copy then gets nothing more: no gap is ever sent)
    start: int = 0  # the first log item it sent
    holds: dict[str, tuple[int, float]] = field(default_factory=dict)  # txn -> (item not to send yet, until)
    began: float = field(default_factory=time.monotonic)  # ``--replay-rate`` paced from then,
    paced_from: int = 0  # and from this item

    def held_before(self, now: float) -> int | None:
        """The first item it may not send now (None: none held)."""
        return min((at for at, until in list(self.holds.values()) if until >= now), default=None)

    def limit(self, now: float) -> int | None:
        """``held_before``, the expired holds dropped (called with the lock held)."""
        for txn in [t for t, (_, until) in self.holds.items() if until < now]:
            del self.holds[txn]
        return self.held_before(now)


class LogReplays:
    def __init__(self, plane: "DataPlane") -> None:
        self.plane = plane
        self.active: dict[str, Replay] = {}  # copy -> its replay in progress
        self.history = HistorySource(plane.state.store)  # where the past is read (the archive too)
        self.rate = 0.0  # ``serve --replay-rate``: items/s a replay sends at most (0: as the links take)

    def __contains__(self, stream: str) -> bool:
        return stream in self.active

    def status(self) -> dict:
        now, out = time.monotonic(), {}
        for s, r in list(self.active.items()):
            limit = r.held_before(now)
            out[s] = {"stream": r.original, "next_item": r.next, "error": r.error,
                      **({"held_before": limit} if limit is not None else {})}
        return out

    def start(self, stream: str, start: int = 0) -> int:
        """Called with the lock held when a copy of a stream registered here is installed for a
        subscription over the past (``subscribe --since`` / ``--from-start``) or planned again
        after a failure: the copy is fed the stream's log from item ``start`` (where the
        subscription began; not before the first item still retained, ``retention``), then its
        live items. The log is read and sent by a thread of its own, a batch at a time and only
        while the next hop's queue has room, so that a long log neither holds this peer's lock
        nor overflows a link; live items (and the end) reach the copy only once the replay has
        caught up with the log, under the lock. Returns the first log item replayed.

        A stream computed here in such a plan instead drops its items numbered below ``start``:
        the recomputation of a chain of streams the subscription read from there on."""
        entry, original = self.plane.state.table.get(stream), self.plane.state.parent_original(stream)
        if entry is not None and (entry.operators or original is None):  # (a copy of a running replay, too)
            self.plane.positions.skip_below[stream] = start
            return start
        if entry is None:
            return start
        floor = self.history.floor(original)
        if start < floor:
            log.warning("%s: items %d–%d of %s were trimmed (history): replaying from %d", stream, start,
                        floor - 1, original.name, floor)
            start = floor
        self.active[stream] = Replay(original.name, start, start=start, paced_from=start)
        threading.Thread(target=self._run, args=(stream,), name=f"replay-{stream}", daemon=True).start()
        return start

    def hold(self, stream: str, txn: str, item: int) -> str:
        """Called with the lock held, at reservation: the replay filling ``stream`` sends
        nothing from ``item`` on until ``txn`` ends here (``release``) — a new copy of it that
        takes its items from ``item`` on is being installed downstream. "" if it holds; else
        why it cannot serve from ``item`` (it began later, has sent it already, caught up)."""
        r = self.active.get(stream)
        if r is None:
            return f"the replay filling {stream} is over"
        if r.error:
            return f"the replay filling {stream} stopped: {r.error}"
        if item < r.start:
            return f"the replay filling {stream} began at item {r.start}, after {item}"
        if r.next > item:
            return f"the replay filling {stream} has sent item {item} already (next: {r.next})"
        r.holds[txn] = (item, time.monotonic() + RESERVATION_TTL_S)
        return ""

    def release(self, txn: str) -> None:
        """Called with the lock held: ``txn``'s holds end (committed or aborted here)."""
        for r in self.active.values():
            r.holds.pop(txn, None)

    def holds(self, stream: str, txn: str) -> bool:
        """Whether ``txn`` still holds the replay filling ``stream``."""
        r = self.active.get(stream)
        return r is not None and txn in r.holds and r.holds[txn][1] >= time.monotonic()

    def renew(self, txn: str) -> None:
        """Called with the lock held, when the replay's origin commits ``txn`` (first of the
        plan's peers): its holds now end after every reservation it still commits elsewhere,
        so none lapses before the new copies downstream are in place."""
        until = time.monotonic() + RESERVATION_TTL_S
        for r in self.active.values():
            if txn in r.holds:
                r.holds[txn] = (r.holds[txn][0], until)

    def held(self, txn: str) -> dict[str, int]:
        """Per stream registered here, the item ``txn`` holds a replay of it before."""
        return {r.original: r.holds[txn][0] for r in self.active.values() if txn in r.holds}

    def needed(self) -> dict[str, list[int]]:
        """Per stream registered here, the next log item of each copy being filled from it."""
        out: dict[str, list[int]] = {}
        for r in self.active.values():
            out.setdefault(r.original, []).append(r.next)
        return out

    def _run(self, stream: str) -> None:
        try:
            while True:
                with self.plane.state.lock:
                    r, entry = self.active.get(stream), self.plane.state.table.get(stream)
                    original = self.plane.state.originals.get(r.original) if r is not None else None
                    if r is None or entry is None or original is None:
                        self.active.pop(stream, None)
                        return  # removed meanwhile
                    stop, limit = original.logged, r.limit(time.monotonic())
                    if (limit is not None and r.next >= limit) or (r.holds and r.next >= stop):
                        wait = 0.01  # held (``hold``): not even caught up
                        r.began, r.paced_from = time.monotonic(), r.next
                    elif r.next >= stop:  # caught up: live from now on (the lock holds new items back)
                        del self.active[stream]
                        entry.live_from = stop  # others may share it where these items have passed
                        if self.plane.state.table.has_ended(r.original):
                            self.plane.ingest(stream, [], True, [])
                        return
                    else:
                        wait = self._pace(r)
                        stop = min(stop, limit) if limit is not None else stop
                if wait:
                    time.sleep(wait)
                    continue
                end = min(r.next + self._batch(), stop)
                texts = self.history.read(r.original, r.next, end, original.retained_from)
                marks = self.history.watermarks(r.original, r.next, r.next + len(texts), original.retained_from)
                self._wait_for_room(entry)
                with self.plane.state.lock:
                    if self.active.get(stream) is not r:
                        return
                    # (not past a hold taken while the batch was read)
                    first, limit = r.next, r.limit(time.monotonic())
                    upto = first + len(texts) if limit is None else min(first + len(texts), limit)
                    for after, path, value in [*(m for m in marks if m[0] <= upto), (upto, "", 0.0)]:
                        if after > r.next:  # the items before the watermark, then the watermark
                            self.plane.ingest_text(entry, texts[r.next - first:after - first], False,
                                                   replaying=True, position=r.next)
                            r.next = after
                        if path:
                            self.plane.watermark(stream, path, value, replaying=True)
        except Exception as exc:  # noqa: BLE001 - never kills the daemon, never lets a gap through
            # The copy stays held (its live items wait behind the replay): a subscriber sees its
            # results stop, and status says why, rather than getting items with a hole before them.
            log.exception("replaying the log into %s failed", stream)
            with self.plane.state.lock:
                r = self.active.get(stream)
                if r is not None:
                    r.error = f"{type(exc).__name__}: {exc}"

    def _batch(self) -> int:
        return min(REPLAY_BATCH, max(1, int(self.rate / 20))) if self.rate > 0 else REPLAY_BATCH

    def _pace(self, r: Replay) -> float:
        """Seconds to wait before the next batch, for ``rate`` items/s at most."""
        if self.rate <= 0:
            return 0.0
        return max(0.0, r.began + (r.next - r.paced_from) / self.rate - time.monotonic())

    def _wait_for_room(self, entry: NetworkStream) -> None:
        """Until every next hop of the stream, and of the streams computed here from it (a copy
        that crosses no link, its operators here: ``replay_plans``), has fewer than
        REPLAY_QUEUE_ITEMS queued."""
        here = self.plane.state.id
        table, hops, todo = self.plane.state.table, set(), [entry.id]
        with self.plane.state.lock:
            while todo:
                s = table.get(todo.pop())
                if s is not None:
                    hops.update(s.next_hops(here))
                    todo.extend(table.derived(s.id, here))
        for n in sorted(hops):
            while getattr(self.plane.sender(n), "queued_items", 0) > REPLAY_QUEUE_ITEMS:
                time.sleep(0.02)
