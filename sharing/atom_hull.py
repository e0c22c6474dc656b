"""The atoms two selections both imply: what a stream serving both must keep at least.

Stream widening (``widening``) offers a near miss a stream with the hull of two selections;
a subscription whose condition joins alternatives by 'or' (``property_extraction``) is
filtered upstream by the hull of its alternatives. Pure.
"""

from __future__ import annotations

from fractions import Fraction

from wxquery.operators import definitions as alg

LOWER = {">": False, ">=": True}  # op -> inclusive
UPPER = {"<": False, "<=": True}


def hull_atoms(ours: tuple[alg.Atom, ...], theirs: tuple[alg.Atom, ...]) -> tuple[alg.Atom, ...]:
    """Atoms each implied by ``ours`` and by ``theirs`` (each one alone, so also where an
    element repeats and different occurrences satisfy different atoms)."""
    a, b = _bounds(ours), _bounds(theirs)
    atoms: list[alg.Atom] = []
    for path in sorted(set(a) & set(b)):
        (lo_a, hi_a), (lo_b, hi_b) = a[path], b[path]
        if lo_a is not None and lo_b is not None:
            value, inclusive = min(lo_a, lo_b, key=lambda x: (x[0], not x[1]))
            atoms.append(alg.Atom(path, ">=" if inclusive else ">", None, value))
        if hi_a is not None and hi_b is not None:
            value, inclusive = max(hi_a, hi_b, key=lambda x: (x[0], x[1]))
            atoms.append(alg.Atom(path, "<=" if inclusive else "<", None, value))
    relations = [x for x in ours if (x.right is not None or x.on_string) and x in theirs]  # (kept if both have it)
    return tuple(atoms + relations)


Bound = tuple[Fraction, bool] | None


def _bounds(atoms: tuple[alg.Atom, ...]) -> dict[str, tuple[Bound, Bound]]:
    """Per element compared with a constant, its tightest lower and upper bound."""
    out: dict[str, tuple[Bound, Bound]] = {}
    for atom in atoms:
        if atom.right is not None or atom.on_string:
            continue
        lo, hi = out.get(atom.left, (None, None))
        c = atom.constant
        if atom.op in LOWER or atom.op == "=":
            new = (c, LOWER.get(atom.op, True))
            lo = new if lo is None else max(lo, new, key=lambda x: (x[0], not x[1]))
        if atom.op in UPPER or atom.op == "=":
            new = (c, UPPER.get(atom.op, True))
            hi = new if hi is None else min(hi, new, key=lambda x: (x[0], x[1]))
        out[atom.left] = (lo, hi)
    return out
