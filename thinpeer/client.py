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

from .credentials import Credentials
from .linger import FLUSH, Rejected, lingering

BATCH = 1000  # items per Publish request, and at most BATCH_BYTES (one bigger item goes alone)
BATCH_BYTES = 4 << 20
MESSAGE_LIMIT = 64 << 20  # what the super-peers accept in one gRPC message
DEFAULT_MAX_ITEM_BYTES = MESSAGE_LIMIT - (1 << 20)  # until a super-peer says its own limit


TRANSIENT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})  # the super-peer may answer again


def _number(rejection: str) -> str:
    """"item N" of a rejection's reason "item N: why"."""
    return rejection.partition(":")[0]


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
    degraded: str = ""  # why its items cannot reach it now ("": they can)
    # on a sample: the <sg:approximation> element of the windows that arrived with these items
    approximation: str = ""
    past: str = ""  # over the past: how far the replay of its streams' past has come ("": live)


@dataclass
class PublishSummary:
    accepted: int = 0
    rejected: int = 0
    reasons: list[str] | None = None
    duplicates: int = 0  # items the super-peer had taken before (a retried batch), skipped


class SuperPeerClient:
    def __init__(self, address: str, timeout: float = 30.0, credentials: Credentials | None = None) -> None:
        """``credentials``: the backbone's CA certificate and a token (``thinpeer.credentials``);
        by default from ``STREAMGLOBE_CA`` and ``STREAMGLOBE_TOKEN`` (neither: plaintext)."""
        self.address = address
        self.timeout = timeout
        self.credentials = credentials if credentials is not None else Credentials.resolve()
        self.channel = self.credentials.channel(address)
        self.stub = pb_grpc.ThinPeerStub(self.channel)
        self.max_item_bytes: dict[str, int] = {}  # per stream, as its super-peer said
        self.history_bounds: dict[str, str] = {}  # per stream registered, the history it keeps

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
                hint = ("" if self.credentials.secure else
                        "; if its network is secure (the default), give --ca or STREAMGLOBE_CA and a token")
                details = f"cannot reach super-peer at {self.address} ({details}){hint}"
            raise ThinPeerError(code, details) from None

    # ------------------------------------------------------------------ publishing

    def register_stream(self, name: str, root: str, item: str, rate: float = 0.0,
                        event_time: str = "", event_time_rate: float = 1.0, history: str = "") -> int:
        """Register a stream (again, for a publisher reconnecting); the stream-wide number its
        next new item gets: how many items the super-peer has taken so far. ``event_time``: the
        item's element time windows read (e.g. ``det_time``), advanced by watermarks at
        ``event_time_rate`` units per second while the stream is idle. ``history``: how much of
        its past the super-peer keeps for subscriptions over it ("10m", "100000", "64MB"; "":
        the super-peer's default); ``history_bounds`` records the bound in effect."""
        reply = self._call("RegisterStream", pb.RegisterStreamRequest(
            name=name, root=root, item=item, rate=rate, event_time=event_time,
            event_time_rate=event_time_rate, history=history))
        self.history_bounds[name] = reply.history
        if reply.max_item_bytes:
            self.max_item_bytes[name] = reply.max_item_bytes
        return reply.next_position

    def publish(self, name: str, items: Iterable[str | bytes | Rejected], rate: float | None = None,
                progress=None, position: int | None = None, retry_s: float = 30.0,
                linger_s: float | None = 0.05) -> PublishSummary:
        """Send items in batches bounded in count and bytes; every item is numbered by its
        position in ``items`` (rejections say "item N: why"). An item over the super-peer's
        size limit, or that is not UTF-8 text, is rejected here without being sent.

        ``position``: the stream-wide number of the first item (``register_stream`` says where
        the stream stands); items are then numbered from it, in rejections too. Numbered batches
        are taken once by the super-peer, so a batch whose reply is lost is sent again (for up
        to ``retry_s`` while the super-peer is unreachable) without duplicating anything. The
        numbering is the stream's: one numbered publisher per stream at a time.

        ``linger_s``: an item waits at most this long for its batch to fill when ``items`` is a
        live source (an iterator that blocks, like stdin or a broker): the source is read in a
        thread and a small batch goes as soon as the source has nothing more for that long.
        None: batches fill whatever the wait (a list is always sent in full batches). An item
        given as ``Rejected(reason)`` (the source could not make an item of its input) is
        counted and reported with its number, and keeps that number."""
        summary = PublishSummary(reasons=[])
        limit = self.max_item_bytes.get(name, DEFAULT_MAX_ITEM_BYTES)
        batch: list[bytes] = []
        batch_bytes = 0
        start = time.monotonic()
        index = position or 0  # the number of the next item
        first = index  # the number of batch[0]: batches are contiguous runs of numbers

        def flush() -> None:
            nonlocal first, batch_bytes
            if batch:
                request = pb.PublishRequest(stream=name, first_sequence=first, items=batch)
                if position is not None:
                    request.position = first
                reply = self._publish_batch(request, retry_s if position is not None else 0.0)
                summary.duplicates += reply.duplicates
                summary.accepted += reply.accepted
                summary.rejected += reply.rejected
                summary.reasons.extend(ours.pop(_number(why), why)  # type: ignore[union-attr]
                                       for why in reply.rejections)
                summary.reasons.extend(ours.values())  # (past the super-peer's count of reasons)
                ours.clear()
                batch.clear()
                batch_bytes = 0
                if progress is not None:
                    progress(summary)
            first = index

        ours: dict[str, str] = {}  # the reasons of the placeholders in the batch, by number

        def refuse(reason: str) -> None:
            """An item refused here keeps its number: numbered, as a gap; appended, as an empty
            placeholder the super-peer rejects (so that its positions stay the input's and a
            later ``position`` resume skips exactly what it has), reported with our reason."""
            nonlocal index, batch_bytes
            if position is None:
                ours[f"item {index}"] = f"item {index}: {reason} (not sent)"
                batch.append(b"")
                index += 1
                return
            flush()
            summary.rejected += 1
            summary.reasons.append(f"item {index}: {reason} (not sent)")  # type: ignore[union-attr]
            index += 1
            flush()

        per_batch = BATCH if rate is None else max(1, min(BATCH, int(rate / 20) or 1))
        live = linger_s is not None and not isinstance(items, (list, tuple))
        for item in lingering(items, linger_s) if live else items:  # type: ignore[arg-type]
            if item is FLUSH:
                flush()
                continue
            if isinstance(item, Rejected):
                refuse(item.reason)
                continue
            try:
                data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
            except UnicodeEncodeError as exc:
                refuse(f"not encodable as UTF-8 ({exc.reason} at character {exc.start})")
                continue
            if len(data) > limit:
                refuse(f"{len(data):,} bytes, more than the {limit:,} bytes the super-peer "
                       "accepts per item")
                continue
            if batch and batch_bytes + len(data) > BATCH_BYTES:
                flush()
            batch.append(data)
            batch_bytes += len(data)
            index += 1
            if len(batch) >= per_batch:
                flush()
                if rate:
                    ahead = (index - (position or 0)) / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
        flush()
        return summary

    def _publish_batch(self, request: pb.PublishRequest, retry_s: float) -> pb.PublishReply:
        """One batch; a numbered one again after a lost reply or while the super-peer is
        unreachable (it skips what it took already), until ``retry_s`` have passed."""
        deadline = time.monotonic() + retry_s
        delay = 0.1
        while True:
            try:
                return self._call("Publish", request)
            except ThinPeerError as exc:
                if exc.code not in TRANSIENT or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def close_stream(self, name: str) -> int:
        return self._call("CloseStream", pb.CloseStreamRequest(stream=name)).items

    # ------------------------------------------------------------------ subscribing

    def subscribe(self, query: str, strategy: str = "sharing", wait_for_streams: bool = False,
                  from_start: bool = False, since_s: float | None = None,
                  approximate: bool = False, confidence: float | None = None) -> pb.SubscribeReply:
        """``from_start``: over every item its streams' super-peers retain, then live;
        ``since_s``: over the items that arrived there in the last so many seconds, then live.
        The reply's ``history`` says how far back the history went when it did not reach as
        far as asked ("" when it did). ``approximate``: when the network cannot carry the
        subscription whole, plan it on a sample of its input instead of refusing it; the
        reply's ``sample`` is R for a 1/R sample (1: every item), and its windows come with
        intervals at ``confidence`` (None: the super-peer's default, 0.95)."""
        return self._call("Subscribe", pb.SubscribeRequest(query=query, strategy=strategy,
                                                           wait_for_streams=wait_for_streams,
                                                           from_start=from_start, since_s=since_s,
                                                           approximate=approximate, confidence=confidence))

    def unsubscribe(self, subscription: str) -> list[str]:
        return list(self._call("Unsubscribe", pb.UnsubscribeRequest(subscription=subscription)).removed_streams)

    def read(self, subscription: str, offset: int = 0, max_items: int = 1000,
             wait_ms: int = 1000, peek: bool = False) -> pb.ReadResultsReply:
        """``peek``: look at results without confirming anything read (the web view)."""
        return self._call("ReadResults", pb.ReadResultsRequest(
            subscription=subscription, offset=offset, max_items=max_items, wait_ms=wait_ms, peek=peek),
            timeout=self.timeout + wait_ms / 1000)

    def confirm_read(self, subscription: str, offset: int) -> None:
        """Tell the super-peer every result before ``offset`` was read: once the stream has
        ended and everything is read, the subscription's results are released there."""
        self.read(subscription, offset, max_items=1, wait_ms=0)

    def result_batches(self, subscription: str, offset: int = 0,
                       idle_timeout: float | None = None, max_items: int = 1000,
                       wait_ms: int = 1000) -> Iterator[ResultBatch]:
        """Every read from ``offset`` on, empty ones included, until the stream closes or nothing
        came for ``idle_timeout`` seconds.

        The one read/resume loop of the thin peer: ``results`` and ``streamglobe subscribe`` both
        use it. Batches, not items, so that a caller can see the root of an empty result, report
        dropped items and persist its offset once per read. The idle clock restarts when the
        caller resumes after a non-empty batch, so time spent consuming it does not count, and
        while the subscription is degraded (it is planned again or heals: it is waited for). A
        reply holds up to ``max_items`` and up to the super-peer's byte bound: the loop goes on
        from the offset after it. A caller that consumes the last batch of an ended stream and
        resumes the loop confirms the read (``confirm_read``), which frees the results.
        """
        last, past = time.monotonic(), ""
        while True:
            reply = self.read(subscription, offset, max_items=max_items, wait_ms=wait_ms)
            batch = ResultBatch(reply.offset, list(reply.items), reply.root, reply.dropped,
                                reply.closed, reply.degraded, reply.approximation, reply.past)
            yield batch
            if batch.items:
                offset = batch.offset + len(batch.items)
            # (a degraded subscription is waited for: it heals; a replay of the past that goes on
            # is not idle, even while it brings no results)
            if batch.items or batch.degraded or batch.past != past:
                last = time.monotonic()
            past = batch.past
            if batch.closed:
                self.confirm_read(subscription, batch.offset + len(batch.items))
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

    def cut_link(self, peer: str, cut: bool = True) -> list[str]:
        """An admin's fault injection: this super-peer stops (``cut``) or resumes talking to its
        neighbour ``peer``; the neighbours its links are cut to now."""
        return list(self._call("CutLink", pb.CutLinkRequest(peer=peer, cut=cut)).cut)
