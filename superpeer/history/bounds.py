"""How much of its past a stream keeps (issue 15): the **history** a super-peer retains of each
stream registered there, and what ``subscribe --since`` / ``--from-start`` can reach.

A stream's log (``state_store``) holds every accepted item; ``--history`` bounds it by items,
bytes or duration (``serve --history`` for the peer's streams, ``register --history`` per
stream; several bounds together: whichever keeps less). The bound is a promise about the
past for *new* subscriptions: items a running subscription may still need — where its exact
re-plan after a failure would replay from (``sharing.replay``), a copy being filled from the
log — are kept beyond it. Every super-peer reports, with its heartbeat reply, the oldest item
of each stream its unfinished subscriptions need (its **pins**); the stream's peer trims only
below every peer's pin, and not at all while some peer has not been heard from since it
started (its subscriptions are not known). Items within the bound are never trimmed. A plan
committed here pins where it starts (``PeerState.commit_pins``) until a heartbeat round begun
after the commit has heard the subscriber's peer (whose pins then include it: a subscription
being installed pins its streams from their first item).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal

from streamglobe import units
from streamglobe.units import parse_duration  # noqa: F401 - ``--since`` is read as every duration

UNLIMITED = ("", "all", "unlimited")
ITEMS = re.compile(r"\s*(\d+)\s*items?\s*")


@dataclass(frozen=True)
class HistoryBound:
    """At most this many items, bytes (UTF-8 item text) and seconds back; None: unbounded."""

    items: int | None = None
    bytes: int | None = None
    seconds: float | None = None

    @property
    def unbounded(self) -> bool:
        return self.items is None and self.bytes is None and self.seconds is None

    def __str__(self) -> str:
        parts = ([f"{self.items} items"] if self.items is not None else []) + \
                ([f"{self.bytes} bytes"] if self.bytes is not None else []) + \
                ([format_duration(self.seconds)] if self.seconds is not None else [])
        return ", ".join(parts) or "unlimited"


def parse_history(spec: str) -> HistoryBound:
    """``"100000"`` or ``"100000 items"``, a size (``"64MB"``, ``"1GiB"``), a duration (``"10m"``,
    ``"2h"``, ``"1h30m"``), several separated by commas (``"10m,1GB"``: whichever keeps less);
    ``""``, ``"all"``, ``"unlimited"``: no bound. Sizes and durations are read by
    ``streamglobe.units``, as in every flag. Raises ``ValueError`` saying what is wrong."""
    if spec.strip().lower() in UNLIMITED:
        return HistoryBound()
    items = size = seconds = None
    for term in spec.split(","):
        found, counted = units.quantity(term), ITEMS.fullmatch(term)
        if counted is not None or (found is not None and found.kind == "number"):
            value = Decimal(counted.group(1)) if counted is not None else found.value
            if value != int(value):
                raise ValueError(f"history {spec!r}: a number of items is whole")
            items = int(value) if items is None else min(items, int(value))
        elif found is not None and found.kind == "size" and found.value == int(found.value):
            size = int(found.value) if size is None else min(size, int(found.value))
        elif found is not None and found.kind == "duration":
            seconds = float(found.value) if seconds is None else min(seconds, float(found.value))
        else:
            what = f" ({units.WHAT[found.kind]})" if found is not None else ""
            raise ValueError(f"history {spec!r}: {term.strip()!r}{what} is not a bound: a number of items, "
                             "a size (64MB, 1GiB) or a duration (10m, 1h30m)")
    return HistoryBound(items, size, seconds)


def format_duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g}d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def cut_for(bound: HistoryBound, first: int, stop: int, arrivals: list[tuple[int, float, int]],
            now: float, sizes=None) -> int:
    """The number of the first item the bound keeps, of a log holding items ``first`` up to
    ``stop``; ``arrivals``: (first item, arrival time, bytes) per logged batch, oldest first;
    ``sizes(start, stop)``: the items' sizes, to cut inside the batch the byte bound crosses."""
    cut = first
    if bound.items is not None:
        cut = max(cut, stop - bound.items)
    if bound.seconds is not None:
        cut = max(cut, since_position(arrivals, stop, now - bound.seconds))
    if bound.bytes is not None:
        kept, ends = 0, stop
        for batch_first, _, size in reversed(arrivals):
            start = max(batch_first, first)
            if start >= ends:
                continue
            if kept + size > bound.bytes:  # this batch crosses the bound: keep its newest items that fit
                inside = ends
                for k, item_size in reversed(list(enumerate(sizes(start, ends) if sizes else [], start))):
                    if kept + item_size > bound.bytes:
                        break
                    kept, inside = kept + item_size, k
                cut = max(cut, inside)
                break
            kept, ends = kept + size, start
    return min(cut, stop)


def since_position(arrivals: list[tuple[int, float, int]], stop: int, t: float) -> int:
    """The number of the first logged item that arrived at ``t`` or later (``stop``: none did)."""
    for batch_first, at, _ in arrivals:
        if at >= t:
            return batch_first
    return stop


def pins_of(subscriptions: Iterable) -> dict[str, int]:
    """Per original stream, the first item this peer's unfinished subscriptions may replay
    (``SubscriptionRecord``: ``starts`` per original, ``chains`` per input variable)."""
    pins: dict[str, int] = {}
    for record in subscriptions:
        if record.error or record.runtime.buffer.closed:
            continue
        variables = {v: s.stream for v, s in _inputs(record)}
        if record.plan is not None and not record.starts and not record.chains:
            for original in variables.values():  # being installed: where it starts is not known yet
                pins[original] = 0
        for original, start in record.starts.items():
            pins[original] = min(pins.get(original, start), start)
        for variable, chain in record.chains.items():
            original = variables.get(variable)
            if original is not None:
                pins[original] = min(pins.get(original, chain.start), chain.start)
    return pins


def _inputs(record) -> list:
    analysis = record.runtime.analysis
    return [(i.variable, i.input) for i in analysis.properties.inputs]


def trim_below(name: str, cut: int, own: Mapping[str, int], reported: Mapping[str, Mapping[str, int] | None],
               replaying: Iterable[int]) -> int:
    """Where the log of ``name`` may be trimmed: below the bound's ``cut``, the pins of this
    peer (``own``), of every other peer (None: not heard from since this process started: no
    trimming) and the log items copies being filled still need (``replaying``)."""
    limit = cut
    for pins in reported.values():
        if pins is None:
            return 0
        limit = min(limit, pins.get(name, limit))
    limit = min([limit, own.get(name, limit), *replaying])
    return max(limit, 0)


def describe_extent(name: str, first: int, stop: int, oldest_at: float | None, now: float) -> str:
    """How far back a stream's history goes, for people."""
    if oldest_at is None or stop <= first:
        return f'stream "{name}" retains no items now (items up to {stop} were logged and trimmed)'
    when = datetime.fromtimestamp(oldest_at, timezone.utc).isoformat(timespec="seconds")
    return (f'stream "{name}" retains items {first}–{stop - 1}, the oldest arrived {when} '
            f"({format_duration(math.floor(max(now - oldest_at, 0)))} ago)")
