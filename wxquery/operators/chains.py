"""Operator chains evaluated over a batch: the one implementation of select, project and
window-aggregate that every executor runs.

A ``Chain`` is one installed derived stream normalised for batch evaluation. ``evaluate_chain``
runs it over one ``ItemBatch`` of its parent: selection as vectorised masks, projection written
once per item, and a window operator reduced to **per-pane partial aggregates** (``aggregates``)
that ``panes.ChainState`` merges across batches and turns into window records. The split is what
lets the Spark executor run this half inside its scan tasks and the other half in its driver; the
inline executor runs both halves in-process (``runner``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from .definitions import (WHOLE_ITEM, AggregateFilter, Atom, CombineWindows, KeyValue, Operator, Partial,
                       Project, Sample, Select, WindowAggregate)
from .aggregates import AGGREGATES, fold
from .batch import Column, ItemBatch, selected_rows, selection_mask
from .sampling import kept as sampled
from .windows import WindowClock, assigner_for


@dataclass(frozen=True)
class Chain:
    """One installed derived stream, normalised for batch evaluation.

    ``atoms`` (selection) and ``project`` apply to items; then at most one window operator
    (``WindowAggregate`` on items, ``CombineWindows`` on records); ``filters`` are aggregate
    filters on finished window records. ``start`` is the first feed offset the chain sees.
    """

    id: int
    stream: str
    parent: str
    input_kind: str  # "items" | "records"
    atoms: tuple[Atom, ...]
    project: frozenset[str] | None
    window: WindowAggregate | CombineWindows | None
    filters: tuple[Atom, ...]
    start: int
    sample: int = 1  # keep 1/sample of the input items first (``Sample``; 1: all)

    @property
    def output_kind(self) -> str:
        return "records" if self.window is not None or self.input_kind == "records" else "items"

    def paths(self) -> set[str]:
        """Element paths a batch must extract for this chain."""
        out: set[str] = set()
        for a in self.atoms:
            out.add(a.left)
            if a.right is not None:
                out.add(a.right)
        if isinstance(self.window, WindowAggregate):
            if self.window.window.ref is not None:
                out.add(self.window.window.ref)
            out.update(self.window.window.key_paths)
            out.update(e for fn, e in self.window.partials if not (fn == "count" and e == WHOLE_ITEM))
        return out


def normalise(cid: int, stream: str, parent: str, input_kind: str,
              operators: Iterable[Operator], start: int = 0) -> Chain:
    """Fold an operator chain into a ``Chain``; refuses shapes the planner never produces."""
    operators = list(operators)
    atoms: list[Atom] = []
    filters: list[Atom] = []
    project = None
    window = None
    sample = 1
    for k, op in enumerate(operators):
        if isinstance(op, Sample) and k == 0 and input_kind == "items":
            sample = op.rate
        elif isinstance(op, Select) and window is None and project is None and input_kind == "items":
            atoms.extend(op.atoms)
        elif isinstance(op, Project) and window is None and input_kind == "items":
            project = op.paths if project is None else project & op.paths
        elif isinstance(op, WindowAggregate) and window is None and input_kind == "items":
            window = op
        elif isinstance(op, CombineWindows) and window is None and input_kind == "records":
            window = op
        elif isinstance(op, AggregateFilter) and (window is not None or input_kind == "records"):
            filters.extend(op.atoms)
        else:
            raise ValueError(f"cannot run {op} at this position of {list(map(str, operators))}")
    if project is not None and WHOLE_ITEM in project:
        project = None
    return Chain(cid, stream, parent, input_kind, tuple(atoms), project, window, tuple(filters), start, sample)


@dataclass
class PieceInputs:
    """A count window's rows in one piece of a batch (``pieces``), which panes they fall in being
    known only once the pieces before are counted: per partial, the values it folds.

    When many of the piece's rows reached the window the piece hands back which ones (``bits``,
    packed) and each partial's *whole* column, the very object every chain of the task that folds
    that element shares: a task's result is one pickle, so the column crosses to the driver once
    and not once per chain (10 count-window chains over 100,000 photons sent 8 MB per job as
    per-chain copies). Sparse rows are sent as their own values (``bits`` None)."""

    columns: list[Column | None]  # with ``bits``, None: a whole-item count (needs only the rows)
    bits: bytes | None = None
    n: int = 0  # the piece's rows (``bits`` given)

    def values(self) -> list[Column]:
        """Per partial, the values of the rows that reached the window, in row order."""
        if self.bits is None:
            return list(self.columns)
        rows = np.flatnonzero(np.unpackbits(np.frombuffer(self.bits, np.uint8), count=self.n))
        return [rows if c is None else column_rows(c, rows) for c in self.columns]

    @classmethod
    def of(cls, batch: ItemBatch, rows: np.ndarray, partials: tuple[Partial, ...]) -> "PieceInputs":
        if rows.size * SHARED_DENSITY < batch.n:
            return cls(partial_inputs(batch, rows, partials))
        whole = [None if fn == "count" and element == WHOLE_ITEM else batch.column(element)
                 for fn, element in partials]
        mask = np.zeros(batch.n, bool)
        mask[rows] = True
        return cls(whole, np.packbits(mask).tobytes(), batch.n)


# A count window's piece sends whole columns (``PieceInputs``) when at least 1/SHARED_DENSITY of
# the rows reached it: a whole column costs that many times a sparse one, and saves a copy per chain.
SHARED_DENSITY = 8


@dataclass
class ChainOutput:
    items: list[tuple[int, str]] = field(default_factory=list)  # (offset, xml)
    panes: list[tuple[int, list]] = field(default_factory=list)  # (pane, partial values)
    records: list[tuple[int, str]] = field(default_factory=list)  # (offset, record xml)
    low: float = math.inf  # time windows: the lowest reference admitted (``pieces`` checks it)
    inputs: PieceInputs | None = None  # count windows evaluated as one piece of a batch
    reached: int = 0  # count windows: rows that reached the window
    keys: list | None = None  # partitioned count windows in a piece: the key of each row reached


def evaluate_chain(chain: Chain, batch: ItemBatch, offsets: np.ndarray | None, clock: WindowClock,
                   lateness: float, piece: bool = False, floors: np.ndarray | None = None,
                   candidates: tuple[np.ndarray, tuple[Atom, ...]] | None = None) -> ChainOutput:
    """One chain over one batch of its parent's items (``offsets`` ascending, one per item; None:
    every item is new to the chain and outputs carry item positions). ``clock`` is advanced.

    ``piece``: the items are one piece of a batch cut into consecutive ranges evaluated apart
    (``pieces.merge_pieces`` joins them), and ``clock`` holds only an admission threshold, not
    where the chain stands: a count window then hands back its rows' partial inputs instead of
    panes, which the driver numbers. ``floors``: per item, the event time the watermarks sent
    before it had raised a time window's clock to (``WindowClock.admit_batch``). ``candidates``:
    the rows a shared predicate index found inside the chain's key range, and the chain's atoms
    left to test on them (``predicate_index``; None: every atom is tested on every row)."""
    out = ChainOutput()
    live = live_rows(chain, batch, offsets)
    if chain.input_kind == "records":
        numbers = range(len(batch.texts)) if offsets is None else offsets.tolist()
        out.records = [(int(o), batch.texts[i]) for i, o in enumerate(numbers) if live is None or live[i]]
        return out
    if candidates is None:
        rows = np.flatnonzero(selection_mask(batch, chain.atoms, live))
    else:
        rows, residual = candidates
        rows = selected_rows(batch, residual, rows if live is None else rows[live[rows]])
    if chain.window is None:
        kept = rows.tolist()
        offs = kept if offsets is None else offsets[rows].tolist()  # Python ints, in one call
        out.items = list(zip(offs, project_rows(chain, batch, kept)))
        return out
    assert isinstance(chain.window, WindowAggregate)
    spec = chain.window.window
    assigner = assigner_for(spec)
    keys = row_keys(batch, spec.key_paths, rows) if spec.key is not None else None
    if spec.kind == "count" and piece:
        out.reached = int(rows.size)
        if rows.size:
            out.inputs = PieceInputs.of(batch, rows, chain.window.partials)
        out.keys = keys
        clock.seen += out.reached
        return out
    inputs = partial_inputs(batch, rows, chain.window.partials) if rows.size else []
    if spec.kind == "count":
        out.reached = int(rows.size)
        if keys is not None:
            first = clock.seen
            out.panes = reduce_keyed_panes(inputs, clock.key_ordinals(keys) // int(assigner.pane),
                                           keys, chain.window.partials, first)
            return out
        panes = assigner.count_panes(clock.seen, out.reached)
        clock.seen += out.reached
    else:
        assert spec.ref is not None
        refs = batch.first_values(spec.ref)[rows]
        admitted = clock.admit_batch(refs, lateness, None if floors is None else floors[rows])
        if not admitted.all():
            inputs = [column_rows(c, np.flatnonzero(admitted)) for c in inputs]
        panes = assigner.time_panes(refs[admitted])
        if panes.size:
            out.low = float(refs[admitted].min())
        if keys is not None:
            kept = np.flatnonzero(admitted).tolist()
            out.panes = reduce_keyed_panes(inputs, panes, [keys[i] for i in kept], chain.window.partials)
            return out
    out.panes = reduce_panes(inputs, panes, chain.window.partials)
    return out


def row_keys(batch: ItemBatch, paths: tuple[str, ...], rows: np.ndarray) -> list[KeyValue]:
    """The key of each row of a window partitioned by ``paths`` (``item_key``): the string value
    of the first node at the path (None: it has none), or the tuple of them for several paths."""
    columns = [[found[0] if found else None for found in (strings[r] for r in rows.tolist())]
               for strings in (batch.strings(p) for p in paths)]
    return columns[0] if len(columns) == 1 else list(zip(*columns))


def reduce_keyed_panes(inputs: list[Column], panes: np.ndarray, keys: list[KeyValue],
                       partials: tuple[Partial, ...], first: int | None = None) -> list[tuple[tuple, list]]:
    """``reduce_panes`` for a window partitioned by a key: per (key, pane), the partials of the
    rows with that key in that pane (``keys``: one per row), in one reduction over both. ``first``:
    count windows, the number of the first row among every item the window has counted — a
    pane is then ``(key, pane, number of its last row)``, which orders the windows by the items
    that close them, however the items were batched."""
    if panes.size == 0:
        return []
    codes: dict[KeyValue, int] = {}
    code = np.fromiter((codes.setdefault(k, len(codes)) for k in keys), np.int64, len(keys))
    low = int(panes.min())
    span = int(panes.max()) - low + 1
    if span * len(codes) >= 1 << 62:  # (panes too far apart to number (key, pane) pairs in 64 bits)
        return [row for k in codes for row in _one_key(inputs, panes, keys, k, partials, first)]
    combined = code * span + (panes - low)
    names = list(codes)
    reduced = reduce_panes(inputs, combined, partials)
    if first is None:
        return [((names[c // span], c % span + low), values) for c, values in reduced]
    uniq, inv = np.unique(combined, return_inverse=True)
    last = np.full(uniq.size, -1, np.int64)
    np.maximum.at(last, inv, np.arange(combined.size, dtype=np.int64))
    return [((names[c // span], c % span + low, first + int(e)), values)
            for (c, values), e in zip(reduced, last.tolist())]


def _one_key(inputs: list[Column], panes: np.ndarray, keys: list[KeyValue], key: KeyValue,
             partials: tuple[Partial, ...], first: int | None) -> list[tuple[tuple, list]]:
    """``reduce_keyed_panes`` of the rows of one key."""
    rows = np.asarray([i for i, k in enumerate(keys) if k == key], np.int64)
    out = reduce_keyed_panes([column_rows(c, rows) for c in inputs], panes[rows], [key] * rows.size, partials,
                             None if first is None else 0)
    if first is None:
        return out
    return [((k, p, first + int(rows[e])), values) for (k, p, e), values in out]  # (numbered in the batch)


def live_rows(chain: Chain, batch: ItemBatch, offsets: np.ndarray | None = None) -> np.ndarray | None:
    """Which items of the batch the chain takes at all (None: every one): those new to it that
    parse and are in its sample."""
    live = None if offsets is None else offsets >= chain.start  # (None: every item is new)
    if batch.valid is not None:  # items that do not parse are dropped (the batch counts them)
        live = batch.valid if live is None else live & batch.valid
    if chain.sample > 1 and chain.input_kind == "items":
        keep = sampled(batch.texts, chain.sample)
        live = keep if live is None else live & keep
    return live


def reaching_rows(chain: Chain, batch: ItemBatch) -> np.ndarray:
    """The rows of the batch that reach the chain's window (or its output): selected ones."""
    return np.flatnonzero(selection_mask(batch, chain.atoms, live_rows(chain, batch)))


def quick(chain: Chain, batch: ItemBatch) -> bool:
    """Whether the chain's output over a batch is its selected rows projected and nothing else
    (a per-item chain on items, every item valid, no sample): ``project_rows`` is then all of it."""
    return (chain.window is None and chain.input_kind == "items" and chain.sample == 1
            and batch.valid is None)


def project_rows(chain: Chain, batch: ItemBatch, rows: list[int]) -> list[str]:
    """The wire texts a per-item chain outputs for the given rows of the batch."""
    if chain.project is None:
        texts = batch.texts
        return [texts[r] for r in rows]
    project = batch.projector(chain.project)
    return [project(r) for r in rows]


def partial_inputs(batch: ItemBatch, rows: np.ndarray, partials: tuple[Partial, ...]) -> list[Column]:
    """Per partial, the values its aggregate folds, of the given rows in row order (a whole-item
    ``count`` counts rows: any column of their length)."""
    return [rows if fn == "count" and element == WHOLE_ITEM else column_rows(batch.column(element), rows)
            for fn, element in partials]


def column_rows(col: Column, rows: np.ndarray) -> Column:
    return col[rows] if isinstance(col, np.ndarray) else [col[r] for r in rows.tolist()]


def concat_columns(parts: list[Column]) -> Column:
    """Columns of consecutive pieces as one (a list of values per row if any piece has one)."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts) if parts else np.empty(0)
    out: list = []
    for p in parts:
        out.extend([[v] for v in p.tolist()] if isinstance(p, np.ndarray) else p)
    return out


def reduce_panes(inputs: list[Column], panes: np.ndarray, partials: tuple[Partial, ...]) -> list[tuple[int, list]]:
    """Per pane (ascending), the partial aggregates of rows that fall in the given ``panes``
    (one per row), from their ``partial_inputs``."""
    if panes.size == 0:
        return []
    uniq, inv = np.unique(panes, return_inverse=True)
    out: list[list] = [[] for _ in range(uniq.size)]
    for (fn, element), col in zip(partials, inputs):
        if fn == "count" and element == WHOLE_ITEM:
            values = AGGREGATES["count"].reduce(col, inv, uniq.size)
        elif isinstance(col, np.ndarray):
            values = AGGREGATES[fn].reduce(col, inv, uniq.size)
        else:
            groups: list[list[float]] = [[] for _ in range(uniq.size)]
            for vs, g in zip(col, inv.tolist()):
                groups[g].extend(vs)
            values = [fold(fn, g) for g in groups]
        for slot, value in zip(out, values):
            slot.append(value)
    return list(zip(uniq.tolist(), out))
