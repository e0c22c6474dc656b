"""A shared predicate index: the selections of many chains on one parent answered together.

A super-peer that serves many subscriptions runs many chains on the same stream, and most of
them select ranges of a few elements (a sky region's ``ra`` and ``dec``, an energy band).
Evaluated one by one, every chain compares every item of a batch, and the cost per item grows
with the number of chains. This is the grouped filter of CACQ and PSoup's query SteM, in a form
that suits batches:

* per batch, a **key** column is sorted once, and every chain's interval on it becomes two
  binary searches — all chains' searches in one vectorised call;
* the rows inside the chains' intervals are laid end to end, and each chain's intervals on the
  other elements are tested on them in one vectorised comparison per element, for all chains;
* a chain learns its rows only if it has any; one whose intervals hold no row of the batch
  costs nothing more.

The work per batch grows with the logarithm of the chains and with what they select, not with how
many there are. It is exactly the selection ``selection_mask`` makes: a chain's atoms ``x θ c``
on one element (θ in ``= < <= > >=``) are one interval of doubles, the conjunction of
``Comparison``'s tests, which compare as IEEE doubles; NaN — a missing or non-numeric value,
which satisfies no atom — sorts after every number, outside every interval, and fails every
bound. Atoms relating two elements, and atoms on an element that is not one value per item in a
batch (repeated or missing elements: a list column), are left to the chain, tested on its rows
(``batch.selected_rows``); a key that is not one value per item leaves its chains to be
evaluated one by one for that batch.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .batch import ItemBatch
from .definitions import Atom

NO_ROWS = np.empty(0, dtype=np.intp)  # a covered chain's rows when its intervals hold none
INDEX_FROM = 8  # chains that share a key before it is worth sorting the key column per batch
# A chain whose key interval holds more than this share of a batch tests every row instead: its
# candidates would cost more to gather and order than a comparison per row.
WIDE = 0.25
_LOWER, _UPPER = ("=", ">=", ">"), ("=", "<=", "<")


@dataclass(frozen=True)
class Interval:
    """The conjunction of atoms ``x θ c`` on one element."""

    lo: float = -math.inf
    lo_strict: bool = False
    hi: float = math.inf
    hi_strict: bool = False

    @classmethod
    def of(cls, atoms: Iterable[Atom]) -> Interval:
        lo, lo_strict, hi, hi_strict = -math.inf, False, math.inf, False
        for atom in atoms:
            c = float(atom.constant)  # (as ``Comparison`` casts it)
            if atom.op in _LOWER and (c > lo or (c == lo and atom.op == ">")):
                lo, lo_strict = c, atom.op == ">"
            if atom.op in _UPPER and (c < hi or (c == hi and atom.op == "<")):
                hi, hi_strict = c, atom.op == "<"
        return cls(lo, lo_strict, hi, hi_strict)


@dataclass(frozen=True)
class ChainAtoms:
    """One chain's selection as the index reads it."""

    chain: Hashable  # the chain's name where it runs (its stream, or its id)
    key: str  # the element it is indexed by
    intervals: dict[str, Interval]  # per element compared with constants (the key among them)
    by_element: dict[str, tuple[Atom, ...]]  # the atoms behind each interval
    relational: tuple[Atom, ...]  # atoms comparing two elements, or as strings: tested by the chain


def chain_atoms(chain: Hashable, atoms: Sequence[Atom]) -> ChainAtoms | None:
    """How a chain is indexed (None: no atom compares an element with a constant). The key is
    an element bounded on both sides where there is one: its interval is narrower, so fewer rows
    are read."""
    by_element: dict[str, list[Atom]] = defaultdict(list)
    for atom in atoms:
        if atom.right is None and not atom.on_string:
            by_element[atom.left].append(atom)
    if not by_element:
        return None

    def sides(element: str) -> int:
        ops = {a.op for a in by_element[element]}
        return int(bool(ops & set(_LOWER)) and bool(ops & set(_UPPER)))

    key = max(by_element, key=sides)  # (the first of the best)
    return ChainAtoms(chain, key, {e: Interval.of(a) for e, a in by_element.items()},
                      {e: tuple(a) for e, a in by_element.items()},
                      tuple(a for a in atoms if a.right is not None or a.on_string))


class _Bounds:
    """The chains' intervals on one element, as arrays (a chain without one: ``has`` false)."""

    def __init__(self, element: str, chains: list[ChainAtoms]) -> None:
        self.element = element
        found = [c.intervals.get(element) for c in chains]
        self.has = np.array([i is not None for i in found])
        whole = Interval()
        self.lo = np.array([(i or whole).lo for i in found])
        self.lo_strict = np.array([(i or whole).lo_strict for i in found])
        self.hi = np.array([(i or whole).hi for i in found])
        self.hi_strict = np.array([(i or whole).hi_strict for i in found])

    def holds(self, values: np.ndarray, which: np.ndarray) -> np.ndarray:
        """Per candidate row (its value here, its chain's position), whether it is inside its
        chain's interval or its chain has none."""
        lo, hi = self.lo[which], self.hi[which]
        inside = (np.where(self.lo_strict[which], values > lo, values >= lo)
                  & np.where(self.hi_strict[which], values < hi, values <= hi))
        return inside | ~self.has[which]


class _Key:
    """The chains indexed by one element."""

    def __init__(self, element: str, chains: list[ChainAtoms]) -> None:
        self.element = element
        self.chains = chains
        self.names = frozenset(c.chain for c in chains)
        self.key = _Bounds(element, chains)
        others = sorted({e for c in chains for e in c.intervals} - {element})
        self.others = [_Bounds(e, chains) for e in others]

    def select(self, batch: ItemBatch) -> tuple[dict[Hashable, tuple[np.ndarray, tuple[Atom, ...]]], list[Hashable]] | None:
        """Per chain whose intervals hold rows of the batch, those rows (ascending) and the
        atoms it must still test on them; and the chains whose key interval holds so much of the
        batch that testing every row is cheaper (left to themselves). None: the key is not one
        value per item here."""
        col = batch.column(self.element)
        if not isinstance(col, np.ndarray):
            return None
        order = np.argsort(col, kind="stable")
        ordered = col[order]
        k = self.key
        start = np.where(k.lo_strict, np.searchsorted(ordered, k.lo, "right"),
                         np.searchsorted(ordered, k.lo, "left"))
        end = np.where(k.hi_strict, np.searchsorted(ordered, k.hi, "left"),
                       np.searchsorted(ordered, k.hi, "right"))
        lengths = end - start
        wide = lengths > col.size * WIDE
        apart = [self.chains[i].chain for i in np.flatnonzero(wide).tolist()]
        hit = np.flatnonzero((lengths > 0) & ~wide)
        if not hit.size:
            return {}, apart
        # the candidates of every chain with any, end to end (chain by chain): rows and chains
        lengths = lengths[hit]
        firsts = np.cumsum(lengths) - lengths
        at = np.arange(int(lengths.sum())) + np.repeat(start[hit] - firsts, lengths)
        rows = order[at]
        which = np.repeat(hit, lengths)
        keep = np.ones(rows.size, dtype=bool)
        left_to_chain: list[_Bounds] = []
        for bounds in self.others:
            other = batch.column(bounds.element)
            if isinstance(other, np.ndarray):
                keep &= bounds.holds(other[rows], which)
            else:
                left_to_chain.append(bounds)
        rows, which = rows[keep], which[keep]
        if not rows.size:
            return {}, apart
        cuts = np.flatnonzero(np.diff(which)) + 1  # (still chain by chain)
        out: dict[Hashable, tuple[np.ndarray, tuple[Atom, ...]]] = {}
        for piece, position in zip(np.split(rows, cuts), which[np.r_[0, cuts]].tolist()):
            chain = self.chains[position]
            later = chain.relational
            for bounds in left_to_chain:
                later += chain.by_element.get(bounds.element, ())
            piece.sort()  # (the key's order: each chain's rows go in the batch's)
            out[chain.chain] = (piece, later)
        return out, apart


@dataclass
class Selected:
    """A batch's answer: ``rows`` per chain whose intervals hold rows (ascending, with the
    atoms left to test on them); a chain in ``covered`` but not in ``rows`` selects nothing; a
    chain in neither is evaluated one by one."""

    covered: frozenset[Hashable]
    rows: dict[Hashable, tuple[np.ndarray, tuple[Atom, ...]]]


class PredicateIndex:
    """The chains of one parent grouped by key element; ``select`` answers a batch.

    ``chains`` are ``(a name for the chain, its selection atoms)``. Only keys that
    ``index_from`` chains or more share are indexed; the other chains are never ``covered``."""

    def __init__(self, chains: Iterable[tuple[Hashable, Sequence[Atom]]], index_from: int = INDEX_FROM) -> None:
        by_key: dict[str, list[ChainAtoms]] = defaultdict(list)
        for name, atoms in chains:
            found = chain_atoms(name, atoms)
            if found is not None:
                by_key[found.key].append(found)
        self.keys = [_Key(element, found) for element, found in by_key.items() if len(found) >= index_from]
        self.indexed = frozenset(name for key in self.keys for name in key.names)

    def select(self, batch: ItemBatch) -> Selected:
        rows: dict[Hashable, tuple[np.ndarray, tuple[Atom, ...]]] = {}
        covered = self.indexed
        for key in self.keys:
            found = key.select(batch)
            if found is None:
                covered = covered - key.names
            else:
                rows.update(found[0])
                if found[1]:
                    covered = covered - frozenset(found[1])
        return Selected(covered, rows)
