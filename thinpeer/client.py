"""Thin-peer client library: publish a stream, subscribe and read results, over gRPC.

Errors come back as ``ThinPeerError`` carrying the super-peer's status code and message, e.g.
``INVALID_ARGUMENT: query:3:7: error: '!=' compares strings only …`` (its ``line`` and ``column``
say where). Replies are typed (``thinpeer.replies``); ``thinpeer.aio`` is the same client for
``asyncio``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Self

import grpc

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc

from .credentials import Credentials
from .linger import FLUSH, Rejected, lingering
from .publishing import (
    BATCH,
    BATCH_BYTES,
    DEFAULT_MAX_ITEM_BYTES,
    MESSAGE_LIMIT,
    Batches,
    Outgoing,
    retry_after,
)
from .replies import (
    TRANSIENT,
    PublishSummary,
    ResultBatch,
    Status,
    Subscription,
    ThinPeerError,
)
from .resume import RECONNECT_S, Idle, Reconnect

__all__ = [
    "BATCH",
    "BATCH_BYTES",
    "DEFAULT_MAX_ITEM_BYTES",
    "MESSAGE_LIMIT",
    "TRANSIENT",
    "PublishSummary",
    "ResultBatch",
    "Status",
    "StreamPublisher",
    "Subscription",
    "SuperPeerClient",
    "ThinPeerError",
]


def rpc_error(exc: grpc.RpcError, address: str, secure: bool) -> ThinPeerError:
    """A gRPC failure as the error a caller reads, with a hint where one helps."""
    code = exc.code().name if exc.code() else "UNKNOWN"
    details = exc.details() or ""
    if code == "UNAVAILABLE":
        hint = ("" if secure else
                "; if its network is secure (the default), give --ca or STREAMGLOBE_CA and a token")
        details = f"cannot reach super-peer at {address} ({details}){hint}"
    return ThinPeerError(code, details)


def subscribe_request(query: str, strategy: str = "sharing", wait_for_streams: bool = False,
                      from_start: bool = False, since_s: float | None = None, approximate: bool = False,
                      confidence: float | None = None, min_rate: int | None = None,
                      weight: float | None = None) -> pb.SubscribeRequest:
    return pb.SubscribeRequest(query=query, strategy=strategy, wait_for_streams=wait_for_streams,
                               from_start=from_start, since_s=since_s, approximate=approximate,
                               confidence=confidence, min_rate=min_rate, weight=weight)


class ClientBase:
    """What the synchronous and the ``asyncio`` client share: where they connect, how, and what
    the super-peer said of the streams registered through them."""

    def __init__(self, address: str, timeout: float = 30.0, credentials: Credentials | None = None) -> None:
        """``credentials``: the backbone's CA certificate and a token (``thinpeer.credentials``);
        by default from ``STREAMGLOBE_CA`` and ``STREAMGLOBE_TOKEN`` (neither: plaintext)."""
        self.address = address
        self.timeout = timeout
        self.credentials = credentials if credentials is not None else Credentials.resolve()
        self.max_item_bytes: dict[str, int] = {}  # per stream, as its super-peer said
        self.history_bounds: dict[str, str] = {}  # per stream registered, the history it keeps

    def _error(self, exc: grpc.RpcError) -> ThinPeerError:
        return rpc_error(exc, self.address, self.credentials.secure)

    def _registered(self, name: str, reply: pb.RegisterStreamReply) -> int:
        self.history_bounds[name] = reply.history
        if reply.max_item_bytes:
            self.max_item_bytes[name] = reply.max_item_bytes
        return reply.next_position

    def _batches(self, name: str, position: int | None, rate: float | None) -> Batches:
        return Batches(name, self.max_item_bytes.get(name, DEFAULT_MAX_ITEM_BYTES), position, rate)


class SuperPeerClient(ClientBase):
    """A thin peer's connection to one super-peer (see the module's docstring)."""

    def __init__(self, address: str, timeout: float = 30.0, credentials: Credentials | None = None) -> None:
        super().__init__(address, timeout, credentials)
        self.channel = self.credentials.channel(address)
        self.stub = pb_grpc.ThinPeerStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request, timeout: float | None = None):
        try:
            return getattr(self.stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise self._error(exc) from None

    # ------------------------------------------------------------------ publishing

    def register_stream(self, name: str, root: str, item: str, rate: float = 0.0,
                        event_time: str = "", event_time_rate: float = 1.0, history: str = "") -> int:
        """Register a stream (again, for a publisher reconnecting); the stream-wide number its
        next new item gets: how many items the super-peer has taken so far. ``event_time``: the
        item's element time windows read (e.g. ``det_time``), advanced by watermarks at
        ``event_time_rate`` units per second while the stream is idle. ``history``: how much of
        its past the super-peer keeps for subscriptions over it ("10m", "100000", "64MB"; "":
        the super-peer's default); ``history_bounds`` records the bound in effect."""
        return self._registered(name, self._call("RegisterStream", pb.RegisterStreamRequest(
            name=name, root=root, item=item, rate=rate, event_time=event_time,
            event_time_rate=event_time_rate, history=history)))

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
        batches = self._batches(name, position, rate)

        def send(outgoing: list[Outgoing]) -> None:
            for out in outgoing:
                reply = None
                if out.request is not None:
                    reply = self._publish_batch(out.request, retry_s if position is not None else 0.0,
                                                batches, progress)
                batches.record(out, reply)
                if progress is not None and out.request is not None:
                    progress(batches.summary)
                if out.full and (ahead := batches.ahead_s()):
                    time.sleep(ahead)

        live = linger_s is not None and not isinstance(items, (list, tuple))
        for item in lingering(items, linger_s) if live else items:  # type: ignore[arg-type]
            send(batches.flush() if item is FLUSH else batches.add(item))
        send(batches.flush())
        return batches.summary

    def _publish_batch(self, request: pb.PublishRequest, retry_s: float, batches: Batches,
                       progress=None) -> pb.PublishReply:
        """One batch; a numbered one again after a lost reply or while the super-peer is
        unreachable (it skips what it took already), until ``retry_s`` have passed. A batch
        held back (the network downstream is full; nothing of it was taken) is sent again for
        as long as it is held back: the publisher goes at the rate the network takes."""
        reconnect = Reconnect(retry_s)
        while True:
            started = time.monotonic()
            try:
                return self._call("Publish", request)
            except ThinPeerError as exc:
                time.sleep(retry_after(exc, batches, reconnect, time.monotonic() - started, progress))

    @contextmanager
    def stream(self, name: str, root: str, item: str, **options) -> Iterator[StreamPublisher]:
        """A stream registered (``register_stream``'s ``options``) and published to for the
        length of a ``with`` block, in numbered batches that survive a restart of the
        super-peer; closed when the block ends (its subscriptions then see it end)."""
        publisher = StreamPublisher(self, name, self.register_stream(name, root, item, **options))
        try:
            yield publisher
        finally:
            publisher.close()

    def close_stream(self, name: str) -> int:
        return self._call("CloseStream", pb.CloseStreamRequest(stream=name)).items

    # ------------------------------------------------------------------ subscribing

    def subscribe(self, query: str, strategy: str = "sharing", wait_for_streams: bool = False,
                  from_start: bool = False, since_s: float | None = None,
                  approximate: bool = False, confidence: float | None = None,
                  min_rate: int | None = None, weight: float | None = None) -> Subscription:
        """``from_start``: over every item its streams' super-peers retain, then live;
        ``since_s``: over the items that arrived there in the last so many seconds, then live.
        The reply's ``history`` says how far back the history went when it did not reach as
        far as asked ("" when it did). ``approximate``: when the network cannot carry the
        subscription whole, plan it on a sample of its input instead of refusing it; the
        reply's ``sample`` is R for a 1/R sample (1: every item), and its windows come with
        intervals at ``confidence`` (None: the super-peer's default, 0.95). While it runs, the
        network lowers its sample under pressure, never below 1/``min_rate`` (None: 1/64; 1:
        never), approximate subscriptions with a larger ``weight`` last, and raises it again
        when the pressure goes."""
        return Subscription.from_reply(self._call("Subscribe", subscribe_request(
            query, strategy, wait_for_streams, from_start, since_s, approximate, confidence, min_rate, weight)))

    @contextmanager
    def subscription(self, query: str, **options) -> Iterator[Subscription]:
        """``subscribe`` for the length of a ``with`` block: unsubscribed when it ends."""
        subscription = self.subscribe(query, **options)
        try:
            yield subscription
        finally:
            try:
                self.unsubscribe(subscription.id)
            except ThinPeerError as exc:
                if exc.code != "NOT_FOUND":  # (its results were read to the end and released)
                    raise

    def unsubscribe(self, subscription: str) -> list[str]:
        return list(self._call("Unsubscribe", pb.UnsubscribeRequest(subscription=subscription)).removed_streams)

    def read(self, subscription: str, offset: int = 0, max_items: int = 1000,
             wait_ms: int = 1000, peek: bool = False) -> ResultBatch:
        """One read from ``offset``, waiting up to ``wait_ms`` for a result to come. ``peek``:
        look at results without confirming anything read (the web view)."""
        return ResultBatch.from_reply(self._call("ReadResults", pb.ReadResultsRequest(
            subscription=subscription, offset=offset, max_items=max_items, wait_ms=wait_ms, peek=peek),
            timeout=self.timeout + wait_ms / 1000))

    def confirm_read(self, subscription: str, offset: int) -> None:
        """Tell the super-peer every result before ``offset`` was read: once the stream has
        ended and everything is read, the subscription's results are released there."""
        self.read(subscription, offset, max_items=1, wait_ms=0)

    def result_batches(self, subscription: str, offset: int = 0,
                       idle_timeout: float | None = None, max_items: int = 1000,
                       wait_ms: int = 1000, retry_s: float = RECONNECT_S) -> Iterator[ResultBatch]:
        """Every read from ``offset`` on, empty ones included, until the stream closes or nothing
        came for ``idle_timeout`` seconds.

        The one read/resume loop of the thin peer: ``results`` and ``streamglobe subscribe`` both
        use it. Batches, not items, so that a caller can see the root of an empty result, report
        dropped items and persist its offset once per read (``resume.Idle`` says when it ends).
        A reply holds up to ``max_items`` and up to the super-peer's byte bound: the loop goes on
        from the offset after it. While the super-peer cannot be reached (it restarts), the loop
        tries again from the same offset for up to ``retry_s`` seconds, so nothing is missed or
        read twice. A caller that consumes the last batch of an ended stream and resumes the
        loop confirms the read (``confirm_read``), which frees the results.
        """
        loop, reconnect = Idle(offset, idle_timeout), Reconnect(retry_s)
        while True:
            try:
                batch = self.read(subscription, loop.offset, max_items=max_items, wait_ms=wait_ms)
            except ThinPeerError as exc:
                time.sleep(reconnect.delay(exc))
                continue
            if reconnect.succeeded():
                loop.touch()
            yield batch
            state = loop.after(batch)
            if state == "closed":
                self.confirm_read(subscription, batch.next_offset)
                return
            if state == "idle":
                return

    def results(self, subscription: str, offset: int = 0, idle_timeout: float | None = None,
                ) -> Iterator[tuple[int, str, str]]:
        """(offset, item, root) until the stream closes or nothing came for ``idle_timeout``."""
        for batch in self.result_batches(subscription, offset, idle_timeout):
            for i, item in enumerate(batch.items):
                yield batch.offset + i, item, batch.root

    def status(self) -> Status:
        """The super-peer's status: a dict of everything, with typed views (``Status``)."""
        return Status(json.loads(self._call("Status", pb.StatusRequest()).json))

    def cut_link(self, peer: str, cut: bool = True) -> list[str]:
        """An admin's fault injection: this super-peer stops (``cut``) or resumes talking to its
        neighbour ``peer``; the neighbours its links are cut to now."""
        return list(self._call("CutLink", pb.CutLinkRequest(peer=peer, cut=cut)).cut)


class StreamPublisher:
    """One registered stream, published to in numbered batches: each ``publish`` goes on from
    where the last one ended, and a batch whose reply was lost is sent again without
    duplicating anything (the super-peer takes each number once)."""

    def __init__(self, client: SuperPeerClient, name: str, position: int) -> None:
        self.client, self.name, self.position = client, name, position
        self.closed = False

    def publish(self, items: Iterable[str | bytes | Rejected], **options) -> PublishSummary:
        """``SuperPeerClient.publish``'s ``options`` (``rate``, ``linger_s``, ``progress``)."""
        summary = self.client.publish(self.name, items, position=self.position, **options)
        self.position = summary.next_position if summary.next_position is not None else self.position
        return summary

    def close(self) -> int:
        """End the stream; how many items the super-peer took of it in all."""
        if self.closed:
            return 0
        self.closed = True
        return self.client.close_stream(self.name)
