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

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from .definitions import (WHOLE_ITEM, AggregateFilter, Atom, CombineWindows, Operator, Partial,
                       Project, Sample, Select, WindowAggregate)
from .aggregates import AGGREGATES, fold
from .batch import Column, ItemBatch, selection_mask
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
class ChainOutput:
    items: list[tuple[int, str]] = field(default_factory=list)  # (offset, xml)
    panes: list[tuple[int, list]] = field(default_factory=list)  # (pane, partial values)
    records: list[tuple[int, str]] = field(default_factory=list)  # (offset, record xml)


def evaluate_chain(chain: Chain, batch: ItemBatch, offsets: np.ndarray | None, clock: WindowClock,
                   lateness: float) -> ChainOutput:
    """One chain over one batch of its parent's items (``offsets`` ascending, one per item; None:
    every item is new to the chain and outputs carry item positions). ``clock`` is advanced."""
    out = ChainOutput()
    if offsets is None:
        offsets = np.arange(batch.n if chain.input_kind == "items" else len(batch.texts))
        live = None
    else:
        live = offsets >= chain.start
    if batch.valid is not None:  # items that do not parse are dropped (the batch counts them)
        live = batch.valid if live is None else live & batch.valid
    if chain.sample > 1 and chain.input_kind == "items":
        keep = sampled(batch.texts, chain.sample)
        live = keep if live is None else live & keep
    if chain.input_kind == "records":
        out.records = [(int(o), batch.texts[i]) for i, o in enumerate(offsets.tolist())
                       if live is None or live[i]]
        return out
    rows = np.flatnonzero(selection_mask(batch, chain.atoms, live))
    if chain.window is None:
        kept = rows.tolist()
        offs = offsets[rows].tolist()  # Python ints, converted in one call
        if chain.project is None:
            texts = batch.texts
            out.items = [(o, texts[r]) for o, r in zip(offs, kept)]
        else:
            project = batch.projector(chain.project)
            out.items = [(o, project(r)) for o, r in zip(offs, kept)]
        return out
    assert isinstance(chain.window, WindowAggregate)
    spec = chain.window.window
    assigner = assigner_for(spec)
    if spec.kind == "count":
        panes = assigner.count_panes(clock.seen, int(rows.size))
        clock.seen += int(rows.size)
    else:
        assert spec.ref is not None
        refs = batch.first_values(spec.ref)[rows]
        admitted = clock.admit_batch(refs, lateness)
        rows = rows[admitted]
        panes = assigner.time_panes(refs[admitted])
    out.panes = pane_partials(batch, rows, panes, chain.window.partials)
    return out


def pane_partials(batch: ItemBatch, rows: np.ndarray, panes: np.ndarray,
                  partials: tuple[Partial, ...]) -> list[tuple[int, list]]:
    """Per pane (ascending), the partial aggregates of the given rows, in row order."""
    if rows.size == 0:
        return []
    uniq, inv = np.unique(panes, return_inverse=True)
    out: list[list] = [[] for _ in range(uniq.size)]
    for fn, element in partials:
        if fn == "count" and element == WHOLE_ITEM:
            values = AGGREGATES["count"].reduce(rows, inv, uniq.size)
        else:
            values = _reduce_column(fn, batch.column(element), rows, inv, uniq.size)
        for slot, value in zip(out, values):
            slot.append(value)
    return list(zip(uniq.tolist(), out))


def _reduce_column(fn: str, col: Column, rows: np.ndarray, inv: np.ndarray, k: int) -> list:
    if isinstance(col, np.ndarray):
        return AGGREGATES[fn].reduce(col[rows], inv, k)
    groups: list[list[float]] = [[] for _ in range(k)]
    for r, g in zip(rows.tolist(), inv.tolist()):
        groups[g].extend(col[r])
    return [fold(fn, g) for g in groups]
