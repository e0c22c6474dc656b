"""The band of a window join: what lets a join of two live streams stream.

``for $p in stream("photons")/… for $a in stream("alerts")/… where $a/t >= $p/t - 5 and
$a/t <= $p/t + 2 …`` is XQuery's nested loop: for each outer item, every inner item in
document order. Over live streams that loop could never finish its first outer item — the inner
stream has no end. But the inner items that can match lie in a **band** around the outer item,
``[$p/t - 5, $p/t + 2]``; if both inputs come in non-decreasing order of their band elements —
the contract a time window puts on its reference element (DESIGN §3) — then an outer item's
matches are all known once the inner input has passed the band's end, and inner items below the
band of the latest outer item are never needed again. The results are then exactly the nested
loop's, in its order; what the inner input keeps is its band, and what it runs ahead of the
outer input.

This module finds the band in a query (pure: ``superpeer.subscriptions.join_feeds`` runs it).
A band needs both a lower and an upper bound of one inner element relative to one outer
element, each an atom ``x θ y ± c`` of the FLWR's ``where`` clause, compared as numbers (two
elements compared without ``± c`` compare as strings, which orders nothing). The outer input is
the FLWR's first clause, the inner a later one of the same FLWR, both bound to whole stream
items without a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from . import ast
from .operators.comparisons import MIRRORED
from .operators.definitions import Atom, offset_text
from .static_checks import CheckedQuery

# x θ y + c as a bound on x: θ → (lower, upper)
BOUNDS = {"=": (True, True), "<": (False, True), "<=": (False, True), ">": (True, False), ">=": (True, False)}


@dataclass(frozen=True)
class Band:
    """The inner input's ``inner_path`` lies within ``[outer + low, outer + high]`` of the outer
    input's ``outer_path`` (inclusive: the where clause decides strictness exactly)."""

    outer: str  # variables
    inner: str
    outer_path: str
    inner_path: str
    low: Fraction
    high: Fraction

    def __str__(self) -> str:
        o = f"${self.outer}/{self.outer_path}"
        return f"${self.inner}/{self.inner_path} within [{o}{offset_text(self.low)}, {o}{offset_text(self.high)}]"


def join_bands(checked: CheckedQuery) -> list[Band]:
    """The bands of the joins of a query's top-level FLWRs (``ast.top_level_flwrs``: those its evaluation
    runs once): at most one per inner
    input, and one element per outer input."""
    return [band for flwr in ast.top_level_flwrs(checked.query.body) for band in _flwr_bands(checked, flwr)]


def network_band(checked: CheckedQuery) -> Band | None:
    """The band of a join that may run in the network, one step before the subscriber
    (``sharing.join_planning``): the query's one top-level FLWR has exactly two clauses, both
    ``for`` clauses over whole stream items, with a band between them. Its groups — each outer
    item with the inner items of its band — then hold every pair the nested loop needs."""
    flwrs = list(ast.top_level_flwrs(checked.query.body))
    if len(flwrs) != 1 or len(flwrs[0].clauses) != 2:
        return None
    bands = _flwr_bands(checked, flwrs[0])
    return bands[0] if len(bands) == 1 else None


def network_keys(checked: CheckedQuery, band: Band) -> tuple[Atom, ...]:
    """The equalities between the two inputs of a join that may run in the network
    (``network_band``), each a key its joining peer applies to the groups: an atom
    ``$inner/x = $outer/y`` of the where clause's top-level 'and', compared as it is written —
    as strings, or as numbers with ``+ c`` — as ``Atom(x, "=", y, c)`` (left: the inner item's
    path). ``$outer/y = $inner/x`` is one too, unless it adds a non-zero constant to the inner
    side (``y = x + c`` is not ``x = y - c`` in doubles). Sorted: the same keys, the same
    joined stream."""
    flwr = next(iter(ast.top_level_flwrs(checked.query.body)))
    keys = set()
    for atom in flwr.where.atoms if flwr.where is not None else ():
        if atom.op != "=" or atom.right is None:
            continue
        constant = checked.compared_constant(atom)
        x, y = _plain(atom.left, band.inner), _plain(atom.right, band.outer)
        if (x is None or y is None) and (isinstance(constant, str) or constant == 0):
            x, y = _plain(atom.right, band.inner), _plain(atom.left, band.outer)
        if x is not None and y is not None:
            keys.add(Atom(x, "=", y, constant))
    return tuple(sorted(keys, key=str))


def key_text(band: Band, key: Atom) -> str:
    """A key as the query writes it: ``$a/author = $p/src``, ``$a/id = $p/id + 0``."""
    offset = "" if isinstance(key.constant, str) else (offset_text(key.constant) or " + 0")
    return f"${band.inner}/{key.left} = ${band.outer}/{key.right}{offset}"


def _whole_items(checked: CheckedQuery, clause: ast.Clause) -> bool:
    """Whether a clause binds whole stream items one at a time (what a join's feed holds)."""
    if not isinstance(clause, ast.ForClause) or clause.window is not None:
        return False
    binding = checked.clauses.get(id(clause))
    return (binding is not None and binding.kind == "item" and binding.stream is not None
            and not binding.sub_path and isinstance(clause.source.root, ast.StreamCall))


def _flwr_bands(checked: CheckedQuery, flwr: ast.FLWR) -> list[Band]:
    if not flwr.clauses or not _whole_items(checked, flwr.clauses[0]) or flwr.where is None:
        return []
    outer = flwr.clauses[0]
    assert isinstance(outer, ast.ForClause)
    bands: list[Band] = []
    for clause in flwr.clauses[1:]:
        if _whole_items(checked, clause):
            assert isinstance(clause, ast.ForClause)
            band = _band(outer.var, clause.var, flwr.where)
            # (several inner inputs may share the outer one: on the same outer element)
            if band is not None and all(b.outer_path == band.outer_path for b in bands):
                bands.append(band)
    return bands


def _plain(p: ast.PathExpr | None, var: str) -> str | None:
    """The item-relative path of a predicate-free path from ``$var`` (None if it is not one)."""
    if p is None or not isinstance(p.root, ast.VarRef) or p.root.name != var or p.has_predicates or not p.names:
        return None
    return "/".join(p.names)


def _band(outer: str, inner: str, where: ast.Conjunction) -> Band | None:
    """The narrowest band the numeric atoms between the two inputs give, if any has both ends."""
    lows: dict[tuple[str, str], Fraction] = {}
    highs: dict[tuple[str, str], Fraction] = {}
    for atom in where.atoms:
        if not isinstance(atom.constant, ast.Number):  # (strings, and two paths compared as strings)
            continue
        op, c = atom.op, atom.constant.value
        x, y = _plain(atom.left, inner), _plain(atom.right, outer)
        if x is None or y is None:  # outer θ inner + c is inner θ' outer - c
            x, y = _plain(atom.right, inner), _plain(atom.left, outer)
            op, c = MIRRORED[op], -c
        if x is None or y is None:
            continue
        lower, upper = BOUNDS[op]
        if lower:
            lows[x, y] = max(lows.get((x, y), c), c)
        if upper:
            highs[x, y] = min(highs.get((x, y), c), c)
    both = [(highs[k] - lows[k], k) for k in lows if k in highs and lows[k] <= highs[k]]
    if not both:
        return None
    _, (x, y) = min(both)
    return Band(outer, inner, y, x, lows[x, y], highs[x, y])
