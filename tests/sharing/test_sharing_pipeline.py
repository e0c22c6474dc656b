"""Residual operators + post-processing give exactly the reference evaluator's results.

For a subscription, the original stream goes through the operators ``full_pipeline`` derives
(what query shipping installs at the source), and the subscriber's post-processing runs on what
arrives; the result must equal evaluating the query directly. Then the same through a shared
stream: a first subscription's stream, reused by a second with the residual operators.
"""

from __future__ import annotations

import math

import pytest
from lxml import etree

from conftest import photon_document
from random_queries import random_pair
from sharing.analysis import analyze
from sharing.matching import full_pipeline, match_properties
from sharing.scenarios import example_query
from wxquery.errors import UnsatisfiablePredicateError
from wxquery.evaluator import evaluate, post_process
from per_item_operators import Pipeline
from wxquery.stream_document import StreamDocument

DOC = photon_document(1500, seed=8, rate=8.0)


def items_of(document: str) -> list:
    return list(StreamDocument.from_text(document).items("photons", "photon"))


def reference(text: str) -> list[str]:
    return list(evaluate(analyze(text).checked, StreamDocument.from_text(DOC)).serialized_items())


def delivered_results(text: str, delivered_per_input: list[list]) -> list[str]:
    analysis = analyze(text)
    clauses = [b.clause for b in analysis.checked.clauses.values()
               if b.name in {i.variable for i in analysis.properties.inputs} and b.kind != "aggregate"]
    delivered = {id(c): d for c, d in zip(clauses, delivered_per_input)}
    props = analysis.properties
    return list(post_process(analysis.checked, delivered, props.applied_upstream,
                             props.aggregated_upstream).serialized_items())


def same_items(ours: list[str], theirs: list[str]) -> None:
    """Item by item; numbers may differ in the last bits where partial sums were merged."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if a == b:
            continue
        ea, eb = etree.fromstring(a), etree.fromstring(b)
        ta, tb = [t for t in ea.itertext()], [t for t in eb.itertext()]
        assert len(ta) == len(tb), (a, b)
        for x, y in zip(ta, tb):
            assert math.isclose(float(x), float(y), rel_tol=1e-12), (a, b)


def through_full_pipeline(text: str) -> list[str]:
    (inp,) = analyze(text).properties.inputs
    match = full_pipeline(inp)
    assert match.shareable
    return delivered_results(text, [Pipeline(match.residual).run(items_of(DOC))])


@pytest.mark.parametrize("name", ["q1", "q2", "q3", "q4"])
def test_paper_queries_through_their_operators(name: str):
    text = example_query(name)
    assert through_full_pipeline(text) == reference(text)


@pytest.mark.parametrize("seed", range(60))
def test_random_queries_through_their_operators(seed: int):
    text = random_pair(seed).wxquery
    try:
        analyze(text)
    except UnsatisfiablePredicateError:
        return
    assert through_full_pipeline(text) == reference(text)


def test_query2_from_query1_stream_and_query4_from_query3_stream():
    for first, second in (("q1", "q2"), ("q3", "q4")):
        t1, t2 = (example_query(n) for n in (first, second))
        (p1,) = analyze(t1).properties.inputs
        (p2,) = analyze(t2).properties.inputs
        stream = Pipeline(full_pipeline(p1).residual).run(items_of(DOC))
        match = match_properties(p1, p2)
        assert match.shareable, match.reason
        same_items(delivered_results(t2, [Pipeline(match.residual).run(stream)]), reference(t2))
