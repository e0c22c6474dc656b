"""Items from a live source, with the moments at which a batch must go even though it is small.

A publisher batches items (one gRPC call per 1,000) because per-call costs dominate per-item
ones. A live source — ``tail -f``, a VOEvent broker, a sensor — may deliver one item a minute: held
until 1,000 have come, its items would wait for hours. ``lingering`` reads the source in a thread
and yields its items as they come, and ``FLUSH`` whenever the source has nothing more to give and
the oldest item not yet flushed has waited ``linger_s`` (a producer's *linger time*). A fast
source never blocks, so it never sees a ``FLUSH`` and keeps full batches.

A source may also yield ``Rejected`` for an input it could not turn into an item (a malformed JSON
line): the publisher counts it with its reason and its number, and goes on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: how many items the reader may run ahead of the publisher (bounds the memory a fast source takes)
AHEAD = 8192


class _Flush:
    def __repr__(self) -> str:
        return "FLUSH"


FLUSH = _Flush()


@dataclass(frozen=True)
class Rejected:
    """An input the source could not make an item of; it keeps its number in the stream."""

    reason: str


def lingering(items: Iterable[T], linger_s: float) -> Iterator[T | _Flush]:
    """``items`` as they come, with ``FLUSH`` where a batch should go out now. An exception the
    source raises reaches the caller after every item before it (and a ``FLUSH``)."""
    source = iter(items)
    changed = threading.Condition()
    held: list = []
    state: dict = {"done": False, "error": None, "stop": False}

    def read() -> None:
        try:
            for item in source:
                with changed:
                    while len(held) >= AHEAD and not state["stop"]:
                        changed.wait()
                    if state["stop"]:
                        return
                    held.append(item)
                    if len(held) == 1:
                        changed.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            state["error"] = exc
        finally:
            with changed:
                state["done"] = True
                changed.notify_all()

    reader = threading.Thread(target=read, name="source-reader", daemon=True)
    reader.start()
    oldest: float | None = None  # when the oldest item not yet flushed was yielded
    try:
        while True:
            with changed:
                while not held and not state["done"]:
                    if oldest is None:
                        changed.wait()
                        continue
                    left = oldest + linger_s - time.monotonic()
                    if left <= 0:
                        break
                    changed.wait(left)
                taken = held[:]
                held.clear()
                done = state["done"]
                changed.notify_all()  # the reader may go on
            if taken:
                if oldest is None:
                    oldest = time.monotonic()
                yield from taken
                continue
            if oldest is not None:
                oldest = None
                yield FLUSH
            if done:
                if state["error"] is not None:
                    raise state["error"]
                return
    finally:
        with changed:
            state["stop"] = True
            changed.notify_all()


async def alingering(items: AsyncIterable[T], linger_s: float) -> AsyncIterator[T | _Flush]:
    """``lingering`` for an ``async`` source: its items as they come, with ``FLUSH`` when it has
    had nothing more to give for ``linger_s`` since the oldest item not yet flushed. The next
    item is awaited as a task, so a wait that times out does not cancel the source's read."""
    source = items.__aiter__()
    loop = asyncio.get_running_loop()
    pending: asyncio.Future | None = None
    oldest: float | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(source.__anext__())
            left = None if oldest is None else max(0.0, oldest + linger_s - loop.time())
            done, _ = await asyncio.wait({pending}, timeout=left)
            if not done:
                oldest = None
                yield FLUSH
                continue
            taken, pending = pending, None
            try:
                item = taken.result()
            except StopAsyncIteration:
                return
            if oldest is None:
                oldest = loop.time()
            yield item
    finally:
        if pending is not None:
            pending.cancel()
