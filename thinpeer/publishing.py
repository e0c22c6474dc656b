"""How a publisher cuts items into ``Publish`` requests, apart from how the requests are sent.

The synchronous client and the ``asyncio`` one send the same requests and report the same
summary; only the sending differs (a blocking call or an awaited one). ``Batches`` holds the
rules both follow: batches bounded in items and bytes, every item numbered by its position in
the input (and in the stream when publishing is numbered), items the super-peer would refuse
refused here without being sent, and each reply folded into one ``PublishSummary``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from proto import streamglobe_pb2 as pb

from .linger import Rejected
from .replies import HELD_BACK, PublishSummary, ThinPeerError
from .resume import Reconnect

BATCH = 4000  # items per Publish request, and at most BATCH_BYTES (one bigger item goes alone)
BATCH_BYTES = 4 << 20
MESSAGE_LIMIT = 64 << 20  # what the super-peers accept in one gRPC message
DEFAULT_MAX_ITEM_BYTES = MESSAGE_LIMIT - (1 << 20)  # until a super-peer says its own limit


def _number(rejection: str) -> str:
    """"item N" of a rejection's reason "item N: why"."""
    return rejection.partition(":")[0]


@dataclass
class Outgoing:
    """One thing the publisher does next, in order: send ``request`` (whose placeholders for
    items refused here have the reasons ``ours``, by "item N"), or, with no request, report
    ``refused``, an item refused here that a numbered stream skips."""

    request: pb.PublishRequest | None
    ours: dict[str, str] = field(default_factory=dict)
    refused: str = ""
    full: bool = False  # the batch was cut because it was full (a paced publisher waits after it)


class Batches:
    """The batches of one ``publish`` call. Feed it items (``add``, ``refuse``, ``flush``); each
    returns what must go out now, in order; fold every reply back with ``record``."""

    def __init__(self, stream: str, limit: int = DEFAULT_MAX_ITEM_BYTES, position: int | None = None,
                 rate: float | None = None) -> None:
        """``position``: numbered publishing from this stream-wide number (None: appended);
        ``rate``: items per second to pace at (None: as fast as the super-peer takes them)."""
        self.stream, self.limit, self.position, self.rate = stream, limit, position, rate
        self.summary = PublishSummary(reasons=[])
        self.per_batch = BATCH if not rate else max(1, min(BATCH, int(rate / 20) or 1))
        self.index = position or 0  # the number of the next item
        self.first = self.index  # the number of the batch's first item: batches are contiguous
        self.items: list[bytes] = []
        self.bytes = 0
        self.ours: dict[str, str] = {}
        self.started = time.monotonic()
        self.held_for: dict[str, float] = {}  # seconds held back, per cause (``held``)

    def add(self, item: str | bytes | Rejected) -> list[Outgoing]:
        if isinstance(item, Rejected):
            return self.refuse(item.reason)
        try:
            data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        except UnicodeEncodeError as exc:
            return self.refuse(f"not encodable as UTF-8 ({exc.reason} at character {exc.start})")
        if len(data) > self.limit:
            return self.refuse(f"{len(data):,} bytes, more than the {self.limit:,} bytes the "
                               "super-peer accepts per item")
        out = self.flush() if self.items and self.bytes + len(data) > BATCH_BYTES else []
        self.items.append(data)
        self.bytes += len(data)
        self.index += 1
        if len(self.items) >= self.per_batch:
            out += self.flush(full=True)
        return out

    def refuse(self, reason: str) -> list[Outgoing]:
        """An item refused here keeps its number: numbered, as a gap; appended, as an empty
        placeholder the super-peer rejects (so that its positions stay the input's and a later
        ``position`` resume skips exactly what it has), reported with our reason."""
        why = f"item {self.index}: {reason} (not sent)"
        if self.position is None:
            self.ours[f"item {self.index}"] = why
            self.items.append(b"")
            self.index += 1
            return []
        out = self.flush()
        self.index += 1
        self.first = self.index
        return out + [Outgoing(None, refused=why)]

    def flush(self, full: bool = False) -> list[Outgoing]:
        """The batch so far, to go now (a live source has had nothing more for a while)."""
        if not self.items:
            self.first = self.index
            return []
        request = pb.PublishRequest(stream=self.stream, first_sequence=self.first, items=self.items)
        if self.position is not None:
            request.position = self.first
        out = Outgoing(request, self.ours, full=full)
        self.items, self.bytes, self.ours, self.first = [], 0, {}, self.index
        return [out]

    def record(self, outgoing: Outgoing, reply: pb.PublishReply | None) -> None:
        """Fold what the super-peer answered (or our own refusal) into the summary."""
        summary = self.summary
        if reply is None:
            summary.rejected += 1
            summary.reasons.append(outgoing.refused)  # type: ignore[union-attr]
        else:
            summary.duplicates += reply.duplicates
            if reply.held_back:  # (it waited inside the call: the network held it back)
                self.held(reply.held_back, reply.held_back_s)
            summary.accepted += reply.accepted
            summary.rejected += reply.rejected
            ours = dict(outgoing.ours)
            summary.reasons.extend(ours.pop(_number(why), why)  # type: ignore[union-attr]
                                   for why in reply.rejections)
            summary.reasons.extend(ours.values())  # (past the super-peer's count of reasons)
        if self.position is not None:
            summary.next_position = self.index

    def held(self, reason: str, seconds: float) -> None:
        """The super-peer held a batch back for ``seconds`` (back-pressure): said in the summary.
        The reason said is the one that held the publisher back longest in all, not the last:
        a stalled neighbour may, once it takes again, leave another link briefly full, and
        the publisher wants to know what cost it the time."""
        reason = reason.removeprefix(HELD_BACK)
        cause = reason.split(", which ")[0]  # (the rest says how full the link is: it varies)
        self.summary.held_back_s += seconds
        self.held_for[cause] = self.held_for.get(cause, 0.0) + seconds
        if self.held_for[cause] >= max(self.held_for.values()):
            self.summary.held_back = reason

    def ahead_s(self) -> float:
        """How long a paced publisher waits before its next batch (0: none)."""
        if not self.rate:
            return 0.0
        sent = self.index - (self.position or 0)
        return max(0.0, sent / self.rate - (time.monotonic() - self.started))


def retry_after(error: ThinPeerError, batches: Batches, reconnect: Reconnect, waited_s: float,
                progress=None) -> float:
    """How long to wait before a batch whose call failed with ``error`` is sent again, or the
    error raised when it must not be. Held back (the network downstream is full; nothing of it
    was taken): again at once, for as long as it is held back, said in the summary. Otherwise
    as ``reconnect`` allows (a numbered batch while the super-peer cannot be reached)."""
    if error.held_back:
        batches.held(error.message, waited_s)
        if progress is not None:
            progress(batches.summary)
        return 0.0
    return reconnect.delay(error)
