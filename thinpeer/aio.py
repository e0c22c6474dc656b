"""The thin-peer client for ``asyncio`` programs, over ``grpc.aio``.

The same calls as ``thinpeer.client.SuperPeerClient``, awaited, with the same typed replies, the
same batching of published items (``thinpeer.publishing``) and the same reading loop
(``thinpeer.resume``: it reconnects and resumes from its offset while the super-peer restarts)::

    async with AsyncSuperPeerClient("127.0.0.1:50051") as client:
        async with client.subscription(query) as subscription:
            async for offset, item, root in client.results(subscription.id, idle_timeout=5):
                ...

A published source may be a list, any iterable that does not block, or an ``async`` iterable (a
live one: an item waits at most ``linger_s`` for its batch to fill).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Self

import grpc

from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc

from .client import ClientBase, subscribe_request
from .credentials import Credentials
from .linger import FLUSH, Rejected, alingering
from .publishing import Outgoing, retry_after
from .replies import PublishSummary, ResultBatch, Status, Subscription, ThinPeerError
from .resume import RECONNECT_S, Idle, Reconnect

Item = str | bytes | Rejected


class AsyncSuperPeerClient(ClientBase):
    """A thin peer's ``asyncio`` connection to one super-peer; ``async with`` closes it."""

    def __init__(self, address: str, timeout: float = 30.0, credentials: Credentials | None = None) -> None:
        super().__init__(address, timeout, credentials)
        self.channel = self.credentials.aio_channel(address)
        self.stub = pb_grpc.ThinPeerStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _call(self, method: str, request, timeout: float | None = None):
        try:
            return await getattr(self.stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:  # (grpc.aio.AioRpcError)
            raise self._error(exc) from None

    # ------------------------------------------------------------------ publishing

    async def register_stream(self, name: str, root: str, item: str, rate: float = 0.0,
                              event_time: str = "", event_time_rate: float = 1.0, history: str = "") -> int:
        """``SuperPeerClient.register_stream``: where the stream's numbering stands."""
        return self._registered(name, await self._call("RegisterStream", pb.RegisterStreamRequest(
            name=name, root=root, item=item, rate=rate, event_time=event_time,
            event_time_rate=event_time_rate, history=history)))

    async def publish(self, name: str, items: Iterable[Item] | AsyncIterable[Item], rate: float | None = None,
                      progress=None, position: int | None = None, retry_s: float = 30.0,
                      linger_s: float | None = 0.05) -> PublishSummary:
        """``SuperPeerClient.publish``, awaited; ``linger_s`` applies to an ``async`` source."""
        batches = self._batches(name, position, rate)

        async def send(outgoing: list[Outgoing]) -> None:
            for out in outgoing:
                reply = None
                if out.request is not None:
                    reply = await self._publish_batch(out.request, retry_s if position is not None else 0.0,
                                                      batches, progress)
                batches.record(out, reply)
                if progress is not None and out.request is not None:
                    progress(batches.summary)
                if out.full and (ahead := batches.ahead_s()):
                    await asyncio.sleep(ahead)

        if isinstance(items, AsyncIterable):
            source = alingering(items, linger_s) if linger_s is not None else items
            async for item in source:
                await send(batches.flush() if item is FLUSH else batches.add(item))  # type: ignore[arg-type]
        else:
            for item in items:
                await send(batches.add(item))
        await send(batches.flush())
        return batches.summary

    async def _publish_batch(self, request: pb.PublishRequest, retry_s: float, batches,
                             progress=None) -> pb.PublishReply:
        """``SuperPeerClient._publish_batch``: held back, it is sent again for as long as it is."""
        reconnect = Reconnect(retry_s)
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                return await self._call("Publish", request)
            except ThinPeerError as exc:
                await asyncio.sleep(retry_after(exc, batches, reconnect, loop.time() - started, progress))

    async def close_stream(self, name: str) -> int:
        return (await self._call("CloseStream", pb.CloseStreamRequest(stream=name))).items

    @asynccontextmanager
    async def stream(self, name: str, root: str, item: str, **options) -> AsyncIterator[AsyncStreamPublisher]:
        """``SuperPeerClient.stream``: registered, published to in numbered batches, closed at
        the end of the ``async with`` block."""
        publisher = AsyncStreamPublisher(self, name, await self.register_stream(name, root, item, **options))
        try:
            yield publisher
        finally:
            await publisher.close()

    # ------------------------------------------------------------------ subscribing

    async def subscribe(self, query: str, strategy: str = "sharing", wait_for_streams: bool = False,
                        from_start: bool = False, since_s: float | None = None,
                        approximate: bool = False, confidence: float | None = None,
                        min_rate: int | None = None, weight: float | None = None) -> Subscription:
        """``SuperPeerClient.subscribe``, awaited."""
        return Subscription.from_reply(await self._call("Subscribe", subscribe_request(
            query, strategy, wait_for_streams, from_start, since_s, approximate, confidence, min_rate, weight)))

    @asynccontextmanager
    async def subscription(self, query: str, **options) -> AsyncIterator[Subscription]:
        """``subscribe`` for the length of an ``async with`` block: unsubscribed when it ends."""
        subscription = await self.subscribe(query, **options)
        try:
            yield subscription
        finally:
            try:
                await self.unsubscribe(subscription.id)
            except ThinPeerError as exc:
                if exc.code != "NOT_FOUND":
                    raise

    async def unsubscribe(self, subscription: str) -> list[str]:
        reply = await self._call("Unsubscribe", pb.UnsubscribeRequest(subscription=subscription))
        return list(reply.removed_streams)

    async def read(self, subscription: str, offset: int = 0, max_items: int = 1000,
                   wait_ms: int = 1000, peek: bool = False) -> ResultBatch:
        return ResultBatch.from_reply(await self._call("ReadResults", pb.ReadResultsRequest(
            subscription=subscription, offset=offset, max_items=max_items, wait_ms=wait_ms, peek=peek),
            timeout=self.timeout + wait_ms / 1000))

    async def confirm_read(self, subscription: str, offset: int) -> None:
        await self.read(subscription, offset, max_items=1, wait_ms=0)

    async def result_batches(self, subscription: str, offset: int = 0, idle_timeout: float | None = None,
                             max_items: int = 1000, wait_ms: int = 1000,
                             retry_s: float = RECONNECT_S) -> AsyncIterator[ResultBatch]:
        """``SuperPeerClient.result_batches`` as an ``async`` iterator (same ending, same
        reconnecting from the offset)."""
        loop, reconnect = Idle(offset, idle_timeout), Reconnect(retry_s)
        while True:
            try:
                batch = await self.read(subscription, loop.offset, max_items=max_items, wait_ms=wait_ms)
            except ThinPeerError as exc:
                await asyncio.sleep(reconnect.delay(exc))
                continue
            if reconnect.succeeded():
                loop.touch()
            yield batch
            state = loop.after(batch)
            if state == "closed":
                await self.confirm_read(subscription, batch.next_offset)
                return
            if state == "idle":
                return

    async def results(self, subscription: str, offset: int = 0,
                      idle_timeout: float | None = None) -> AsyncIterator[tuple[int, str, str]]:
        """(offset, item, root) until the stream closes or nothing came for ``idle_timeout``."""
        async for batch in self.result_batches(subscription, offset, idle_timeout):
            for i, item in enumerate(batch.items):
                yield batch.offset + i, item, batch.root

    async def status(self) -> Status:
        return Status(json.loads((await self._call("Status", pb.StatusRequest())).json))


class AsyncStreamPublisher:
    """``thinpeer.client.StreamPublisher`` for ``asyncio``."""

    def __init__(self, client: AsyncSuperPeerClient, name: str, position: int) -> None:
        self.client, self.name, self.position = client, name, position
        self.closed = False

    async def publish(self, items: Iterable[Item] | AsyncIterable[Item], **options) -> PublishSummary:
        summary = await self.client.publish(self.name, items, position=self.position, **options)
        self.position = summary.next_position if summary.next_position is not None else self.position
        return summary

    async def close(self) -> int:
        if self.closed:
            return 0
        self.closed = True
        return await self.client.close_stream(self.name)
