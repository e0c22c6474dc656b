"""Copies of a stream registered here being filled from its past (``subscribe --since`` /
``--from-start``, a re-plan after a failure): the archive's items, then the log's, then live,
read and sent by a thread per copy (``DataPlane.replay``)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharing.stream_table import NetworkStream

from .history_source import HistorySource

if TYPE_CHECKING:
    from .data_plane import DataPlane

REPLAY_BATCH = 1000  # log items read and pushed at a time
REPLAY_QUEUE_ITEMS = 50_000  # a replay waits while a next hop's queue holds more
log = logging.getLogger("streamglobe.superpeer")


@dataclass
class Replay:
    """A copy being filled from its stream's log (``LogReplays.start``)."""

    original: str
    next: int  # the next log item to send
    error: str = ""  # why it stopped (the copy then gets nothing more: no gap is ever sent)


class LogReplays:
    def __init__(self, plane: "DataPlane") -> None:
        self.plane = plane
        self.active: dict[str, Replay] = {}  # copy -> its replay in progress
        self.history = HistorySource(plane.state.store)  # where the past is read (the archive too)

    def __contains__(self, stream: str) -> bool:
        return stream in self.active

    def status(self) -> dict:
        return {s: {"stream": r.original, "next_item": r.next, "error": r.error} for s, r in self.active.items()}

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
        entry = self.plane.state.table.get(stream)
        original = self.plane.state.originals.get(entry.parent) if entry is not None and entry.parent else None
        if entry is not None and entry.operators:
            self.plane.positions.skip_below[stream] = start
            return start
        if entry is None or original is None:
            return start
        floor = self.history.floor(original)
        if start < floor:
            log.warning("%s: items %d–%d of %s were trimmed (history): replaying from %d", stream, start,
                        floor - 1, original.name, floor)
            start = floor
        self.active[stream] = Replay(original.name, start)
        threading.Thread(target=self._run, args=(stream,), name=f"replay-{stream}", daemon=True).start()
        return start

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
                    stop = original.logged
                    if r.next >= stop:  # caught up: live from now on (the lock holds new items back)
                        del self.active[stream]
                        entry.live_from = stop  # others may share it where these items have passed
                        if self.plane.state.table.has_ended(r.original):
                            self.plane.ingest(stream, [], True, [])
                        return
                end = min(r.next + REPLAY_BATCH, stop)
                texts = self.history.read(r.original, r.next, end, original.retained_from)
                marks = self.history.watermarks(r.original, r.next, r.next + len(texts), original.retained_from)
                self._wait_for_room(entry)
                with self.plane.state.lock:
                    if self.active.get(stream) is not r:
                        return
                    first = r.next
                    for after, path, value in [*marks, (first + len(texts), "", 0.0)]:
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
