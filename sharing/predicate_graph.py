"""Predicate graphs: conjunctions of ``x θ c`` / ``x θ y ± c`` as weighted digraphs (DESIGN.md §4).

An atomic predicate becomes edges ``x → y`` meaning ``x ≤ y + c`` (or ``x < y + c`` when strict);
constants are compared against a node for 0. Weights are pairs ``(c, strict)`` with exact
``Fraction`` constants, so ``<`` over decimals is reasoned about exactly. Over the reals:

* the conjunction is satisfiable iff the graph has no negative cycle (a cycle whose constants sum
  below 0, or to exactly 0 through a strict edge);
* it implies ``x ≤ y + c`` iff the shortest-path closure has ``d(x, y)`` at least as tight.

This is sound *and* complete for such conjunctions, which the paper's edge-by-edge check is not
(it misses implications through chains, e.g. ``x ≤ y + 1 ∧ y ≤ 3 ⇒ x ≤ 5``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from fractions import Fraction
from typing import Iterable

import networkx as nx

from wxquery.operators.definitions import Atom, format_fraction

ZERO = "0"  # the node standing for the constant zero


@dataclass(frozen=True, order=True)
class Bound:
    """The weight of ``x → y``: ``x - y ≤ c`` (``<`` when strict).

    Ordered by tightness: a smaller constant is tighter, and at equal constants the strict bound
    is tighter; ``Bound(c, True) < Bound(c, False)`` because ``(c, 0) < (c, 1)``.
    """

    c: Fraction
    loose: int  # 0 = strict (<), 1 = non-strict (<=); kept as int for the ordering

    @property
    def strict(self) -> bool:
        return self.loose == 0

    def __add__(self, other: "Bound") -> "Bound":
        return Bound(self.c + other.c, min(self.loose, other.loose))

    def implies(self, other: "Bound") -> bool:
        """Whether ``x - y ⊴ self`` guarantees ``x - y ⊴ other``."""
        return self <= other

    def to_json(self) -> dict:
        return {"weight": format_fraction(self.c), "strict": self.strict}


def bound(c: Fraction | int | str, strict: bool) -> Bound:
    return Bound(Fraction(c), 0 if strict else 1)


def atom_edges(atom: Atom) -> list[tuple[str, str, Bound]]:
    """The ``x - y ⊴ c`` edges of an atomic predicate."""
    x = atom.left
    y = atom.right if atom.right is not None else ZERO
    c = atom.constant
    op = atom.op
    if op == "<=":
        return [(x, y, bound(c, False))]
    if op == "<":
        return [(x, y, bound(c, True))]
    if op == ">=":  # x >= y + c  <=>  y - x <= -c
        return [(y, x, bound(-c, False))]
    if op == ">":
        return [(y, x, bound(-c, True))]
    return [(x, y, bound(c, False)), (y, x, bound(-c, False))]


class PredicateGraph:
    """A conjunction of atoms as a networkx DiGraph whose edges carry the tightest ``Bound``."""

    def __init__(self, atoms: Iterable[Atom] = ()) -> None:
        self.graph = nx.DiGraph()
        self.graph.add_node(ZERO)
        self.atoms: tuple[Atom, ...] = tuple(atoms)
        for atom in self.atoms:
            self.graph.add_nodes_from(n for n in (atom.left, atom.right) if n is not None)
            for x, y, b in atom_edges(atom):
                self.add_edge(x, y, b)
        self._dist: dict[str, dict[str, tuple[int, int]]] | None = None
        self._scale = 1
        self._satisfiable: bool | None = None
        self._minimized: "PredicateGraph | None" = None

    def add_edge(self, x: str, y: str, b: Bound) -> None:
        current = self.graph.get_edge_data(x, y)
        if current is None or b < current["bound"]:
            self.graph.add_edge(x, y, bound=b)
            self._dist = None
            self._satisfiable = None
            self._minimized = None

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(n for n in self.graph.nodes if n != ZERO)

    # ------------------------------------------------------------------ closure

    def _scaled(self) -> tuple[int, dict[str, dict[str, tuple[int, int]]]]:
        """All-pairs tightest bounds (Floyd–Warshall), constants scaled to integers by the
        common denominator so that the inner loop does no Fraction arithmetic."""
        if self._dist is None:
            scale = 1
            for _, _, data in self.graph.edges(data=True):
                scale = math.lcm(scale, data["bound"].c.denominator)
            nodes = list(self.graph.nodes)
            dist: dict[str, dict[str, tuple[int, int]]] = {n: {} for n in nodes}
            for x, y, data in self.graph.edges(data=True):
                b = data["bound"]
                dist[x][y] = (int(b.c * scale), b.loose)
            for k in nodes:
                dk = dist[k]
                for i in nodes:
                    di = dist[i]
                    ik = di.get(k)
                    if ik is None:
                        continue
                    for j, kj in dk.items():
                        cand = (ik[0] + kj[0], ik[1] if ik[1] < kj[1] else kj[1])
                        cur = di.get(j)
                        if cur is None or cand < cur:
                            di[j] = cand
            self._scale, self._dist = scale, dist
        return self._scale, self._dist

    def closure(self) -> dict[str, dict[str, Bound]]:
        """All-pairs tightest bounds; a missing pair is unbounded."""
        scale, dist = self._scaled()
        return {x: {y: Bound(Fraction(c, scale), loose) for y, (c, loose) in row.items()}
                for x, row in dist.items()}

    def is_satisfiable(self) -> bool:
        """No negative cycle: every ``d(x, x)`` is at least ``0`` non-strict."""
        if self._satisfiable is None:
            _, dist = self._scaled()
            self._satisfiable = all(row.get(n, (0, 1)) >= (0, 1) for n, row in dist.items())
        return self._satisfiable

    def tightest(self, x: str, y: str) -> Bound | None:
        """The tightest implied bound on ``x - y``, or None when unbounded."""
        scale, dist = self._scaled()
        if x == y:
            own = dist.get(x, {}).get(x)
            if own is not None and own < (0, 1):
                return Bound(Fraction(own[0], scale), own[1])
            return bound(0, False)
        t = dist.get(x, {}).get(y)
        return None if t is None else Bound(Fraction(t[0], scale), t[1])

    # ------------------------------------------------------------------ implication

    def implies_edge(self, x: str, y: str, b: Bound) -> bool:
        if not self.is_satisfiable():
            return True
        if x == y:
            return bound(0, False) <= b or (self.tightest(x, x) or bound(0, False)) <= b
        scale, dist = self._scaled()
        t = dist.get(x, {}).get(y)
        if t is None:
            return False
        # t/scale ⊴ b.c, compared without fractions
        lhs, rhs = t[0] * b.c.denominator, b.c.numerator * scale
        return lhs < rhs or (lhs == rhs and t[1] <= b.loose)

    def implies_atom(self, atom: Atom) -> bool:
        return all(self.implies_edge(x, y, b) for x, y, b in atom_edges(atom))

    def implies(self, other: "PredicateGraph") -> bool:
        """``self ⇒ other`` over the reals: every edge of ``other`` is implied by the closure.

        Elements are treated as present (the reals have no 'missing'); the only case where that
        differs from stream semantics is a tautological self-comparison such as ``x <= x + 1``
        on an element that ``self`` does not test, which is then considered implied.
        """
        if not self.is_satisfiable():
            return True
        for x, y, data in other.graph.edges(data=True):
            if not self.implies_edge(x, y, data["bound"]):
                return False
        return True

    def equivalent(self, other: "PredicateGraph") -> bool:
        return self.implies(other) and other.implies(self)

    # ------------------------------------------------------------------ minimisation

    def minimized(self) -> "PredicateGraph":
        """An equivalent graph without redundant edges (no kept edge is implied by the others).

        Greedy over the closure's edges in a fixed order: an edge is dropped when the edges still
        kept imply it. Checking against the *remaining* edges (not the full closure) keeps
        equality cycles from making each other redundant. Unsatisfiable graphs are returned as
        they are.
        """
        if not self.is_satisfiable():
            return self
        if self._minimized is not None:
            return self._minimized
        kept = {(x, y): b for x, row in self.closure().items() for y, b in row.items() if x != y}
        for edge in sorted(kept, key=lambda e: (e[0], e[1])):
            b = kept.pop(edge)
            rest = PredicateGraph()
            rest.graph.add_nodes_from(self.graph.nodes)
            for (x, y), bb in kept.items():
                rest.add_edge(x, y, bb)
            if not rest.implies_edge(edge[0], edge[1], b):
                kept[edge] = b
        result = PredicateGraph()
        result.graph.add_nodes_from(self.graph.nodes)
        for (x, y), b in kept.items():
            result.add_edge(x, y, b)
        result.atoms = tuple(result.edge_atoms())
        self._minimized = result
        return result

    def edge_atoms(self) -> list[Atom]:
        out = []
        for x, y, data in self.graph.edges(data=True):
            b: Bound = data["bound"]
            op = "<" if b.strict else "<="
            if y == ZERO:
                out.append(Atom(x, op, None, b.c))
            elif x == ZERO:  # 0 - y ⊴ c  <=>  y ⊵ -c
                out.append(Atom(y, ">" if b.strict else ">=", None, -b.c))
            else:
                out.append(Atom(x, op, y, b.c))
        return out

    def to_json(self) -> dict:
        return {
            "nodes": sorted(self.graph.nodes),
            "edges": [
                {"from": x, "to": y, **data["bound"].to_json()}
                for x, y, data in sorted(self.graph.edges(data=True), key=lambda e: (e[0], e[1]))
            ],
        }


@lru_cache(maxsize=8192)
def graph_of(atoms: tuple[Atom, ...]) -> PredicateGraph:
    """The (shared, cached) graph of a conjunction; treat the result as read-only."""
    return PredicateGraph(atoms)
