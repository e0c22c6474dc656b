"""The front door from subscription text to properties: parse, check, extract, reject the
unsatisfiable.

Everything that accepts a query from a user (CLI, super-peer) goes through ``analyze`` so that
the same query is judged the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from wxquery import ast
from wxquery.errors import Position, UnsatisfiablePredicateError
from wxquery.limits import DEFAULT_LIMITS, Check, QueryLimits, never_interrupted
from wxquery.parser import parse
from wxquery.static_checks import CheckedQuery, check as check_query

from .predicate_graph import Atom, PredicateGraph
from .properties import Properties, extract


@dataclass(frozen=True)
class QueryWarning:
    """Something legal that is probably not what was meant; said with its position."""

    message: str
    position: Position
    repeated: bool = False  # (it says a conjunction holds only where an element repeats)

    def format(self, filename: str = "<query>") -> str:
        return f"{filename}:{self}"

    def __str__(self) -> str:
        return f"{self.position}: warning: {self.message}"


@dataclass(frozen=True)
class Analysis:
    checked: CheckedQuery
    properties: Properties
    warnings: tuple[QueryWarning, ...] = ()

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
    warnings = _check_conjunctions(checked, check, require_satisfiable)
    properties = extract(checked)
    for inp in properties.inputs:
        for selection, what in ((inp.selection, "selection"),
                                (inp.aggregate_selection, "filter on the aggregates")):
            if selection is None:
                continue
            if not selection.graph.is_satisfiable(check):  # (rare: only then the per-atom reasoning)
                clause = next(b.clause for b in checked.clauses.values() if b.name == inp.variable)
                written = " and ".join(str(a) for a in selection.atoms)
                if not satisfiable_on_some_item(selection.atoms, check):
                    if not require_satisfiable:
                        continue
                    raise UnsatisfiablePredicateError(
                        f"unsatisfiable predicate: the {what} on ${inp.variable} ({written}) can never hold",
                        clause.pos)
                if not any(w.repeated for w in warnings):  # (the conjunction that needs it said it already)
                    warnings.append(QueryWarning(
                        f"the {what} on ${inp.variable} ({written}) holds only on items where an element it "
                        "compares occurs more than once", clause.pos, True))
            selection.graph.minimized(check)
    return Analysis(checked, properties, tuple(warnings))


def _check_conjunctions(checked: CheckedQuery, check: Check, refuse: bool) -> list[QueryWarning]:
    """Every where clause, path predicate and if condition must be satisfiable on its own
    (``refuse``: else it is an error). One that holds only on items where an element it compares
    occurs more than once (``$e/a = 1 and $e/a = 2``) is legal XQuery and kept, with a warning.

    Paths through a window variable are existential over the window's items, so they are left
    out of the reasoning (two atoms on ``$w/en`` may hold for different items).
    """
    warnings = []
    for conj, chooses in _conjunctions(checked.query.body):
        atoms = []
        for a in conj.atoms:
            left = _node(checked, a.left)
            right = _node(checked, a.right) if a.right is not None else None
            if left is None or (a.right is not None and right is None):
                continue
            atoms.append(Atom(left, a.op, right, checked.compared_constant(a)))
        if not atoms or PredicateGraph(atoms).is_satisfiable(check):
            continue
        written = " and ".join(str(a) for a in atoms)
        if satisfiable_on_some_item(atoms, check):
            repeated = sorted({p for a in atoms for p in (a.left, a.right) if p and _per_atom(p, 0) != p})
            warnings.append(QueryWarning(f"{written} holds only on items where {' or '.join(repeated)} occurs "
                                    "more than once (each comparison may hold for another one)", conj.pos, True))
        elif chooses:  # (an if whose condition never holds still gives its else branch)
            warnings.append(QueryWarning(f"{written} can never hold: the if always gives its else branch",
                                         conj.pos))
        elif refuse:
            raise UnsatisfiablePredicateError(f"unsatisfiable predicate: {written} can never hold", conj.pos)
    return warnings


def satisfiable_on_some_item(atoms: list[Atom] | tuple[Atom, ...], check: Check = never_interrupted) -> bool:
    """Whether some item satisfies the conjunction, as XQuery compares: a comparison of a path
    that steps to an element holds if it holds for *one* of the nodes the path selects, and each
    comparison may pick another one (``$e/a = 1 and $e/a = 2`` holds on an item with two ``a``).
    So every such path is a node of its own in each atom; the item itself, its attributes and
    let-bound values are one value each, shared by all atoms."""
    own = [Atom(_per_atom(a.left, i), a.op, None if a.right is None else _per_atom(a.right, i), a.constant)
           for i, a in enumerate(atoms)]
    return PredicateGraph(own).is_satisfiable(check)


def _per_atom(path: str, i: int) -> str:
    steps = [s for s in path.split("/") if s and s != "." and not s.startswith("$")]
    return f"{path}#{i}" if any(not s.startswith("@") for s in steps) else path


def _node(checked: CheckedQuery, p: ast.PathExpr) -> str | None:
    if isinstance(p.root, ast.VarRef):
        if checked.binding_of(p.root).kind == "window":
            return None
        return "$" + p.root.name + "".join("/" + n for n in p.keyed_names)
    return "." + "".join("/" + n for n in p.keyed_names)


def _conjunctions(e: object, chooses: bool = False) -> Iterator[tuple[ast.Conjunction, bool]]:
    """Every conjunction of the query, and whether it is an if's condition (which chooses a
    branch: one that never holds still gives the else branch)."""
    if isinstance(e, ast.Conjunction):
        yield e, chooses
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
        yield from _conjunctions(e.condition, chooses=True)
        yield from _conjunctions(e.then)
        yield from _conjunctions(e.otherwise)
    elif isinstance(e, ast.SequenceExpr):
        for i in e.items:
            yield from _conjunctions(i)
    elif isinstance(e, ast.ElementConstructor):
        for inner in ast.nested(e):
            yield from _conjunctions(inner)
    elif isinstance(e, ast.Enclosed):
        yield from _conjunctions(e.expr)
    elif isinstance(e, ast.AggregateCall):
        yield from _conjunctions(e.argument)


__all__ = ["Analysis", "Position", "QueryWarning", "analyze", "satisfiable_on_some_item"]
