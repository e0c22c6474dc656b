"""Window state across batches: per-pane partials merged into windows, emitted once final.

``chains.evaluate_chain`` reduces each batch to per-pane partial aggregates; ``ChainState`` merges
them into the panes of still-open windows and emits each window's record once it is final, with
the semantics of DESIGN.md §3:

* time windows close when the clock's watermark (highest accepted reference less the lateness)
  reaches their end, or when the input ends; windows without items produce nothing;
* count windows close when Δ items have reached them; incomplete ones are dropped at the end
  (which windows are final is ``WindowAssigner.complete``/``final``, as in the evaluator's
  collecting windows; the clock is ``WindowClock``);
* coarser windows from a finer aggregate stream (``CombineWindows``) and aggregate filters run on
  whole records (a record stream carries one record per window, a trickle next to items).

The state is plain data (no closures), so executors pickle it with their checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Callable

from .comparisons import Comparison
from .definitions import Atom, CombineWindows, KeyValue, WindowAggregate, WindowSpec, key_projection
from .aggregates import merge
from .chains import Chain
from .count_alignment import Anchor, HeldCount, Unalignable, aligned_start
from .pane_folds import FOLDED, fold_windows
from .records import WindowRecord, window_texts
from .windows import WindowClock, assigner_for, key_order


FOLD_AT_LEAST = 16  # windows closed at once from arrays (``pane_folds``); fewer one by one


def watermark_element(chain: Chain) -> str | None:
    """The element whose watermarks a chain's window obeys: that of a time window over items."""
    window = chain.window
    if isinstance(window, WindowAggregate) and window.window.kind == "diff":
        return window.window.ref
    return None


class CombineWindowRecords:
    """Coarser windows from finer window records that arrive in index order.

    Coarse window k' is made of the source windows starting at k'·μ' + i·Δ (i < Δ'/Δ), whose
    source indices are (k'·μ' + i·Δ)/μ. It is final once a later source record arrives (or at
    the end); a count window additionally needs every constituent (only complete windows).
    """

    def __init__(self, definition: CombineWindows) -> None:
        self.definition = definition
        s, w = definition.source, definition.window
        self.parts = int(w.size / s.size)
        self.stride = s.size / s.step  # source indices between consecutive constituents
        self.coarse_step = w.step / s.step  # source indices between coarse window starts
        self.count_kind = w.kind == "count"
        self.pending: dict[int, WindowRecord] = {}
        self.next_coarse: int | None = None

    def constituents(self, k: int) -> list[int]:
        first = k * self.coarse_step
        return [int(first + i * self.stride) for i in range(self.parts)]

    def _first_coarse_containing(self, m: int) -> int:
        span = (self.parts - 1) * self.stride  # smallest k' whose constituents can include m
        return math.ceil((m - span) / self.coarse_step)

    def push(self, record: WindowRecord) -> list[WindowRecord]:
        held = self.pending.get(record.index)
        if held is not None:  # (records of every key of a time window, merged: they come together)
            for (fn, element), value in record.values.items():
                held.values[(fn, element)] = merge(fn, held.values.get((fn, element)), value)
            record = held
        self.pending[record.index] = record
        if self.next_coarse is None:
            self.next_coarse = self._first_coarse_containing(record.index)
        return self._emit(upto=record.index)

    def flush(self) -> list[WindowRecord]:
        return self._emit(upto=None) if self.pending else []

    def _emit(self, upto: int | None) -> list[WindowRecord]:
        out = []
        while self.next_coarse is not None:
            k = self.next_coarse
            members = self.constituents(k)
            if upto is not None and (members[-1] > upto if self.count_kind else members[-1] >= upto):
                break  # (time windows: a window up to the newest record may still grow; a count record is complete)
            present = [self.pending[m] for m in members if m in self.pending]
            if not present and upto is None and (not self.pending or max(self.pending) < members[0]):
                break
            if present and (not self.count_kind or len(present) == len(members)):
                out.append(self._combine(k, present))
            self.next_coarse = k + 1
            lowest_needed = self.constituents(k + 1)[0]
            for m in [m for m in self.pending if m < lowest_needed]:
                del self.pending[m]
        return out

    def _combine(self, k: int, records: list[WindowRecord]) -> WindowRecord:
        out = WindowRecord(k)
        for fn, element in self.definition.partials:
            value = None
            for r in records:
                value = merge(fn, value, r.values.get((fn, element)))
            out.values[(fn, element)] = value
        return out


@lru_cache(maxsize=1024)
def aggregate_filter(atoms: tuple[Atom, ...]) -> Callable[[WindowRecord], bool]:
    """Compiled once per filter (chain state is pickled, so it keeps the atoms, not this test).
    Whether a record's final aggregate values (``avg(en)`` = sum/count) satisfy every atom."""

    def values(record: WindowRecord, name: str) -> list[float]:
        fn, _, rest = name.partition("(")
        return [float(v) for v in record.final(fn, rest[:-1])]

    tests = [(Comparison(a.op, a.constant), a.left, a.right) for a in atoms]
    return lambda record: all(
        comparison.holds(values(record, left), None if right is None else values(record, right))
        for comparison, left, right in tests)


def window_record(partials: tuple, index: int, values: list, key: KeyValue = None) -> WindowRecord:
    """Window ``index``'s record from its merged partials (a count of no pane is 0)."""
    return WindowRecord(index, {(fn, element): (value or 0) if fn == "count" else value
                                for (fn, element), value in zip(partials, values)}, key)


class KeyedPanes:
    """The window state of a chain partitioned by a key (``WindowSpec.key``): one ``ChainState``
    of the same window, unpartitioned, per key — panes arrive as ``((key, pane), partials)`` —
    and, on records, one ``CombineWindowRecords`` per key. The chain's clock stays the one clock:
    time windows of every key close by its watermark; count windows by their key's items
    (``WindowClock.by_key``). Records come out by window, then key (``key_order``), a count
    window's in the order of its key's windows."""

    def __init__(self, chain: Chain) -> None:
        window = chain.window
        assert isinstance(window, (WindowAggregate, CombineWindows)) and window.window.key is not None
        self.time = window.window.kind == "diff"
        self.target = window.window
        self.source = window.source if isinstance(window, CombineWindows) else window.window
        if isinstance(window, WindowAggregate):
            self.unkeyed: Chain = replace(chain, window=replace(window, window=window.window.unkeyed()))
        else:
            self.unkeyed = replace(chain, window=replace(window, source=window.source.unkeyed(),
                                                         window=window.window.unkeyed()))
        self.states: dict[KeyValue, ChainState] = {}  # the keys with open panes
        self.combiners: dict[KeyValue, CombineWindowRecords] = {}  # the keys with records pending
        self.closing: dict[tuple[KeyValue, int], int] = {}  # count windows: (key, pane) → its last item's number
        self.next_k: dict[KeyValue, int] = {}  # count windows: where a key without open panes goes on
        self.touched: set[KeyValue] = set()  # count windows: keys with items since the last close
        self.newest: int | None = None  # time windows on records: the latest record's window

    def add_panes(self, panes: list[tuple[tuple, list]]) -> None:
        by_key: dict[KeyValue, list[tuple[int, list]]] = {}
        for pane, values in panes:
            k, p = pane[0], pane[1]
            by_key.setdefault(k, []).append((p, values))
            if len(pane) > 2:
                self.closing[(k, p)] = max(self.closing.get((k, p), -1), pane[2])
        for k, some in by_key.items():
            state = self.states.get(k)
            if state is None:
                state = self.states[k] = ChainState(self.unkeyed)
                state.next_k = self.next_k.pop(k, None)
            state.add_panes(some)
            self.touched.add(k)

    def closed(self, clock: WindowClock, lateness: float, end: bool) -> list[WindowRecord]:
        """The windows final now, as records."""
        return [self.record(k, key, values) for k, key, values in self.closed_rows(clock, lateness, end)]

    def record(self, index: int, key: KeyValue, values: list) -> WindowRecord:
        return window_record(self.unkeyed.window.partials, index, values, key)  # type: ignore[union-attr]

    def closed_rows(self, clock: WindowClock, lateness: float, end: bool) -> list[tuple[int, KeyValue, list]]:
        """The windows final now, as (window, key, merged partials), in their order."""
        out: list[tuple[int, KeyValue, list]] = []
        closes: list[int] = []  # count windows: the number of the item that closed each
        assigner = assigner_for(self.unkeyed.window.window)  # type: ignore[union-attr] # (not kept: state is pickled)
        seen = clock.by_key or {}
        if self.time or end:
            keys = list(self.states)
        else:  # (a count window closes only with its key's items: the keys that had some and reached one's end)
            keys = [k for k in self.touched if k in self.states
                    and assigner.complete(seen.get(k, 0)) > (self.states[k].next_k or 0)]
        self.touched = set()
        for k in keys:
            state = self.states[k]
            if self.time:
                state.clock.high = clock.high
            else:
                state.clock.seen = seen.get(k, 0)
            for index, values in state._closed(lateness, end):
                out.append((index, k, values))
                if not self.time:
                    closes.append(self.closing.get((k, assigner.panes_of_window(index)[-1]), -1))
            if not state.panes:  # (a key seen again starts afresh: its windows are later)
                del self.states[k]
                if not self.time and state.next_k is not None:
                    self.next_k[k] = state.next_k
        if closes:
            out = [r for _, _, r in sorted(zip(closes, range(len(out)), out))]
            for k, p in [kp for kp in self.closing if kp[0] not in self.states or kp[1] not in self.states[kp[0]].panes]:
                del self.closing[(k, p)]
        if self.time:
            out.sort(key=lambda row: (row[0], key_order(row[1])))
        return out

    def add_records(self, texts: list[str]) -> list[WindowRecord]:
        assert isinstance(self.unkeyed.window, CombineWindows)
        out: list[WindowRecord] = []
        project = key_projection(self.source, self.target)  # (not kept: state is pickled)
        for t in texts:
            record = WindowRecord.from_xml(t)
            if project is not None:  # (keys in another order, or more keys merged into fewer)
                record.key = project(record.key)
            combiner = self.combiners.get(record.key)
            if combiner is None:
                combiner = self.combiners[record.key] = CombineWindowRecords(self.unkeyed.window)
            out.extend(self._keyed(record.key, combiner.push(record)))
            if self.time and (self.newest is None or record.index > self.newest):
                self.newest = record.index  # records come by window: every key's earlier windows are complete
                for k, other in self.combiners.items():
                    if other is not combiner:
                        out.extend(self._keyed(k, other._emit(upto=record.index)))
        for k in [k for k, c in self.combiners.items() if not c.pending]:
            del self.combiners[k]  # (nothing of it is pending: a later record of the key starts afresh)
        return self._ordered(out)

    def flush(self) -> list[WindowRecord]:
        out = [r for k, c in self.combiners.items() for r in self._keyed(k, c.flush())]
        return self._ordered(out)

    @staticmethod
    def _keyed(key: KeyValue, records: list[WindowRecord]) -> list[WindowRecord]:
        for r in records:
            r.key = key
        return records

    def _ordered(self, records: list[WindowRecord]) -> list[WindowRecord]:
        if self.time:
            records.sort(key=lambda r: (r.index, key_order(r.key)))
        return records


class ChainState:
    """Everything one chain carries across batches: its clock, open panes and emitted windows."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        window = chain.window
        self.keyed = (KeyedPanes(chain) if isinstance(window, (WindowAggregate, CombineWindows))
                      and window.window.key is not None else None)
        self.clock = WindowClock()
        self.panes: dict[int, list] = {}
        self.next_k: int | None = None
        self.combine = CombineWindowRecords(chain.window) if isinstance(chain.window, CombineWindows) else None
        self.ended = False
        # count windows taking over from another operator's (``count_alignment``): its input,
        # held until an anchor aligns it; and where this one stands, for one taking over from it
        self.held: HeldCount | None = None
        self.anchor: Anchor | None = None

    def align(self, anchor: Anchor, lateness: float) -> list[str]:
        """A held count window aligned at ``anchor``: its output texts so far (``NotYet``,
        ``Unalignable`` from ``HeldCount.place`` if it cannot be)."""
        assert self.held is not None
        if self.ended:
            raise Unalignable("its input ended before it was aligned")
        if not self.held.reached(anchor):
            self.held.check(anchor)  # (``NotYet`` if the anchor is before its first item)
            self.held.anchor = anchor  # (taken: aligned when its input reaches the anchor)
            return []
        rows, columns = self.held.place(anchor)
        self.held = None
        self.next_k, self.clock.seen, panes = aligned_start(self.chain, anchor, rows, columns)
        return self.apply([], panes, [], None, lateness, False)

    # ------------------------------------------------------------------ merging

    def add_panes(self, panes: list[tuple[int, list]]) -> None:
        assert isinstance(self.chain.window, WindowAggregate)
        if self.keyed is not None:
            self.keyed.add_panes(panes)  # type: ignore[arg-type]
            return
        fns = [fn for fn, _ in self.chain.window.partials]
        for p, values in panes:
            current = self.panes.get(p)
            if current is None:
                self.panes[p] = list(values)
            else:
                self.panes[p] = [merge(fn, a, b) for fn, a, b in zip(fns, current, values)]

    def add_records(self, texts: list[str]) -> list[WindowRecord]:
        if self.keyed is not None and self.combine is not None:
            return self.keyed.add_records(texts)
        out: list[WindowRecord] = []
        for t in texts:
            record = WindowRecord.from_xml(t)
            out.extend(self.combine.push(record) if self.combine is not None else [record])
        return out

    # ------------------------------------------------------------------ emission

    def close(self, lateness: float, end: bool) -> list[WindowRecord]:
        """Records of the windows that are final now (all remaining ones at the end)."""
        if not isinstance(self.chain.window, WindowAggregate):
            if self.keyed is not None and self.combine is not None:
                return self.keyed.flush() if end else []
            return self.combine.flush() if (end and self.combine is not None) else []
        if self.keyed is not None:
            return self.keyed.closed(self.clock, lateness, end)
        return [self._window_record(k, values) for k, values in self._closed(lateness, end)]

    def _closed(self, lateness: float, end: bool) -> list[tuple[int, list]]:
        """The windows final now, as (k, merged partials), in window order."""
        spec = self.chain.window.window  # type: ignore[union-attr]
        if spec.kind == "count":
            rows = self._close_count(spec)
        else:
            rows = self._close_time(spec, self.clock.watermark(lateness), end)
        if end:
            self.panes.clear()
        return rows

    def _filtered(self, records: list[WindowRecord]) -> list[WindowRecord]:
        if not self.chain.filters:
            return records
        keep = aggregate_filter(self.chain.filters)
        return [r for r in records if keep(r)]

    def _merged(self, members: list[int]) -> list:
        """A window's partials from those of its panes ``members`` (in pane order; the driver
        closes thousands per batch, so the first pane is taken as it is, not merged)."""
        assert isinstance(self.chain.window, WindowAggregate)
        partials = self.chain.window.partials
        merged: list = list(self.panes[members[0]]) if members else [None] * len(partials)
        for p in members[1:]:
            merged = [merge(fn, a, b) for (fn, _), a, b in zip(partials, merged, self.panes[p])]
        return merged

    def _window_record(self, k: int, values: list) -> WindowRecord:
        return window_record(self.chain.window.partials, k, values)  # type: ignore[union-attr]

    def _close_count(self, spec: WindowSpec) -> list[tuple[int, list]]:
        assigner = assigner_for(spec)
        k = self.next_k or 0
        complete = max(k, assigner.complete(self.clock.seen))
        partials = self.chain.window.partials  # type: ignore[union-attr]
        if complete - k >= FOLD_AT_LEAST and all(fn in FOLDED for fn, _ in partials):
            rows = fold_windows(self.panes, [fn for fn, _ in partials], k, complete - k,
                                assigner.panes_per_window, assigner.panes_per_step)
            out = list(zip(range(k, complete), rows))
        else:
            out = [(j, self._merged([p for p in assigner.panes_of_window(j) if p in self.panes]))
                   for j in range(k, complete)]
        k = self.next_k = complete
        lowest = assigner.panes_of_window(k).start
        for p in [p for p in self.panes if p < lowest]:
            del self.panes[p]
        return out

    def _close_time(self, spec: WindowSpec, watermark: float, end: bool) -> list[tuple[int, list]]:
        assigner = assigner_for(spec)
        candidates: set[int] = set()
        for p in self.panes:
            ks = assigner.windows_of_pane(p)
            candidates.update(range(ks.start if self.next_k is None else max(ks.start, self.next_k), ks.stop))
        # every candidate has a pane: a window without one is never written
        closing = assigner.final(sorted(candidates), watermark, end)
        partials = self.chain.window.partials  # type: ignore[union-attr]
        spanned = (closing[-1] - closing[0]) * assigner.panes_per_step + assigner.panes_per_window if closing else 0
        if (len(closing) >= FOLD_AT_LEAST and all(fn in FOLDED for fn, _ in partials)
                and spanned <= 4 * len(self.panes) + 64):  # arrays over the panes spanned: not if most are empty
            rows = fold_windows(self.panes, [fn for fn, _ in partials], closing[0], closing[-1] - closing[0] + 1,
                                assigner.panes_per_window, assigner.panes_per_step)
            out = [(k, rows[k - closing[0]]) for k in closing]
        else:
            out = [(k, self._merged([p for p in assigner.panes_of_window(k) if p in self.panes])) for k in closing]
        if closing:
            self.next_k = closing[-1] + 1
        if self.next_k is not None:
            for p in [p for p in self.panes if assigner.first_window_of_pane(p) < self.next_k]:
                del self.panes[p]
        return out

    # ------------------------------------------------------------------ one batch

    def apply(self, items: list[str], panes: list[tuple[int, list]], records: list[str],
              clock: WindowClock | None, lateness: float, end: bool) -> list[str]:
        """Fold one batch's evaluation into the state; the chain's new output texts."""
        if clock is not None:
            # the batch's clock: a watermark applied while the batch ran may have raised ours
            # past it, and event time never goes back
            clock.reach(self.clock.high)
            self.clock = clock
        if self.chain.output_kind == "items":
            return items
        if self.chain.input_kind == "records":
            out = self.add_records(records)
            out.extend(self.close(lateness, end))
            return [r.to_xml() for r in self._filtered(out)]
        self.add_panes(panes)
        partials = self.chain.window.partials  # type: ignore[union-attr]
        if self.keyed is not None:
            rows = self.keyed.closed_rows(self.clock, lateness, end)
            if self.chain.filters or len(set(partials)) < len(partials):  # a record holds a partial once
                return [r.to_xml() for r in self._filtered([self.keyed.record(*row) for row in rows])]
            return window_texts(partials, [(k, values) for k, _, values in rows], [key for _, key, _ in rows])
        rows = self._closed(lateness, end)
        if self.chain.filters or len(set(partials)) < len(partials):  # a record holds a partial once
            return [r.to_xml() for r in self._filtered([self._window_record(k, v) for k, v in rows])]
        return window_texts(partials, rows)

    def advance(self, path: str, value: float, lateness: float) -> list[str]:
        """A watermark: if this chain's time window is over element ``path``, event time
        ``value`` is taken as an item with it would be (no later item has less); the output
        texts of the windows it closes."""
        if self.ended or self.chain.input_kind != "items" or watermark_element(self.chain) != path:
            return []
        self.clock.reach(value)
        return self.apply([], [], [], None, lateness, False)

