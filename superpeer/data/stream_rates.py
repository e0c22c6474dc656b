"""What each stream actually carries, measured where it passes (issue 31, measured statistics).

Plans are priced with estimates: an original's rate and item size as observed at its super-peer,
a derived stream's from the selectivity its predicates are estimated to have. Those estimates
are often off by a factor (a histogram's guess at a conjunction, a projection's size). Every
super-peer therefore counts, per stream that passes it, the items and bytes it takes, and at
each heartbeat round smooths them (exponentially, ``SMOOTHING``) over intervals of at least
``INTERVAL_ITEMS`` items or ``INTERVAL_S`` seconds; ``status`` → ``measured_rates`` shows them.
A stream whose measured rate drifts from the one first measured by more than ``DRIFT`` starts a
re-optimisation round.

They do not replace the estimates in the prices: a plan would then weigh measured running
streams against estimated new ones, and each error in an estimate becomes a move (measured on
the sharing-over-time benchmark: 1.2-1.5x the fresh plan in 3 to 6 of 9 windows, against
0.89-1.02x in all 9 without). The estimates themselves are measured on a sample of the data
(``sharing.sample_estimates``) and are within ±25 % of these rates on the simulated links.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


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
        stream's smoothed rate. Returns the warmed-up streams whose rate drifted from the one
        last reported."""
        now = time.monotonic() if now is None else now
        self.last = now
        drifted: list[str] = []
        for sid, meter in list(self.meters.items()):
            if table.get(sid) is None:
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
                continue  # (warming up)
            bits = meter.freq * meter.size * 8
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


@dataclass
class LinkRates:
    """Bits/s each outbound link carried, smoothed as the streams' rates are, from the links'
    byte counters (acknowledged batches): what admission holds a link to when it is more than
    its plans reserve (``PeerState.usage_view``)."""

    bits: dict[str, float] = field(default_factory=dict)
    seen: dict[str, tuple[float, int]] = field(default_factory=dict)  # (when, bytes) last read

    def measure(self, counters: dict, now: float | None = None) -> dict[str, float]:
        """Fold each link's bytes since the last round into its rate; the rates."""
        now = time.monotonic() if now is None else now
        for peer, c in list(counters.items()):
            at, before = self.seen.get(peer, (None, 0))
            self.seen[peer] = (now, c.bytes)
            if at is None or now <= at:
                continue
            rate = max(c.bytes - before, 0) * 8 / (now - at)
            old = self.bits.get(peer)
            self.bits[peer] = rate if old is None else SMOOTHING * rate + (1 - SMOOTHING) * old
        return dict(self.bits)


@dataclass
class ExecutorLoad:
    """The cores this peer's executor measurably spends on the operators installed here, smoothed
    as the rates are, from its busy seconds (``Executor.busy_s``): what admission holds the peer
    to when it is more than its plans reserve (a stream faster than priced, an operator dearer
    than calibrated). The inline executor runs in one thread, so its busy time per second is
    cores; a Spark executor busy all the time is a peer at its capacity (``capacity``)."""

    load: float | None = None
    seen: tuple[float, float] | None = None  # (when, busy seconds) last read

    def measure(self, busy_s: float, scale: float = 1.0, now: float | None = None) -> float | None:
        """Fold the busy seconds since the last round into the load (cores); the load."""
        now = time.monotonic() if now is None else now
        before, self.seen = self.seen, (now, busy_s)
        if before is None or now <= before[0]:
            return self.load
        load = min(max(busy_s - before[1], 0.0) / (now - before[0]), 1.0) * scale
        self.load = load if self.load is None else SMOOTHING * load + (1 - SMOOTHING) * self.load
        return self.load

