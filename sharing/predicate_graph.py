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

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

import networkx as nx

from wxquery.algebra import Atom, format_fraction

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
        self._closure: dict[str, dict[str, Bound]] | None = None
        self._satisfiable: bool | None = None

    def add_edge(self, x: str, y: str, b: Bound) -> None:
        current = self.graph.get_edge_data(x, y)
        if current is None or b < current["bound"]:
            self.graph.add_edge(x, y, bound=b)

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(n for n in self.graph.nodes if n != ZERO)

    # ------------------------------------------------------------------ closure

    def closure(self) -> dict[str, dict[str, Bound]]:
        """All-pairs tightest bounds (Floyd–Warshall over ``Bound``); missing pair = unbounded."""
        if self._closure is None:
            nodes = list(self.graph.nodes)
            dist: dict[str, dict[str, Bound]] = {n: {} for n in nodes}
            for x, y, data in self.graph.edges(data=True):
                dist[x][y] = data["bound"]
            for k in nodes:
                dk = dist[k]
                for i in nodes:
                    di = dist[i]
                    ik = di.get(k)
                    if ik is None:
                        continue
                    for j, kj in dk.items():
                        candidate = ik + kj
                        current = di.get(j)
                        if current is None or candidate < current:
                            di[j] = candidate
            self._closure = dist
        return self._closure

    def is_satisfiable(self) -> bool:
        """No negative cycle: every ``d(x, x)`` is at least ``0`` non-strict."""
        if self._satisfiable is None:
            zero = bound(0, False)
            dist = self.closure()
            self._satisfiable = all(dist[n].get(n, zero) >= zero for n in dist)
        return self._satisfiable

    def tightest(self, x: str, y: str) -> Bound | None:
        """The tightest implied bound on ``x - y``, or None when unbounded."""
        if x == y:
            own = self.closure().get(x, {}).get(x)
            zero = bound(0, False)
            return own if own is not None and own < zero else zero
        return self.closure().get(x, {}).get(y)

    # ------------------------------------------------------------------ implication

    def implies_edge(self, x: str, y: str, b: Bound) -> bool:
        if not self.is_satisfiable():
            return True
        t = self.tightest(x, y)
        return t is not None and t.implies(b)

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
