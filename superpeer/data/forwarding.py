"""Outbound item batches to one neighbour super-peer, in order, acknowledged, with back-off.

One sender per neighbour drains a queue of (stream, items, end) into ``Transfer`` batches of up to
``BATCH`` items and ``BATCH_BYTES`` bytes (one bigger item travels alone; an item no message could
carry is dropped and counted), never merging different streams or crossing an end-of-stream mark,
so the receiver sees every stream in order.

The batches travel on one long-lived gRPC stream per link and direction (``Transfers``), up to
``WINDOW`` of them in flight: the receiver takes them in order and acknowledges each, so a batch
never waits for the round trip of the one before (a unary call per batch did: its latency bounded
the link's rate). A batch is held, and counted as held, until acknowledged. When the stream
breaks — the neighbour stopped, the link was cut, an error — the batches in flight are sent again
on a new stream, with back-off while the neighbour cannot be reached; the failure is reported in
status, and the rest of the node keeps running. Each stream's items on the link are numbered (per
sender epoch), so that a batch sent again after a lost acknowledgement is taken once by the
receiver (``link_receipts``). A batch the receiver refuses for good (``REFUSED``: not this
peer's to send, malformed) gives its stream up on this link, counted, and the link goes on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from proto import streamglobe_pb2 as pb

from .limits import ENVELOPE, MESSAGE_LIMIT
from .origins import Origins, joined, mergeable
from .positions import kept_runs
from .wire_batch import WireBatch, sizes_of

EMPTY = WireBatch(b"", [])

BATCH = 4000
BATCH_BYTES = 1 << 20  # (a slow link acknowledges a batch within seconds: 8 s at 1 Mbit/s)
WINDOW = 8  # batches in flight on a link's stream, not yet acknowledged
# nothing acknowledged for this long (and no word that the neighbour holds it back: ``pressure``)
# breaks the stream: a stuck or vanished neighbour
ACK_TIMEOUT_S = 60.0
MAX_ITEM_BYTES = MESSAGE_LIMIT - ENVELOPE
MAX_QUEUED_ITEMS = 2_000_000
# answers that retrying cannot change: the stream is given up on this link (counted, in status)
REFUSED = frozenset({grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT,
                     grpc.StatusCode.UNAUTHENTICATED})
REFUSED_NAMES = frozenset(code.name for code in REFUSED)


@dataclass
class _Chunk:
    stream: str
    items: WireBatch  # (as they travel: one buffer, each item's length)
    end: bool
    watermark: tuple[str, float] | None = None  # (element, event time) after the items
    position: int | None = None  # log number of the first item (an original stream, a copy)
    origins: Origins | None = None  # per item, its original's item (``origins``)

    @property
    def sizes(self) -> Sequence[int]:
        """UTF-8 bytes of each item."""
        return self.items.lengths

    def split(self, n: int) -> _Chunk:
        """Keep the first ``n`` items; the rest (and the end mark, the watermark) as a new chunk."""
        rest = _Chunk(self.stream, self.items[n:], self.end, self.watermark,
                      None if self.position is None else self.position + n,
                      None if self.origins is None else self.origins[n:])
        if self.origins is not None:
            self.origins = self.origins[:n]
        self.items = self.items[:n]
        self.end, self.watermark = False, None
        return rest


@dataclass
class LinkCounters:
    items: int = 0
    bytes: int = 0
    batches: int = 0
    errors: int = 0
    last_error: str = ""
    dropped: int = 0
    held_items: int = 0  # queued or sent and not yet acknowledged: the link's replay buffer
    held_bytes: int = 0
    peak_held_bytes: int = 0
    pressure: str = ""  # the neighbour holds our batches back, and why ("": it does not)


class Forwarder:
    def __init__(self, sender: str, neighbour: str, stub, counters: LinkCounters, epoch: str = "") -> None:
        self.sender = sender
        self.epoch = epoch
        self.neighbour = neighbour
        self.stub = stub
        self.counters = counters
        self.queue: deque[_Chunk] = deque()
        self.queued_items = 0
        self.cond = threading.Condition()
        self.stopped = False
        self.sequence: dict[str, int] = {}
        self.discarded: set[str] = set()  # removed streams: never sent again
        # sent, not yet acknowledged: (batch, request, when it was sent)
        self.inflight: deque[tuple[_Chunk, pb.TransferRequest, float]] = deque()
        self._call = None  # the link's stream now (cancelled to break it: ``interrupt``)
        self._interrupts = 0  # (a stream opened while the link was being cut is broken too)
        self._stalled = ""  # why the stream was broken here, if it was
        self._progress = time.monotonic()  # the last acknowledgement, or word of back-pressure
        self.failing_since: float | None = None  # the link's stream broke then and has not healed
        self.thread = threading.Thread(target=self._run, name=f"fwd-{sender}-{neighbour}", daemon=True)

    def start(self) -> None:
        """The sender thread: it drains the queue until ``stop``."""
        self.thread.start()

    def send(self, stream: str, items: Sequence[str], end: bool = False, position: int | None = None,
             origins: Origins | None = None) -> None:
        """Queue items (numbered from ``position`` if the stream is numbered by its log,
        else by this link), or the end; ``origins``: per item, its original's item, if known.
        Items received as a ``WireBatch`` leave as the same buffer."""
        if not items and not end:
            return
        sizes = sizes_of(items)
        if max(sizes, default=0) > MAX_ITEM_BYTES:
            with self.cond:
                self.counters.dropped += sum(1 for n in sizes if n > MAX_ITEM_BYTES)
                self.counters.last_error = (f"{stream}: dropped an item of {max(sizes):,} bytes, "
                                            f"more than a message carries ({MAX_ITEM_BYTES:,})")
            # each run of the items kept goes with its own number (the dropped ones' are skipped)
            runs = kept_runs([n <= MAX_ITEM_BYTES for n in sizes])
            for k, (a, b) in enumerate(runs):
                self._queue(stream, WireBatch.of(items[a:b]).bare(), end and k == len(runs) - 1,
                            None if position is None else position + a,
                            None if origins is None else origins[a:b])
            if not runs and end:
                self._queue(stream, EMPTY, True, None)
            return
        self._queue(stream, WireBatch.of(items).bare(), end, position, origins)

    def _queue(self, stream: str, items: WireBatch, end: bool, position: int | None,
               origins: Origins | None = None) -> None:
        with self.cond:
            if self.queued_items + len(items) > MAX_QUEUED_ITEMS:
                self.counters.dropped += len(items)
                items = EMPTY
                if not end:
                    return
            self.queue.append(_Chunk(stream, items, end, position=position if items else None,
                                     origins=origins if items else None))
            self.queued_items += len(items)
            c = self.counters
            c.held_items += len(items)
            c.held_bytes += items.nbytes
            c.peak_held_bytes = max(c.peak_held_bytes, c.held_bytes)
            self.cond.notify_all()

    def discard(self, stream: str) -> None:
        """A stream removed here: its queued items are dropped, and a batch of it being retried
        is given up (the far end may never answer again)."""
        with self.cond:
            self.discarded.add(stream)
            kept = deque(c for c in self.queue if c.stream != stream)
            for c in self.queue:
                if c.stream == stream:
                    self._release(c)
                    self.queued_items -= len(c.items)
            self.queue = kept
            self.cond.notify_all()

    # ------------------------------------------------------------------ back-pressure (``Room``)

    def wait_for_room(self, bound, timeout_s: float) -> bool:
        """Whether the link holds less than ``bound`` (a ``backpressure.LinkBuffer``), waiting
        up to ``timeout_s`` for it to; a stopped link always has room (nothing waits on it)."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while (self.counters.held_bytes >= bound.max_bytes or self.counters.held_items >= bound.max_items) \
                    and not self.stopped and self.failing_since is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def fullness(self) -> str:
        c = self.counters
        said = f"{c.held_bytes / (1 << 20):.1f} MiB in {c.held_items:,} items"
        return said + (f"; it holds back: {c.pressure}" if c.pressure else "")

    @property
    def reachable(self) -> bool:
        return self.failing_since is None

    def _release(self, chunk: _Chunk) -> None:
        self.counters.held_items -= len(chunk.items)
        self.counters.held_bytes -= chunk.items.nbytes

    def send_watermark(self, stream: str, path: str, value: float) -> None:
        """Event time after the stream's items sent so far (it travels in order with them)."""
        with self.cond:
            self.queue.append(_Chunk(stream, EMPTY, False, (path, value)))
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        self.interrupt()

    def interrupt(self) -> None:
        """Break the link's stream (the link was cut): what is in flight goes again on the next."""
        with self.cond:
            self._interrupts += 1
            call = self._call
        if call is not None:
            call.cancel()

    def _take(self) -> _Chunk | None:
        """The next batch (blocking until there is one); None once stopped."""
        with self.cond:
            while not self.queue and not self.stopped:
                self.cond.wait()
            if self.stopped and not self.queue:
                return None
            return self._take_locked()

    def _take_locked(self) -> _Chunk:
        """Called with ``cond`` held and the queue not empty: the next batch, merged from the
        queue's chunks of one stream up to a batch."""
        first = self.queue.popleft()
        pieces = [first.origins]  # (joined once: not a list rebuilt per merged chunk)
        batches, count, size = [first.items], len(first.items), first.items.nbytes
        while (not first.end and first.watermark is None and self.queue and self.queue[0].stream == first.stream
               and _follows(first, count, self.queue[0])
               and count + len(self.queue[0].items) <= BATCH
               and size + self.queue[0].items.nbytes <= BATCH_BYTES):
            nxt = self.queue.popleft()
            if not count:
                first.position, first.origins, pieces = nxt.position, nxt.origins, [nxt.origins]
            elif nxt.items:
                pieces.append(nxt.origins)
                first.origins = nxt.origins  # (the last piece: what the next one must follow)
            batches.append(nxt.items)
            count, size = count + len(nxt.items), size + nxt.items.nbytes
            first.end = nxt.end
            first.watermark = nxt.watermark
        first.items = WireBatch.joined([b for b in batches if b] or [EMPTY])
        first.origins = joined(pieces)
        n = _fitting(first.sizes) if count > BATCH or size > BATCH_BYTES else count
        if n < count:
            self.queue.appendleft(first.split(n))
        self.queued_items -= len(first.items)
        return first

    def _request(self, chunk: _Chunk) -> pb.TransferRequest:
        """The batch as it travels, numbered: the stream's log numbers, or this link's."""
        seq = self.sequence.get(chunk.stream, 0) if chunk.position is None else chunk.position
        request = pb.TransferRequest(stream=chunk.stream, first_sequence=seq, payload=chunk.items.payload,
                                     lengths=chunk.items.lengths, end=chunk.end, sender=self.sender,
                                     sender_epoch=self.epoch)
        if chunk.watermark is not None:
            request.watermark_path, request.watermark = chunk.watermark
        if isinstance(chunk.origins, range):
            request.numbered_by_origin = True
        elif chunk.origins is not None:
            request.origins.extend(chunk.origins)
        self.sequence[chunk.stream] = seq + len(chunk.items)
        return request

    # ------------------------------------------------------------------ the link's stream

    def _run(self) -> None:
        """Open the link's stream when there is something to send, read its acknowledgements,
        and open it again (after a back-off) when it breaks."""
        delay = 0.05
        while True:
            with self.cond:
                while not self.queue and not self.inflight and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
                resend = self._resendable()
            live = threading.Event()
            live.set()
            failed = False
            try:
                with self.cond:
                    interrupts = self._interrupts
                call = self.stub.Transfers(self._requests(live, resend))
                with self.cond:
                    self._call = call
                    broken = self._interrupts != interrupts
                if broken:  # (cut while it was being opened)
                    call.cancel()
                for reply in call:
                    if reply.pressure:
                        self._pressured(reply.pressure)
                    else:
                        self._acknowledged(reply)
                    delay = 0.05
            except grpc.RpcError as exc:
                failed = not self.stopped
                if failed:
                    self._broken(exc)
            except ValueError:  # the channel was closed: this node is stopping
                return
            finally:
                with self.cond:
                    live.clear()
                    self.cond.notify_all()
                self._call = None
            if failed:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _resendable(self) -> list[pb.TransferRequest]:
        """Called with ``cond`` held, before a new stream: the batches in flight on the last one
        (of streams still sent), to go first, in order."""
        kept: deque[tuple[_Chunk, pb.TransferRequest, float]] = deque()
        now = time.monotonic()
        for chunk, request, _ in self.inflight:
            if chunk.stream in self.discarded:
                self._release(chunk)
            else:
                kept.append((chunk, request, now))
        self.inflight = kept
        return [request for _, request, _ in kept]

    def _requests(self, live: threading.Event, resend: list[pb.TransferRequest]):
        """The stream's requests (iterated by gRPC): what was in flight, then each next batch
        as soon as the window has room; it ends when the node stops or the stream broke. A
        batch not acknowledged in ``ACK_TIMEOUT_S`` breaks the stream."""
        yield from resend
        while True:
            stalled, request = False, None
            with self.cond:
                while live.is_set() and not self.stopped and (len(self.inflight) >= WINDOW or not self.queue):
                    self.cond.wait(1.0)
                    if self.inflight and time.monotonic() - max(self.inflight[0][2], self._progress) > ACK_TIMEOUT_S:
                        self._stalled = f"DEADLINE_EXCEEDED: nothing acknowledged in {ACK_TIMEOUT_S:g} s"
                        stalled, call = True, self._call
                        break
                if not stalled:
                    if not live.is_set() or self.stopped:
                        return
                    chunk = self._take_locked()
                    if chunk.stream in self.discarded:
                        self._release(chunk)
                        continue
                    try:
                        request = self._request(chunk)
                    except Exception as exc:  # noqa: BLE001 - a batch that cannot be sent is dropped, counted
                        self.counters.dropped += len(chunk.items)
                        self.counters.last_error = f"{chunk.stream}: a batch could not be sent: {exc}"
                        self._release(chunk)
                        continue
                    self.inflight.append((chunk, request, time.monotonic()))
            if stalled:  # (the reading side then sees the stream broken)
                if call is not None:
                    call.cancel()
                return
            yield request

    def _acknowledged(self, reply: pb.TransferReply) -> None:
        """The oldest batch in flight was taken (or refused for good: its stream is given up here)."""
        with self.cond:
            if not self.inflight:
                return
            chunk, _, _ = self.inflight.popleft()
            self._progress, self.failing_since = time.monotonic(), None
            c = self.counters
            c.pressure = ""
            if reply.refused_code:
                c.errors += 1
                c.last_error = f"{reply.refused_code}: {reply.refused}"
                if reply.refused_code in REFUSED_NAMES:
                    c.dropped += len(chunk.items)
                    self.discarded.add(chunk.stream)
            else:
                c.items += len(chunk.items)
                c.bytes += chunk.items.nbytes
                c.batches += 1
            self._release(chunk)
            self.cond.notify_all()

    def _pressured(self, reason: str) -> None:
        """The neighbour holds the next batch back (its own links are full): not a stall."""
        with self.cond:
            self._progress, self.failing_since = time.monotonic(), None
            self.counters.pressure = reason
            self.cond.notify_all()

    def _broken(self, exc: grpc.RpcError) -> None:
        """The stream broke: counted; a neighbour that refuses this peer's stream for good
        (``REFUSED``) refuses each batch in flight, whose streams are given up on this link."""
        with self.cond:
            self.failing_since = self.failing_since or time.monotonic()
            self.cond.notify_all()  # (back-pressure stops waiting for an unreachable neighbour)
            c = self.counters
            c.errors += 1
            c.last_error = self._stalled or f"{exc.code().name}: {exc.details()}"
            self._stalled = ""
            if exc.code() in REFUSED:
                for chunk, _, _ in self.inflight:
                    c.dropped += len(chunk.items)
                    self.discarded.add(chunk.stream)


def _follows(first: _Chunk, count: int, nxt: _Chunk) -> bool:
    """Whether ``nxt`` continues the numbering of ``first`` grown to ``count`` items (one batch
    carries one first number)."""
    if not nxt.items or not count:
        return True
    if not mergeable(first.origins, nxt.origins):
        return False
    if nxt.position is None:
        return True
    if first.position is None:
        return False
    return first.position + count == nxt.position


def _fitting(sizes: Sequence[int]) -> int:
    """How many leading items make one batch: up to BATCH items and BATCH_BYTES, at least one."""
    total = 0
    for n, size in enumerate(sizes[:BATCH]):
        total += size
        if n and total > BATCH_BYTES:
            return n
    return min(len(sizes), BATCH)
