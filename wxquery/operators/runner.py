"""Chains run in-process, batch by batch: the inline executor and the simulator.

Both halves of the batch operators run here, one after the other: ``evaluate_chain`` (what a Spark
scan task runs) and ``ChainState.apply`` (what the Spark driver runs). A ``ChainGroup`` holds the
chains computed from one parent stream, so each pushed batch is parsed once for all of them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .definitions import Operator, WindowAggregate
from .batch import ItemBatch
from .chains import Chain, evaluate_chain, normalise, partial_inputs, project_rows, quick, reaching_rows
from .count_alignment import Anchor, HeldCount, is_count_window
from .panes import ChainState
from .predicate_index import INDEX_FROM, NO_ROWS, PredicateIndex, Selected
from .windows import WindowCounters



class ChainGroup:
    """The chains on one parent stream, evaluated together over each batch of its items."""

    def __init__(self, lateness: float = 0.0, index_from: int = INDEX_FROM) -> None:
        self.lateness = lateness
        self.index_from = index_from  # chains on one key element before they share an index
        self.states: dict[str, ChainState] = {}
        self._index: PredicateIndex | None = None  # (made again when the chains change)
        self._paths: set[str] | None = None
        self._anyway: tuple[frozenset, list[str]] | None = None
        self.malformed = 0  # items dropped because they did not parse
        # per chain of per-item operators, the batch offsets of its last push's outputs: each
        # output's input item, so that a caller can say where every output came from
        self.offsets: dict[str, list[int]] = {}

    def add(self, chain: Chain, held: bool = False) -> None:
        """``held``: a count window that takes over from another operator's, its input held
        until ``align`` (``count_alignment``)."""
        state = self.states[chain.stream] = ChainState(chain)
        if held:
            if not is_count_window(chain):
                raise ValueError(f"only a count window over items can be aligned later, not {chain.stream}")
            state.held = HeldCount()
        self._index = self._paths = self._anyway = None

    def anchor(self, stream: str) -> Anchor | None:
        """Where the count window computing ``stream`` stands (None: not known)."""
        state = self.states.get(stream)
        return None if state is None or state.held is not None else state.anchor

    def align(self, stream: str, anchor: Anchor) -> list[str]:
        """The held count window computing ``stream`` aligned at ``anchor``: its outputs (none
        if it is aligned already: an answer lost on the way is asked again)."""
        state = self.states[stream]
        return [] if state.held is None else state.align(anchor, self.lateness)

    def remove(self, stream: str) -> None:
        self.states.pop(stream, None)
        self.changed()

    def changed(self) -> None:
        """A chain's definition changed in place (a stream widened): what is derived from them
        all is made again at the next push."""
        self._index = self._paths = self._anyway = None

    def __len__(self) -> int:
        return len(self.states)

    def push(self, texts: Sequence[str], end: bool, origins: Sequence[int] | None = None) -> dict[str, list[str]]:
        """Every chain over the next batch of the parent's wire texts: outputs per stream. A
        per-item chain that the shared index says selects nothing of the batch is left out.
        ``origins``: per item, the original's item it came from, if known (count windows say
        where they stand by them, and a held one keeps them: ``count_alignment``)."""
        out: dict[str, list[str]] = {}
        self.offsets = {}
        batch = None
        selected: Selected | None = None
        todo: Iterable[str] = list(self.states)
        if texts:
            batch = ItemBatch(texts)
            self.malformed += batch.malformed
            if self._paths is None:
                self._paths = {p for st in self.states.values() for p in st.chain.paths()}
            batch.prepare(self._paths)
            if self._index is None:
                self._index = PredicateIndex(((s, st.chain.atoms) for s, st in self.states.items()
                                              if st.chain.input_kind == "items"), self.index_from)
            if self._index.keys:
                selected = self._index.select(batch)
                if not end:  # (per-item chains that select nothing are not even looked at)
                    todo = [*self._evaluated_anyway(selected.covered),
                            *(s for s in selected.rows if self.states[s].chain.window is None)]
        for stream in todo:
            state = self.states[stream]
            if state.ended:
                continue
            if state.held is not None:
                self._hold(state, batch, origins)
                anchor = state.held.anchor
                out[stream] = state.align(anchor, self.lateness) if anchor and state.held.reached(anchor) else []
                state.ended = end
                continue
            items: list[str] = []
            panes: list = []
            records: list[str] = []
            if batch is not None:
                candidates = None
                if selected is not None and stream in selected.covered:
                    candidates = selected.rows.get(stream, (NO_ROWS, ()))
                    if not candidates[1] and quick(state.chain, batch):
                        rows = candidates[0].tolist()
                        out[stream] = project_rows(state.chain, batch, rows)
                        self.offsets[stream] = rows
                        state.ended = end
                        continue
                result = evaluate_chain(state.chain, batch, None, state.clock, self.lateness,
                                        candidates=candidates)
                items = [x for _, x in result.items]
                panes, records = result.panes, [x for _, x in result.records]
                if state.chain.output_kind == "items" and state.chain.input_kind == "items":
                    self.offsets[stream] = [int(o) for o, _ in result.items]
            out[stream] = state.apply(items, panes, records, None, self.lateness, end)
            state.ended = end
            if batch is not None and is_count_window(state.chain):
                state.anchor = None if origins is None else Anchor(int(origins[-1]) + 1, state.clock.seen)
        return out

    @staticmethod
    def _hold(state: ChainState, batch: ItemBatch | None, origins: Sequence[int] | None) -> None:
        if batch is None:
            return
        assert isinstance(state.chain.window, WindowAggregate) and state.held is not None
        if origins is None:  # (it can never be aligned: nothing of the batch is worth keeping)
            state.held.hold(None, np.empty(0, np.int64), [])
            return
        rows = reaching_rows(state.chain, batch)
        inputs = partial_inputs(batch, rows, state.chain.window.partials) if rows.size else []
        picked = origins.start + rows if isinstance(origins, range) else np.asarray(origins, np.int64)[rows]
        state.held.hold(origins, picked, inputs)

    def _evaluated_anyway(self, covered: frozenset) -> list[str]:
        """The chains a batch evaluates whatever the index says: those it does not cover, and
        window chains (their state moves with every batch)."""
        if self._anyway is None or self._anyway[0] is not covered:
            self._anyway = (covered, [s for s, st in self.states.items()
                                      if s not in covered or st.chain.window is not None])
        return self._anyway[1]

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
