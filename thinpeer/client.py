"""Thin-peer client library: publish a stream, subscribe and read results, over gRPC.

Errors come back as ``ThinPeerError`` carrying the super-peer's status code and message, e.g.
``INVALID_ARGUMENT: query:3:7: error: 'or' is not supported …``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import grpc

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc

BATCH = 1000


class ThinPeerError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ResultBatch:
    """One read of a subscription's results: ``items`` start at ``offset``; ``dropped`` counts
    items the retention bound discarded before this read; ``closed``: no more will come."""

    offset: int
    items: list[str]
    root: str
    dropped: int
    closed: bool


@dataclass
class PublishSummary:
    accepted: int = 0
    rejected: int = 0
    reasons: list[str] | None = None


class SuperPeerClient:
    def __init__(self, address: str, timeout: float = 30.0) -> None:
        self.address = address
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)])
        self.stub = pb_grpc.ThinPeerStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "SuperPeerClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request, timeout: float | None = None):
        try:
            return getattr(self.stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            code = exc.code().name if exc.code() else "UNKNOWN"
            details = exc.details() or ""
            if code == "UNAVAILABLE":
                details = f"cannot reach super-peer at {self.address} ({details})"
            raise ThinPeerError(code, details) from None

    # ------------------------------------------------------------------ publishing

    def register_stream(self, name: str, root: str, item: str, rate: float = 0.0) -> None:
        self._call("RegisterStream", pb.RegisterStreamRequest(name=name, root=root, item=item, rate=rate))

    def publish(self, name: str, items: Iterable[str], rate: float | None = None,
                progress=None) -> PublishSummary:
        summary = PublishSummary(reasons=[])
        batch: list[str] = []
        start = time.monotonic()
        sent = 0

        def flush() -> None:
            nonlocal sent
            if not batch:
                return
            reply = self._call("Publish", pb.PublishRequest(stream=name, first_sequence=sent, items=batch))
            summary.accepted += reply.accepted
            summary.rejected += reply.rejected
            summary.reasons.extend(reply.rejections)  # type: ignore[union-attr]
            sent += len(batch)
            batch.clear()
            if progress is not None:
                progress(summary)

        per_batch = BATCH if rate is None else max(1, min(BATCH, int(rate / 20) or 1))
        for item in items:
            batch.append(item)
            if len(batch) >= per_batch:
                flush()
                if rate:
                    ahead = sent / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
        flush()
        return summary

    def close_stream(self, name: str) -> int:
        return self._call("CloseStream", pb.CloseStreamRequest(stream=name)).items

    # ------------------------------------------------------------------ subscribing

    def subscribe(self, query: str, strategy: str = "sharing", wait_for_streams: bool = False
                  ) -> pb.SubscribeReply:
        return self._call("Subscribe", pb.SubscribeRequest(query=query, strategy=strategy,
                                                           wait_for_streams=wait_for_streams))

    def unsubscribe(self, subscription: str) -> list[str]:
        return list(self._call("Unsubscribe", pb.UnsubscribeRequest(subscription=subscription)).removed_streams)

    def read(self, subscription: str, offset: int = 0, max_items: int = 1000,
             wait_ms: int = 1000) -> pb.ReadResultsReply:
        return self._call("ReadResults", pb.ReadResultsRequest(
            subscription=subscription, offset=offset, max_items=max_items, wait_ms=wait_ms),
            timeout=self.timeout + wait_ms / 1000)

    def result_batches(self, subscription: str, offset: int = 0,
                       idle_timeout: float | None = None, max_items: int = 1000,
                       wait_ms: int = 1000) -> Iterator[ResultBatch]:
        """Every read from ``offset`` on, empty ones included, until the stream closes or nothing
        came for ``idle_timeout`` seconds.

        The one read/resume loop of the thin peer: ``results`` and ``streamglobe subscribe`` both
        use it. Batches, not items, so that a caller can see the root of an empty result, report
        dropped items and persist its offset once per read. The idle clock restarts when the
        caller resumes after a non-empty batch, so time spent consuming it does not count.
        """
        last = time.monotonic()
        while True:
            reply = self.read(subscription, offset, max_items=max_items, wait_ms=wait_ms)
            batch = ResultBatch(reply.offset, list(reply.items), reply.root, reply.dropped,
                                reply.closed)
            yield batch
            if batch.items:
                offset = batch.offset + len(batch.items)
                last = time.monotonic()
            if batch.closed:
                return
            if idle_timeout is not None and time.monotonic() - last >= idle_timeout:
                return

    def results(self, subscription: str, offset: int = 0, idle_timeout: float | None = None,
                ) -> Iterator[tuple[int, str, str]]:
        """(offset, item, root) until the stream closes or nothing came for ``idle_timeout``."""
        for batch in self.result_batches(subscription, offset, idle_timeout):
            for i, item in enumerate(batch.items):
                yield batch.offset + i, item, batch.root

    def status(self) -> dict:
        return json.loads(self._call("Status", pb.StatusRequest()).json)
