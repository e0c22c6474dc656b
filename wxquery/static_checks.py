"""Static semantics of WXQuery: scopes, variable kinds and what makes sense on an infinite stream.

The checks here reject queries that parse but cannot be a continuous query: undefined
variables, paths below an aggregate value, aggregates over a whole (unbounded) stream, binding a
stream's document element instead of its items. They also classify every variable, which the
properties extraction and the evaluator rely on. Satisfiability of predicates is decided in
``sharing.predicate_graph`` (it needs the predicate graph), not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator, Literal

from . import ast
from .errors import WXQueryStaticError

VariableKind = Literal["item", "window", "aggregate"]


@dataclass(frozen=True)
class Binding:
    """What a variable stands for.

    ``stream``/``item_path`` name the input the variable derives from (``None`` for aggregates
    over non-stream data); ``sub_path`` is the path below a stream item the variable is bound to
    (empty when it is bound to whole items).
    """

    name: str
    kind: VariableKind
    clause: ast.ForClause | ast.LetClause
    stream: str | None
    item_path: tuple[str, ...]
    sub_path: tuple[str, ...]


@dataclass
class CheckedQuery:
    """A query that passed the static checks, with every variable reference resolved."""

    query: ast.Query
    bindings: dict[int, Binding]  # id(VarRef) -> binding it refers to
    clauses: dict[int, Binding]  # id(clause) -> binding it introduces

    def binding_of(self, ref: ast.VarRef) -> Binding:
        return self.bindings[id(ref)]

    def compared_constant(self, atom: ast.Comparison) -> Fraction | str:
        """What an atom compares with: its constant — or, for two paths compared without
        arithmetic, ``""`` when both are untyped content, compared as strings (XQuery 3.1's
        general comparison casts two ``xs:untypedAtomic`` values to ``xs:string``), and 0 when
        one is an aggregate's value, an ``xs:double`` to which the other is cast."""
        if atom.constant is not None:
            return atom.constant.value
        sides = (atom.left, atom.right)
        if any(s is not None and isinstance(s.root, ast.VarRef)
               and self.binding_of(s.root).kind == "aggregate" for s in sides):
            return Fraction(0)
        return ""


def check(query: ast.Query) -> CheckedQuery:
    checker = _Checker(query)
    checker.expr(query.body, {})
    return CheckedQuery(query, checker.bindings, checker.clauses)


class _Checker:
    def __init__(self, query: ast.Query) -> None:
        self.query = query
        self.bindings: dict[int, Binding] = {}
        self.clauses: dict[int, Binding] = {}

    # ------------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr, scope: dict[str, Binding]) -> None:
        if isinstance(e, ast.FLWR):
            self.flwr(e, scope)
        elif isinstance(e, ast.IfExpr):
            self.conjunction(e.condition, scope, context=None)
            self.expr(e.then, scope)
            self.expr(e.otherwise, scope)
        elif isinstance(e, ast.ElementConstructor):
            self.constructor(e, scope)
        elif isinstance(e, ast.SequenceExpr):
            for inner in ast.nested(e):
                self.expr(inner, scope)
        elif isinstance(e, ast.PathExpr):
            if attribute_path(e):
                text = ast.path_text(e)
                raise WXQueryStaticError(f"{text} is an attribute: it can be a result only as a path enclosed "
                                         f"directly in an element constructor, e.g. <a>{{ {text} }}</a> (not "
                                         f"through if, for or a sequence)", e.pos)
            self.output_path(e, scope)
        elif isinstance(e, ast.AggregateCall):
            self.aggregate(e, scope)
        elif isinstance(e, ast.NumberLiteral):
            pass
        else:  # pragma: no cover - the parser produces nothing else
            raise TypeError(type(e))

    def constructor(self, e: ast.ElementConstructor, scope: dict[str, Binding]) -> None:
        """An attribute enclosed in a constructor (``<a>{ $e/@x }…</a>``) becomes the new
        element's; as in XQuery it must come before any other content, once per name — and
        not in the query's outermost constructor, which stands for the result stream."""
        content, names = False, set()
        for attribute in e.attributes:
            self.attribute_value(e, attribute, scope)
            names.add("@" + attribute.name)
        for part in e.content:
            if isinstance(part, ast.Enclosed) and isinstance(part.expr, ast.PathExpr) and attribute_path(part.expr):
                path, name = part.expr, part.expr.names[-1]
                if e is self.query.body:
                    raise WXQueryStaticError(f"{ast.path_text(path)}: the outermost element stands for the result "
                                             f"stream and takes no attribute; put it in the items' element, "
                                             f"e.g. <a>{{ {ast.path_text(path)} }}</a>", part.pos)
                if content:
                    raise WXQueryStaticError(f"{ast.path_text(path)} comes after the content of <{e.name}>: an "
                                             f"attribute must come first (XQuery's XQTY0024)", part.pos)
                if name in names:
                    raise WXQueryStaticError(f"<{e.name}> would get attribute {name} twice (XQuery's "
                                             f"XQDY0025)", part.pos)
                names.add(name)
                self.output_path(path, scope)
                continue
            content = True
            if isinstance(part, ast.Enclosed):
                self.expr(part.expr, scope)
            elif isinstance(part, ast.ElementConstructor):
                self.constructor(part, scope)

    def attribute_value(self, e: ast.ElementConstructor, attribute: ast.AttributeConstructor,
                        scope: dict[str, Binding]) -> None:
        """``<a id="{ $e/@id }">``: not on the outermost element (as for an enclosed attribute),
        and only what makes a value at once — paths, aggregates, numbers — in braces."""
        if e is self.query.body:
            raise WXQueryStaticError(f"attribute {attribute.name}: the outermost element stands for the result "
                                     f"stream and takes no attribute; put it in the items' element", attribute.pos)
        for part in attribute.parts:
            if not isinstance(part, ast.Enclosed):
                continue
            if isinstance(part.expr, ast.PathExpr):
                self.output_path(part.expr, scope)
            elif isinstance(part.expr, ast.AggregateCall):
                self.aggregate(part.expr, scope)
            elif not isinstance(part.expr, ast.NumberLiteral):
                raise WXQueryStaticError(f"the value of attribute {attribute.name} takes paths, aggregates and "
                                         "numbers in braces, not a FLWR, an if, a sequence or an element",
                                         part.pos)

    def flwr(self, e: ast.FLWR, scope: dict[str, Binding]) -> None:
        scope = dict(scope)
        for clause in e.clauses:
            if isinstance(clause, ast.ForClause):
                binding = self.for_clause(clause, scope)
            else:
                self.aggregate(clause.aggregate, scope)
                stream = self.derived_stream(clause.aggregate.argument, scope)
                binding = Binding(clause.var, "aggregate", clause, stream, (), ())
            self.clauses[id(clause)] = binding
            scope[clause.var] = binding
        if e.where is not None:
            self.conjunction(e.where, scope, context=None)
        self.expr(e.ret, scope)

    def for_clause(self, clause: ast.ForClause, scope: dict[str, Binding]) -> Binding:
        source = clause.source
        self.path(source, scope, context=None)
        if attribute_path(source):
            raise WXQueryStaticError(f"a for clause iterates over elements, not over the attribute "
                                     f"{source.names[-1]}", source.steps[-1].pos)
        kind: VariableKind = "window" if clause.window is not None else "item"
        if isinstance(source.root, ast.StreamCall):
            self.stream_path(source)
            item_path = source.names[:2]
            sub_path = source.names[2:]
            stream: str | None = source.root.name
        else:
            assert isinstance(source.root, ast.VarRef)
            parent = self.bindings[id(source.root)]
            if parent.kind == "aggregate":
                raise WXQueryStaticError(f"${parent.name} is an aggregate value; a for clause "
                                         "iterates over items", source.pos)
            stream, item_path = parent.stream, parent.item_path
            sub_path = parent.sub_path + source.names
        if isinstance(clause.window, ast.TimeWindow) and not clause.window.ref:
            raise WXQueryStaticError("a time window needs a reference element", clause.window.pos)
        return Binding(clause.var, kind, clause, stream, item_path, sub_path)

    def stream_path(self, path: ast.PathExpr) -> None:
        assert isinstance(path.root, ast.StreamCall)
        name = path.root.name
        if len(path.steps) < 2:
            raise WXQueryStaticError(
                f'stream("{name}")' + "".join("/" + s for s in path.names) + " is the whole, "
                f"unbounded stream; bind its items, e.g. stream(\"{name}\")/{name}/item", path.pos)
        if path.steps[0].predicates:
            raise WXQueryStaticError("predicates on a stream's document element are not "
                                     "supported; filter its items instead", path.steps[0].pos)

    def output_path(self, path: ast.PathExpr, scope: dict[str, Binding]) -> None:
        self.path(path, scope, context=None)
        if isinstance(path.root, ast.StreamCall):
            self.stream_path(path)

    def aggregate(self, call: ast.AggregateCall, scope: dict[str, Binding]) -> None:
        arg = call.argument
        if isinstance(arg.root, ast.StreamCall):
            raise WXQueryStaticError(
                f"{call.function}() over the unbounded stream \"{arg.root.name}\" never "
                f"produces a value; aggregate over a window, e.g. for $w in "
                f"stream(\"{arg.root.name}\")/.../item |count 10| let $a := {call.function}($w/...)",
                call.pos)
        self.path(arg, scope, context=None)

    def derived_stream(self, path: ast.PathExpr, scope: dict[str, Binding]) -> str | None:
        if isinstance(path.root, ast.VarRef):
            return self.bindings[id(path.root)].stream
        return None

    # ------------------------------------------------------------------ paths & conditions

    def path(self, path: ast.PathExpr, scope: dict[str, Binding], context: object) -> None:
        root = path.root
        if isinstance(root, ast.VarRef):
            binding = scope.get(root.name)
            if binding is None:
                known = ", ".join("$" + n for n in sorted(scope)) or "none"
                raise WXQueryStaticError(f"undefined variable ${root.name} (variables in scope: "
                                         f"{known})", root.pos)
            self.bindings[id(root)] = binding
            if binding.kind == "aggregate" and path.steps:
                raise WXQueryStaticError(f"${root.name} is an aggregate value and has no elements "
                                         f"(cannot select /{path.steps[0].name})", path.steps[0].pos)
        elif isinstance(root, ast.ContextItem) and context is None:
            raise WXQueryStaticError("the context item is only defined inside a path predicate",
                                     root.pos)
        for step in path.steps:
            for predicate in step.predicates:
                self.conjunction(predicate, scope, context=step)

    def conjunction(self, c: ast.Conjunction, scope: dict[str, Binding], context: object) -> None:
        for term in c.terms:
            for inner in ast.term_conditions(term):
                self.conjunction(inner, scope, context)
        for atom in c.atoms:
            if context is not None:  # a path predicate: it reads the element it filters, nothing else
                for side in (atom.left, atom.right):
                    if side is not None and isinstance(side.root, ast.VarRef):
                        raise WXQueryStaticError(
                            f"a path predicate compares the element it filters (relative paths, or .), "
                            f"not ${side.root.name}: move the comparison into a where clause",
                            side.root.pos)
            self.path(atom.left, scope, context)
            root = atom.left.root
            if (isinstance(atom.constant, ast.String) and isinstance(root, ast.VarRef)
                    and self.bindings[id(root)].kind == "aggregate"):
                raise WXQueryStaticError(f"${root.name} is an aggregate value, a number: it compares with "
                                         f"numbers, not with the string {atom.constant.text}", atom.pos)
            if atom.right is not None:
                self.path(atom.right, scope, context)
                numbers = [s.root.name for s in (atom.left, atom.right) if isinstance(s.root, ast.VarRef)
                           and self.bindings[id(s.root)].kind == "aggregate"]
                if atom.op == "!=" and numbers:
                    raise WXQueryStaticError(f"${numbers[0]} is an aggregate value, a number: '!=' compares "
                                             "strings only; compare numbers with =, <, <=, > or >=", atom.pos)


def iter_comparisons(c: ast.Conjunction | None) -> Iterator[ast.Comparison]:
    """Every comparison of a condition, those inside its 'or' and 'not()' terms too."""
    if c is not None:
        yield from c.atoms
        for term in c.terms:
            for inner in ast.term_conditions(term):
                yield from iter_comparisons(inner)


def attribute_path(path: ast.PathExpr) -> bool:
    """Whether the path ends in an attribute (``$e/pos/@ra``)."""
    return bool(path.steps) and path.steps[-1].name.startswith("@")

