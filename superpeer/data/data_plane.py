"""The data plane of one super-peer: items in, derived streams computed, items out.

Items reach the peer published by a thin peer (checked here, once, to be exactly one element of
the stream's item type — ``items`` — and statistics observed) or transferred from the previous
peer of a stream's route. From there each batch goes to the executor once per parent stream
(whatever the number of operators on it), to the subscriptions delivered here, and to the
stream's next hops; copies (streams without operators) are duplicated here with the same text.
Items are parsed only where an operator or a subscription reads values (DESIGN.md §7); an item
a neighbour sends that does not parse is dropped and counted, and the rest keeps flowing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

from sharing.statistics import StreamEstimate
from sharing.stream_table import NetworkStream
from wxquery.operators.definitions import CombineWindows, WindowAggregate
from wxquery.operators.records import serialize

from ..errors import NodeError
from ..executors import Executor
from ..history.log_replay import LogReplays
from ..peer_state import PeerState
from ..security.peer_access import check_transfer_route
from .items import check_items, parse_batch, parse_each
from .link_receipts import LinkReceipts
from .narrowing import wants_text
from .network_joins import made_by_reader
from .origins import Origins, fed_high
from .positions import StreamPositions, kept_runs
from .stream_rates import StreamRates
from .wire_batch import WireBatch, as_texts, text_bytes

STATISTICS_FULL = 2000  # observe every item up to this many, then every 50th
MAX_REJECTION_REASONS = 20
MIN_RATE_WINDOW_S = 10.0
WINDOW_OPERATORS = (WindowAggregate, CombineWindows)
log = logging.getLogger("streamglobe.superpeer")


class Sender(Protocol):
    """Where a stream's items leave towards one neighbour (in order, batched)."""

    def send(self, stream: str, items: list[str], end: bool = False, position: int | None = None,
             origins: Origins | None = None) -> None:
        """``position``: the log number of the first item, for a stream numbered by a log;
        ``origins``: per item, its original's item (``origins``), when known."""

    def send_watermark(self, stream: str, path: str, value: float) -> None: ...


class Outbound(Protocol):
    """The queues of items towards the neighbours (the transport's forwarders)."""

    def forwarder(self, peer: str) -> Sender: ...

    def discard(self, stream: str) -> None:
        """Nothing more of ``stream`` is sent to any neighbour (it was removed here)."""


class Published(NamedTuple):
    """What a publisher's batch came to."""

    accepted: int
    rejected: int
    reasons: list[str]  # "item N: why" for the first rejections
    next_position: int  # the number the stream's next new item gets
    duplicates: int = 0  # items of the batch numbered below it: taken before, skipped
    held_back_s: float = 0.0  # how long it waited for room on the links it leaves on
    held_back: str = ""  # what for ("": it did not wait)


class DataPlane:
    def __init__(self, state: PeerState, executor: Executor, outbound: Outbound,
                 positions: StreamPositions, replays: LogReplays,
                 observe_batch: Callable[[float], None] = lambda seconds: None) -> None:
        """``positions``: the numbers of every stream's items here; ``replays``: the copies
        being filled from a stream's past. The executor's outputs come back through
        ``executor_output``."""
        self.state = state
        self.executor = executor
        self.outbound = outbound
        self.positions = positions
        self.replays = replays
        self.observe_batch = observe_batch
        self.executor_seqs: dict[str, int] = {}
        self.unknown_transfers = 0
        self.forged_transfers = 0  # from a peer that is not the one before this one on the route
        self.bad_transfers = 0
        self.last_bad_transfer = ""
        self.receipts = LinkReceipts()
        self.rates = StreamRates()  # what each stream passing here carries (``stream_rates``)

    def sender(self, neighbour: str) -> Sender:
        """The outbound queue towards a neighbour."""
        return self.outbound.forwarder(neighbour)

    def queued_items(self, neighbour: str) -> int:
        """Items waiting to leave towards a neighbour (a replay waits while there are many)."""
        return getattr(self.outbound.forwarder(neighbour), "queued_items", 0)

    def forget(self, stream: str) -> None:
        """A stream removed here (under the lock): its queued items and its numbering go."""
        self.outbound.discard(stream)
        self.positions.forget(stream)
        self.rates.forget(stream)
        self.state.fed_high.pop(stream, None)
        self.state.held_for_widening.pop(stream, None)  # (a stream held by a widening that never settled)

    # ------------------------------------------------------------------ publishers

    def publish(self, name: str, items: list[str] | list[bytes], first: int | None = None,
                position: int | None = None) -> Published:
        """Check a publisher's batch, observe statistics, and ingest the items that are exactly
        one ``<item>`` element each; the others are rejected one by one, the rest of the batch
        still goes on. Items are named by ``first`` (the publisher's sequence number of the
        batch's first item) plus their index; without it, by their position among the items
        this stream received.

        ``position``: the stream-wide number of the batch's first item. Items numbered below
        the stream's next position were taken before (a batch retried after its reply was lost,
        or a publisher resuming) and are skipped; a number above it leaves a gap (items the
        publisher refused itself). Batches of one stream are taken one at a time."""
        state = self.state.originals.get(name)
        if state is None:
            where = self.state.known_originals.get(name)
            hint = f" (it is registered at {where.origin})" if where else "; register it first"
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.state.id}{hint}')
        with state.publishing:
            if state.closed:
                raise NodeError("FAILED_PRECONDITION", f'stream "{name}" is closed')
            skip = 0
            if position is not None:
                skip = min(max(state.next_position - position, 0), len(items))
                items = items[skip:]
                if first is not None:
                    first += skip
            checked = check_items(items, state.item, self.state.limits.max_item_bytes)
            values = checked.values
            texts = WireBatch.of(checked.texts)  # (one buffer logged, sent and counted, not one per hop)
            start = state.next_position if position is None else position + skip
            next_position = max(state.next_position, start + len(items))
            try:  # in the log before anything is taken or acknowledged: a restart loses nothing
                self.state.store.append(name, state.logged, texts, next_position,
                                        state.accepted + len(values),
                                        state.rejected + len(checked.rejected), state.duplicates + skip,
                                        at=time.time())
            except Exception as exc:  # noqa: BLE001 - the batch is refused whole, with the reason
                raise NodeError("UNAVAILABLE", f'could not log the batch of stream "{name}": '
                                               f"{type(exc).__name__}: {exc}") from None
            now = time.monotonic()
            with self.state.lock:
                base = state.accepted + state.rejected if first is None else first
                reasons = [f"item {base + k}: {why}" for k, why in checked.rejected[:MAX_REJECTION_REASONS]]
                stats = state.statistics
                for el in values:
                    if stats.items < STATISTICS_FULL:
                        stats.observe(el, index=state.accepted)
                    elif state.accepted % 50 == 0:  # (it stands for the 50 items up to the next)
                        stats.observe(el, index=state.accepted, weight=50)
                    state.accepted += 1
                if state.rate <= 0:
                    # Measured rate; a file published in one burst is not a sustained rate, so the
                    # elapsed time counts at least MIN_RATE_WINDOW_S.
                    state.first_arrival = state.first_arrival or now
                    stats.frequency = state.accepted / max(now - state.first_arrival, MIN_RATE_WINDOW_S)
                state.rejected += len(checked.rejected)
                state.duplicates += skip
                state.next_position = next_position
                logged = state.logged
                state.logged += len(texts)
                if state.event_time is not None:
                    state.event_time.observe(values, now)
                entry = self.state.table.get(name)
                if entry is not None and stats.items:
                    entry.estimate = StreamEstimate(stats.frequency, stats.avg_item_size)
                # parsed trees stay only where something here reads values; the text travels on
                self.ingest(name, values if self.needs_values(name) else [], False, texts,
                            position=logged, origins=range(logged, logged + len(texts)))
                return Published(len(values), len(checked.rejected), reasons, state.next_position, skip)

    def replay(self, stream: str, start: int = 0, since_s: float | None = None) -> tuple[int, str]:
        """Called with the lock held: fill a new copy of a stream registered here from its past,
        then live (``log_replay``); (the first item replayed, what the subscriber should be told)."""
        return self.replays.fill(stream, self, start, since_s)

    def next_position(self, name: str) -> int:
        """Where a stream registered here stands: the number its next new item gets."""
        state = self.state.originals.get(name)
        return 0 if state is None else state.next_position

    def close_stream(self, name: str) -> int:
        """End a published stream (flushes open windows downstream); returns items accepted."""
        state = self.state.originals.get(name)
        if state is None:
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.state.id}')
        with state.publishing, self.state.lock:  # after a batch being taken, never inside it
            if not state.closed:
                self.state.store.close_original(name)
                state.closed = True
                self.ingest(name, [], True, [])
        return state.accepted

    # ------------------------------------------------------------------ neighbours

    def transfer(self, stream: str, items: list[str], end: bool, sender: str = "", epoch: str = "",
                 first: int | None = None, watermark: tuple[str, float] | None = None,
                 origins: Origins | None = None) -> int:
        """A batch from the previous peer of the route; the acknowledgement. Numbered batches
        (``first``) are taken once: the items of a retried batch already taken are dropped
        (``link_receipts``), and the reply is the next number expected. A stream no longer here
        is acknowledged and dropped (counted), so a sender never blocks on a removed stream.
        Only the peer before this one on the stream's route may send it here. ``origins``: per
        item, the original's item it came from (``origins``), if known."""
        with self.state.lock:
            entry = self.state.table.get(stream)
            if entry is None:
                self.unknown_transfers += len(items)
                self.receipts.drop((sender, epoch, stream))
                return len(items) if first is None else first + len(items)
            try:
                check_transfer_route(sender, stream, entry.route, self.state.id)
            except NodeError:
                self.forged_transfers += 1
                raise
            acknowledged, position = len(items), None
            if first is not None:
                skip, acknowledged = self.receipts.admit((sender, epoch, stream), first, len(items))
                items = items[skip:]
                origins = origins[skip:] if origins is not None else None
                position = first + skip  # the log number, for an original stream or a copy of one
            self.ingest_text(entry, items, end, position=position, origins=origins)
            if watermark is not None:
                self.watermark(stream, *watermark)
        return acknowledged

    def ingest_text(self, entry: NetworkStream, items: list[str], end: bool, replaying: bool = False,
                    position: int | None = None, origins: Origins | None = None) -> None:
        """Wire text into the data plane, parsed only if something here reads values. A copy
        filled from the log (``replaying``) is numbered by the original's items: those are its
        origins."""
        if replaying and origins is None and position is not None:
            origins = range(position, position + len(items))
        values: list = []
        if self.needs_values(entry.id):
            batch = parse_batch(as_texts(items)) if entry.kind != "records" and len(items) > 1 else None
            if batch is not None:  # (the usual case: one parse for the batch)
                self.ingest(entry.id, batch, end, items, replaying, position, origins)
                return
            values, kept, errors = parse_each(entry.kind, as_texts(items))
            if errors:
                self.bad_transfers += len(errors)
                self.last_bad_transfer = f"stream {entry.id}: {errors[-1]}"
            if not all(kept) and position is not None:  # each run with its own numbers
                runs, done = kept_runs(kept), 0
                for k, (a, b) in enumerate(runs):
                    self.ingest(entry.id, values[done:done + b - a], end and k == len(runs) - 1,
                                items[a:b], replaying, position + a,
                                None if origins is None else origins[a:b])
                    done += b - a
                if not runs and end:
                    self.ingest(entry.id, [], True, [], replaying)
                return
            items = [x for x, k in zip(items, kept) if k]
            if origins is not None and not all(kept):
                origins = [o for o, k in zip(origins, kept) if k]
        self.ingest(entry.id, values, end, items, replaying, position, origins)

    def needs_values(self, stream: str) -> bool:
        """Items are parsed only where an operator or a subscription reads them; copies and
        forwarding pass the wire text on (recursively through copies)."""
        if any(not wants_text(c) for c, _ in self.state.deliveries.get(stream, ())):
            return True
        for child in self.state.derived_here(stream):
            if self.executor.is_copy(child):
                if self.needs_values(child):
                    return True
            elif self.executor.needs_values(child):
                return True
        return False

    def ingest(self, sid: str, values: list, end: bool, serialized: list[str] | None,
               replaying: bool = False, position: int | None = None, origins: Origins | None = None) -> None:
        """Called with the lock held: derived streams, deliveries, forwarding. A copy being
        filled from its stream's log takes only the replayed items (the live ones are in the
        log: it takes them from there). ``position``: the log number of the first item
        (``positions``), passed on with the items of an original stream and its copies;
        ``origins``: per item, its original's item (``origins``), when known."""
        entry = self.state.table.get(sid)
        if entry is None or (sid in self.replays and not replaying):
            return
        count = len(serialized) if serialized is not None else len(values)
        position = self.positions.advance(sid, position, count) if count else None
        if count and serialized is not None and not replaying:  # (text as it travels; the past is not a rate)
            self.rates.add(sid, count, text_bytes(serialized))
        if end and not self.state.table.mark_ended(sid):
            end = False  # its end passed here already: every consumer sees it once
            if not values and not serialized:
                return
        computed = False
        for child in self.state.derived_here(sid):
            if self.executor.is_copy(child):  # duplicated here: same items, same wire text
                self._copy(child, values, end, serialized, position, origins)
            elif not made_by_reader(self.state.table, child):  # (a joined stream: not into the executor)
                computed = True
        if computed:  # one push per parent, whatever the number of operators on it
            texts = None
            if self.executor.wants_text:
                texts = as_texts(serialized) if serialized is not None else [serialize(v) for v in values]
            started = time.perf_counter()
            self.executor.push(sid, values, texts, end, origins)
            self.observe_batch(time.perf_counter() - started)  # (metrics: the executor's time per batch)
        consumers = self.state.deliveries.get(sid, ())
        if consumers and count:  # (where a switch of plans must take over from: ``TrackSwitch.fed_before``)
            self.state.fed_high[sid] = fed_high(self.state.fed_high.get(sid), values, origins)
        texts: list[str] | None = None
        for consumer, variable in consumers:
            if wants_text(consumer):  # (its results are these items: ``wxquery.pass_through``)
                if texts is None:
                    texts = as_texts(serialized) if serialized is not None else [serialize(v) for v in values]
                consumer.feed(variable, texts, end, origins)
            else:
                consumer.feed(variable, values, end, origins)
        hops = entry.next_hops(self.state.id)
        if hops and (values or serialized or end):
            text = serialized if serialized is not None else [serialize(v) for v in values]
            for n in hops:
                self.sender(n).send(sid, text, end, position, origins)

    def _copy(self, child: str, values: list, end: bool, serialized: list[str] | None,
              position: int | None, origins: Origins | None = None) -> None:
        """Items of a parent into a copy made here: a copy of a running replay for a later past
        subscription (``sharing.replay_plans``) takes them from its first item on only."""
        below = self.positions.skip_below.get(child)
        if below is not None and position is not None and position < below:
            skip = below - position
            values, position = values[skip:], below
            serialized = serialized[skip:] if serialized is not None else None
            origins = origins[skip:] if origins is not None else None
            if not (values or serialized or end):
                return
        self.ingest(child, values, end, serialized, position=position, origins=origins)

    def watermark(self, sid: str, path: str, value: float, replaying: bool = False) -> None:
        """Called with the lock held: event time ``value`` at element ``path`` reached stream
        ``sid`` here (no later item has a smaller value there). Window operators on it close
        what it ends (``Executor.advance``); it goes on through copies and operators that keep
        items as they are (selections, projections: when the executor has already delivered
        their items), and to the next hops. A copy being filled from the log takes the logged
        watermarks, in their place among the items, not the live ones."""
        entry = self.state.table.get(sid)
        if entry is None or self.state.table.has_ended(sid) or (sid in self.replays and not replaying):
            return
        computed, passing = False, []
        for child in self.state.derived_here(sid):
            if self.executor.is_copy(child):  # (one taking items from ``below`` on: the marks after it)
                below = self.positions.skip_below.get(child)
                if below is None or self.positions.next.get(sid, 0) > below:
                    self.watermark(child, path, value)
                continue
            if not made_by_reader(self.state.table, child):  # (a joined stream's reader takes it below)
                computed = True  # (an asynchronous executor says when it passed: ``Passed``)
                passing += [child] if self.executor.synchronous else []
        if computed:
            self.executor.advance(sid, path, value)
        for child in passing:  # (the inline executor's outputs of the items before it are out)
            self.pass_watermark(child, path, value)
        for consumer, variable in self.state.deliveries.get(sid, ()):
            advance = getattr(consumer, "watermark", None)  # (a subscription's window join; not a switch)
            if advance is not None:
                advance(variable, path, value)
        for n in entry.next_hops(self.state.id):
            self.sender(n).send_watermark(sid, path, value)

    def pass_watermark(self, child: str, path: str, value: float) -> None:
        """(Lock held) a watermark on ``child``'s parent passed it: on along a stream that keeps
        items as they are, not to what a recomputation's level feeds before it began."""
        c = self.state.table.get(child)
        if (c is not None and c.kind == "items" and not any(isinstance(op, WINDOW_OPERATORS) for op in c.operators)
                and self.executor_seqs.get(child, 0) >= self.positions.skip_below.get(child, 0)):
            self.watermark(child, path, value)

    def idle_watermarks(self, idle_s: float) -> None:
        """Watermarks for the streams registered here that have been idle ``idle_s``."""
        now = time.monotonic()
        for name, o in list(self.state.originals.items()):
            if o.event_time is None or o.closed or not o.publishing.acquire(blocking=False):
                continue  # (a batch being taken: the stream is not idle)
            try:
                w = o.event_time.idle_watermark(now, idle_s)
                if w is None:
                    continue
                try:  # in its place in the log: a replay sends it where it was sent
                    self.state.store.add_watermark(name, o.logged, o.event_time.path, w)
                except Exception:  # noqa: BLE001 - a watermark not sent only delays results
                    log.exception("could not log a watermark of %s", name)
                    continue
                with self.state.lock:
                    self.watermark(name, o.event_time.path, w)
            finally:
                o.publishing.release()

    def attach(self, stream: str) -> None:
        """Called with the lock held when a stream produced here has just been installed: if
        its parent's end already passed this peer, that end will not come again, so the new
        stream ends now (a copy directly; an operator chain through the executor, which ends
        only the chains that have not ended yet)."""
        entry = self.state.table.get(stream)
        if (entry is None or entry.parent is None or entry.origin != self.state.id
                or not self.state.table.has_ended(entry.parent) or self.state.table.has_ended(stream)):
            return
        if self.executor.is_copy(stream):
            self.ingest(stream, [], True, [])
        else:
            self.executor.push(entry.parent, [], [] if self.executor.wants_text else None, True)

    def executor_output(self, stream: str, seq: int, outputs: list, end: bool,
                        origins: Origins | None = None) -> None:
        """A derived stream's new items from the executor (in order; a redelivery after an
        executor restart repeats sequence numbers, which are dropped here); ``origins``: per
        output of a per-item chain, its original's item, when the executor knows it."""
        with self.state.lock:
            expected = self.executor_seqs.get(stream, seq)
            self.executor_seqs[stream] = max(expected, seq + len(outputs))
            # the stream's own numbers (``positions``); a re-plan's recomputation drops those
            # below where its subscription's chain went on from them
            first = max(expected, seq, self.positions.skip_below.get(stream, 0))
            outputs = outputs[max(first - seq, 0):]
            if origins is not None:
                origins = origins[max(first - seq, 0):]
            entry = self.state.table.get(stream)
            if entry is None or not (outputs or end):
                return
            if self.executor.wants_text:
                self.ingest_text(entry, outputs, end, position=first, origins=origins)
            else:
                self.ingest(stream, outputs, end, None, position=first, origins=origins)

    def status(self) -> dict:
        return {"dropped_transfers_for_unknown_streams": self.unknown_transfers,
                "refused_transfers_from_the_wrong_peer": self.forged_transfers,
                "dropped_malformed_transfers": self.bad_transfers,
                "last_malformed_transfer": self.last_bad_transfer,
                "duplicate_transfer_items": self.receipts.duplicates,
                "transfer_sequence_gaps": {"items": self.receipts.gaps, "last": self.receipts.last_gap},
                "replays": self.replays.status(), "measured_rates": self.rates.status()}
