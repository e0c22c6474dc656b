"""Photon streams and operator chains shared by the operator and executor tests.

``photons`` makes clean or messy wire texts (non-numbers, repeated and missing elements, items out
of order); ``CHAINS`` are operator chains of every shape the planner produces; ``assert_same``
compares outputs item by item, numbers to 12 significant digits where partial sums are merged.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction as F

import pytest
from lxml import etree

from per_item_operators import WindowRecord
from photons.generator import generate
from wxquery.operators import definitions as alg


def photons(n: int, seed: int, messy: bool) -> list[str]:
    texts = [p.to_xml() for p in generate(n, seed=seed, rate=50.0)]
    if not messy:
        return texts
    rng = random.Random(seed)
    out = []
    for t in texts:
        r = rng.random()
        if r < 0.03:
            t = t.replace("<en>", "<en>x")  # not a number
        elif r < 0.06:
            t = t.replace("<phc>", "<phc>7</phc><phc>")  # repeated element
        elif r < 0.08:
            t = t.replace("<det_time>", "<det_time>-").replace("</photon>", "</photon>")  # out of order
        elif r < 0.09:
            t = t.replace("<dec>", "<dec_>").replace("</dec>", "</dec_>")  # missing element
        elif r < 0.10:
            t = t.replace("<det_time>", "<det_time> ").replace("</det_time>", "</det_time>")
        out.append(t)
    return out


def assert_same(expected: list[str], actual: list[str]) -> None:
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        if e.startswith("<w "):
            re_, ra = WindowRecord.from_xml(e), WindowRecord.from_xml(a)
            assert re_.index == ra.index and re_.key == ra.key and re_.values.keys() == ra.values.keys()
            for key, x in re_.values.items():
                y = ra.values[key]
                if x is None or y is None:
                    assert x is y, key
                elif math.isnan(x):
                    assert math.isnan(y), key
                else:
                    assert y == pytest.approx(x, rel=1e-12, abs=1e-12), key
        else:
            assert etree.tostring(etree.fromstring(a)) == etree.tostring(etree.fromstring(e))


def atom(left, op, c, right=None):
    return alg.Atom(left, op, right, F(c))


RA, DEC, EN, T = "coord/cel/ra", "coord/cel/dec", "en", "det_time"
CHAINS = {
    "select": [alg.Select((atom(RA, ">=", "130.5"), atom(RA, "<=", "131.5"), atom(EN, ">", "1.3")))],
    "select-project": [alg.Select((atom(DEC, "<", "-46"),)), alg.Project(frozenset({"coord/cel", EN}))],
    "relational": [alg.Select((atom(EN, "<", "0.2", RA),)), alg.Project(frozenset({EN, "phc"}))],
    "repeated": [alg.Select((atom("phc", "=", "7"),))],
    "time-tumbling": [alg.WindowAggregate(alg.WindowSpec("diff", F(20), F(20), T),
                                          (("sum", EN), ("count", EN), ("max", EN), ("min", "phc")))],
    "time-sliding": [alg.Select((atom(EN, ">=", "1.3"),)),
                     alg.WindowAggregate(alg.WindowSpec("diff", F(15), F("2.5"), T),
                                         (("count", "."), ("sum", EN)))],
    "time-fraction": [alg.WindowAggregate(alg.WindowSpec("diff", F("0.7"), F("0.3"), T),
                                          (("max", EN), ("count", ".")))],
    "count": [alg.Select((atom(RA, ">", "130.8"),)),
              alg.WindowAggregate(alg.WindowSpec("count", F(10), F(4)), (("sum", EN), ("count", EN)))],
    "count-filter": [alg.WindowAggregate(alg.WindowSpec("count", F(6), F(6)), (("sum", EN), ("count", EN))),
                     alg.AggregateFilter((atom("avg(en)", ">", "1.5"),))],
}
