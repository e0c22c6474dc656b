"""Window state kept by the Spark executor's driver between micro-batches.

Tasks reduce each micro-batch to per-pane partial aggregates (``batch_operators``); this module
merges them into the panes of still-open windows and emits each window once it is final, with
the semantics of DESIGN.md §3 and exactly the records the inline operators produce:

* time windows close when the highest accepted reference (less the lateness) reaches their end —
  the watermark — or when the input ends; windows without items produce nothing;
* count windows close when Δ items have reached them; incomplete ones are dropped at the end;
* coarser windows from a finer aggregate stream and aggregate filters reuse the inline operators
  (a record stream carries one record per window, a trickle next to the item streams).

The state is plain data, pickled with the driver's checkpoint after every micro-batch.
"""

from __future__ import annotations

import math
from fractions import Fraction

from wxquery import algebra as alg
from wxquery.inline_operators import (AggregateFilterInstance, CombineInstance, WindowRecord, _merge)

from .batch_operators import Chain, Cursor, pane_width


class ChainState:
    """Everything one chain carries across micro-batches."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.cursor = Cursor()
        self.panes: dict[int, list] = {}
        self.next_k: int | None = None
        self.combine = CombineInstance(chain.window) if isinstance(chain.window, alg.CombineWindows) else None
        self.filter = AggregateFilterInstance(alg.AggregateFilter(chain.filters)) if chain.filters else None
        self.ended = False

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["filter"] = None  # compiled closures; rebuilt from the chain
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.chain.filters:
            self.filter = AggregateFilterInstance(alg.AggregateFilter(self.chain.filters))

    # ------------------------------------------------------------------ merging

    def add_panes(self, panes: list[tuple[int, list]]) -> None:
        assert isinstance(self.chain.window, alg.WindowAggregate)
        fns = [fn for fn, _ in self.chain.window.partials]
        for p, values in panes:
            current = self.panes.get(p)
            if current is None:
                self.panes[p] = list(values)
            else:
                self.panes[p] = [_merge(fn, a, b) for fn, a, b in zip(fns, current, values)]

    def add_records(self, texts: list[str]) -> list[WindowRecord]:
        out: list[WindowRecord] = []
        for t in texts:
            record = WindowRecord.from_xml(t)
            out.extend(self.combine.push(record) if self.combine is not None else [record])
        return self._filtered(out)

    # ------------------------------------------------------------------ emission

    def close(self, lateness: float, end: bool) -> list[WindowRecord]:
        """Records of the windows that are final now (all remaining ones at the end)."""
        window = self.chain.window
        if isinstance(window, alg.CombineWindows) or window is None:
            out = self.combine.flush() if (end and self.combine is not None) else []
            return self._filtered(out)
        spec = window.window
        if spec.kind == "count":
            records = self._close_count(spec)
        else:
            records = self._close_time(spec, self.cursor.high - lateness, end)
        if end:
            self.panes.clear()
        return self._filtered(records)

    def _filtered(self, records: list[WindowRecord]) -> list[WindowRecord]:
        if self.filter is None:
            return records
        return [r for r in records if self.filter.push(r)]

    def _record(self, k: int, members: list[int]) -> WindowRecord:
        assert isinstance(self.chain.window, alg.WindowAggregate)
        partials = self.chain.window.partials
        merged: list = [None] * len(partials)
        for p in members:
            values = self.panes[p]
            merged = [_merge(fn, a, b) for (fn, _), a, b in zip(partials, merged, values)]
        record = WindowRecord(k)
        for (fn, element), value in zip(partials, merged):
            record.values[(fn, element)] = (value or 0) if fn == "count" else value
        return record

    def _close_count(self, spec: alg.WindowSpec) -> list[WindowRecord]:
        g = int(pane_width(spec))
        size, step = int(spec.size), int(spec.step)
        k = self.next_k or 0
        out = []
        while k * step + size <= self.cursor.seen:
            first = k * step // g
            members = [p for p in range(first, first + size // g) if p in self.panes]
            out.append(self._record(k, members))
            k += 1
        self.next_k = k
        lowest = k * step // g
        for p in [p for p in self.panes if p < lowest]:
            del self.panes[p]
        return out

    def _close_time(self, spec: alg.WindowSpec, watermark: float, end: bool) -> list[WindowRecord]:
        g = pane_width(spec)
        size, step = Fraction(spec.size), Fraction(spec.step)
        per_window, per_step = int(size / g), int(step / g)
        candidates: set[int] = set()
        for p in self.panes:
            lo = math.floor((p * g - size) / step) + 1
            hi = math.floor(p * g / step)
            candidates.update(range(lo if self.next_k is None else max(lo, self.next_k), hi + 1))
        out = []
        for k in sorted(candidates):
            if not end and float(k * step + size) > watermark:
                break
            first = k * per_step
            members = [p for p in range(first, first + per_window) if p in self.panes]
            if members:
                out.append(self._record(k, members))
            self.next_k = k + 1
        if self.next_k is not None:
            for p in [p for p in self.panes if math.floor(p * g / step) < self.next_k]:
                del self.panes[p]
        return out

    # ------------------------------------------------------------------ one micro-batch

    def apply(self, items: list[str], panes: list[tuple[int, list]], records: list[str],
              cursor: Cursor | None, lateness: float, end: bool) -> list[str]:
        """Fold one micro-batch's task output into the state; the chain's new output items."""
        if cursor is not None:
            self.cursor = cursor
        if self.chain.output_kind == "items":
            return items
        if self.chain.input_kind == "records":
            out = self.add_records(records)
        else:
            self.add_panes(panes)
            out = []
        out.extend(self.close(lateness, end))
        return [r.to_xml() for r in out]
