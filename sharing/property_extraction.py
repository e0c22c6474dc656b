"""Properties extraction: from a statically checked subscription to its ``Properties``.

One walk over the AST decides, for every condition, window and aggregate, whether the network
can apply it to an input stream before the subscriber's super-peer (then it becomes part of that
input's properties and can be shared with other subscriptions) or whether only post-processing
can (restructuring, joins between inputs, conditions on windows' contents, windows whose
contents are returned). What is applied upstream is recorded by AST identity, so that
post-processing does not apply it twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterator

from wxquery import ast
from wxquery.join_band import join_bands, network_band, network_keys
from wxquery.operators.comparisons import STRING_FUNCTIONS
from wxquery.operators.definitions import WHOLE_ITEM, Atom, WindowSpec
from wxquery.static_checks import Binding, CheckedQuery

from .atom_hull import hull_atoms
from .stream_properties import (
    Aggregation,
    InputProperties,
    InputStream,
    PostProcessing,
    Projection,
    Properties,
    Selection,
)


def window_from_ast(w: ast.Window) -> WindowSpec:
    """The window of a for clause as the algebra's ``WindowSpec``."""
    if isinstance(w, ast.CountWindow):
        return WindowSpec("count", Fraction(w.size), Fraction(w.step), key=w.key)
    return WindowSpec("diff", w.size.value, w.step.value, "/".join(w.ref), w.key)


def extract(checked: CheckedQuery) -> Properties:
    """The properties of a statically checked subscription."""
    return _Extractor(checked).run()


@dataclass
class _InputBuilder:
    """What the extraction has found so far about one input (one for clause over a stream)."""

    clause: ast.ForClause
    binding: Binding
    window_pushed: bool
    item_atoms: list[Atom] = field(default_factory=list)
    aggregate_atoms: list[Atom] = field(default_factory=list)
    output: set[str] = field(default_factory=set)
    referenced: set[str] = field(default_factory=set)
    aggregates: dict[str, Aggregation] = field(default_factory=dict)  # by let variable or call id


class _Extractor:
    """Walks the AST once. Every path lands in ``referenced``; it also lands in ``output`` when
    the subscriber's super-peer still needs it (returned, or used by a condition or window that is
    not applied upstream)."""

    def __init__(self, checked: CheckedQuery) -> None:
        self.checked = checked
        self.inputs: dict[int, _InputBuilder] = {}  # id(origin ForClause) -> builder
        self.joins: list[str] = []
        self.residual: list[str] = []
        self.local_windows: list[str] = []
        self.applied: set[int] = set()
        self.aggregate_arg_roots: set[int] = set()
        self.key_roots: set[int] = set()  # roots of ``$w/key`` on a partitioned window
        self.var_uses: dict[int, list[ast.VarRef]] = {}

    def run(self) -> Properties:
        self.collect_uses(self.checked.query.body, in_aggregate=False)
        for clause, binding in self.origin_clauses():
            # (a window over elements below the items, stream(…)/s/item/part, counts and times
            # those elements, not the items the network's operators see: it is cut here)
            pushed = clause.window is not None and self.only_aggregated(clause) and len(clause.source.steps) == 2
            self.inputs[id(clause)] = _InputBuilder(clause, binding, pushed)
            if clause.window is not None and not pushed:
                self.local_windows.append(f"${clause.var} {window_from_ast(clause.window)}")
        self.walk(self.checked.query.body, output=True)
        result: list[InputProperties] = []
        for b in self.inputs.values():
            window = window_from_ast(b.clause.window) if b.window_pushed else None
            below = tuple(b.clause.source.names[2:])  # (the window's items, within the stream's)
            if b.clause.window is not None and b.clause.window.kind == "diff":
                ref = "/".join(below + b.clause.window.ref)
                b.referenced.add(ref)
                if not b.window_pushed:
                    b.output.add(ref)
            for names in b.clause.window.by if b.clause.window is not None else ():
                key = "/".join(below + names)
                b.referenced.add(key)
                if not b.window_pushed:
                    b.output.add(key)
            b.referenced |= b.output
            result.append(InputProperties(
                input=InputStream(b.binding.stream or "", b.binding.item_path),
                variable=b.clause.var,
                selection=Selection(tuple(b.item_atoms)) if b.item_atoms else None,
                projection=Projection(frozenset(b.output), frozenset(b.referenced)),
                window=window,
                aggregates=tuple(dict.fromkeys(b.aggregates.values())) if b.window_pushed else (),
                aggregate_selection=Selection(tuple(b.aggregate_atoms)) if b.aggregate_atoms else None,
            ))
        root = self.checked.query.root_name
        band = network_band(self.checked)
        post = PostProcessing(root, tuple(self.joins), tuple(self.residual), tuple(self.local_windows),
                              tuple(str(b) for b in join_bands(self.checked)), band,
                              network_keys(self.checked, band) if band is not None else ())
        aggregated = frozenset(id(b.clause) for b in self.inputs.values() if b.window_pushed)
        return Properties(tuple(result), post, frozenset(self.applied), aggregated)

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

    def collect_uses(self, node: object, in_aggregate: bool) -> None:
        """Record every variable reference, and which ones root an aggregate's argument."""
        if isinstance(node, ast.VarRef):
            binding = self.checked.bindings.get(id(node))
            if binding is not None:
                self.var_uses.setdefault(id(binding.clause), []).append(node)
                if in_aggregate:
                    self.aggregate_arg_roots.add(id(node))
            return
        if isinstance(node, ast.PathExpr) and self.window_key(node):
            self.key_roots.add(id(node.root))
        if isinstance(node, ast.AggregateCall):
            self.collect_uses(node.argument.root, in_aggregate=True)
            for step in node.argument.steps:
                self.collect_uses(step, in_aggregate=False)
            return
        if isinstance(node, ast.LetClause):
            self.collect_uses(node.aggregate, in_aggregate)
            return
        if isinstance(node, (str, int, Fraction, ast.Number)) or node is None:
            return
        if isinstance(node, tuple):
            for child in node:
                self.collect_uses(child, in_aggregate)
            return
        if hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                if name != "pos":
                    self.collect_uses(getattr(node, name), in_aggregate)

    def only_aggregated(self, clause: ast.ForClause) -> bool:
        """A window is applied upstream only if its variable is used solely inside aggregates
        (or for a partitioned window's key, which its records carry)."""
        uses = self.var_uses.get(id(clause), [])
        return all(id(u) in self.aggregate_arg_roots or id(u) in self.key_roots for u in uses)

    def window_key(self, path: ast.PathExpr) -> bool:
        """Whether the path is ``$w/key`` on a partitioned window ``$w`` (``|count 4 by key|``)."""
        if not isinstance(path.root, ast.VarRef) or path.has_predicates:
            return False
        binding = self.checked.bindings.get(id(path.root))
        clause = binding.clause if binding is not None else None
        return (isinstance(clause, ast.ForClause) and clause.window is not None
                and path.names in clause.window.by)

    def relative(self, path: ast.PathExpr) -> tuple[_InputBuilder | None, str, Binding | None]:
        """(input, item-relative path, binding) of a variable-rooted path."""
        if not isinstance(path.root, ast.VarRef):
            return None, "", None
        binding = self.checked.binding_of(path.root)
        if binding.kind == "aggregate":
            return None, "", binding
        names = binding.sub_path + path.keyed_names
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
                for atom in e.where.atoms:
                    self.where_atom(atom)
                for term in e.where.terms:  # ('or', 'not()': evaluated at the subscriber's peer)
                    self.needed_term(term)
                    self.disjunction_hull(term)
                    self.residual.append("where " + term_text(term))
            self.walk(e.ret, output)
        elif isinstance(e, ast.IfExpr):
            self.needed_conjunction(e.condition)
            self.residual.append("if " + conjunction_text(e.condition))
            self.walk(e.then, output)
            self.walk(e.otherwise, output)
        elif isinstance(e, (ast.SequenceExpr, ast.ElementConstructor)):
            for inner in ast.nested(e):
                self.walk(inner, output)
        elif isinstance(e, ast.PathExpr):
            self.path(e, needed=True)
        elif isinstance(e, ast.AggregateCall):
            self.aggregate(e, None)

    def for_clause(self, clause: ast.ForClause) -> None:
        source = clause.source
        if isinstance(source.root, ast.StreamCall):
            builder = self.inputs[id(clause)]
            for predicate in source.steps[1].predicates:
                for atom in predicate.atoms:
                    builder.item_atoms.append(self.context_atom(atom, prefix=()))
                    builder.referenced.update(self.context_paths(atom, prefix=()))
                    self.applied.add(id(atom))
            if len(source.steps) > 2:
                self.needed_steps(builder, source.steps[2:], prefix=())
                builder.output.add("/".join(source.names[2:]))
        else:
            self.path(source, needed=True)

    def needed_steps(self, builder: _InputBuilder, steps: tuple[ast.Step, ...],
                     prefix: tuple[str, ...]) -> None:
        """Predicates inside a returned path are evaluated at the subscriber's super-peer."""
        names = list(prefix)
        for step in steps:
            names.append(step.name)
            for predicate in step.predicates:
                for atom in predicate.atoms:
                    for p in self.context_paths(atom, prefix=tuple(names)):
                        builder.output.add(p)
                    for side in (atom.left, atom.right):
                        if side is not None and not isinstance(side.root, ast.ContextItem):
                            self.path(side, needed=True)
                self.residual.append(f"{'/'.join(names)}[{conjunction_text(predicate)}]")

    def path(self, p: ast.PathExpr, needed: bool) -> None:
        builder, rel, binding = self.relative(p)
        if builder is None:
            return
        assert binding is not None
        if builder.window_pushed and binding.clause is builder.clause and self.window_key(p):
            builder.referenced.add(rel)  # (the window's records carry the key)
            return
        self.needed_steps(builder, p.steps, binding.sub_path)
        builder.referenced.add(carried(rel))
        if needed:
            builder.output.add(carried(rel))

    def aggregate(self, call: ast.AggregateCall, var: str | None) -> None:
        builder, rel, binding = self.relative(call.argument)
        if builder is None or binding is None:
            self.path(call.argument, needed=True)
            return
        pushed = builder.window_pushed and binding.clause is builder.clause
        self.path(call.argument, needed=not pushed)
        if pushed:
            key = var if var is not None else f"#{id(call)}"
            builder.aggregates[key] = Aggregation(call.function, rel)

    def where_atom(self, atom: ast.Comparison) -> None:
        sides = [atom.left] + ([atom.right] if atom.right is not None else [])
        resolved = [self.relative(s) for s in sides]
        bindings = [bd for _, _, bd in resolved]
        # A filter on pushed aggregates of one input: the aggregate-selection operator.
        if all(bd is not None and bd.kind == "aggregate" for bd in bindings):
            owners = [self.pushed_aggregate_owner(bd) for bd in bindings if bd is not None]
            if all(o is not None for o in owners) and len({id(o) for o in owners}) == 1:
                builder = owners[0]
                assert builder is not None
                names = [builder.aggregates[bd.name].name for bd in bindings if bd is not None]
                builder.aggregate_atoms.append(Atom(names[0], atom.op,
                                                    names[1] if len(names) > 1 else None,
                                                    self.checked.compared_constant(atom)))
                self.applied.add(id(atom))
                return
        # A filter on the items of one input, bound to whole items without a window: a selection.
        builders = {id(b) for b, _, _ in resolved if b is not None}
        selected = self.item_atom(atom)
        if selected is not None:
            builder, item_atom = selected
            builder.item_atoms.append(item_atom)
            builder.referenced.update(carried(r) for _, r, _ in resolved)
            self.applied.add(id(atom))
            return
        for side in sides:
            self.path(side, needed=True)
        text = comparison_text(atom)
        if len(builders) > 1:
            self.joins.append(text)
        else:
            self.residual.append("where " + text)

    def item_atom(self, atom: ast.Comparison) -> tuple[_InputBuilder, Atom] | None:
        """The comparison as a selection of one input's items (bound whole, without a window),
        if it is one."""
        resolved = [self.relative(s) for s in [atom.left] + ([atom.right] if atom.right is not None else [])]
        bindings = [bd for _, _, bd in resolved]
        if len({id(b) for b, _, _ in resolved if b is not None}) != 1 or not all(
                bd is not None and bd.kind == "item" and not bd.sub_path
                and self.origin(bd) is not None and self.origin(bd).clause is bd.clause  # type: ignore[union-attr]
                for bd in bindings):
            return None
        builder = resolved[0][0]
        assert builder is not None
        right = resolved[1][1] if len(resolved) > 1 else None
        return builder, Atom(resolved[0][1], atom.op, right, self.checked.compared_constant(atom))

    def disjunction_hull(self, term: ast.Disjunction | ast.Negation) -> None:
        """Push what every alternative of an 'or' implies (``widening.hull_atoms``: each
        element's widest bounds, the relations all of them have) as a selection of their input
        too: two sky boxes joined by 'or' are filtered upstream by the box around both. The
        term itself is still evaluated at the subscriber's peer (these atoms are not
        ``applied``), so the selection only has to keep every item it keeps."""
        if not isinstance(term, ast.Disjunction):
            return  # (a negation implies no comparison)
        per_input: list[dict[int, tuple[_InputBuilder, tuple[Atom, ...]]]] = []
        for alternative in term.alternatives:
            atoms: dict[int, tuple[_InputBuilder, tuple[Atom, ...]]] = {}
            for atom in alternative.atoms:
                selected = self.item_atom(atom)
                if selected is not None:
                    builder, item_atom = selected
                    atoms[id(builder)] = (builder, atoms.get(id(builder), (builder, ()))[1] + (item_atom,))
            per_input.append(atoms)
        for key in set.intersection(*(set(a) for a in per_input)):
            builder, hull = per_input[0][key]
            for atoms in per_input[1:]:
                hull = hull_atoms(hull, atoms[key][1])
            builder.item_atoms.extend(hull)
            builder.referenced.update(carried(p) for a in hull for p in (a.left, a.right) if p is not None)

    def pushed_aggregate_owner(self, binding: Binding) -> _InputBuilder | None:
        clause = binding.clause
        if not isinstance(clause, ast.LetClause):
            return None
        builder, _, arg_binding = self.relative(clause.aggregate.argument)
        if (builder is not None and builder.window_pushed and arg_binding is not None
                and arg_binding.clause is builder.clause and binding.name in builder.aggregates):
            return builder
        return None

    def needed_conjunction(self, c: ast.Conjunction) -> None:
        for atom in c.atoms:
            for side in (atom.left, atom.right):
                if side is not None and not isinstance(side.root, ast.ContextItem):
                    self.path(side, needed=True)
        for term in c.terms:
            self.needed_term(term)

    def needed_term(self, term: ast.Disjunction | ast.Negation) -> None:
        for inner in ast.term_conditions(term):
            self.needed_conjunction(inner)

    # ---------------------------------------------------------------- conditions

    def context_atom(self, atom: ast.Comparison, prefix: tuple[str, ...]) -> Atom:
        left = "/".join(prefix + atom.left.keyed_names) or WHOLE_ITEM
        right = None
        if atom.right is not None:
            right = "/".join(prefix + atom.right.keyed_names) or WHOLE_ITEM
        return Atom(left, atom.op, right, self.checked.compared_constant(atom))

    def context_paths(self, atom: ast.Comparison, prefix: tuple[str, ...]) -> list[str]:
        return [carried("/".join(prefix + side.keyed_names) or WHOLE_ITEM)
                for side in (atom.left, atom.right)
                if side is not None and isinstance(side.root, ast.ContextItem)]


def carried(path: str) -> str:
    """What a stream must carry for a path: the path itself, or for one through a name test
    (``What/Param[@name="RA"]/@value``) the elements tested, whole (``What/Param``): which of
    them has the name is only known from their content."""
    if "[" not in path:
        return path
    head, _, _ = path.partition("[")
    return head


# ============================================================================ condition text


def comparison_text(a: ast.Comparison) -> str:
    """A comparison as text, for the join and residual conditions of post-processing."""
    if a.right is None:
        assert a.constant is not None
        if a.op in STRING_FUNCTIONS:
            return f"{a.op}({ast.path_text(a.left)}, {a.constant.text})"
        return f"{ast.path_text(a.left)} {a.op} {a.constant.text}"
    text = f"{ast.path_text(a.left)} {a.op} {ast.path_text(a.right)}"
    if a.constant is not None:  # (``+ 0`` too: it compares numbers, not strings)
        assert isinstance(a.constant, ast.Number)
        text += (" - " + a.constant.text.lstrip("-")) if a.constant.value < 0 else " + " + a.constant.text
    return text


def conjunction_text(c: ast.Conjunction) -> str:
    """A conjunction as text, its comparisons and terms joined by 'and'."""
    return " and ".join([*(comparison_text(a) for a in c.atoms), *(term_text(t) for t in c.terms)])


def term_text(t: ast.Disjunction | ast.Negation) -> str:
    if isinstance(t, ast.Negation):
        return f"not({conjunction_text(t.condition)})"
    return "(" + " or ".join(conjunction_text(a) for a in t.alternatives) + ")"
