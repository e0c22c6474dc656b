"""Where the items in the Spark executor's feed came from: per feed offset, the original's item
(``superpeer.data.origins``), when the node said so with the push.

The per-item chains' outputs carry their input's feed offset (``ChainOutput.items``), so an
output's origin is its input's: a join placed at a Spark super-peer then says which items its
groups hold, and a subscription fed through Spark can resume after a failure, as beside the
inline executor. Kept in memory only, from the push until the feed commits past it: after a
restart, the outputs handed on again say nothing of their origins (unknown, never wrong).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence


class FeedOrigins:
    """Runs of (first feed offset, origins of the items from there), ascending. Its lock is a
    leaf: ``add`` is called under the node's lock, ``of`` and ``trim`` from the driver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starts: list[int] = []
        self._runs: list[Sequence[int]] = []

    def add(self, first: int, origins: Sequence[int]) -> None:
        """The items appended to the feed from offset ``first`` on came from ``origins``."""
        if origins:
            with self._lock:
                self._starts.append(first)
                self._runs.append(list(origins))

    def of(self, offsets: Sequence[int]) -> list[int] | None:
        """The origins of the items at these feed offsets (None: one of them is not known)."""
        out = []
        with self._lock:
            for offset in offsets:
                k = bisect.bisect_right(self._starts, offset) - 1
                if k < 0 or offset - self._starts[k] >= len(self._runs[k]):
                    return None
                out.append(self._runs[k][offset - self._starts[k]])
        return out

    def trim(self, below: int) -> None:
        """The feed committed up to ``below``: no output will read the items before it."""
        with self._lock:
            while self._starts and self._starts[0] + len(self._runs[0]) <= below:
                del self._starts[0], self._runs[0]

    def __len__(self) -> int:
        return len(self._runs)
