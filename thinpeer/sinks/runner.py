"""Feed a sink a subscription's results from where it stopped, until the stream ends or it is
stopped, confirming to the super-peer only what the sink has made durable.

Results are read with ``peek`` (a read confirms nothing), handed to the sink, and confirmed with
``confirm_read`` once the sink's ``flush`` says they are delivered: a super-peer releases the
results of an ended stream only when they are confirmed, so a sink killed between a read and its
flush finds them there again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from thinpeer.sinks.base import ResultSink

if TYPE_CHECKING:
    from thinpeer.client import SuperPeerClient

READ_ITEMS = 1000
READ_WAIT_MS = 200  # how long a read waits for results: also how often ``due`` is looked at
READ_EXACTLY_TRIES = 50  # reads of a batch known to be there before it counts as gone


@dataclass
class Delivered:
    """How a run ended: results delivered in it, the committed offset, and why it stopped."""

    items: int
    committed: int
    why: str  # "the stream closed", "timeout", "stopped"


def deliver_results(client: SuperPeerClient, subscription: str, sink: ResultSink,
                    start: int = 0, idle_timeout: float | None = None,
                    say: Callable[[str], None] = lambda message: None,
                    stop: Callable[[], bool] = lambda: False) -> Delivered:
    """Deliver from the sink's committed offset (``start`` if it keeps none). Stops when the
    stream has ended and everything is delivered, when nothing came for ``idle_timeout`` seconds,
    or when ``stop()`` says so (held results are flushed first; on Ctrl-C they are not, and are
    read again next time)."""
    committed = sink.committed()
    offset = start if committed is None else committed
    delivered = 0
    pending = sink.pending()
    if pending is not None and pending[0] >= offset:
        # a delivery begun and not known to be complete: the same batch again, first
        first, count = pending
        again = _read_exactly(client, subscription, first, count)
        if again is None:
            say(f"warning: results {first}..{first + count - 1}, whose delivery may not have "
                "completed when the sink stopped, are no longer all held by the super-peer: "
                "what is left of them is delivered as a new batch")
        else:
            items, root = again
            say(f"delivering results {first}..{first + count - 1} again (their delivery may not "
                f"have completed when the sink stopped); the receiver can drop a copy by its key")
            sink.write(first, items, root)
            offset = _confirm(client, subscription, sink.flush(), offset)
            delivered += len(items)
    last = time.monotonic()
    degraded = ""
    while True:
        reply = client.read(subscription, offset, max_items=READ_ITEMS, wait_ms=READ_WAIT_MS, peek=True)
        if reply.dropped and reply.offset > offset:
            say(f"warning: {reply.offset - offset} result(s) from offset {offset} are no longer held "
                "by the super-peer (its retention bound): they cannot be delivered")
        if reply.degraded != degraded:
            say(f"subscription {subscription} degraded: {reply.degraded}" if reply.degraded else
                f"subscription {subscription} healthy again (nothing lost)")
            degraded = reply.degraded
        items = list(reply.items)
        if items:
            sink.write(reply.offset, items, reply.root or "results")
            offset = reply.offset + len(items)
            delivered += len(items)
            last = time.monotonic()
        elif reply.offset > offset:
            offset = reply.offset
        ended = reply.closed and not items
        if reply.degraded:
            last = time.monotonic()
        idle = idle_timeout is not None and time.monotonic() - last >= idle_timeout
        stopping = stop()
        if ended or idle or stopping or sink.due():
            committed = _confirm(client, subscription, sink.flush(), start if committed is None else committed)
            if ended or idle or stopping:
                why = "the stream closed" if ended else ("timeout" if idle else "stopped")
                return Delivered(delivered, committed, why)


def _confirm(client: SuperPeerClient, subscription: str, flushed: int | None, before: int) -> int:
    """Confirm what the sink committed (``before``, what was committed when this run began, if
    it has committed nothing yet)."""
    committed = before if flushed is None else flushed
    client.confirm_read(subscription, committed)
    return committed


def _read_exactly(client: SuperPeerClient, subscription: str, first: int, count: int
                  ) -> tuple[list[str], str] | None:
    """Results ``first`` … ``first + count - 1`` (several reads when a reply is bounded in bytes);
    None when the super-peer no longer holds them all (its retention bound dropped some)."""
    items: list[str] = []
    root = "results"
    for _ in range(READ_EXACTLY_TRIES):
        if len(items) >= count:
            return items, root
        reply = client.read(subscription, first + len(items), max_items=count - len(items),
                            wait_ms=READ_WAIT_MS, peek=True)
        if reply.offset != first + len(items) or (reply.closed and not reply.items):
            return None
        items.extend(reply.items)
        root = reply.root or root
    return (items, root) if len(items) >= count else None
