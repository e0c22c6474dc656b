"""Which items a ``Sample`` keeps: a 64-bit BLAKE2 hash of the item's UTF-8 text, as a number in
[0, 1), below 1/rate. Deterministic (a stream sampled twice is the same stream; the 1/64 sample
of a stream lies inside its 1/32 one) and, over distinct items, independent Bernoulli trials —
what the estimates' intervals assume (``sharing.estimates``)."""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b

import numpy as np

_SCALE = float(1 << 64)


def sample_keys(texts: Sequence[str]) -> np.ndarray:
    return np.fromiter((int.from_bytes(blake2b(t.encode(), digest_size=8).digest(), "little") / _SCALE
                        for t in texts), dtype=np.float64, count=len(texts))


def kept(texts: Sequence[str], rate: int) -> np.ndarray:
    """The mask of the items the 1/``rate`` sample keeps."""
    return sample_keys(texts) < 1.0 / rate
