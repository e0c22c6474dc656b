"""Aggregates estimated from a sample (OSCAR, issue 15), with confidence intervals.

Every item is in a 1/R sample with probability p = 1/R, independently (``archive.layout``'s
nested Bernoulli samples), so per window, over the sampled items x_i:

* ``count``: N̂ = R·c, Var = N·p(1-p)/p² estimated by c(1-p)/p²;
* ``sum``: Ŝ = R·Σx (Horvitz–Thompson), Var̂ = (1-p)/p² · Σx²;
* ``avg``: Σx/c, unscaled (a ratio estimator), Var̂ ≈ (1-p)·s²/c with s² the sample variance;
* ``min``/``max``: the sample's, with no interval — the true minimum is at most the sample's
  (the true maximum at least): one-sided, said as such.

Intervals are normal approximations at the requested confidence (two-sided); with few sampled
items they are wide, and with none in a window the window is not seen at all (a sample cannot
show a window nothing of which was sampled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

from wxquery.operators.definitions import KeyValue, Partial, WindowAggregate, partials_of
from wxquery.operators.records import WindowRecord, escape_attribute, key_attributes
from wxquery.operators.windows import key_order

from .stream_properties import Aggregation, InputProperties, Properties, Selection

SUM_OF_SQUARES = "sumsq"
SAMPLE_RATES = (2, 4, 8, 16, 32, 64)  # the resolutions: 1/2 … 1/64 of the items


@dataclass(frozen=True)
class Estimate:
    window: int
    function: str  # count, sum, avg, min, max
    element: str
    estimate: float | None
    low: float | None  # None: no interval (min/max, or nothing sampled)
    high: float | None
    key: KeyValue = None  # a window partitioned by a key: the window's key


def with_variance_partials(window: WindowAggregate) -> WindowAggregate:
    """The window operator with what intervals need too: Σx² beside every sum, and the count
    of every summed element."""
    partials = list(window.partials)
    for fn, element in window.partials:
        if fn == "sum":
            for extra in ((SUM_OF_SQUARES, element), ("count", element)):
                if extra not in partials:
                    partials.append(extra)
    return WindowAggregate(window.window, tuple(partials))


SCALED = ("count", "sum")  # aggregates whose sample value is the whole stream's divided by R


def sampled_input(inp: InputProperties, rate: int) -> InputProperties:
    """The input read from a 1/``rate`` sample: with the aggregates its intervals need too (as
    ``with_variance_partials``: Σx² and the count of every summed element), and its filter on
    aggregates — applied in the network to the sample's windows — comparing counts and sums
    with the whole stream's constants divided by ``rate`` (``count > 100`` on the stream is
    ``count > 100/R`` on the sample). Every approximate subscription over the same sample is
    rewritten alike, so they share its streams."""
    aggregates = list(inp.aggregates)
    for agg in inp.aggregates:
        if "sum" in agg.internal:
            for extra in (Aggregation(SUM_OF_SQUARES, agg.element), Aggregation("count", agg.element)):
                if extra not in aggregates:
                    aggregates.append(extra)
    selection = inp.aggregate_selection
    if selection is not None:
        selection = Selection(tuple(replace(a, constant=a.constant / rate) if _function(a.left) in SCALED else a
                                    for a in selection.atoms))
    return replace(inp, sample=rate, aggregates=tuple(aggregates), aggregate_selection=selection)


def filter_samplable(inp: InputProperties) -> bool:
    """Whether each comparison of its filter on aggregates compares aggregates a sample scales
    alike (a count with a sum, an average with a maximum; not a count with an average)."""
    atoms = inp.aggregate_selection.atoms if inp.aggregate_selection is not None else ()
    return all(a.right is None or (_function(a.left) in SCALED) == (_function(a.right) in SCALED)
               for a in atoms)


def _function(name: str) -> str:
    """``count`` of the aggregate name ``count(en)``."""
    return name.split("(", 1)[0]


def samplable(properties: Properties) -> bool:
    """Whether a sample of its input answers the subscription approximately: one input, no
    count window, and no filter comparing a scaled aggregate with an unscaled one."""
    return len(properties.inputs) == 1 and all(
        (i.window is None or i.window.kind != "count") and filter_samplable(i) for i in properties.inputs)


def with_sample(properties: Properties, rate: int) -> Properties:
    """The subscription over a 1/``rate`` sample of each input (1: the subscription itself):
    ``sampled_input``."""
    if rate == 1:
        return properties
    return replace(properties, inputs=tuple(sampled_input(i, rate) for i in properties.inputs))


def asked_partials(inp: InputProperties) -> tuple[Partial, ...]:
    """The window partials a query's own aggregates need (not those added for intervals)."""
    return tuple(dict.fromkeys(p for agg in inp.aggregates for p in partials_of(agg.function, agg.element)))


def estimate_record(record: WindowRecord, rate: int, confidence: float = 0.95,
                    asked: tuple = ()) -> list[Estimate]:
    """Scale ``record`` in place to the whole stream's estimates; the intervals of the
    aggregates ``asked`` (the query's partials; all when empty: ``avg`` where its sum and count
    are both asked). An interval needs two sampled values at least for an average."""
    wanted = set(asked) or set(record.values)
    p = 1.0 / rate
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    values = dict(record.values)
    out: list[Estimate] = []
    for (fn, element), value in values.items():
        if fn == "count":
            c = value or 0
            half = z * math.sqrt(c * (1 - p)) / p
            if (fn, element) in wanted:
                out.append(Estimate(record.index, "count", element, c * rate, max(c * rate - half, 0.0),
                                    c * rate + half))
        elif fn == "sum":
            q = values.get((SUM_OF_SQUARES, element)) or 0.0
            s = value if value is not None else 0.0
            half = z * math.sqrt(max(q, 0.0) * (1 - p)) / p
            if (fn, element) in wanted:
                out.append(Estimate(record.index, "sum", element, s * rate, s * rate - half, s * rate + half))
            c = values.get(("count", element))
            if c and ("count", element) in wanted and (fn, element) in wanted:
                mean = s / c
                if c < 2:
                    out.append(Estimate(record.index, "avg", element, mean, None, None))
                    continue
                var = max(q / c - mean * mean, 0.0) * c / (c - 1)
                half = z * math.sqrt((1 - p) * var / c)
                out.append(Estimate(record.index, "avg", element, mean, mean - half, mean + half))
        elif fn in ("min", "max") and (fn, element) in wanted:
            out.append(Estimate(record.index, fn, element, value, None, None))
    record.values = {k: v for k, v in scaled(record, rate).values.items() if k[0] != SUM_OF_SQUARES}
    if record.key is not None:
        out = [replace(e, key=record.key) for e in out]
    return out


def scaled(record: WindowRecord, rate: int) -> WindowRecord:
    """A copy of a window record of a 1/``rate`` sample with the whole stream's estimates:
    counts and sums × rate (averages follow), minima and maxima as sampled."""
    out = WindowRecord(record.index, dict(record.values), record.key)
    for (fn, element), value in record.values.items():
        if fn == "count":
            out.values[(fn, element)] = int((value or 0) * rate)
        elif fn in ("sum", SUM_OF_SQUARES) and value is not None:
            out.values[(fn, element)] = value * rate
    return out


def estimate_xml(estimates: list[Estimate], rate: int, confidence: float, rows: int | None, ns: str) -> str:
    """The ``<sg:approximation>`` element an approximate answer ends with (README); ``rows``:
    the sampled items read (None: not known, as at a live subscriber, which sees only windows)."""
    by: dict[tuple, list[Estimate]] = {}
    for e in estimates:
        by.setdefault((e.window, key_order(e.key)), []).append(e)
    parts = [f'<sg:approximation xmlns:sg="{ns}" sampling-rate="{1 / rate:g}" sample="1/{rate}" '
             f'confidence="{confidence:g}"' + ("" if rows is None else f' rows-read="{rows}"') + ">"]
    for k, key in sorted(by):
        group = by[(k, key)]
        parts.append(f'<sg:window k="{k}"{key_attributes(group[0].key)}>')
        for e in group:
            attrs = f'function="{e.function}" element="{escape_attribute(e.element)}"'
            if e.estimate is not None:
                attrs += f' estimate="{e.estimate!r}"'
            if e.low is not None and e.high is not None:
                attrs += f' low="{e.low!r}" high="{e.high!r}"'
            elif e.function in ("min", "max") and e.estimate is not None:
                attrs += ' bound="' + ("upper" if e.function == "min" else "lower") + '"'
            parts.append(f"<sg:aggregate {attrs}/>")
        parts.append("</sg:window>")
    parts.append("</sg:approximation>")
    return "".join(parts)
