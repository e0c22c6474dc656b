"""Partial aggregates: one object per WXQuery aggregate function, the only place their rules live.

A window's aggregate is computed from *partials* that can be added to item by item, reduced over
a column in one vectorised pass, and merged across panes, micro-batches and finer windows (which
is what sharing coarser windows and the Spark executor's pane state need). ``avg`` is not a
partial: it travels as (sum, count) and is computed by ``final`` at the subscriber's super-peer.

The rules are XQuery's: ``sum`` is a left fold from the first value (so ``-0`` stays ``-0``) and
``0`` over nothing; ``min``/``max`` are NaN if any value is NaN and empty over nothing; ``count``
counts; ``avg`` is sum/count and empty over nothing. A partial is ``None`` while it has seen no
value (``count`` starts at 0).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Protocol, Union

import numpy as np

from .definitions import Partial, partials_of
from ..values import NAN

Number = Union[int, float]
PartialValue = Union[Number, None]


class PartialAggregate(Protocol):
    """init / add / merge over single values, and ``reduce`` over a column grouped into panes."""

    name: str

    def init(self) -> PartialValue: ...

    def add(self, acc: PartialValue, value: float) -> PartialValue: ...

    def merge(self, a: PartialValue, b: PartialValue) -> PartialValue: ...

    def reduce(self, values: np.ndarray, groups: np.ndarray, k: int) -> list[PartialValue]:
        """Per group 0…k-1 (every group non-empty), the partial of ``values`` in row order."""
        ...


class Count:
    name = "count"

    def init(self) -> PartialValue:
        return 0

    def add(self, acc: PartialValue, value: float) -> PartialValue:
        return (acc or 0) + 1

    def merge(self, a: PartialValue, b: PartialValue) -> PartialValue:
        return (a or 0) + (b or 0)

    def reduce(self, values: np.ndarray, groups: np.ndarray, k: int) -> list[PartialValue]:
        return np.bincount(groups, minlength=k).tolist()


class Sum:
    name = "sum"

    def init(self) -> PartialValue:
        return None

    def add(self, acc: PartialValue, value: float) -> PartialValue:
        return value if acc is None else acc + value

    def merge(self, a: PartialValue, b: PartialValue) -> PartialValue:
        if a is None:
            return b
        return a if b is None else a + b

    def reduce(self, values: np.ndarray, groups: np.ndarray, k: int) -> list[PartialValue]:
        acc = np.full(k, -0.0)  # -0.0 + x is x, also for x = -0.0: the fold from the first value
        np.add.at(acc, groups, values)  # unbuffered, so left to right within each group
        return acc.tolist()


class Extremum:
    """min or max; NaN wins, as XQuery's fn:min/fn:max over doubles."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pick = min if name == "min" else max
        self.ufunc = np.minimum if name == "min" else np.maximum

    def init(self) -> PartialValue:
        return None

    def add(self, acc: PartialValue, value: float) -> PartialValue:
        return self.merge(acc, value)

    def merge(self, a: PartialValue, b: PartialValue) -> PartialValue:
        if a is None:
            return b
        if b is None:
            return a
        if math.isnan(a) or math.isnan(b):
            return NAN
        return self.pick(a, b)

    def reduce(self, values: np.ndarray, groups: np.ndarray, k: int) -> list[PartialValue]:
        acc = np.full(k, math.inf if self.name == "min" else -math.inf)
        with np.errstate(invalid="ignore"):
            self.ufunc.at(acc, groups, values)  # propagates NaN
        zero = np.flatnonzero(values == 0)
        if zero.size:  # 0 and -0 tie: the first one in row order wins, as in ``merge``
            tied = acc[groups[zero]] == 0
            first_groups, first = np.unique(groups[zero][tied], return_index=True)
            acc[first_groups] = values[zero[tied][first]]
        return acc.tolist()


class SumOfSquares(Sum):
    """Σx²: no XQuery function, a partial an approximate answer's confidence interval needs
    (``sharing.estimates``)."""

    name = "sumsq"

    def add(self, acc: PartialValue, value: float) -> PartialValue:
        return super().add(acc, value * value)

    def reduce(self, values: np.ndarray, groups: np.ndarray, k: int) -> list[PartialValue]:
        return super().reduce(values * values, groups, k)


AGGREGATES: dict[str, PartialAggregate] = {
    "count": Count(), "sum": Sum(), "min": Extremum("min"), "max": Extremum("max"), "sumsq": SumOfSquares()}


def fold(function: str, values: Iterable[float]) -> PartialValue:
    """The partial of ``function`` over values in order."""
    aggregate = AGGREGATES[function]
    acc = aggregate.init()
    for v in values:
        acc = aggregate.add(acc, v)
    return acc


def merge(function: str, a: PartialValue, b: PartialValue) -> PartialValue:
    return AGGREGATES[function].merge(a, b)


def final(function: str, element: str, partials: Mapping[Partial, PartialValue]) -> list[Number]:
    """The aggregate's XQuery value (a one-item or empty sequence) from its partials."""
    if function == "avg":
        total = partials.get(("sum", element))
        count = partials.get(("count", element))
        if not count:
            return []
        assert total is not None
        return [total / count]
    value = partials.get((function, element))
    if function == "sum" and value is None:
        return [0]
    if function == "count":
        return [value or 0]
    return [] if value is None else [value]


def aggregate_values(function: str, values: list[float]) -> list[Number]:
    """An aggregate over a sequence of doubles, as XQuery computes it (count counts them)."""
    return final(function, ".", {p: fold(p[0], values) for p in partials_of(function, ".")})
