"""The front door from subscription text to properties: parse, check, extract, reject the
unsatisfiable.

Everything that accepts a query from a user (CLI, super-peer) goes through ``analyze`` so that
the same query is judged the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from wxquery import ast
from wxquery.errors import Position, UnsatisfiablePredicateError
from wxquery.limits import DEFAULT_LIMITS, Check, QueryLimits, never_interrupted
from wxquery.parser import parse
from wxquery.static_checks import CheckedQuery, check as check_query

from .predicate_graph import Atom, PredicateGraph
from .properties import Properties, extract


@dataclass(frozen=True)
class Analysis:
    checked: CheckedQuery
    properties: Properties

    @property
    def query(self) -> ast.Query:
        return self.checked.query


def analyze(text: str, require_satisfiable: bool = True, *,
            limits: QueryLimits = DEFAULT_LIMITS, check: Check = never_interrupted) -> Analysis:
    """Parse and statically check ``text``; raise a ``WXQueryError`` with a position if it is
    not a valid (and, unless told otherwise, satisfiable) WXQuery subscription.

    ``limits`` bound what the text may hold (``QueryLimitError`` names the one exceeded);
    ``check`` is called throughout the predicate reasoning and may raise
    ``wxquery.limits.AnalysisInterrupted`` to stop it. The minimal predicate graphs that
    matching and planning read later are computed here, under the same ``check``.
    """
    checked = check_query(parse(text, limits))
    if require_satisfiable:
        _check_conjunctions(checked, check)
    properties = extract(checked)
    for inp in properties.inputs:
        for selection, what in ((inp.selection, "selection"),
                                (inp.aggregate_selection, "filter on the aggregates")):
            if selection is None:
                continue
            if not selection.graph.is_satisfiable(check):
                if not require_satisfiable:
                    continue
                clause = next(b.clause for b in checked.clauses.values() if b.name == inp.variable)
                raise UnsatisfiablePredicateError(
                    f"unsatisfiable predicate: the {what} on ${inp.variable} "
                    f"({' and '.join(str(a) for a in selection.atoms)}) can never hold",
                    clause.pos)
            selection.graph.minimized(check)
    return Analysis(checked, properties)


def _check_conjunctions(checked: CheckedQuery, check: Check) -> None:
    """Every where clause, path predicate and if condition must be satisfiable on its own.

    Paths through a window variable are existential over the window's items, so they are left
    out of the reasoning (two atoms on ``$w/en`` may hold for different items).
    """
    for conj in _conjunctions(checked.query.body):
        atoms = []
        for a in conj.atoms:
            left = _node(checked, a.left)
            right = _node(checked, a.right) if a.right is not None else None
            if left is None or (a.right is not None and right is None):
                continue
            atoms.append(Atom(left, a.op, right, checked.compared_constant(a)))
        if atoms and not PredicateGraph(atoms).is_satisfiable(check):
            raise UnsatisfiablePredicateError(
                "unsatisfiable predicate: " + " and ".join(str(a) for a in atoms)
                + " can never hold", conj.pos)


def _node(checked: CheckedQuery, p: ast.PathExpr) -> str | None:
    if isinstance(p.root, ast.VarRef):
        if checked.binding_of(p.root).kind == "window":
            return None
        return "$" + p.root.name + "".join("/" + n for n in p.keyed_names)
    return "." + "".join("/" + n for n in p.keyed_names)


def _conjunctions(e: object):
    if isinstance(e, ast.Conjunction):
        yield e
        for a in e.atoms:
            yield from _conjunctions(a.left)
            if a.right is not None:
                yield from _conjunctions(a.right)
    elif isinstance(e, ast.PathExpr):
        for s in e.steps:
            for p in s.predicates:
                yield from _conjunctions(p)
    elif isinstance(e, ast.FLWR):
        for c in e.clauses:
            yield from _conjunctions(c.source if isinstance(c, ast.ForClause) else c.aggregate.argument)
        if e.where is not None:
            yield from _conjunctions(e.where)
        yield from _conjunctions(e.ret)
    elif isinstance(e, ast.IfExpr):
        yield from _conjunctions(e.condition)
        yield from _conjunctions(e.then)
        yield from _conjunctions(e.otherwise)
    elif isinstance(e, ast.SequenceExpr):
        for i in e.items:
            yield from _conjunctions(i)
    elif isinstance(e, ast.ElementConstructor):
        for part in e.content:
            yield from _conjunctions(part)
    elif isinstance(e, ast.Enclosed):
        yield from _conjunctions(e.expr)
    elif isinstance(e, ast.AggregateCall):
        yield from _conjunctions(e.argument)


__all__ = ["Analysis", "analyze", "Position"]
