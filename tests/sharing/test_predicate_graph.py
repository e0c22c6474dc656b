"""Predicate graphs against an SMT solver: satisfiability and implication over the reals."""

from __future__ import annotations

from fractions import Fraction

import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from sharing.predicate_graph import Atom, PredicateGraph, ZERO

VARS = ["a", "b", "c", "d"]
OPS = ["=", "<", "<=", ">", ">="]

constants = st.builds(lambda n, d: Fraction(n, d), st.integers(-6, 6), st.sampled_from([1, 2, 4, 10]))
atoms = st.builds(
    Atom,
    st.sampled_from(VARS),
    st.sampled_from(OPS),
    st.one_of(st.none(), st.sampled_from(VARS)),
    constants,
)
conjunctions = st.lists(atoms, min_size=0, max_size=6)


def _z3(atom: Atom, env: dict) -> z3.BoolRef:
    left = env[atom.left]
    right = (env[atom.right] if atom.right is not None else 0) + z3.RealVal(str(atom.constant))
    return {"=": left == right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[atom.op]


def _env() -> dict:
    return {v: z3.Real(v) for v in VARS}


def z3_satisfiable(p: list[Atom]) -> bool:
    s = z3.Solver()
    env = _env()
    s.add(*[_z3(a, env) for a in p])
    return s.check() == z3.sat


def z3_implies(p_new: list[Atom], p_old: list[Atom]) -> bool:
    s = z3.Solver()
    env = _env()
    s.add(*[_z3(a, env) for a in p_new])
    s.add(z3.Not(z3.And(*[_z3(a, env) for a in p_old])) if p_old else z3.BoolVal(False))
    return s.check() == z3.unsat


def variables(p: list[Atom]) -> set[str]:
    return {n for a in p for n in (a.left, a.right) if n is not None}


@settings(max_examples=500, deadline=None)
@given(conjunctions)
def test_satisfiability_matches_z3(p: list[Atom]):
    assert PredicateGraph(p).is_satisfiable() == z3_satisfiable(p)


@settings(max_examples=800, deadline=None)
@given(conjunctions, conjunctions)
def test_implication_is_sound_and_complete(p_old: list[Atom], p_new: list[Atom]):
    """A stream filtered by p_old serves a subscription filtered by p_new iff p_new ⇒ p_old."""
    expected = z3_implies(p_new, p_old)
    assert PredicateGraph(p_new).implies(PredicateGraph(p_old)) == expected


@settings(max_examples=300, deadline=None)
@given(conjunctions)
def test_minimized_graph_is_equivalent_and_irredundant(p: list[Atom]):
    g = PredicateGraph(p)
    if not g.is_satisfiable():
        return
    m = list(g.minimized().atoms)
    assert z3_implies(m, p) and z3_implies(p, m)
    for i, atom in enumerate(m):
        rest = m[:i] + m[i + 1:]
        assert not z3_implies(rest, [atom]), f"{atom} is implied by the other kept atoms"


def test_chain_implication_the_paper_misses():
    old = PredicateGraph([Atom("x", "<=", None, Fraction(5))])
    new = PredicateGraph([Atom("x", "<=", "y", Fraction(1)), Atom("y", "<=", None, Fraction(3))])
    assert new.implies(old)
    assert not new.implies(PredicateGraph([Atom("x", "<", None, Fraction(4))]))


def test_strictness_is_exact_over_decimals():
    old = PredicateGraph([Atom("en", "<", None, Fraction("1.3"))])
    assert PredicateGraph([Atom("en", "<=", None, Fraction("1.29"))]).implies(old)
    assert not PredicateGraph([Atom("en", "<=", None, Fraction("1.3"))]).implies(old)
    assert PredicateGraph([Atom("en", "<", None, Fraction("1.3"))]).implies(old)


def test_zero_node_is_in_every_graph():
    assert ZERO in PredicateGraph().graph
