"""Outbound item batches to one neighbour super-peer, in order, acknowledged, with back-off.

One sender thread per neighbour drains a queue of (stream, items, end) and sends them as
``Transfer`` batches of up to ``BATCH`` items and ``BATCH_BYTES`` bytes (one bigger item travels
alone; an item no message could carry is dropped and counted), never merging different streams
or crossing an end-of-stream mark, so the receiver sees every stream in order. A neighbour that cannot be
reached is retried with back-off while its queue is bounded; the failure is reported in status,
and the rest of the node keeps running. Each stream's items on the link are numbered (per sender
epoch), so that a batch retried after a lost reply is taken once by the receiver
(``link_receipts``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

import grpc

from proto import streamglobe_pb2 as pb

from .items import utf8_size
from .limits import ENVELOPE, MESSAGE_LIMIT
from .origins import Origins, joined, mergeable
from .positions import kept_runs

BATCH = 1000
BATCH_BYTES = 4 << 20
MAX_ITEM_BYTES = MESSAGE_LIMIT - ENVELOPE
MAX_QUEUED_ITEMS = 2_000_000
# answers that retrying cannot change: the stream is given up on this link (counted, in status)
REFUSED = frozenset({grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT,
                     grpc.StatusCode.UNAUTHENTICATED})


@dataclass
class _Chunk:
    stream: str
    items: list[str]
    sizes: list[int]  # UTF-8 bytes of each item
    end: bool
    watermark: tuple[str, float] | None = None  # (element, event time) after the items
    position: int | None = None  # log number of the first item (an original stream, a copy)
    origins: Origins | None = None  # per item, its original's item (``origins``)

    def split(self, n: int) -> "_Chunk":
        """Keep the first ``n`` items; the rest (and the end mark, the watermark) as a new chunk."""
        rest = _Chunk(self.stream, self.items[n:], self.sizes[n:], self.end, self.watermark,
                      None if self.position is None else self.position + n,
                      None if self.origins is None else self.origins[n:])
        if self.origins is not None:
            self.origins = self.origins[:n]
        del self.items[n:], self.sizes[n:]
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
        self.thread = threading.Thread(target=self._run, name=f"fwd-{sender}-{neighbour}", daemon=True)

    def start(self) -> None:
        """The sender thread: it drains the queue until ``stop``."""
        self.thread.start()

    def send(self, stream: str, items: list[str], end: bool = False, position: int | None = None,
             origins: Origins | None = None) -> None:
        """Queue items (numbered from ``position`` if the stream is numbered by its log,
        else by this link), or the end; ``origins``: per item, its original's item, if known."""
        if not items and not end:
            return
        sizes = [utf8_size(x) for x in items]
        if any(n > MAX_ITEM_BYTES for n in sizes):
            with self.cond:
                self.counters.dropped += sum(1 for n in sizes if n > MAX_ITEM_BYTES)
                self.counters.last_error = (f"{stream}: dropped an item of {max(sizes):,} bytes, "
                                            f"more than a message carries ({MAX_ITEM_BYTES:,})")
            # each run of the items kept goes with its own number (the dropped ones' are skipped)
            runs = kept_runs([n <= MAX_ITEM_BYTES for n in sizes])
            for k, (a, b) in enumerate(runs):
                self._queue(stream, items[a:b], sizes[a:b], end and k == len(runs) - 1,
                            None if position is None else position + a,
                            None if origins is None else origins[a:b])
            if not runs and end:
                self._queue(stream, [], [], True, None)
            return
        self._queue(stream, items, sizes, end, position, origins)

    def _queue(self, stream: str, items: list[str], sizes: list[int], end: bool, position: int | None,
               origins: Origins | None = None) -> None:
        with self.cond:
            if self.queued_items + len(items) > MAX_QUEUED_ITEMS:
                self.counters.dropped += len(items)
                items, sizes = [], []
                if not end:
                    return
            self.queue.append(_Chunk(stream, list(items), sizes, end, position=position if items else None,
                                     origins=origins if items else None))
            self.queued_items += len(items)
            c = self.counters
            c.held_items += len(items)
            c.held_bytes += sum(sizes)
            c.peak_held_bytes = max(c.peak_held_bytes, c.held_bytes)
            self.cond.notify()

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

    def _release(self, chunk: _Chunk) -> None:
        self.counters.held_items -= len(chunk.items)
        self.counters.held_bytes -= sum(chunk.sizes)

    def send_watermark(self, stream: str, path: str, value: float) -> None:
        """Event time after the stream's items sent so far (it travels in order with them)."""
        with self.cond:
            self.queue.append(_Chunk(stream, [], [], False, (path, value)))
            self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def _take(self) -> _Chunk | None:
        with self.cond:
            while not self.queue and not self.stopped:
                self.cond.wait()
            if self.stopped and not self.queue:
                return None
            first = self.queue.popleft()
            pieces = [first.origins]  # (joined once: not a list rebuilt per merged chunk)
            # merge following chunks of the same stream up to a batch
            while (not first.end and first.watermark is None and self.queue and self.queue[0].stream == first.stream
                   and _follows(first, self.queue[0])
                   and len(first.items) + len(self.queue[0].items) <= BATCH
                   and sum(first.sizes) + sum(self.queue[0].sizes) <= BATCH_BYTES):
                nxt = self.queue.popleft()
                if not first.items:
                    first.position, first.origins, pieces = nxt.position, nxt.origins, [nxt.origins]
                elif nxt.items:
                    pieces.append(nxt.origins)
                    first.origins = nxt.origins  # (the last piece: what the next one must follow)
                first.items.extend(nxt.items)
                first.sizes.extend(nxt.sizes)
                first.end = nxt.end
                first.watermark = nxt.watermark
            first.origins = joined(pieces)
            n = _fitting(first.sizes)
            if n < len(first.items):
                self.queue.appendleft(first.split(n))
            self.queued_items -= len(first.items)
            return first

    def _run(self) -> None:
        while True:
            chunk = self._take()
            if chunk is None:
                return
            seq = self.sequence.get(chunk.stream, 0) if chunk.position is None else chunk.position
            request = pb.TransferRequest(stream=chunk.stream, first_sequence=seq, items=chunk.items,
                                         end=chunk.end, sender=self.sender, sender_epoch=self.epoch)
            if chunk.watermark is not None:
                request.watermark_path, request.watermark = chunk.watermark
            if isinstance(chunk.origins, range):
                request.numbered_by_origin = True
            elif chunk.origins is not None:
                request.origins.extend(chunk.origins)
            delay = 0.05
            while not self.stopped and chunk.stream not in self.discarded:
                try:
                    self.stub.Transfer(request, timeout=30)
                    break
                except grpc.RpcError as exc:
                    self.counters.errors += 1
                    self.counters.last_error = f"{exc.code().name}: {exc.details()}"
                    if exc.code() in REFUSED:  # the neighbour will never take it: do not block the link
                        with self.cond:
                            self.counters.dropped += len(chunk.items)
                            self.discarded.add(chunk.stream)
                        break
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
            self.sequence[chunk.stream] = seq + len(chunk.items)
            with self.cond:
                self._release(chunk)
            self.counters.items += len(chunk.items)
            self.counters.bytes += sum(chunk.sizes)
            self.counters.batches += 1


def _follows(first: _Chunk, nxt: _Chunk) -> bool:
    """Whether ``nxt`` continues ``first``'s numbering (one batch carries one first number)."""
    if not nxt.items or not first.items:
        return True
    if not mergeable(first.origins, nxt.origins):
        return False
    if nxt.position is None:
        return True
    if first.position is None:
        return False
    return first.position + len(first.items) == nxt.position


def _fitting(sizes: list[int]) -> int:
    """How many leading items make one batch: up to BATCH items and BATCH_BYTES, at least one."""
    total = 0
    for n, size in enumerate(sizes[:BATCH]):
        total += size
        if n and total > BATCH_BYTES:
            return n
    return min(len(sizes), BATCH)
