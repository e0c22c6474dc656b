"""Outbound item batches to one neighbour super-peer, in order, acknowledged, with back-off.

One sender thread per neighbour drains a queue of (stream, items, end) and sends them as
``Transfer`` batches of up to ``BATCH`` items, never merging different streams or crossing an
end-of-stream mark, so the receiver sees every stream in order. A neighbour that cannot be
reached is retried with back-off while its queue is bounded; the failure is reported in status,
and the rest of the node keeps running.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

import grpc

from proto import streamglobe_pb2 as pb

BATCH = 1000
MAX_QUEUED_ITEMS = 2_000_000


@dataclass
class _Chunk:
    stream: str
    items: list[str]
    end: bool


@dataclass
class LinkCounters:
    items: int = 0
    bytes: int = 0
    batches: int = 0
    errors: int = 0
    last_error: str = ""
    dropped: int = 0


class Forwarder:
    def __init__(self, sender: str, neighbour: str, stub, counters: LinkCounters) -> None:
        self.sender = sender
        self.neighbour = neighbour
        self.stub = stub
        self.counters = counters
        self.queue: deque[_Chunk] = deque()
        self.queued_items = 0
        self.cond = threading.Condition()
        self.stopped = False
        self.sequence: dict[str, int] = {}
        self.thread = threading.Thread(target=self._run, name=f"fwd-{sender}-{neighbour}", daemon=True)
        self.thread.start()

    def send(self, stream: str, items: list[str], end: bool = False) -> None:
        if not items and not end:
            return
        with self.cond:
            if self.queued_items + len(items) > MAX_QUEUED_ITEMS:
                self.counters.dropped += len(items)
                items = []
                if not end:
                    return
            self.queue.append(_Chunk(stream, list(items), end))
            self.queued_items += len(items)
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
            # merge following chunks of the same stream up to a batch
            while (not first.end and self.queue and self.queue[0].stream == first.stream
                   and len(first.items) + len(self.queue[0].items) <= BATCH):
                nxt = self.queue.popleft()
                first.items.extend(nxt.items)
                first.end = nxt.end
            if len(first.items) > BATCH:
                rest = _Chunk(first.stream, first.items[BATCH:], first.end)
                first = _Chunk(first.stream, first.items[:BATCH], False)
                self.queue.appendleft(rest)
            self.queued_items -= len(first.items)
            return first

    def _run(self) -> None:
        while True:
            chunk = self._take()
            if chunk is None:
                return
            seq = self.sequence.get(chunk.stream, 0)
            request = pb.TransferRequest(stream=chunk.stream, first_sequence=seq, items=chunk.items,
                                         end=chunk.end, sender=self.sender)
            delay = 0.05
            while not self.stopped:
                try:
                    self.stub.Transfer(request, timeout=30)
                    break
                except grpc.RpcError as exc:
                    self.counters.errors += 1
                    self.counters.last_error = f"{exc.code().name}: {exc.details()}"
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
            self.sequence[chunk.stream] = seq + len(chunk.items)
            self.counters.items += len(chunk.items)
            self.counters.bytes += sum(len(x.encode()) for x in chunk.items)
            self.counters.batches += 1
