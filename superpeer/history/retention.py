"""A super-peer's history keeper (``history.bounds``): trims its streams' logs to their bounds, says
where ``--since`` starts and how far back each history goes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from ..peer_state import OriginalState, PeerState
from .bounds import HistoryBound, cut_for, describe_extent, parse_history, since_position, trim_below
from .history_source import HistorySource, floor_of

log = logging.getLogger("streamglobe.superpeer")
TRIM_STEP = 20_000  # log items deleted per transaction: the lock and the database are never held long


class Retention:
    def __init__(self, state: PeerState, default: HistoryBound | None = None,
                 history: HistorySource | None = None) -> None:
        self.state = state
        self.history = history or HistorySource(state.store)  # the archive, if there is one
        self.default = default or HistoryBound()  # ``serve --history``: streams registered without one
        self.trimmed: dict[str, int] = {}  # stream -> items trimmed by this process
        self.held: dict[str, str] = {}  # stream -> why its log is kept beyond its bound now

    def bound(self, original: OriginalState) -> HistoryBound:
        return original.history if original.history is not None else self.default

    def set_bound(self, name: str, spec: str) -> str:
        """A stream's own bound (``register --history``; a publisher registering again may change
        it); returns the bound in effect. ``ValueError`` if ``spec`` is not one."""
        original = self.state.originals.get(name)
        if spec:
            bound = parse_history(spec)
            if original is not None and original.history != bound:
                self.state.store.set_history(name, spec)
                original.history = bound
        return str(self.bound(original)) if original is not None else str(self.default)

    def start_since(self, original: OriginalState, seconds: float, now: float | None = None) -> int:
        """The first retained item of ``original`` that arrived ``seconds`` ago or later."""
        store = self.state.store
        extent = store.extent(original.name)
        t = (now or time.time()) - seconds
        at = since_position(store.arrivals(original.name), extent.stop, t)
        if at <= original.retained_from and (extent.oldest_at is None or extent.oldest_at > t):
            older = self.history.first_since(original, t)  # the archive may reach further back
            if older is not None:
                return older
        return max(at, original.retained_from)

    def note(self, original: OriginalState, start: int, since_s: float | None, now: float | None = None) -> str:
        """What a subscription asking for the past should be told, "" if it got all it asked:
        the history had been trimmed past where it wanted to start."""
        past = self.history.archived(original.name)
        floor = floor_of(original, past)
        if floor == 0 or start > floor:
            return ""
        now = now or time.time()
        extent = self.state.store.extent(original.name)
        from_archive = past is not None and floor < extent.first  # it reaches further back than the log
        first, oldest = (past.first, past.oldest_at) if from_archive else (extent.first, extent.oldest_at)
        if since_s is not None and oldest is not None and oldest <= now - since_s:
            return ""
        asked = "everything" if since_s is None else f"the last {since_s:g} s"
        where = " (archive and log)" if from_archive else ""
        return (f"{describe_extent(original.name, first, extent.stop, oldest, now)}{where} "
                f"(history bound: {self.bound(original)}); asked for {asked}, the subscription starts "
                f"at item {start}")

    def trim(self, pins: Callable[[], tuple[Mapping[str, int], Mapping[str, Iterable[int]]]],
             reported: Mapping[str, Mapping[str, int] | None], now: float | None = None) -> dict[str, int]:
        """Trim every bounded log of a stream registered here; returns the items trimmed per stream.
        ``pins()``, called with the lock held: this peer's pins and, per stream, the log items
        copies being filled from it still need; ``reported``: the other peers' pins (None: not
        heard yet). At most ``TRIM_STEP`` items go at a time: the first retained item moves
        under the lock (no replay starts below it after that), the rows are deleted outside it."""
        now = now or time.time()
        done: dict[str, int] = {}
        store = self.state.store
        for original in list(self.state.originals.values()):
            bound = self.bound(original)
            if bound.unbounded:
                continue
            extent = store.extent(original.name)
            cut = cut_for(bound, extent.first, extent.stop, store.arrivals(original.name), now,
                          lambda a, b, n=original.name: store.item_sizes(n, a, b))
            self.held.pop(original.name, None)
            while cut > original.retained_from:
                with self.state.lock:
                    own, replaying = pins()
                    below = trim_below(original.name, cut, own, reported, replaying.get(original.name, ()))
                    if below < cut:
                        silent = sorted(p for p, r in reported.items() if r is None)
                        self.held[original.name] = (
                            f"not heard from {', '.join(silent)} since this process started" if silent else
                            f"items from {below} on are still needed by a subscription's recovery or replay")
                    step = min(below, original.retained_from + TRIM_STEP)
                    if step <= original.retained_from:
                        break
                    original.retained_from = step
                n = store.trim(original.name, step)
                done[original.name] = done.get(original.name, 0) + n
                self.trimmed[original.name] = self.trimmed.get(original.name, 0) + n
        return done

    def status(self, original: OriginalState, now: float | None = None) -> dict:
        extent = self.state.store.extent(original.name)
        return {"bound": str(self.bound(original)), "retained_from": extent.first, "retained_items":
                extent.stop - extent.first, "retained_bytes": extent.bytes,
                "oldest_arrival_s_ago": None if extent.oldest_at is None else
                round((now or time.time()) - extent.oldest_at, 1),
                "trimmed_by_this_process": self.trimmed.get(original.name, 0),
                "kept_beyond_bound": self.held.get(original.name, "")}
