"""Seeded random WXQuery subscriptions with their XQuery 3.1 twins, built from one spec.

Both texts are produced from the same random choices, so that a difference between our
evaluator and Saxon points at a semantic bug, not at a mistranslation written by hand twice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# (path, low, high, decimals) — constants are drawn around realistic values of each element
ELEMENTS = [
    ("coord/cel/ra", 118.0, 142.0, 2),
    ("coord/cel/dec", -52.0, -38.0, 2),
    ("coord/det/dx", 2000, 6000, 0),
    ("coord/det/dy", 2000, 6000, 0),
    ("phc", 0, 255, 0),
    ("en", 0.1, 2.4, 3),
]
OPS = ["=", "<", "<=", ">", ">="]
AGGREGATES = ["min", "max", "sum", "count", "avg"]


@dataclass
class QueryPair:
    wxquery: str
    xquery: str


def _const(rng: random.Random, low: float, high: float, decimals: int) -> str:
    value = rng.uniform(low, high)
    return str(int(round(value))) if decimals == 0 else f"{value:.{decimals}f}"


def _atom(rng: random.Random, var: str) -> str:
    path, low, high, dec = rng.choice(ELEMENTS)
    op = rng.choice(OPS if path in ("phc",) else [o for o in OPS if o != "="])
    prefix = f"{var}/" if var else ""
    if rng.random() < 0.25:
        others = [e for e in ELEMENTS if e[0] != path and e[1] < high and e[2] > low]
        other = rng.choice(others) if others and rng.random() < 0.85 else (path, low, high, dec)
        c = _const(rng, -(high - low) / 4, (high - low) / 4, dec)
        sign = "+" if not c.startswith("-") else "-"
        return f"{prefix}{path} {op} {prefix}{other[0]} {sign} {c.lstrip('-')}"
    c = _const(rng, low, high, dec)
    if rng.random() < 0.15:
        mirror = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        return f"{c} {mirror} {prefix}{path}"
    return f"{prefix}{path} {op} {c}"


def _conj(rng: random.Random, var: str, n: int) -> str:
    return " and ".join(_atom(rng, var) for _ in range(n))


def selection_query(rng: random.Random) -> QueryPair:
    n_pred = rng.randint(0, 2)
    n_where = rng.randint(0, 3)
    pred = f"[{_conj(rng, '', n_pred)}]" if n_pred else ""
    where = f" where {_conj(rng, '$p', n_where)}" if n_where else ""
    outs = rng.sample([e[0] for e in ELEMENTS] + ["det_time", "coord", "coord/cel"], rng.randint(1, 3))
    body = "".join(f"{{ $p/{o} }}" for o in outs)
    kind = rng.random()
    if kind < 0.2:
        ret = "$p"
    elif kind < 0.4:
        cond = _conj(rng, "$p", rng.randint(1, 2))
        ret = f"if ({cond}) then <in>{body}</in> else <out>{{ $p/det_time }}</out>"
    else:
        ret = f"<item>{body}</item>"
    wx = f'<sel>{{ for $p in stream("photons")/photons/photon{pred}{where} return {ret} }}</sel>'
    xq = f"<sel>{{ for $p in /photons/photon{pred}{where} return {ret} }}</sel>"
    return QueryPair(wx, xq)


def window_query(rng: random.Random) -> QueryPair:
    n_pred = rng.randint(0, 2)
    pred = f"[{_conj(rng, '', n_pred)}]" if n_pred else ""
    aggs = []
    for i in range(rng.randint(1, 3)):
        fn = rng.choice(AGGREGATES)
        path = rng.choice([e[0] for e in ELEMENTS])
        arg = "$w" if fn == "count" and rng.random() < 0.5 else f"$w/{path}"
        aggs.append((f"$a{i}", f"{fn}({arg})"))
    lets = " ".join(f"let {v} := {e}" for v, e in aggs)
    where = ""
    if rng.random() < 0.4:
        v, e = rng.choice(aggs)
        if e.startswith("count"):
            where = f" where {v} >= {rng.randint(1, 20)}"
        else:
            where = f" where {v} {rng.choice(['<', '<=', '>', '>='])} {_const(rng, 0.1, 2.4, 2)}"
    ret = "<agg>" + "".join(f"<v>{{ {v} }}</v>" for v, _ in aggs) + "</agg>"
    if rng.random() < 0.5:
        size = rng.randint(1, 40)
        step = rng.choice([size, rng.randint(1, 40)])
        wx = (f'<win>{{ for $w in stream("photons")/photons/photon{pred} |count {size} step {step}| '
              f"{lets}{where} return {ret} }}</win>")
        xq = (f"<win>{{ for sliding window $w in /photons/photon{pred} "
              f"start at $s when ($s - 1) mod {step} eq 0 only end at $e when $e - $s + 1 eq {size} "
              f"{lets}{where} return {ret} }}</win>")
    else:
        size = rng.choice(["5", "10", "12.5", "20", "30", "60", "7.25"])
        step = rng.choice([size, "2.5", "5", "10", "1", "0.75", "40"])
        wx = (f'<win>{{ for $w in stream("photons")/photons/photon{pred} '
              f"|det_time diff {size} step {step}| {lets}{where} return {ret} }}</win>")
        xq = (f"declare variable $items := /photons/photon{pred};\n"
              f"<win>{{ let $t := $items/det_time ! xs:double(.) "
              f"for $k in xs:integer(floor((min($t) - {size}) div {step})) to "
              f"xs:integer(ceiling(max($t) div {step})) "
              f"let $w := $items[det_time >= $k * {step} and det_time < $k * {step} + {size}] "
              f"where exists($w) {lets}{where} return {ret} }}</win>")
    return QueryPair(wx, xq)


def random_pair(seed: int) -> QueryPair:
    rng = random.Random(seed)
    return window_query(rng) if rng.random() < 0.5 else selection_query(rng)
