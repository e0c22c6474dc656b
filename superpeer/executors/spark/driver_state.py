"""What the Spark executor's driver keeps across micro-batches (and checkpoints after each)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from wxquery.operators.chains import Chain
from wxquery.operators.panes import ChainState

Output = tuple[str, int, list, bool]  # (stream, first sequence number, texts, end)


@dataclass
class DriverState:
    """What the driver checkpoints after every micro-batch."""

    last_batch: int = -1
    states: dict[int, ChainState] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    outputs: list[Output] = field(default_factory=list)

    def advance(self, chains: dict[int, Chain], parent: str, path: str, value: float,
                lateness: float) -> list[Output]:
        """A watermark on ``parent`` (every item before it applied): the windows it closes in
        the chains over that parent, numbered after their earlier outputs. The clocks it raises
        are the next micro-batch's cursors."""
        outputs = []
        for cid, chain in sorted(chains.items()):
            st = self.states.get(cid)
            texts = st.advance(path, value, lateness) if st is not None and chain.parent == parent else []
            if texts:
                seq = self.seqs.get(chain.stream, 0)
                self.seqs[chain.stream] = seq + len(texts)
                outputs.append((chain.stream, seq, texts, False))
        return outputs


class PendingWatermarks:
    """Watermarks waiting for the items pushed before them to go through a micro-batch. Its
    own lock is a leaf: ``advance`` (under the node's lock) never waits for a micro-batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, str, str, float]] = []  # (feed offset, parent, path, value)
        self.applied = 0

    def add(self, offset: int, parent: str, path: str, value: float) -> None:
        with self._lock:
            self._waiting.append((offset, parent, path, value))

    def due(self, processed: int) -> list[tuple[int, str, str, float]]:
        """Those whose items have all been processed (taken off the list)."""
        with self._lock:
            due = [w for w in self._waiting if w[0] <= processed]
            self._waiting = [w for w in self._waiting if w[0] > processed]
            self.applied += len(due)
            return due

    def __len__(self) -> int:
        return len(self._waiting)

