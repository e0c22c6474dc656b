"""Chains run in-process, batch by batch: the inline executor and the simulator.

Both halves of the batch operators run here, one after the other: ``evaluate_chain`` (what a Spark
scan task runs) and ``ChainState.apply`` (what the Spark driver runs). A ``ChainGroup`` holds the
chains computed from one parent stream, so each pushed batch is parsed once for all of them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .definitions import Operator
from .batch import ItemBatch
from .chains import Chain, evaluate_chain, normalise
from .panes import ChainState
from .windows import WindowCounters


class ChainGroup:
    """The chains on one parent stream, evaluated together over each batch of its items."""

    def __init__(self, lateness: float = 0.0) -> None:
        self.lateness = lateness
        self.states: dict[str, ChainState] = {}
        self.malformed = 0  # items dropped because they did not parse
        # per chain of per-item operators, the batch offsets of its last push's outputs: each
        # output's input item, so that a caller can say where every output came from
        self.offsets: dict[str, list[int]] = {}

    def add(self, chain: Chain) -> None:
        self.states[chain.stream] = ChainState(chain)

    def remove(self, stream: str) -> None:
        self.states.pop(stream, None)

    def __len__(self) -> int:
        return len(self.states)

    def push(self, texts: Sequence[str], end: bool) -> dict[str, list[str]]:
        """Every chain over the next batch of the parent's wire texts: outputs per stream."""
        out: dict[str, list[str]] = {}
        self.offsets = {}
        batch = None
        if texts:
            batch = ItemBatch(texts)
            self.malformed += batch.malformed
            batch.prepare(p for st in self.states.values() for p in st.chain.paths())
        for stream, state in list(self.states.items()):
            if state.ended:
                continue
            items: list[str] = []
            panes: list = []
            records: list[str] = []
            if batch is not None:
                result = evaluate_chain(state.chain, batch, None, state.clock, self.lateness)
                items = [x for _, x in result.items]
                panes, records = result.panes, [x for _, x in result.records]
                if state.chain.output_kind == "items" and state.chain.input_kind == "items":
                    self.offsets[stream] = [int(o) for o, _ in result.items]
            out[stream] = state.apply(items, panes, records, None, self.lateness, end)
            state.ended = end
        return out

    def advance(self, path: str, value: float) -> dict[str, list[str]]:
        """A watermark: every time window over element ``path`` takes event time ``value`` as if
        an item with it had arrived (no later item has less); the windows it closes, per stream."""
        out: dict[str, list[str]] = {}
        for stream, state in self.states.items():
            closed = state.advance(path, value, self.lateness)
            if closed:
                out[stream] = closed
        return out

    def counters(self) -> dict[str, WindowCounters]:
        """Late and missing-reference items per window chain."""
        return {s: st.clock.counters() for s, st in self.states.items() if st.chain.window is not None}


def run_operators(operators: Iterable[Operator], input_kind: str, texts: Sequence[str],
                  lateness: float = 0.0) -> list[str]:
    """One operator chain over a whole finite stream of wire texts (the simulator, tests)."""
    group = ChainGroup(lateness)
    group.add(normalise(0, "out", "in", input_kind, operators))
    return group.push(texts, end=True)["out"]
