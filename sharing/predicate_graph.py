"""Predicate graphs: conjunctions of ``x θ c`` / ``x θ y ± c`` as weighted digraphs (DESIGN.md §4).

An atomic predicate becomes edges ``x → y`` meaning ``x ≤ y + c`` (or ``x < y + c`` when strict);
constants are compared against a node for 0. Weights are pairs ``(c, strict)`` with exact
``Fraction`` constants, so ``<`` over decimals is reasoned about exactly. Over the reals:

* the conjunction is satisfiable iff the graph has no negative cycle (a cycle whose constants sum
  below 0, or to exactly 0 through a strict edge);
* it implies ``x ≤ y + c`` iff the shortest-path closure has ``d(x, y)`` at least as tight.

This is sound *and* complete for such conjunctions, which the paper's edge-by-edge check is not
(it misses implications through chains, e.g. ``x ≤ y + 1 ∧ y ≤ 3 ⇒ x ≤ 5``).

Satisfiability, bounds, implication and minimisation all come from one closure, computed
sparsely (``difference_closure``): a query is client input, and a dense closure (or one per
edge, as minimisation once did) lets a few kilobytes of comparisons cost minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Iterable, Iterator

import networkx as nx

from wxquery.limits import Check, never_interrupted
from wxquery.operators.definitions import Atom, format_fraction

from .difference_closure import ShortestPathClosure
from .minimal_system import minimal_edges
from .string_constraints import StringConstraints

ZERO = "0"  # the node standing for the constant zero


def _canonical(node: str) -> tuple[bool, str]:
    """Node order for canonical results: the zero node first, then by name."""
    return (node != ZERO, node)


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
    """A conjunction of atoms as a networkx DiGraph whose edges carry the tightest ``Bound``.

    Every question about it is answered from one ``ShortestPathClosure`` (built on first use and
    cached; see ``difference_closure``). Its integer weights encode a bound ``(c, strict)`` as
    ``c·scale·m - strict``: ``scale`` clears the denominators, and ``m`` exceeds the number of
    edges of any simple path, so that a sum of ``k`` strict edges (``c - k·ε``, as in the
    reals-with-infinitesimal reading of ``<``) is compared exactly. Methods that may do real
    work take ``check`` (see ``wxquery.limits``), which may raise to stop them.
    """

    def __init__(self, atoms: Iterable[Atom] = ()) -> None:
        self.graph = nx.DiGraph()
        self.graph.add_node(ZERO)
        self.atoms: tuple[Atom, ...] = tuple(atoms)
        # string atoms (``x θ "c"``) are no difference constraints: decided apart, exactly
        self.strings = StringConstraints(a for a in self.atoms if a.on_string)
        for atom in self.atoms:
            if atom.on_string:
                continue
            self.graph.add_nodes_from(n for n in (atom.left, atom.right) if n is not None)
            for x, y, b in atom_edges(atom):
                self.add_edge(x, y, b)
        self._closure: tuple[int, int, ShortestPathClosure] | None = None
        self._minimized: "PredicateGraph | None" = None

    def add_edge(self, x: str, y: str, b: Bound) -> None:
        current = self.graph.get_edge_data(x, y)
        if current is None or b < current["bound"]:
            self.graph.add_edge(x, y, bound=b)
            self._closure = None
            self._minimized = None

    @property
    def variables(self) -> frozenset[str]:
        return (frozenset(n for n in self.graph.nodes if n != ZERO) | frozenset(self.strings.ranges)
                | frozenset(n for x, _, y in self.strings.relations for n in (x, y)))

    # ------------------------------------------------------------------ closure

    def _solved(self, check: Check = never_interrupted) -> tuple[int, int, ShortestPathClosure]:
        """``(scale, m, closure)``, built once."""
        if self._closure is None:
            scale = 1
            for _, _, data in self.graph.edges(data=True):
                scale = math.lcm(scale, data["bound"].c.denominator)
            m = self.graph.number_of_nodes() + 1
            succ: dict = {n: {} for n in self.graph.nodes}
            for x, y, data in self.graph.edges(data=True):
                b: Bound = data["bound"]
                c = b.c.numerator * (scale // b.c.denominator)  # exact: the scale is a multiple
                succ[x][y] = c * m - (1 - b.loose)
            closure = ShortestPathClosure(succ, check, canonical=_canonical)
            self._closure = (scale, m, closure)
        return self._closure

    @staticmethod
    def _decode(scale: int, m: int, w: int) -> Bound:
        c = -(-w // m)  # w = c·m - k with 0 <= k < m strict edges
        return Bound(Fraction(c, scale), 0 if c * m - w > 0 else 1)

    @staticmethod
    def _loosest(scale: int, m: int, b: Bound) -> int:
        """The largest encoded weight whose bound implies ``b``."""
        whole, rest = divmod(b.c.numerator * scale, b.c.denominator)  # b.c · scale
        if rest == 0:
            return whole * m - (1 - b.loose)
        return whole * m  # floor(b.c · scale): strictly below b.c, whatever the strictness

    def closure(self, check: Check = never_interrupted) -> dict[str, dict[str, Bound]]:
        """All-pairs tightest bounds of a satisfiable graph; a missing pair is unbounded. Dense:
        for small graphs and tests — the other methods never build it."""
        scale, m, closure = self._solved(check)
        if not closure.satisfiable:
            raise ValueError("an unsatisfiable conjunction implies every bound")
        out: dict[str, dict[str, Bound]] = {}
        for x in self.graph.nodes:
            out[x] = {}
            for y in self.graph.nodes:
                d = closure.distance(x, y, check)
                if d is not None:
                    out[x][y] = self._decode(scale, m, d)
        return out

    def is_satisfiable(self, check: Check = never_interrupted) -> bool:
        """No negative cycle (a cycle whose constants sum below 0, or to 0 through a strict edge),
        and a string for every element compared with strings (``string_constraints``)."""
        return self._solved(check)[2].satisfiable and self.strings.satisfiable

    def tightest(self, x: str, y: str, check: Check = never_interrupted) -> Bound | None:
        """The tightest implied bound on ``x - y`` of a satisfiable graph, or None when
        unbounded. Bounds against the zero node share one row (from it) or column (to it)."""
        scale, m, closure = self._solved(check)
        if not closure.satisfiable:
            raise ValueError("an unsatisfiable conjunction implies every bound")
        if x == y:
            return bound(0, False)
        if x not in closure.cls or y not in closure.cls:
            return None
        d = closure.distance(x, y, check, by="column" if y == ZERO and x != ZERO else "row")
        return None if d is None else self._decode(scale, m, d)

    # ------------------------------------------------------------------ implication

    def implies_edge(self, x: str, y: str, b: Bound, check: Check = never_interrupted) -> bool:
        """Whether the conjunction implies ``x - y ⊴ b``."""
        return all(self._implied([(x, y, b)], check))

    def _implied(self, edges: list[tuple[str, str, Bound]], check: Check) -> Iterator[bool]:
        """Lazily, for each ``(x, y, b)``: whether the conjunction implies ``x - y ⊴ b``."""
        scale, m, closure = self._solved(check)
        if not closure.satisfiable or not self.strings.satisfiable:
            yield from (True for _ in edges)
            return
        questions: list[tuple[str, str, int]] = []
        known: list[bool | None] = []
        for x, y, b in edges:
            if x == y:
                known.append(bound(0, False) <= b)
            elif x not in closure.cls or y not in closure.cls:
                known.append(False)
            else:
                known.append(None)
                questions.append((x, y, self._loosest(scale, m, b)))
        answers = closure.within(questions, check)
        for k in known:
            yield next(answers) if k is None else k

    def implies_atom(self, atom: Atom, check: Check = never_interrupted) -> bool:
        return self.implied_atoms([atom], check)[0]

    def implied_atoms(self, atoms: Iterable[Atom], check: Check = never_interrupted) -> list[bool]:
        """``implies_atom`` for each atom, deciding them together (fewer, shared searches)."""
        atoms = list(atoms)
        edges = [[] if a.on_string else atom_edges(a) for a in atoms]
        answers = self._implied([e for es in edges for e in es], check)
        unsatisfiable = None
        out = []
        for a, es in zip(atoms, edges):
            if a.on_string:  # (an unsatisfiable numeric part implies it too)
                if unsatisfiable is None:
                    unsatisfiable = not self._solved(check)[2].satisfiable
                out.append(unsatisfiable or self.strings.implies_atom(a))
            else:
                out.append(all([next(answers) for _ in es]))
        return out

    def implies(self, other: "PredicateGraph", check: Check = never_interrupted) -> bool:
        """``self ⇒ other`` over the reals: every edge of ``other`` is implied by the closure.

        The edges of ``other`` that share a source (or a target) are decided by one bounded
        search of the closure (``ShortestPathClosure.within``), and the first one not implied
        ends the work.

        Elements are treated as present (the reals have no 'missing'); the only case where that
        differs from stream semantics is a tautological self-comparison such as ``x <= x + 1``
        on an element that ``self`` does not test, which is then considered implied.
        """
        return (all(self._implied(list(other.graph.edges(data="bound")), check))
                and all(self.implied_atoms(other.strings.atoms(), check)))

    def equivalent(self, other: "PredicateGraph", check: Check = never_interrupted) -> bool:
        return self.implies(other, check) and other.implies(self, check)

    # ------------------------------------------------------------------ minimisation

    def minimized(self, check: Check = never_interrupted) -> "PredicateGraph":
        """An equivalent graph without redundant edges (no kept edge is implied by the others),
        read off the closure (``minimal_system``). It depends only on what the
        conjunction means, not on how it was written: equivalent conjunctions minimise to the
        same graph. Unsatisfiable graphs are returned as they are.
        """
        if self._minimized is not None:
            return self._minimized
        scale, m, closure = self._solved(check)
        if not closure.satisfiable or not self.strings.satisfiable:
            return self
        result = PredicateGraph(self.strings.atoms())  # (string atoms as written: ``StringConstraints``)
        result.graph.add_nodes_from(self.graph.nodes)
        for x, y, w in sorted(minimal_edges(closure, check), key=lambda e: (_canonical(e[0]),
                                                                        _canonical(e[1]))):
            result.graph.add_edge(x, y, bound=self._decode(scale, m, w))
        result.atoms = tuple(result.edge_atoms()) + tuple(result.strings.atoms())
        result._minimized = result  # the minimal system of a minimal system is itself
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
        out = {
            "nodes": sorted(self.graph.nodes),
            "edges": [
                {"from": x, "to": y, **data["bound"].to_json()}
                for x, y, data in sorted(self.graph.edges(data=True), key=lambda e: (e[0], e[1]))
            ],
        }
        if self.strings.original:
            out["strings"] = [str(a) for a in self.strings.atoms()]
        return out


@lru_cache(maxsize=8192)
def graph_of(atoms: tuple[Atom, ...]) -> PredicateGraph:
    """The (shared, cached) graph of a conjunction; treat the result as read-only."""
    return PredicateGraph(atoms)
