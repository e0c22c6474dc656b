"""The operator algebra evaluated one item at a time: the test oracle for the batch operators.

This is how the operators were first implemented, item by item with lxml elements, before every
executor ran the batch operators of ``wxquery.operators``. Tests run both over the same items and
compare them, which checks the batch operators' columns, vectorised masks, panes and batch cuts
against the plain definition. It shares only element access, window assignment and aggregate
arithmetic with them, which the reference evaluator also uses and Saxon checks.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from lxml import etree

from wxquery.operators import definitions as alg
from wxquery.operators.aggregates import fold
from wxquery.operators.items import Projection, atom_test, item_key, path_values
from wxquery.operators.panes import CombineWindowRecords, aggregate_filter
from wxquery.operators.records import WindowRecord, serialize  # noqa: F401 — tests import them here
from wxquery.operators.windows import WindowCounters, collecting_windows
from wxquery.values import NAN


# ============================================================================ operators


class OperatorInstance:
    """A running operator: ``push`` one input, get zero or more outputs; ``flush`` at the end."""

    def push(self, value: object) -> list:
        raise NotImplementedError

    def flush(self) -> list:
        return []


class SelectInstance(OperatorInstance):
    def __init__(self, definition: alg.Select) -> None:
        self.tests = [atom_test(a) for a in definition.atoms]

    def push(self, value: etree._Element) -> list:
        return [value] if all(test(value) for test in self.tests) else []


class ProjectInstance(OperatorInstance):
    def __init__(self, definition: alg.Project) -> None:
        self.projection = Projection(definition.paths)

    def push(self, value: etree._Element) -> list:
        return [self.projection.element(value)]


class WindowAggregateInstance(OperatorInstance):
    """Collects each window's items, then aggregates them from scratch."""

    def __init__(self, definition: alg.WindowAggregate, lateness: float = 0.0) -> None:
        self.definition = definition
        window = definition.window
        reference = None
        if window.kind == "diff":
            ref = window.ref
            assert ref is not None
            reference = lambda item: (path_values(item, ref) or [NAN])[0]  # noqa: E731
        key = None
        if window.key is not None:
            paths = window.key_paths
            def key(item: etree._Element) -> alg.KeyValue:
                return item_key(item, paths)
        self.windows = collecting_windows(window, reference, lateness, key=key)

    def push(self, value: etree._Element) -> list:
        return [self._record(w.index, w.items, w.key) for w in self.windows.push(value)]

    def flush(self) -> list:
        return [self._record(w.index, w.items, w.key) for w in self.windows.flush()]

    def _record(self, index: int, items: list, key: alg.KeyValue = None) -> WindowRecord:
        record = WindowRecord(index, key=key)
        for fn, element in self.definition.partials:
            if element == alg.WHOLE_ITEM and fn == "count":
                record.values[(fn, element)] = len(items)
                continue
            record.values[(fn, element)] = fold(fn, [v for item in items for v in path_values(item, element)])
        return record


class CombineInstance(OperatorInstance):
    """Per key (records of a partitioned window), coarser windows from the finer records; from
    windows per more keys, per the window's keys (the finer keys' records merged)."""

    def __init__(self, definition: alg.CombineWindows) -> None:
        self.definition = dataclasses.replace(definition, source=definition.source.unkeyed(),
                                              window=definition.window.unkeyed())
        self.per_key = definition.window.key is not None  # (else every key's records merge by window)
        self.project = alg.key_projection(definition.source, definition.window)
        self.combines: dict = {}

    def push(self, value: WindowRecord) -> list:
        key = value.key if self.project is None else self.project(value.key)
        if not self.per_key:
            value = WindowRecord(value.index, dict(value.values))
        combine = self.combines.setdefault(key, CombineWindowRecords(self.definition))
        return self._keyed(key, combine.push(value))

    def flush(self) -> list:
        return [r for k, c in self.combines.items() for r in self._keyed(k, c.flush())]

    @staticmethod
    def _keyed(key, records: list) -> list:
        for r in records:
            r.key = key
        return records


class AggregateFilterInstance(OperatorInstance):
    def __init__(self, definition: alg.AggregateFilter) -> None:
        self.keep = aggregate_filter(definition.atoms)

    def push(self, value: WindowRecord) -> list:
        return [value] if self.keep(value) else []


def instantiate(definition: alg.Operator, lateness: float = 0.0) -> OperatorInstance:
    if isinstance(definition, alg.Select):
        return SelectInstance(definition)
    if isinstance(definition, alg.Project):
        return ProjectInstance(definition)
    if isinstance(definition, alg.WindowAggregate):
        return WindowAggregateInstance(definition, lateness)
    if isinstance(definition, alg.CombineWindows):
        return CombineInstance(definition)
    if isinstance(definition, alg.AggregateFilter):
        return AggregateFilterInstance(definition)
    raise TypeError(f"unknown operator {definition!r}")


class Pipeline:
    """A chain of operator instances: what one installed stream computes from its parent."""

    def __init__(self, definitions: Iterable[alg.Operator], lateness: float = 0.0) -> None:
        self.stages = [instantiate(d, lateness) for d in definitions]

    @property
    def stats(self) -> WindowCounters:
        total = WindowCounters()
        for stage in self.stages:
            if isinstance(stage, WindowAggregateInstance):
                total.add(stage.windows.clock.counters())
        return total

    def push(self, value: object) -> list:
        values = [value]
        for stage in self.stages:
            values = [out for v in values for out in stage.push(v)]
            if not values:
                break
        return values

    def flush(self) -> list:
        out: list = []
        for i, stage in enumerate(self.stages):
            values = stage.flush()
            for later in self.stages[i + 1:]:
                values = [o for v in values for o in later.push(v)]
            out.extend(values)
        return out

    def run(self, values: Iterable[object]) -> list:
        out: list = []
        for v in values:
            out.extend(self.push(v))
        out.extend(self.flush())
        return out
