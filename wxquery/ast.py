"""The typed abstract syntax tree of WXQuery (Definition 2.1 of the StreamGlobe paper).

The tree is immutable and position-annotated; it is what the static checks, the properties
extraction, the reference evaluator and (later) the executors consume. It never holds runtime
values. Numeric constants are kept as exact ``Fraction``s together with their source text, because
predicate reasoning must be exact while evaluation follows XQuery's double arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union

from .errors import Position
from .values import string_literal

AGGREGATE_FUNCTIONS = ("min", "max", "sum", "count", "avg")


@dataclass(frozen=True)
class Number:
    """A numeric literal: exact value plus the text it was written as."""

    value: Fraction
    text: str

    def __float__(self) -> float:
        return float(self.text) if self.text else float(self.value)


@dataclass(frozen=True)
class String:
    """A string literal a condition compares with (its value, references resolved)."""

    value: str

    @property
    def text(self) -> str:
        """The literal as it can be written back."""
        return string_literal(self.value)


# ----------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class StreamCall:
    """``stream("name")``: the (possibly infinite) document node of a registered stream."""

    name: str
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class VarRef:
    """``$name``."""

    name: str
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class ContextItem:
    """The context item inside a path predicate (written as ``.`` or implied by a relative path)."""

    pos: Position = field(compare=False)


PathRoot = Union[StreamCall, VarRef, ContextItem]


@dataclass(frozen=True)
class Step:
    """One child-axis step ``name[cond]...``."""

    name: str
    predicates: tuple["Conjunction", ...]
    pos: Position = field(compare=False)

    @property
    def name_test(self) -> tuple[str, str] | None:
        """(key, value) when the step picks its elements by a name: one predicate comparing an
        attribute or a child with a string literal, ``Param[@name = "RA"]`` (else None)."""
        if len(self.predicates) != 1 or len(self.predicates[0].atoms) != 1:
            return None
        atom = self.predicates[0].atoms[0]
        if (atom.op != "=" or atom.right is not None or not isinstance(atom.constant, String)
                or not isinstance(atom.left.root, ContextItem) or len(atom.left.steps) != 1
                or atom.left.steps[0].predicates):
            return None
        return atom.left.steps[0].name, atom.constant.value

    @property
    def keyed_name(self) -> str:
        """The step as a path names it: ``Param[@name="RA"]`` for a name test, else its name."""
        test = self.name_test
        return self.name if test is None else f"{self.name}[{test[0]}={string_literal(test[1])}]"


@dataclass(frozen=True)
class PathExpr:
    """A root (stream, variable or context item) followed by child steps, possibly with predicates."""

    root: PathRoot
    steps: tuple[Step, ...]
    pos: Position = field(compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    @property
    def has_predicates(self) -> bool:
        return any(s.predicates for s in self.steps)

    @property
    def keyed_names(self) -> tuple[str, ...]:
        """The step names, name tests included (``Step.keyed_name``): what a condition's path
        is called in properties and operators, ``What/Param[@name="RA"]/@value``."""
        return tuple(s.keyed_name for s in self.steps)


def path_text(p: PathExpr) -> str:
    """A path as the query would write it, without predicates: ``$v/a/b``, ``.`` or ``./a``
    (in errors, and in the conditions post-processing evaluates)."""
    head = "$" + p.root.name if isinstance(p.root, VarRef) else "."
    return head + "".join("/" + n for n in p.names)


# ----------------------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Comparison:
    """An atomic predicate ``left θ right ± constant`` or ``left θ constant``.

    ``left`` and ``right`` are predicate-free paths (``PathExpr`` whose steps carry no
    predicates); ``right`` is None for a comparison with a constant. A ``String`` constant
    makes a string comparison (``right`` None; ``!=`` allowed).

    ``constant`` is None for two paths compared without arithmetic (``$p/a < $q/b``): XQuery
    compares two untyped values as strings, but an aggregate's value is a double, which makes
    the comparison numeric — which of the two only the bindings tell
    (``static_checks.CheckedQuery.compared_constant``). ``$p/a < $q/b + 0`` compares numbers.
    """

    left: PathExpr
    op: str
    right: PathExpr | None
    constant: Number | String | None
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class Conjunction:
    """``atom and atom and ...``, and in a where clause or an if condition also ``terms``
    joined to them by 'and': disjunctions and negations. The atoms are what the sharing layer
    reasons about (pushed into the network, matched, shared); a term is evaluated where the
    results are made (the subscriber's super-peer), so that the atoms beside it still filter
    upstream while the answer stays exactly XQuery's."""

    atoms: tuple[Comparison, ...]
    pos: Position = field(compare=False)
    terms: tuple["Disjunction | Negation", ...] = ()


@dataclass(frozen=True)
class Disjunction:
    """``c1 or c2 or ...`` (each a conjunction): holds when one of them holds."""

    alternatives: tuple[Conjunction, ...]
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class Negation:
    """``not(c)``: XQuery's ``fn:not`` of a condition's effective boolean value — true also
    where an element the condition reads is missing or not a number (so it is not the
    comparison with its operator reversed)."""

    condition: Conjunction
    pos: Position = field(compare=False)


def term_conditions(term: Disjunction | Negation) -> tuple[Conjunction, ...]:
    """The conditions inside an 'or' (its alternatives) or a 'not()' (the one it negates)."""
    return term.alternatives if isinstance(term, Disjunction) else (term.condition,)


# ----------------------------------------------------------------------------- windows


@dataclass(frozen=True)
class CountWindow:
    """``|count Δ step μ|``: a window starts at every μ-th item and holds Δ items."""

    size: int
    step: int
    pos: Position = field(compare=False)
    by: tuple[tuple[str, ...], ...] = ()  # ``by chip, @src``: a window sequence per keys' values

    @property
    def kind(self) -> str:
        return "count"

    @property
    def key(self) -> str | None:
        """The key paths of a partitioned window (``|count 4 by chip|``; ``"chip, @src"`` for
        several, as ``WindowSpec.key``), None if it is not."""
        return window_key_text(self.by)


@dataclass(frozen=True)
class TimeWindow:
    """``|ref diff Δ step μ|``: window k covers reference values in ``[k·μ, k·μ+Δ)``."""

    ref: tuple[str, ...]
    size: Number
    step: Number
    pos: Position = field(compare=False)
    by: tuple[tuple[str, ...], ...] = ()  # ``by chip, @src``: a window sequence per keys' values

    @property
    def kind(self) -> str:
        return "diff"

    @property
    def key(self) -> str | None:
        """The key paths of a partitioned window (``|t diff 10 by chip|``), None if it is not."""
        return window_key_text(self.by)


Window = Union[CountWindow, TimeWindow]


def window_key_text(by: tuple[tuple[str, ...], ...]) -> str | None:
    """Key paths as a window's specification names them: ``chip``, or ``chip, @src`` for a
    window partitioned by several (None: not partitioned)."""
    return ", ".join("/".join(names) for names in by) or None


# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class ForClause:
    var: str
    source: PathExpr
    window: Window | None
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class LetClause:
    """``let $a := Φ(path)`` — WXQuery lets bind aggregates only."""

    var: str
    aggregate: "AggregateCall"
    pos: Position = field(compare=False)


Clause = Union[ForClause, LetClause]


@dataclass(frozen=True)
class AggregateCall:
    function: str
    argument: PathExpr
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class FLWR:
    clauses: tuple[Clause, ...]
    where: Conjunction | None
    ret: "Expr"
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class IfExpr:
    condition: Conjunction
    then: "Expr"
    otherwise: "Expr"
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class SequenceExpr:
    """``(α, β, ...)``; the empty sequence ``()`` has no items."""

    items: tuple["Expr", ...]
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class Text:
    """Literal character content of a direct element constructor (boundary whitespace removed)."""

    value: str
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class Enclosed:
    """``{ expr }`` inside a direct element constructor."""

    expr: "Expr"
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class AttributeConstructor:
    """``name="text {expr} text"`` in a direct element constructor's start tag: its value is
    the text with each enclosed expression's atomized values joined by spaces."""

    name: str
    parts: tuple[Enclosed | Text, ...]
    pos: Position = field(compare=False)


@dataclass(frozen=True)
class ElementConstructor:
    name: str
    content: tuple[Union["ElementConstructor", Enclosed, Text], ...]
    pos: Position = field(compare=False)
    attributes: tuple[AttributeConstructor, ...] = ()


@dataclass(frozen=True)
class NumberLiteral:
    number: Number
    pos: Position = field(compare=False)


Expr = Union[FLWR, IfExpr, SequenceExpr, ElementConstructor, PathExpr, AggregateCall, NumberLiteral]


def nested(e: Expr) -> tuple[Expr, ...]:
    """What a sequence or a direct element constructor holds, in order: the sequence's items, the
    constructor's expressions enclosed in its attributes' values, then its nested constructors and
    enclosed expressions (not its literal text). Every walk
    over a query descends into these the same way; what it does at the other nodes is its own."""
    if isinstance(e, SequenceExpr):
        return e.items
    if isinstance(e, ElementConstructor):
        values = tuple(p.expr for a in e.attributes for p in a.parts if isinstance(p, Enclosed))
        return values + tuple(p.expr if isinstance(p, Enclosed) else p for p in e.content if not isinstance(p, Text))
    return ()


def top_level_flwrs(e: Expr) -> Iterator[FLWR]:
    """The FLWRs not inside another FLWR, in order: those an evaluation runs once (element
    constructors, sequences and if-branches around them are evaluated once)."""
    if isinstance(e, FLWR):
        yield e
    elif isinstance(e, IfExpr):
        yield from top_level_flwrs(e.then)
        yield from top_level_flwrs(e.otherwise)
    else:
        for inner in nested(e):
            yield from top_level_flwrs(inner)


@dataclass(frozen=True)
class Query:
    """A parsed subscription: the body plus the source text it came from."""

    body: Expr
    source: str = field(compare=False, repr=False)

    @property
    def root_name(self) -> str | None:
        """The outermost constructor names the result stream's root element."""
        return self.body.name if isinstance(self.body, ElementConstructor) else None
