"""Count windows that take over from another operator's: aligned with its windows, not their own.

A count window counts the items that reach it from the moment its operator starts (DESIGN.md
§3), so a subscription moved to a plan with a new count-window operator (DESIGN.md §12) would
see windows of another alignment. The new operator is therefore started **held**: it keeps the
partial inputs of the items that reach it, each with its origin (the original's item it came
from, ``superpeer.data.origins``), and emits nothing. The old operator says where it stands —
an ``Anchor``: the first item reaching it from origin ``origin`` on is its item number
``ordinal`` — and the held operator, given that anchor, drops what came from before ``origin``,
numbers the rest from ``ordinal`` on and from then runs as if it had counted from the start.
Windows that began before ``ordinal`` lack items here: the old operator finishes those, and the
first window the new one closes is the first that starts at or after the anchor.

An anchor is exact between batches: the operator has then counted every item from origins
before ``origin`` and none from ``origin`` on, origins being in the original's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .chains import Chain, column_rows, concat_columns, reduce_panes
from .definitions import WindowAggregate
from .windows import assigner_for


@dataclass(frozen=True)
class Anchor:
    """The first item from ``origin`` on that reaches a count window is its item ``ordinal``."""

    origin: int
    ordinal: int


class NotYet(Exception):
    """The anchor is from before the held operator's first item: it cannot place it yet."""


class Unalignable(Exception):
    """The held operator can never be aligned (its input does not say where items came from)."""


@dataclass
class HeldCount:
    """A count-window operator's input while it waits for an ``Anchor``."""

    first_origin: int | None = None  # the origin of the first item it was given (of any)
    last_origin: int | None = None  # … and of the last
    anchor: Anchor | None = None  # given before this operator had reached it: aligned once it has
    origins: list[np.ndarray] = field(default_factory=list)  # per batch, the rows' origins
    inputs: list[list] = field(default_factory=list)  # per batch, per partial, the rows' values
    broken: str = ""

    def hold(self, batch_origins: Sequence[int] | None, row_origins: np.ndarray, inputs: list) -> None:
        """One batch: the origins of all its items (None: not known) and of the rows that reached
        the window, and those rows' partial inputs (``chains.partial_inputs``)."""
        if batch_origins is None:
            if not self.broken:
                self.broken = "its input does not say where items came from"
            return
        if self.first_origin is None and len(batch_origins):
            self.first_origin = int(batch_origins[0])
        if len(batch_origins):
            self.last_origin = int(batch_origins[-1])
        if row_origins.size:
            self.origins.append(row_origins)
            self.inputs.append(inputs)

    def reached(self, anchor: Anchor) -> bool:
        """Whether every item before the anchor's has come here: only then are the items this
        operator has yet to see exactly those the anchor numbers on (one behind the old
        operator keeps holding: numbered now, the items between would be counted twice)."""
        return self.last_origin is not None and self.last_origin + 1 >= anchor.origin

    def check(self, anchor: Anchor) -> None:
        """``Unalignable`` if this operator can never be aligned, ``NotYet`` if the anchor is
        before the first item it holds."""
        if self.broken:
            raise Unalignable(self.broken)
        if self.first_origin is None or self.first_origin > anchor.origin:
            raise NotYet(f"the anchor's item {anchor.origin} is before the first item held "
                         f"({self.first_origin if self.first_origin is not None else 'none yet'})")

    def place(self, anchor: Anchor) -> tuple[int, list]:
        """The held rows from ``anchor.origin`` on: (how many, per partial their values)."""
        self.check(anchor)
        if not self.origins:
            return 0, []
        origins = np.concatenate(self.origins)
        keep = np.flatnonzero(origins >= anchor.origin)
        width = len(self.inputs[0])
        columns = [column_rows(concat_columns([b[i] for b in self.inputs]), keep) for i in range(width)]
        return int(keep.size), columns


def aligned_start(chain: Chain, anchor: Anchor, rows: int, columns: list) -> tuple[int, int, list]:
    """Where a held chain stands once aligned: (its first window, items seen, its panes)."""
    assert isinstance(chain.window, WindowAggregate) and chain.window.window.kind == "count"
    assigner = assigner_for(chain.window.window)
    first_window = -(-anchor.ordinal // assigner.step_i)  # the first window starting at or after it
    panes = reduce_panes(columns, assigner.count_panes(anchor.ordinal, rows), chain.window.partials) if rows else []
    return first_window, anchor.ordinal + rows, panes


def is_count_window(chain: Chain) -> bool:
    return (chain.input_kind == "items" and isinstance(chain.window, WindowAggregate)
            and chain.window.window.kind == "count" and chain.window.window.key is None)
