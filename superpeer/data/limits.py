"""Size and time bounds of a super-peer's data plane, and the gRPC message limit they fit in."""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_LIMIT = 64 << 20  # the gRPC message size super-peers and thin peers accept
ENVELOPE = 1 << 20  # room for the other fields of a message carrying one maximal item


@dataclass(frozen=True)
class DataLimits:
    """Bounds a super-peer puts on the data it holds and sends (configurable per daemon).

    ``max_item_bytes``: a published item's UTF-8 size; bigger ones are rejected with the limit
    named. It stays below the gRPC message limit so that every accepted item can travel alone
    in a ``Transfer`` and be read in a ``ReadResults``. ``max_read_bytes``: the size of one
    ``ReadResults`` reply (at least one item is returned, so a reader always progresses).
    ``finished_retention_s``: how long a subscription whose stream has ended keeps results
    nobody confirmed reading; a reader that reads to the end releases them at once.
    ``link_buffer_bytes`` and ``link_buffer_items``: what one outbound link may hold, queued
    and in flight, before the batches bound for it wait (``backpressure``).
    """

    max_item_bytes: int = 32 << 20
    max_read_bytes: int = 8 << 20
    finished_retention_s: float = 600.0
    link_buffer_bytes: int = 4 << 20
    link_buffer_items: int = 200_000

    def __post_init__(self) -> None:
        most = MESSAGE_LIMIT - ENVELOPE
        for name in ("max_item_bytes", "max_read_bytes"):
            value = getattr(self, name)
            if not 0 < value <= most:
                raise ValueError(f"{name} must be between 1 and {most:,} bytes (the gRPC message "
                                 f"limit less {ENVELOPE:,} bytes of envelope), not {value:,}")
        if self.link_buffer_bytes <= 0 or self.link_buffer_items <= 0:
            raise ValueError(f"a link buffer must hold something, not {self.link_buffer_bytes} bytes / "
                             f"{self.link_buffer_items} items")
        if not self.finished_retention_s >= 0:
            raise ValueError(f"finished_retention_s must be >= 0, not {self.finished_retention_s}")

