"""What each stream actually carries, measured where it passes (issue 31, measured statistics).

Plans are priced with estimates: an original's rate and item size as observed at its super-peer,
a derived stream's from the selectivity its predicates are estimated to have. Those estimates
are often off by a factor (a histogram's guess at a conjunction, a projection's size). Every
super-peer therefore counts, per stream that passes it, the items and bytes it takes, and at
each heartbeat round smooths them (exponentially, ``SMOOTHING``) into the stream's entry in its
table: its estimate (items/s, bytes/item) and the bits it sends on each of its links. From
then on, what this peer reports of its links (heartbeats) and what it answers lookups with
(the streams a plan may reuse, and their copies' price) are measured figures; a stream that has
not run long enough (``WARM_UP_S``, ``MIN_ITEMS``) keeps its estimate. A stream whose measured
rate drifts from the one its plans were priced with by more than ``DRIFT`` is reported, so that
re-optimisation prices the plans again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sharing.statistics import StreamEstimate
from sharing.stream_table import NetworkStream

SMOOTHING = 0.3  # weight of the latest interval
WARM_UP_S = 3.0  # a stream is measured this long before its estimate is replaced
MIN_ITEMS = 20  # … and has carried at least this many items
INTERVAL_ITEMS = 10  # an interval lasts until this many items passed (a sparse stream's rate is
INTERVAL_S = 10.0  # … not one item's arrival), or this long (an idle stream's rate falls)
DRIFT = 0.25  # a measured rate this far from the priced one is reported


@dataclass
class _Meter:
    first: float  # when its first item passed
    since: float = 0.0  # when its current interval began
    items: int = 0  # in the current interval
    bytes: int = 0
    total: int = 0
    freq: float | None = None  # smoothed items/s
    size: float | None = None  # smoothed bytes/item
    priced: float | None = None  # bits/s when it was last reported as drifted (or first measured)


@dataclass
class StreamRates:
    meters: dict[str, _Meter] = field(default_factory=dict)
    last: float = field(default_factory=time.monotonic)

    def add(self, stream: str, items: int, size: int) -> None:
        """Called with the peer's lock held: ``items`` of ``stream`` passed, ``size`` bytes."""
        meter = self.meters.get(stream)
        if meter is None:
            now = time.monotonic()
            meter = self.meters[stream] = _Meter(now, now)
        meter.items += items
        meter.bytes += size
        meter.total += items

    def forget(self, stream: str) -> None:
        self.meters.pop(stream, None)

    def measure(self, table, now: float | None = None) -> list[str]:
        """Called with the peer's lock held, once a round: fold the interval's counts into each
        stream's smoothed rate, and write it into the streams' entries that have warmed up.
        Returns the streams whose rate drifted from the one last priced."""
        now = time.monotonic() if now is None else now
        self.last = now
        drifted: list[str] = []
        for sid, meter in list(self.meters.items()):
            entry: NetworkStream | None = table.get(sid)
            if entry is None:
                del self.meters[sid]
                continue
            interval = now - meter.since
            if table.has_ended(sid) or interval <= 0 or (meter.items < INTERVAL_ITEMS and interval < INTERVAL_S):
                continue  # (ended: its last rate stays; a short interval says little)
            rate = meter.items / interval
            meter.since = now
            size = meter.bytes / meter.items if meter.items and meter.bytes else meter.size
            meter.freq = rate if meter.freq is None else SMOOTHING * rate + (1 - SMOOTHING) * meter.freq
            if size is not None:
                meter.size = size if meter.size is None else SMOOTHING * size + (1 - SMOOTHING) * meter.size
            meter.items = meter.bytes = 0
            if now - meter.first < WARM_UP_S or meter.total < MIN_ITEMS or meter.size is None:
                continue
            apply(entry, StreamEstimate(meter.freq, meter.size))
            bits = entry.estimate.bits_per_second
            if meter.priced is None:
                meter.priced = bits
            elif abs(bits - meter.priced) > DRIFT * max(meter.priced, 1.0):
                meter.priced = bits
                drifted.append(sid)
        return drifted

    def measured(self, stream: str) -> float | None:
        """A warmed-up stream's measured items per second (None: not measured yet)."""
        meter = self.meters.get(stream)
        if meter is None or meter.freq is None or meter.total < MIN_ITEMS:
            return None
        return meter.freq

    def status(self) -> dict:
        return {sid: {"items_per_s": round(m.freq, 3), "bytes_per_item": round(m.size, 1)}
                for sid, m in self.meters.items() if m.freq is not None and m.size is not None}


def apply(entry: NetworkStream, estimate: StreamEstimate) -> None:
    """A stream's measured rate into its entry: its estimate (what this peer reports of its
    links), and the bits on every link of its route (its items cross them all unchanged)."""
    entry.estimate = estimate
    bits = estimate.bits_per_second
    route = entry.route
    for a, b in zip(route, route[1:]):
        entry.usage.links[frozenset((a, b))] = bits
