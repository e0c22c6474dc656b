"""The shared predicate index changes nothing a chain outputs: many chains on one parent, run with
the index (every key shared) and without it (every chain alone), give the same texts, batch for
batch — over clean and messy photons (non-numbers, repeated and missing elements, malformed
items), ranges open and closed, strict and not, equalities, empty and contradictory ranges,
relational atoms, windows and samples among them."""

from __future__ import annotations

import math
import random
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_cases import photons

from wxquery.operators import definitions as alg
from wxquery.operators.batch import ItemBatch, selected_rows, selection_mask
from wxquery.operators.chains import normalise
from wxquery.operators.predicate_index import Interval, PredicateIndex, chain_atoms
from wxquery.operators.runner import ChainGroup

RA, DEC, EN, PHC, T = "coord/cel/ra", "coord/cel/dec", "en", "phc", "det_time"
SPAN = {RA: (110.0, 148.0), DEC: (-58.0, -32.0), EN: (0.0, 2.5), PHC: (0.0, 256.0)}
OPS = ["<", "<=", ">", ">=", "="]


def random_atoms(rng: random.Random, texts: list[str]) -> tuple[alg.Atom, ...]:
    atoms = []
    for _ in range(rng.randint(1, 4)):
        element = rng.choice(list(SPAN))
        lo, hi = SPAN[element]
        op = rng.choice(OPS)
        if op == "=" or rng.random() < 0.2:  # a value that occurs, so that = and bounds meet items
            found = ItemBatch([rng.choice(texts)]).column(element)[0]
            value = float(found[0] if isinstance(found, list) and found else found if not isinstance(found, list)
                          else 1.0)
            c = F(value) if math.isfinite(value) else F(1)
        else:
            c = F(round(rng.uniform(lo, hi), 2)).limit_denominator(1000)
        atoms.append(alg.Atom(element, op, None, c))
    if rng.random() < 0.15:
        atoms.append(alg.Atom(EN, rng.choice(OPS[:4]), PHC, F(-100)))  # relational: never a key
    return tuple(atoms)


def random_chain(rng: random.Random, texts: list[str]) -> tuple[alg.Operator, ...]:
    ops: list[alg.Operator] = []
    if rng.random() < 0.1:
        ops.append(alg.Sample(4))
    ops.append(alg.Select(random_atoms(rng, texts)))
    shape = rng.random()
    if shape < 0.5:
        ops.append(alg.Project(frozenset({RA, EN, T})))
    elif shape < 0.65:
        ops.append(alg.WindowAggregate(alg.WindowSpec("count", F(5), F(5)), (("sum", EN), ("count", EN))))
    elif shape < 0.8:
        ops.append(alg.WindowAggregate(alg.WindowSpec("diff", F(2), F(1), T), (("max", EN),)))
    return tuple(ops)


def run(chains: list[tuple[alg.Operator, ...]], texts: list[str], sizes: list[int], index_from: int) -> dict:
    group = ChainGroup(index_from=index_from)
    for k, ops in enumerate(chains):
        group.add(normalise(k, f"s{k}", "p", "items", ops))
    out: dict[str, list[str]] = {f"s{k}": [] for k in range(len(chains))}
    at = 0
    for size in sizes:
        end = at + size >= len(texts)
        for stream, got in group.push(texts[at:at + size], end).items():
            out[stream].extend(got)
        at += size
        if end:
            break
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), messy=st.booleans(), n=st.integers(1, 40))
def test_chains_output_the_same_with_the_index_as_without(seed: int, messy: bool, n: int) -> None:
    rng = random.Random(seed)
    texts = photons(600, seed=seed % 50, messy=messy)
    if messy:
        texts[rng.randrange(len(texts))] = "<photon><en>1.0</photon>"  # malformed: dropped by all
    chains = [random_chain(rng, texts) for _ in range(n)]
    sizes = [rng.choice([1, 3, 50, 200, 600]) for _ in range(700)]
    assert run(chains, texts, sizes, index_from=1) == run(chains, texts, sizes, index_from=10 ** 9)


@pytest.mark.parametrize("messy", [False, True])
def test_a_key_range_selects_exactly_what_its_atoms_select(messy: bool) -> None:
    rng = random.Random(7)
    texts = photons(2000, seed=3, messy=messy)
    batch = ItemBatch(texts)
    atom_sets = [random_atoms(rng, texts) for _ in range(300)]
    selected = PredicateIndex(enumerate(atom_sets), index_from=1).select(batch)
    for k, atoms in enumerate(atom_sets):
        expected = np.flatnonzero(selection_mask(batch, atoms))
        if k not in selected.covered:
            continue  # (a key with repeated values in this batch is not indexed)
        rows, residual = selected.rows.get(k, (np.empty(0, dtype=np.intp), ()))
        assert selected_rows(batch, residual, rows).tolist() == expected.tolist(), atoms


def test_the_key_is_an_element_bounded_on_both_sides_and_its_bounds_are_the_tightest() -> None:
    atoms = (alg.Atom(EN, ">=", None, F(1)), alg.Atom(RA, ">", None, F(120)), alg.Atom(RA, ">=", None, F(121)),
             alg.Atom(RA, "<", None, F(130)), alg.Atom(RA, "<=", None, F(130)), alg.Atom(EN, "<", PHC, F(0)))
    found = chain_atoms("c", atoms)
    assert found is not None and found.key == RA
    assert found.intervals == {RA: Interval(121.0, False, 130.0, True), EN: Interval(lo=1.0)}
    assert found.relational == (atoms[5],)
    assert chain_atoms("c", (alg.Atom(EN, "<", PHC, F(0)),)) is None
