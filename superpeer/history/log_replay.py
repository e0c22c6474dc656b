"""Copies of a stream registered here being filled from its past (``subscribe --since`` /
``--from-start``, a re-plan after a failure): the archive's items, then the log's, then live,
read and sent by a thread per copy into the data plane (``ReplayTarget``).

A replay may be **held** before an item: another past subscription is being installed on a new
copy of this one downstream, from that item on (``sharing.replay_plans``), and until it is in,
the item must not pass. The hold belongs to that subscription's transaction
(``control.transactions``) and ends with it, or with its lease if its coordinator never comes back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from sharing.stream_table import NetworkStream

from ..control.transactions import Transactions
from ..data.positions import StreamPositions
from ..peer_state import PeerState
from .history_source import HistorySource
from .retention import Retention

REPLAY_BATCH = 1000  # log items read and pushed at a time
REPLAY_QUEUE_ITEMS = 50_000  # a replay waits while a next hop's queue holds more
log = logging.getLogger("streamglobe.superpeer")


class ReplayTarget(Protocol):
    """Where replayed items go: the data plane (called with the peer state's lock held)."""

    def ingest(self, sid: str, values: list, end: bool, serialized: list[str] | None,
               replaying: bool = False, position: int | None = None) -> None: ...

    def ingest_text(self, entry: NetworkStream, items: list[str], end: bool, replaying: bool = False,
                    position: int | None = None) -> None: ...

    def watermark(self, sid: str, path: str, value: float, replaying: bool = False) -> None: ...

    def queued_items(self, neighbour: str) -> int:
        """Items waiting to leave towards a neighbour."""
        ...


@dataclass
class Replay:
    """A copy being filled from its stream's log (``LogReplays.start``)."""

    original: str
    target: ReplayTarget
    next: int  # the next log item to send
    error: str = ""  # why it stopped (the copy then gets nothing more: no gap is ever sent)
    start: int = 0  # the first log item it sent
    began: float = field(default_factory=time.monotonic)  # ``--replay-rate`` paced from then,
    paced_from: int = 0  # and from this item


class LogReplays:
    def __init__(self, state: PeerState, positions: StreamPositions, history: HistorySource,
                 retention: Retention, transactions: Transactions, rate: float = 0.0) -> None:
        """``history``: where the past is read (the archive too); ``retention``: how far back it
        goes; ``rate``: ``serve --replay-rate``, items/s a replay sends at most (0: as fast as
        the links take them)."""
        self.state = state
        self.positions = positions
        self.history = history
        self.retention = retention
        self.transactions = transactions
        self.rate = max(rate, 0.0)
        self.active: dict[str, Replay] = {}  # copy -> its replay in progress
        self._stopped = threading.Event()

    def start(self) -> None:
        """Nothing runs until a replay is asked for (``replay``)."""

    def stop(self) -> None:
        """Every replay thread ends at its next batch; the copies get nothing more."""
        self._stopped.set()

    def __contains__(self, stream: str) -> bool:
        return stream in self.active

    def status(self) -> dict:
        out = {}
        for s, r in list(self.active.items()):
            limit = self.transactions.replay_limit(s)
            out[s] = {"stream": r.original, "next_item": r.next, "error": r.error,
                      **({"held_before": limit} if limit is not None else {})}
        return out

    def fill(self, stream: str, target: ReplayTarget, start: int, since_s: float | None) -> tuple[int, str]:
        """Called with the lock held: a new copy filled from its stream's log (``replay``) from
        item ``start``, or from the items of the last ``since_s`` seconds; (the first item
        replayed, what the subscriber should be told of the history, ``retention.note``)."""
        entry, original = self.state.table.get(stream), self.state.parent_original(stream)
        if original is None or entry.operators:
            return self.replay(stream, target, start), ""
        if since_s is not None:
            start = self.retention.start_since(original, since_s)
        asked_past = since_s is not None or start == 0
        start = self.replay(stream, target, start)
        return start, self.retention.note(original, start, since_s) if asked_past else ""

    def replay(self, stream: str, target: ReplayTarget, start: int = 0) -> int:
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
        entry, original = self.state.table.get(stream), self.state.parent_original(stream)
        if entry is not None and (entry.operators or original is None):  # (a copy of a running replay, too)
            self.positions.skip_below[stream] = start
            return start
        if entry is None:
            return start
        floor = self.history.floor(original)
        if start < floor:
            log.warning("%s: items %d–%d of %s were trimmed (history): replaying from %d", stream, start,
                        floor - 1, original.name, floor)
            start = floor
        self.active[stream] = Replay(original.name, target, start, start=start, paced_from=start)
        threading.Thread(target=self._run, args=(stream,), name=f"replay-{stream}", daemon=True).start()
        return start

    def hold_since(self, running: str, txn: str, since_s: float | None) -> tuple[str, int, str]:
        """Called with the lock held, at reservation: where a subscription over the last
        ``since_s`` seconds (None: everything retained) starts in the stream ``running`` is a
        replay of, and the replay held before that item for ``txn`` (``hold``); (why it cannot
        serve it or "", the first item, what the subscriber should be told of the history)."""
        original = self.state.parent_original(running)
        if original is None:
            return f"{running} is not a copy of a stream registered at {self.state.id}", 0, ""
        start = self.retention.start_since(original, since_s) if since_s is not None else 0
        start = min(max(start, self.history.floor(original)), original.logged)
        if start >= original.logged:  # nothing past to share: a replay of its own goes live at once
            return f"the subscription starts at the live end of {original.name} (item {start})", start, ""
        why = self.hold(running, txn, start)
        return why, start, "" if why else self.retention.note(original, start, since_s)

    def hold(self, stream: str, txn: str, item: int) -> str:
        """Called with the lock held, at reservation: the replay filling ``stream`` sends
        nothing from ``item`` on while ``txn`` is open here (``control.transactions``) — a new copy of it that
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
        self.transactions.hold_replay(txn, stream, item)
        return ""

    def held(self, txn: str) -> dict[str, int]:
        """Per stream registered here, the item ``txn`` holds a replay of it before."""
        return {self.active[c].original: item for c, item in self.transactions.held_by(txn).items()
                if c in self.active}

    def _gone(self, stream: str) -> None:
        """Called with the lock held: the replay filling ``stream`` is over (caught up, or its copy removed)."""
        self.active.pop(stream, None)
        self.transactions.replay_gone(stream)

    def needed(self) -> dict[str, list[int]]:
        """Per stream registered here, the next log item of each copy being filled from it."""
        out: dict[str, list[int]] = {}
        for r in self.active.values():
            out.setdefault(r.original, []).append(r.next)
        return out

    def _run(self, stream: str) -> None:
        try:
            while not self._stopped.is_set():
                with self.state.lock:
                    r, entry = self.active.get(stream), self.state.table.get(stream)
                    original = self.state.originals.get(r.original) if r is not None else None
                    if r is None or entry is None or original is None:
                        self._gone(stream)
                        return  # removed meanwhile
                    stop, limit = original.logged, self.transactions.replay_limit(stream)
                    if limit is not None and (r.next >= limit or r.next >= stop):
                        wait = 0.01  # held (``hold``): not even caught up
                        r.began, r.paced_from = time.monotonic(), r.next
                    elif r.next >= stop:  # caught up: live from now on (the lock holds new items back)
                        self._gone(stream)
                        entry.live_from = stop  # others may share it where these items have passed
                        if self.state.table.has_ended(r.original):
                            r.target.ingest(stream, [], True, [])
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
                self._wait_for_room(entry, r.target)
                with self.state.lock:
                    if self.active.get(stream) is not r:
                        return
                    # (not past a hold taken while the batch was read)
                    first, limit = r.next, self.transactions.replay_limit(stream)
                    upto = first + len(texts) if limit is None else min(first + len(texts), limit)
                    for after, path, value in [*(m for m in marks if m[0] <= upto), (upto, "", 0.0)]:
                        if after > r.next:  # the items before the watermark, then the watermark
                            r.target.ingest_text(entry, texts[r.next - first:after - first], False,
                                                 replaying=True, position=r.next)
                            r.next = after
                        if path:
                            r.target.watermark(stream, path, value, replaying=True)
        except Exception as exc:  # noqa: BLE001 - never kills the daemon, never lets a gap through
            # The copy stays held (its live items wait behind the replay): a subscriber sees its
            # results stop, and status says why, rather than getting items with a hole before them.
            log.exception("replaying the log into %s failed", stream)
            with self.state.lock:
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

    def _wait_for_room(self, entry: NetworkStream, target: ReplayTarget) -> None:
        """Until every next hop of the stream, and of the streams computed here from it (a copy
        that crosses no link, its operators here: ``replay_plans``), has fewer than
        REPLAY_QUEUE_ITEMS queued."""
        here = self.state.id
        table, hops, todo = self.state.table, set(), [entry.id]
        with self.state.lock:
            while todo:
                s = table.get(todo.pop())
                if s is not None:
                    hops.update(s.next_hops(here))
                    todo.extend(table.derived(s.id, here))
        for n in sorted(hops):
            while target.queued_items(n) > REPLAY_QUEUE_ITEMS and not self._stopped.is_set():
                time.sleep(0.02)
