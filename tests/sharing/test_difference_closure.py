"""The sparse closure against a brute-force reference (Floyd–Warshall over exact bounds, as the
predicate graphs used to do it) and against z3, on random small conjunctions rich in ties,
equalities, strict bounds and zero cycles; and the work it does on large ones."""

from __future__ import annotations

import random
from contextlib import contextmanager
from fractions import Fraction

import networkx as nx
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from sharing import minimal_system
from sharing.difference_closure import potentials
from sharing.predicate_graph import ZERO, Atom, Bound, PredicateGraph, atom_edges, bound
from wxquery.limits import AnalysisInterrupted

VARS = ["a", "b", "c", "d", "e", "f"]
OPS = ["=", "<", "<=", ">", ">="]

# Few distinct constants, so that ties, zero cycles and parallel equal constraints are common.
constants = st.builds(Fraction, st.integers(-2, 2), st.sampled_from([1, 1, 1, 2, 3]))
atoms = st.builds(Atom, st.sampled_from(VARS), st.sampled_from(OPS),
                  st.one_of(st.none(), st.sampled_from(VARS)), constants)
conjunctions = st.lists(atoms, min_size=0, max_size=10)


# ---------------------------------------------------------------------- the brute-force reference

def reference_closure(p: list[Atom]) -> tuple[bool, dict[tuple[str, str], Bound]]:
    """Floyd–Warshall over ``Bound`` (satisfiable?, tightest bound per reachable pair)."""
    nodes = {ZERO} | {n for a in p for n in (a.left, a.right) if n is not None}
    dist: dict[tuple[str, str], Bound] = {}
    for a in p:
        for x, y, b in atom_edges(a):
            if (x, y) not in dist or b < dist[x, y]:
                dist[x, y] = b
    for k in nodes:
        for i in nodes:
            if (i, k) not in dist:
                continue
            for j in nodes:
                if (k, j) in dist:
                    cand = dist[i, k] + dist[k, j]
                    if (i, j) not in dist or cand < dist[i, j]:
                        dist[i, j] = cand
    satisfiable = all(dist.get((n, n), bound(0, False)) >= bound(0, False) for n in nodes)
    return satisfiable, dist


def reference_implies(dist: dict[tuple[str, str], Bound], x: str, y: str, b: Bound) -> bool:
    if x == y:
        return bound(0, False) <= b
    return (x, y) in dist and dist[x, y] <= b


def z3_equivalent(p: list[Atom], q: list[Atom]) -> bool:
    env = {v: z3.Real(v) for v in VARS}

    def conj(atoms_: list[Atom]) -> z3.BoolRef:
        terms = []
        for a in atoms_:
            left = env[a.left]
            right = (env[a.right] if a.right is not None else 0) + z3.RealVal(str(a.constant))
            terms.append({"=": left == right, "<": left < right, "<=": left <= right,
                          ">": left > right, ">=": left >= right}[a.op])
        return z3.And(*terms) if terms else z3.BoolVal(True)

    s = z3.Solver()
    s.add(conj(p) != conj(q))
    return s.check() == z3.unsat


# ---------------------------------------------------------------------- satisfiability, bounds

@settings(max_examples=600, deadline=None)
@given(conjunctions)
def test_satisfiability_and_every_bound_match_the_reference(p: list[Atom]):
    satisfiable, dist = reference_closure(p)
    g = PredicateGraph(p)
    assert g.is_satisfiable() == satisfiable
    if not satisfiable:
        return
    nodes = list(g.graph.nodes)
    for x in nodes:
        for y in nodes:
            expected = bound(0, False) if x == y else dist.get((x, y))
            assert g.tightest(x, y) == expected, (x, y)


@settings(max_examples=600, deadline=None)
@given(conjunctions, st.lists(st.tuples(st.sampled_from(VARS + [ZERO]), st.sampled_from(VARS + [ZERO]),
                                        constants, st.booleans()), min_size=1, max_size=6))
def test_single_bounds_by_bounded_search_match_the_reference(p, queries):
    """A fresh graph per question: the bounded Dijkstra, not a cached row, decides it."""
    satisfiable, dist = reference_closure(p)
    for x, y, c, strict in queries:
        b = bound(c, strict)
        expected = True if not satisfiable else reference_implies(dist, x, y, b)
        assert PredicateGraph(p).implies_edge(x, y, b) == expected, (x, y, b)


@settings(max_examples=400, deadline=None)
@given(conjunctions, conjunctions)
def test_implication_between_graphs_matches_the_reference(p: list[Atom], q: list[Atom]):
    satisfiable, dist = reference_closure(p)
    expected = not satisfiable or all(reference_implies(dist, x, y, b)
                                      for a in q for x, y, b in atom_edges(a))
    assert PredicateGraph(p).implies(PredicateGraph(q)) == expected


# ---------------------------------------------------------------------- minimisation

@contextmanager
def hubs(min_degree: int | None):
    """Minimisation with hubs of at least ``min_degree`` edges (None: the defaults), so that
    small graphs exercise both ways of deciding an edge."""
    saved = minimal_system.HUB_MIN_DEGREE, minimal_system.HUB_SQRT_FACTOR
    if min_degree is not None:
        minimal_system.HUB_MIN_DEGREE, minimal_system.HUB_SQRT_FACTOR = min_degree, 0
    try:
        yield
    finally:
        minimal_system.HUB_MIN_DEGREE, minimal_system.HUB_SQRT_FACTOR = saved


HUB_SETTINGS = st.sampled_from([None, 0, 3])


@settings(max_examples=600, deadline=None)
@given(conjunctions, HUB_SETTINGS)
def test_minimized_is_equivalent_irredundant_and_idempotent(p: list[Atom], hub_degree):
    with hubs(hub_degree):
        _check_minimized(p)


def _check_minimized(p: list[Atom]) -> None:
    g = PredicateGraph(p)
    if not g.is_satisfiable():
        assert g.minimized() is g
        return
    m = list(g.minimized().atoms)
    assert z3_equivalent(m, p)
    for i, atom in enumerate(m):
        rest_sat, rest = reference_closure(m[:i] + m[i + 1:])
        assert rest_sat
        assert not all(reference_implies(rest, x, y, b) for x, y, b in atom_edges(atom)), \
            f"{atom} is implied by the other kept atoms of {m}"
    again = PredicateGraph(m).minimized()
    assert again.to_json()["edges"] == g.minimized().to_json()["edges"]


@settings(max_examples=400, deadline=None)
@given(conjunctions, st.randoms(use_true_random=False), HUB_SETTINGS, HUB_SETTINGS)
def test_equivalent_conjunctions_minimise_to_the_same_graph(p: list[Atom], rnd: random.Random,
                                                            hubs_p, hubs_q):
    """The minimal graph depends on the meaning only: adding implied atoms (from the closure)
    and reordering gives the same result."""
    satisfiable, dist = reference_closure(p)
    if not satisfiable:
        return
    implied = [Atom(x, "<" if b.strict else "<=", y, b.c) if y != ZERO and x != ZERO
               else Atom(x, "<" if b.strict else "<=", None, b.c) if x != ZERO
               else Atom(y, ">" if b.strict else ">=", None, -b.c)
               for (x, y), b in dist.items() if x != y and not (x == ZERO and y == ZERO)]
    q = p + rnd.sample(implied, min(len(implied), 5))
    rnd.shuffle(q)
    with hubs(hubs_p):
        mp = PredicateGraph(p).minimized().to_json()["edges"]
    with hubs(hubs_q):
        mq = PredicateGraph(q).minimized().to_json()["edges"]
    assert mq == mp


# ---------------------------------------------------------------------- potentials

@settings(max_examples=500, deadline=None)
@given(st.integers(1, 7).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(-4, 6)),
                         max_size=16))))
def test_potentials_exist_iff_there_is_no_negative_cycle(case):
    n, edges = case
    succ: dict = {i: {} for i in range(n)}
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for u, v, w in edges:
        succ[u][v] = min(w, succ[u].get(v, w))
        g.add_edge(u, v, weight=succ[u][v])
    h = potentials(succ)
    assert (h is None) == nx.negative_edge_cycle(g)
    if h is not None:
        assert all(h[v] <= h[u] + w for u in succ for v, w in succ[u].items())


# ---------------------------------------------------------------------- large graphs

def chain(n: int, reverse: bool = False, strict: bool = False) -> list[Atom]:
    """``v0 >= v1 + 1 and v1 >= v2 + 1 and ...`` (the chain form of the query-cost issue)."""
    out = [Atom(f"v{i}", ">" if strict else ">=", f"v{i + 1}", Fraction(1)) for i in range(n)]
    return out[::-1] if reverse else out


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


@pytest.mark.parametrize("reverse", [False, True])
def test_a_long_chain_costs_linear_work(reverse: bool):
    """4,000 atoms, written in either order: satisfiability, minimisation and the implied bound
    end to end take a number of steps linear in the atoms (the old code: a Floyd–Warshall per
    closure edge, >300 s and 6.5 GB)."""
    n = 4000
    g = PredicateGraph(chain(n, reverse))
    work = Counter()
    assert g.is_satisfiable(work)
    m = g.minimized(work)
    assert set(m.atoms) == {Atom(a.right, "<=", a.left, Fraction(-1)) for a in chain(n)}
    assert g.implies_atom(Atom("v0", ">=", f"v{n}", Fraction(n)), work)
    assert not g.implies_atom(Atom("v0", ">", f"v{n}", Fraction(n)), work)
    assert work.calls < 20 * n


def test_many_bounded_paths_cost_linear_work():
    """The distinct-path form, with relations: 2,000 paths each bounded on both sides (so all
    meet at the zero node, a hub) and each at most the next. Minimisation must not search
    through the hub once per edge (that was 1.8 million heap operations)."""
    n = 2000
    p = [Atom(f"x{i}", ">=", None, Fraction(i)) for i in range(n)]
    p += [Atom(f"x{i}", "<=", None, Fraction(i + 10)) for i in range(n)]
    p += [Atom(f"x{i}", "<=", f"x{i + 1}", Fraction(0)) for i in range(n - 1)]
    g = PredicateGraph(p)
    work = Counter()
    assert g.is_satisfiable(work)
    assert len(g.minimized(work).atoms) == 3 * n - 1
    assert work.calls < 20 * len(p)
    assert g.tightest(ZERO, "x7") == bound(-7, False) and g.tightest("x7", ZERO) == bound(17, False)
    assert g.implies(PredicateGraph(p[::-1]), work) and work.calls < 40 * len(p)


def test_implication_between_large_graphs_costs_linear_work():
    """x_i <= x_{i+1} + 1 and x_i <= x_{i+2} + 3: every node has two out-edges; deciding
    self-implication edge by edge must not compute a full row per node."""
    n = 3000
    p = [Atom(f"x{i}", "<=", f"x{i + 1}", Fraction(1)) for i in range(n)]
    p += [Atom(f"x{i}", "<=", f"x{i + 2}", Fraction(3)) for i in range(n)]
    work = Counter()
    g = PredicateGraph(p)
    assert g.implies(PredicateGraph(p), work)
    assert not g.implies(PredicateGraph(p + [Atom("x0", "<=", f"x{n}", Fraction(n - 1))]), work)
    assert len(g.minimized(work).atoms) == n + 1  # and x_{n-1} <= x_{n+1} + 3, the last
    assert work.calls < 30 * len(p)


def test_equalities_through_a_cycle_are_kept_once():
    """x0 = x1 = ... = x9 written twice, in both directions: one cycle of 10 edges remains."""
    p = [Atom(f"x{i}", "=", f"x{i + 1}", Fraction(0)) for i in range(9)]
    p += [Atom(f"x{i + 1}", "=", f"x{i}", Fraction(0)) for i in range(9)] + [Atom("x0", "=", "x9", Fraction(0))]
    m = PredicateGraph(p).minimized()
    assert len(m.atoms) == 10
    assert z3_equivalent_vars(list(m.atoms), p)


def z3_equivalent_vars(p: list[Atom], q: list[Atom]) -> bool:
    names = {n for a in p + q for n in (a.left, a.right) if n is not None}
    env = {v: z3.Real(v) for v in names}

    def conj(atoms_):
        return z3.And(*[{"=": env[a.left] == r, "<": env[a.left] < r, "<=": env[a.left] <= r,
                         ">": env[a.left] > r, ">=": env[a.left] >= r}[a.op]
                        for a in atoms_
                        for r in [(env[a.right] if a.right else 0) + z3.RealVal(str(a.constant))]])

    s = z3.Solver()
    s.add(conj(p) != conj(q))
    return s.check() == z3.unsat


def test_strict_zero_cycle_and_long_negative_cycle_are_unsatisfiable():
    assert not PredicateGraph([Atom("x", "<", "y", Fraction(0)), Atom("y", "<=", "x", Fraction(0))]).is_satisfiable()
    closing = Atom(f"v{3000}", ">=", "v0", Fraction(-2999))  # v0 >= v3000 + 3000 and v3000 >= v0 - 2999
    assert not PredicateGraph(chain(3000, reverse=True) + [closing]).is_satisfiable()
    loose = Atom(f"v{3000}", ">=", "v0", Fraction(-3000))
    assert PredicateGraph(chain(3000, reverse=True) + [loose]).is_satisfiable()


def test_an_interrupted_computation_caches_nothing():
    g = PredicateGraph(chain(500))

    def stop() -> None:
        raise AnalysisInterrupted("deadline", "stop")

    with pytest.raises(AnalysisInterrupted):
        g.minimized(stop)
    assert g.is_satisfiable() and len(g.minimized().atoms) == 500
