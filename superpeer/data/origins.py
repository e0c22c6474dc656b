"""Where each item of a stream came from in its original stream (DESIGN.md §12).

A subscription that moves from one plan to another is switched at an item of its original
stream: the old plan delivers what comes from the items before it, the new plan what comes from
the items at and after it. For that, every item a subscription receives must say which item of
the original it was computed from — its **origin**. An original's items and a copy's are
numbered by the original's log already, so their origins are their numbers (a ``range``, never
a list); an operator chain of per-item operators (selection, projection) keeps each output's
input origin (a list); a window aggregate's output has none (None: not known).
"""

from __future__ import annotations

from collections.abc import Sequence

Origins = Sequence[int]  # a range (the items' own numbers) or a list


def joined(pieces: list[Origins | None]) -> Origins | None:
    """The origins of consecutive runs of items as one (None if any is not known)."""
    if any(p is None for p in pieces):
        return None
    if len(pieces) == 1:
        return pieces[0]
    if all(isinstance(p, range) for p in pieces) and all(a.stop == b.start for a, b in zip(pieces, pieces[1:])):
        return range(pieces[0].start, pieces[-1].stop)  # type: ignore[union-attr]
    out: list[int] = []
    for p in pieces:
        out.extend(p)  # type: ignore[arg-type]
    return out


def mergeable(first: Origins | None, second: Origins | None) -> bool:
    """Whether two runs' origins can travel in one batch: both known the same way, or neither."""
    if first is None or second is None:
        return first is None and second is None
    if isinstance(first, range) != isinstance(second, range):
        return False
    return not isinstance(first, range) or first.stop == second.start


def of_batch(numbered_by_origin: bool, explicit: Sequence[int], first: int | None, count: int) -> Origins | None:
    """A received batch's origins: its numbers, the list it carries, or None."""
    if numbered_by_origin and first is not None:
        return range(first, first + count)
    if len(explicit) == count and count:
        return list(explicit)
    return None


def picked(origins: Origins | None, offsets: Sequence[int]) -> list[int] | None:
    """The origins of the outputs of a per-item chain, from their inputs' offsets in the batch."""
    if origins is None:
        return None
    return [origins[o] for o in offsets]


FedHigh = tuple[int, int]  # the latest origin and window index a stream delivered at a peer


def fed_high(before: FedHigh | None, values: list, origins: Sequence[int] | None) -> FedHigh:
    """``before`` moved on by a batch a stream delivers here (items come in order; a window
    record says its index, an item its origin, if known)."""
    origin, index = before or (-1, -1)
    if origins is not None and len(origins):
        origin = max(origin, origins[-1])
    if values and isinstance(getattr(values[-1], "index", None), int):
        index = max(index, *(v.index for v in values if isinstance(getattr(v, "index", None), int)))
    return origin, index
