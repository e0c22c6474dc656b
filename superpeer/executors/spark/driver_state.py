"""What the Spark executor's driver keeps across micro-batches (and checkpoints after each)."""

from __future__ import annotations

import threading
from typing import Callable
from dataclasses import dataclass, field

from wxquery.operators.chains import Chain, ChainOutput
from wxquery.operators.panes import ChainState
from wxquery.operators.pieces import Piece, merge_pieces
from wxquery.operators.windows import WindowClock

from .collection import cycle_collection_paused

Output = tuple[str, int, list, bool]  # (stream, first sequence number, texts, end)


@dataclass
class DriverState:
    """What the driver checkpoints after every micro-batch."""

    last_batch: int = -1
    states: dict[int, ChainState] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    outputs: list[Output] = field(default_factory=list)
    end: int = 0  # the feed offset the last applied batch ended at: the next batch starts there
    # per stream of a per-item chain, the feed offsets its ``outputs`` came from (``origins``)
    offsets: dict[str, list[int]] = field(default_factory=dict)

    def fold(self, batch_id: int, end: int, chains: dict[int, Chain], results: list,
             ended: set[int], ids: dict[str, int], lateness: float,
             redo: Callable[[Chain, Piece, WindowClock], tuple[ChainOutput, WindowClock]]) -> "DriverState":
        """The state after one micro-batch: the tasks' ``results`` (``tasks.TaskResult``, in
        task order: a stream's ranges in offset order) joined per chain (``merge_pieces``; ``redo``
        evaluates a chain's piece again from a given clock) and merged into its window state;
        ``outputs`` are the new texts to deliver, numbered after the earlier ones. ``ended``:
        the streams (feed ids) whose end the batch holds. Runs with the cycle collector paused
        (``collection``): a batch's windows and texts all die by reference counting."""
        with cycle_collection_paused():
            return self._fold(batch_id, end, chains, results, ended, ids, lateness, redo)

    def _fold(self, batch_id: int, end: int, chains: dict[int, Chain], results: list,
              ended: set[int], ids: dict[str, int], lateness: float,
              redo: Callable[[Chain, Piece, WindowClock], tuple[ChainOutput, WindowClock]]) -> "DriverState":
        pieces: dict[int, list[Piece]] = {}
        for result in results:
            for cid in set(result.outputs) | set(result.cursors):
                output = result.outputs.get(cid) or ChainOutput()
                pieces.setdefault(cid, []).append(Piece(result.start, result.end, output, result.cursors.get(cid)))
        states = {cid: s for cid, s in self.states.items() if cid in chains}
        seqs = dict(self.seqs)
        outputs: list[Output] = []
        offsets: dict[str, list[int]] = {}
        for cid, chain in sorted(chains.items()):
            st = states.get(cid)
            if st is None:
                st = states[cid] = ChainState(chain)
            if st.ended:
                continue
            done = ids.get(chain.parent) in ended
            clock = None
            merged = ChainOutput()
            if cid in pieces:
                merged, clock = merge_pieces(chain, st.clock, pieces[cid], lateness,
                                             lambda piece, start, chain=chain: redo(chain, piece, start))
            texts = st.apply([x for _, x in merged.items], merged.panes, [x for _, x in merged.records],
                             clock if chain.output_kind == "records" else None, lateness, done)
            st.ended = done
            if texts or done:
                seq = seqs.get(chain.stream, 0)
                outputs.append((chain.stream, seq, texts, done))
                seqs[chain.stream] = seq + len(texts)
                if texts and chain.output_kind == "items":  # (one output per input item, in order)
                    offsets[chain.stream] = [o for o, _ in merged.items]
        return DriverState(batch_id, states, seqs, outputs, end, offsets)

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

