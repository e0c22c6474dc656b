"""Properties of subscriptions and streams (paper §3.1, DESIGN.md §4).

Properties say *what part of which input stream* a subscription needs and its result stream
contains: per input stream, the selection (a predicate graph over element paths relative to the
stream item), the projection (output and referenced elements), the window, the window
aggregates, a filter on the aggregate values, and unknown operators by parameters. Restructuring
(the return clause's shape), joins between inputs and conditions that cannot be pushed to the
input are post-processing at the subscriber's super-peer and never part of what is shared.

Subscriptions and streams are described by the same structure: a stream created for a
subscription carries that subscription's properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterator, Literal

from wxquery import ast
from wxquery.static_checks import Binding, CheckedQuery

from .predicate_graph import Atom, PredicateGraph, format_fraction

WHOLE_ITEM = "."


@dataclass(frozen=True)
class InputStream:
    """An original input: a registered stream and the path from its document node to its items."""

    stream: str
    items: tuple[str, ...]

    def to_json(self) -> dict:
        return {"stream": self.stream, "items": "/".join(self.items)}


@dataclass(frozen=True)
class Selection:
    """A conjunction of atomic predicates over item-relative element paths (or aggregate names)."""

    atoms: tuple[Atom, ...]

    @property
    def graph(self) -> PredicateGraph:
        return PredicateGraph(self.atoms)

    @property
    def elements(self) -> frozenset[str]:
        return frozenset(n for a in self.atoms for n in (a.left, a.right) if n is not None)

    def to_json(self) -> dict:
        minimized = self.graph.minimized()
        return {
            "predicate": [str(a) for a in self.atoms],
            "graph": minimized.to_json(),
        }


@dataclass(frozen=True)
class Projection:
    """``output``: elements the result stream carries; ``referenced``: every element the
    subscription touches (output ∪ predicates ∪ window reference ∪ aggregated elements)."""

    output: frozenset[str]
    referenced: frozenset[str]

    def to_json(self) -> dict:
        return {"output": sorted(self.output), "referenced": sorted(self.referenced)}


@dataclass(frozen=True)
class WindowSpec:
    """A validated window: ``count`` (sizes in items) or ``diff`` over an ordered reference."""

    kind: Literal["count", "diff"]
    size: Fraction
    step: Fraction
    ref: str | None = None

    def __post_init__(self) -> None:
        if self.size <= 0 or self.step <= 0:
            raise ValueError("window size and step must be positive")
        if self.kind == "count" and (self.size.denominator != 1 or self.step.denominator != 1):
            raise ValueError("count windows have whole-number sizes")
        if (self.kind == "diff") != (self.ref is not None):
            raise ValueError("exactly time windows have a reference element")

    @classmethod
    def from_ast(cls, w: ast.Window) -> "WindowSpec":
        if isinstance(w, ast.CountWindow):
            return cls("count", Fraction(w.size), Fraction(w.step))
        return cls("diff", w.size.value, w.step.value, "/".join(w.ref))

    def to_json(self) -> dict:
        out = {"type": self.kind, "size": _num(self.size), "step": _num(self.step)}
        if self.ref is not None:
            out["ref"] = self.ref
        return out


@dataclass(frozen=True)
class Aggregation:
    """A window aggregate. ``avg`` travels as (sum, count) so that it can be reused."""

    function: str
    element: str  # item-relative path, '.' for count of items

    @property
    def name(self) -> str:
        return f"{self.function}({self.element})"

    @property
    def internal(self) -> tuple[str, ...]:
        return ("sum", "count") if self.function == "avg" else (self.function,)

    def to_json(self) -> dict:
        return {"function": self.function, "element": self.element, "internal": list(self.internal)}


@dataclass(frozen=True)
class UnknownOperator:
    """An operator whose semantics the optimizer does not know: shareable only with equal
    parameters (paper, Algorithm 2, lines 25–30)."""

    name: str
    params: tuple[str, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "params": list(self.params)}


@dataclass(frozen=True)
class InputProperties:
    """Everything a subscription does to one input stream, in operator order."""

    input: InputStream
    variable: str
    selection: Selection | None
    projection: Projection
    window: WindowSpec | None = None
    aggregates: tuple[Aggregation, ...] = ()
    aggregate_selection: Selection | None = None
    unknown: tuple[UnknownOperator, ...] = ()

    def operators(self) -> list[dict]:
        ops: list[dict] = []
        if self.selection is not None:
            ops.append({"op": "selection", **self.selection.to_json()})
        ops.append({"op": "projection", **self.projection.to_json()})
        if self.window is not None:
            ops.append({"op": "window", **self.window.to_json()})
        for agg in self.aggregates:
            ops.append({"op": "aggregate", **agg.to_json()})
        if self.aggregate_selection is not None:
            ops.append({"op": "aggregate-selection", **self.aggregate_selection.to_json()})
        for u in self.unknown:
            ops.append({"op": "unknown", **u.to_json()})
        return ops

    def to_json(self) -> dict:
        return {**self.input.to_json(), "variable": "$" + self.variable,
                "operators": self.operators()}


@dataclass(frozen=True)
class PostProcessing:
    """What only the subscriber's super-peer does: restructuring, joins, residual conditions."""

    result_root: str | None
    join_predicates: tuple[str, ...] = ()
    residual_conditions: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"result_root": self.result_root, "restructuring": True,
                "join_predicates": list(self.join_predicates),
                "residual_conditions": list(self.residual_conditions)}


@dataclass(frozen=True)
class Properties:
    inputs: tuple[InputProperties, ...]
    post_processing: PostProcessing

    def to_json(self) -> dict:
        return {"inputs": [i.to_json() for i in self.inputs],
                "post_processing": self.post_processing.to_json()}


def _num(f: Fraction) -> str:
    return format_fraction(f)


# ============================================================================ extraction


def extract(checked: CheckedQuery) -> Properties:
    return _Extractor(checked).run()


@dataclass
class _InputBuilder:
    clause: ast.ForClause
    binding: Binding
    item_atoms: list[Atom] = field(default_factory=list)
    aggregate_atoms: list[Atom] = field(default_factory=list)
    output: set[str] = field(default_factory=set)
    referenced: set[str] = field(default_factory=set)
    aggregates: dict[str, Aggregation] = field(default_factory=dict)  # by variable or call id


class _Extractor:
    def __init__(self, checked: CheckedQuery) -> None:
        self.checked = checked
        self.inputs: dict[int, _InputBuilder] = {}  # id(origin ForClause) -> builder
        self.joins: list[str] = []
        self.residual: list[str] = []

    def run(self) -> Properties:
        for clause, binding in self.origin_clauses():
            self.inputs[id(clause)] = _InputBuilder(clause, binding)
        self.walk(self.checked.query.body, output=True)
        result: list[InputProperties] = []
        for b in self.inputs.values():
            clause = b.clause
            window = WindowSpec.from_ast(clause.window) if clause.window is not None else None
            if window is not None and window.ref is not None:
                b.referenced.add(window.ref)
            b.referenced |= b.output
            result.append(InputProperties(
                input=InputStream(b.binding.stream or "", b.binding.item_path),
                variable=clause.var,
                selection=Selection(tuple(b.item_atoms)) if b.item_atoms else None,
                projection=Projection(frozenset(b.output), frozenset(b.referenced)),
                window=window,
                aggregates=tuple(b.aggregates.values()),
                aggregate_selection=Selection(tuple(b.aggregate_atoms)) if b.aggregate_atoms else None,
            ))
        root = self.checked.query.root_name
        return Properties(tuple(result), PostProcessing(root, tuple(self.joins), tuple(self.residual)))

    # ---------------------------------------------------------------- bindings

    def origin_clauses(self) -> Iterator[tuple[ast.ForClause, Binding]]:
        for binding in self.checked.clauses.values():
            clause = binding.clause
            if isinstance(clause, ast.ForClause) and isinstance(clause.source.root, ast.StreamCall):
                yield clause, binding

    def origin(self, binding: Binding) -> _InputBuilder | None:
        """The input a variable derives from (following for-over-variable chains)."""
        clause = binding.clause
        while isinstance(clause, ast.ForClause) and isinstance(clause.source.root, ast.VarRef):
            clause = self.checked.binding_of(clause.source.root).clause
        if isinstance(clause, ast.ForClause):
            return self.inputs.get(id(clause))
        return None

    def relative(self, path: ast.PathExpr) -> tuple[_InputBuilder | None, str, Binding | None]:
        """(input, item-relative path, binding) of a variable-rooted path."""
        if not isinstance(path.root, ast.VarRef):
            return None, "", None
        binding = self.checked.binding_of(path.root)
        if binding.kind == "aggregate":
            return None, "", binding
        names = binding.sub_path + path.names
        return self.origin(binding), "/".join(names) or WHOLE_ITEM, binding

    # ---------------------------------------------------------------- traversal

    def walk(self, e: ast.Expr, output: bool) -> None:
        if isinstance(e, ast.FLWR):
            for clause in e.clauses:
                if isinstance(clause, ast.ForClause):
                    self.for_clause(clause)
                else:
                    self.aggregate(clause.aggregate, clause.var)
            if e.where is not None:
                self.where(e.where)
            self.walk(e.ret, output)
        elif isinstance(e, ast.IfExpr):
            self.reference_conjunction(e.condition, context=None)
            self.residual.append("if " + _conjunction_text(e.condition))
            self.walk(e.then, output)
            self.walk(e.otherwise, output)
        elif isinstance(e, ast.SequenceExpr):
            for item in e.items:
                self.walk(item, output)
        elif isinstance(e, ast.ElementConstructor):
            for part in e.content:
                if isinstance(part, ast.ElementConstructor):
                    self.walk(part, output)
                elif isinstance(part, ast.Enclosed):
                    self.walk(part.expr, output)
        elif isinstance(e, ast.PathExpr):
            self.path(e, output=output)
        elif isinstance(e, ast.AggregateCall):
            self.aggregate(e, None)

    def for_clause(self, clause: ast.ForClause) -> None:
        source = clause.source
        if isinstance(source.root, ast.StreamCall):
            builder = self.inputs[id(clause)]
            item_step = source.steps[1]
            for predicate in item_step.predicates:
                for atom in predicate.atoms:
                    builder.item_atoms.append(self.context_atom(atom, prefix=()))
                    self.reference_atom(atom, builder, prefix=())
            self.reference_deeper_steps(builder, source.steps[2:], prefix=())
            if len(source.steps) > 2:
                builder.referenced.add("/".join(source.names[2:]))
        else:
            self.path(source, output=False)

    def reference_deeper_steps(self, builder: _InputBuilder, steps: tuple[ast.Step, ...],
                               prefix: tuple[str, ...]) -> None:
        names = list(prefix)
        for step in steps:
            names.append(step.name)
            for predicate in step.predicates:
                for atom in predicate.atoms:
                    self.reference_atom(atom, builder, prefix=tuple(names))
                self.residual.append(f"{'/'.join(names)}[{_conjunction_text(predicate)}]")

    def path(self, p: ast.PathExpr, output: bool) -> None:
        builder, rel, binding = self.relative(p)
        if builder is None:
            return
        # Everything a derived variable's path passes through is referenced; conditions inside
        # the path are residual (they are not pushed to the input).
        assert binding is not None
        prefix = binding.sub_path
        self.reference_deeper_steps(builder, p.steps, prefix)
        if output:
            builder.output.add(rel)
        builder.referenced.add(rel)

    def aggregate(self, call: ast.AggregateCall, var: str | None) -> None:
        builder, rel, binding = self.relative(call.argument)
        self.path(call.argument, output=False)
        if builder is None or binding is None:
            return
        window_var = binding.kind == "window" or (
            binding.clause is builder.clause and builder.clause.window is not None)
        if not window_var:
            return  # a per-item aggregate is restructuring, not a window aggregate
        agg = Aggregation(call.function, rel)
        key = var if var is not None else f"#{id(call)}"
        builder.aggregates[key] = agg

    def where(self, c: ast.Conjunction) -> None:
        for atom in c.atoms:
            self.where_atom(atom)

    def where_atom(self, atom: ast.Comparison) -> None:
        sides = [atom.left] + ([atom.right] if atom.right is not None else [])
        resolved = [self.relative(s) for s in sides]
        builders = {id(b) for b, _, _ in resolved if b is not None}
        bindings = [bd for _, _, bd in resolved]
        for side in sides:
            self.path(side, output=False)
        # Filter on aggregate values of one input: the aggregate-selection operator.
        if all(bd is not None and bd.kind == "aggregate" for bd in bindings):
            targets = {id(self.aggregate_input(bd)) for bd in bindings if bd is not None}
            builder = self.aggregate_input(bindings[0]) if bindings[0] is not None else None
            if builder is not None and len(targets) == 1:
                names = [builder.aggregates[bd.name].name for bd in bindings if bd is not None]
                builder.aggregate_atoms.append(Atom(names[0], atom.op,
                                                    names[1] if len(names) > 1 else None,
                                                    atom.constant.value))
                return
        # Filter on one input's items (bound to whole items, no window): a selection.
        if len(builders) == 1 and all(
                bd is not None and bd.kind == "item" and not bd.sub_path
                and self.origin(bd) is not None and self.origin(bd).clause is bd.clause
                for bd in bindings):
            builder = resolved[0][0]
            assert builder is not None
            right = resolved[1][1] if len(resolved) > 1 else None
            builder.item_atoms.append(Atom(resolved[0][1], atom.op, right, atom.constant.value))
            return
        text = _comparison_text(atom)
        if len(builders) > 1:
            self.joins.append(text)
        else:
            self.residual.append("where " + text)

    def aggregate_input(self, binding: Binding) -> _InputBuilder | None:
        clause = binding.clause
        if not isinstance(clause, ast.LetClause):
            return None
        builder, _, _ = self.relative(clause.aggregate.argument)
        if builder is not None and binding.name in builder.aggregates:
            return builder
        return None

    # ---------------------------------------------------------------- conditions

    def context_atom(self, atom: ast.Comparison, prefix: tuple[str, ...]) -> Atom:
        left = "/".join(prefix + atom.left.names) or WHOLE_ITEM
        right = None
        if atom.right is not None:
            right = "/".join(prefix + atom.right.names) or WHOLE_ITEM
        return Atom(left, atom.op, right, atom.constant.value)

    def reference_atom(self, atom: ast.Comparison, builder: _InputBuilder,
                       prefix: tuple[str, ...]) -> None:
        for side in (atom.left, atom.right):
            if side is None:
                continue
            if isinstance(side.root, ast.ContextItem):
                builder.referenced.add("/".join(prefix + side.names) or WHOLE_ITEM)
            else:
                self.path(side, output=False)

    def reference_conjunction(self, c: ast.Conjunction, context: object) -> None:
        for atom in c.atoms:
            for side in (atom.left, atom.right):
                if side is not None and not isinstance(side.root, ast.ContextItem):
                    self.path(side, output=False)


def _path_text(p: ast.PathExpr) -> str:
    root = p.root
    head = "$" + root.name if isinstance(root, ast.VarRef) else "."
    return head + "".join("/" + n for n in p.names) if p.names or head != "." else head


def _comparison_text(a: ast.Comparison) -> str:
    if a.right is None:
        return f"{_path_text(a.left)} {a.op} {a.constant.text}"
    text = f"{_path_text(a.left)} {a.op} {_path_text(a.right)}"
    if a.constant.value:
        text += (" - " + a.constant.text.lstrip("-")) if a.constant.value < 0 else " + " + a.constant.text
    return text


def _conjunction_text(c: ast.Conjunction) -> str:
    return " and ".join(_comparison_text(a) for a in c.atoms)
