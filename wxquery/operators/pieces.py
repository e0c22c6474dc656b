"""One chain's outputs from consecutive pieces of a batch, evaluated apart, joined into the
output of the whole batch — what lets the Spark executor cut a batch into ranges over its task
slots, so that every item is parsed once for all chains, windows included.

A piece is evaluated from a clock that holds only an admission threshold: the one the batch
starts from, or an older one (a batch planned while the one before it is still being merged).
That is exact for per-item chains and record chains. For the two window kinds:

* **count windows**: a row's pane depends on how many rows reached the window before it, so a
  piece hands back its rows' partial inputs; here they are numbered across the pieces in order
  and reduced into panes.
* **time windows**: a piece admitted its items against its own running maximum from the batch's
  starting one; the true threshold also counts the pieces before it (their highest reference,
  ``H``, and the clock the batch starts from). Admitting against a lower threshold can only admit *more*, and an item is wrongly
  admitted exactly when it lies below ``H - lateness`` — so a piece whose lowest admitted
  reference is not below that is exact (in-order streams always are), and any other piece is
  evaluated again from the true clock (``redo``), which is rare: its first items must be late
  against an earlier piece.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from .chains import Chain, ChainOutput, concat_columns, reduce_keyed_panes, reduce_panes
from .definitions import WindowAggregate
from .windows import WindowClock, assigner_for


@dataclass
class Piece:
    """A chain's output over one range of a batch, and its clock after it (from the batch's)."""

    start: int
    end: int
    output: ChainOutput
    clock: WindowClock | None


Redo = Callable[[Piece, WindowClock], tuple[ChainOutput, WindowClock]]


def merge_pieces(chain: Chain, start: WindowClock, pieces: list[Piece], lateness: float,
                 redo: Redo) -> tuple[ChainOutput, WindowClock]:
    """The chain's output over the pieces in order, and its clock after them, from ``start``
    (the chain's clock where the batch starts).

    Each piece was evaluated from a clock that holds only an admission threshold (``high``) at
    or below ``start``'s — the batch's start, or an older one when the batch was planned before
    the one ahead of it was merged — so its clock's counters and ``seen`` count that piece
    alone. ``redo(piece, clock)`` evaluates a piece again from such a clock."""
    out = ChainOutput()
    for piece in pieces:
        out.items.extend(piece.output.items)
        out.records.extend(piece.output.records)
    clock = replace(start)
    window = chain.window
    if not isinstance(window, WindowAggregate) or chain.input_kind != "items":
        for piece in pieces:
            _follow(clock, piece.clock)
        return out, clock
    spec = window.window
    if spec.kind == "count":
        inputs = [p.output.inputs.values() for p in pieces
                  if p.output.reached and p.output.inputs is not None]
        keyed = WindowClock(by_key=start.by_key)
        if inputs:
            columns = [concat_columns([p[k] for p in inputs]) for k in range(len(window.partials))]
            if spec.key is None:
                panes = assigner_for(spec).count_panes(start.seen, len(columns[0]))
                out.panes.extend(reduce_panes(columns, panes, window.partials))
            else:  # (numbered per key, from where each key stands)
                keys = [k for p in pieces if p.output.reached and p.output.keys for k in p.output.keys]
                panes = keyed.key_ordinals(keys) // int(assigner_for(spec).pane)
                out.panes.extend(reduce_keyed_panes(columns, panes, keys, window.partials, start.seen))
        for piece in pieces:
            _follow(clock, piece.clock)
        clock.by_key = keyed.by_key
        return out, clock
    for piece in pieces:
        output, after = piece.output, piece.clock
        if output.low < clock.watermark(lateness):  # admitted against too low a threshold
            output, after = redo(piece, WindowClock(high=clock.high))
        out.panes.extend(output.panes)
        out.low = min(out.low, output.low)
        _follow(clock, after)
    return out, clock


def _follow(clock: WindowClock, piece: WindowClock | None) -> None:
    """``clock`` advanced by what a piece's clock counted (None: the piece had none of the
    stream's items)."""
    if piece is not None:
        clock.follow(piece)
