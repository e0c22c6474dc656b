"""An equi-depth histogram of an element's sampled values: how a selection on one element is
priced when the sample cannot price the conditions together (``statistics``)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

HISTOGRAM_BUCKETS = 32


@dataclass
class Histogram:
    """Equi-depth histogram: bucket boundaries at quantiles of the observed values."""

    bounds: list[float]

    @classmethod
    def from_values(cls, values: list[float], buckets: int = HISTOGRAM_BUCKETS) -> "Histogram":
        v = sorted(x for x in values if not math.isnan(x))
        if not v:
            return cls([])
        step = max(1, len(v) // buckets)
        bounds = v[::step]
        if bounds[-1] != v[-1]:
            bounds.append(v[-1])
        return cls(bounds)

    def cdf(self, x: float) -> float:
        """Fraction of values ≤ x, interpolated inside a bucket."""
        b = self.bounds
        if not b:
            return 0.0
        if x < b[0]:
            return 0.0
        if x >= b[-1]:
            return 1.0
        i = bisect.bisect_right(b, x) - 1
        lo, hi = b[i], b[i + 1]
        within = (x - lo) / (hi - lo) if hi > lo else 1.0
        return (i + within) / (len(b) - 1)

    def fraction(self, lo: float, hi: float) -> float:
        return max(0.0, self.cdf(hi) - self.cdf(lo)) if hi >= lo else 0.0
