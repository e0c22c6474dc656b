"""The FLWR and window part of the reference evaluator's compiler.

A FLWR expression compiles into a chain of tuple streams, one per clause: each for clause binds
its variable to every item of its source, or to every window's contents when the path carries a
window, and each let clause binds an aggregate. Windows use the shared window assigners and
event-time clock of ``wxquery.operators.windows``, so that the evaluator and the executors agree
on window boundaries, on which items are late and on which windows are final. ``QueryCompiler``
adds this to ``ExpressionCompiler`` and is the complete compiler.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Iterable, Iterator

from . import ast
from .operators.definitions import WindowSpec
from .evaluation_context import Env, SeqFn, Value
from .expression_compiler import ExpressionCompiler
from .item_navigation import Partitioned, atomize, child_elements
from .operators.items import item_key
from .operators.windows import ClosedWindow, WindowClock, WindowCounters, collecting_windows, first_reference


class QueryCompiler(ExpressionCompiler):
    """Compiles whole queries: expressions plus FLWR clause chains and their windows."""

    def flwr(self, e: ast.FLWR) -> SeqFn:
        """A chain of tuple streams, one per clause, filtered by where, mapped by return."""
        tuple_stream: Callable[[Env], Iterator[Env]] = lambda env: iter((env,))
        for clause in e.clauses:
            tuple_stream = self.clause(clause, tuple_stream)
        where = self.conjunction(e.where) if e.where is not None else None
        ret = self.expr(e.ret)

        def run(env: Env) -> Iterator[Value]:
            for bound in tuple_stream(env):
                if where is not None and not where(bound, None):
                    continue
                yield from list(ret(bound))

        return run

    def clause(self, clause: ast.Clause, upstream: Callable[[Env], Iterator[Env]]
               ) -> Callable[[Env], Iterator[Env]]:
        """Extend each upstream binding with ``clause``'s variable: an aggregate (let), each item
        or window of its source (for), or each window record delivered for it (post-processing
        of a window aggregated upstream)."""
        var = clause.var
        if isinstance(clause, ast.LetClause):
            agg = self.aggregate(clause.aggregate)

            def bind_let(env: Env) -> Iterator[Env]:
                for bound in upstream(env):
                    yield {**bound, var: agg(bound)}

            return bind_let
        prepared = self.context.prepared.get(id(clause))
        if prepared is not None and id(clause) in self.context.aggregated:
            records = prepared
            by = clause.window.by if clause.window is not None else ()

            def bind_records(env: Env) -> Iterator[Env]:
                for bound in upstream(env):
                    for record in records:
                        yield {**bound, var: Partitioned((), by, record.key, record) if by else record}

            return bind_records
        source = self.path(clause.source, prepared)
        window = clause.window
        windows = None if window is None else self.windows(window)

        def bind_for(env: Env) -> Iterator[Env]:
            for bound in upstream(env):
                if windows is None:
                    for item in source(bound):
                        yield {**bound, var: [item]}
                elif window is not None and window.by:
                    for w in windows(source(bound)):
                        yield {**bound, var: Partitioned(w.items, window.by, w.key)}
                else:
                    for w in windows(source(bound)):
                        yield {**bound, var: w.items}

        return bind_for

    def windows(self, w: ast.Window) -> Callable[[Iterable[Value]], Iterator[ClosedWindow]]:
        """The windows of a for clause, as the shared window operators cut them."""
        if isinstance(w, ast.CountWindow):
            spec = WindowSpec("count", Fraction(w.size), Fraction(w.step), key=w.key)
            return closed_windows(spec, None, self.context.lateness, self.context.stats)
        spec = WindowSpec("diff", w.size.value, w.step.value, "/".join(w.ref), w.key)
        return closed_windows(spec, reference_value(w.ref), self.context.lateness, self.context.stats)


def reference_value(ref: tuple[str, ...]) -> Callable[[Value], float]:
    """The window reference of an item: its first ``ref`` element as a double
    (``first_reference``: NaN if absent)."""

    def reference(item: Value) -> float:
        current = [item]
        for name in ref:
            current = child_elements(current, name)
        return first_reference(current, atomize)

    return reference


def closed_windows(spec: WindowSpec, reference: Callable[[Value], float] | None, lateness: float,
                   stats: WindowCounters) -> Callable[[Iterable[Value]], Iterator[ClosedWindow]]:
    """The windows of ``spec`` (``reference``: of a time window's items), closed as the
    executors close them — count windows when complete, time windows by the shared event-time
    clock's watermark (``lateness`` behind the largest reference seen) and at the end — each
    window per key with its key; the clock's late and missing counts are added to ``stats`` when
    the items run out."""
    paths = spec.key_paths
    key = None if not paths else (lambda item: item_key(item, paths))

    def windows(items: Iterable[Value]) -> Iterator[ClosedWindow]:
        clock = WindowClock()
        assigner = collecting_windows(spec, reference, lateness, clock, key)
        try:
            for item in items:
                yield from assigner.push(item)
            yield from assigner.flush()
        finally:
            stats.add(clock.counters())

    return windows
