"""The expression compiler of the reference evaluator: AST → nested Python closures.

Compiling once and then pulling items through closures lets results stream out while the input
is still being read. This layer compiles everything but FLWR expressions: sequences, if,
constructors, paths with their predicates, conditions and aggregates. FLWR expressions bind
variables over streams and windows; the subclass ``QueryCompiler`` (``flwr_compiler``) compiles
them, reached from here through the abstract ``flwr``.

In post-processing, conditions already applied upstream (``context.applied``) are skipped, and
an aggregate over a window variable bound to a ``WindowRecord`` reads the record's final value
instead of recomputing it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from decimal import Decimal
from typing import Callable, Iterable

from lxml import etree

from . import ast
from .evaluation_context import CondFn, Env, EvaluationContext, SeqFn, Value
from .item_navigation import (
    Attribute,
    Partitioned,
    atomize,
    bound_roots,
    child_elements,
    navigate_items,
    navigator,
    text_of,
)
from .operators.aggregates import aggregate_values
from .operators.comparisons import comparison as compiled_comparison
from .operators.records import WindowRecord
from .result_content import TextNode, append_text, detached_copy
from .stream_document import string_value
from .values import cast_double, format_atomic


def literal_value(number: ast.Number) -> Value:
    """A numeric literal's XQuery type follows its spelling: xs:double with an exponent,
    xs:decimal with a point, xs:integer otherwise."""
    text = number.text.lstrip("+")
    if "e" in text or "E" in text:
        return float(text)
    if "." in text:
        return Decimal(text)
    return int(text)


class ExpressionCompiler(ABC):
    """Compiles expressions, paths, conditions and aggregates against one evaluation context."""

    def __init__(self, context: EvaluationContext) -> None:
        self.context = context

    @abstractmethod
    def flwr(self, e: ast.FLWR) -> SeqFn:
        """A FLWR expression (see ``QueryCompiler``)."""

    # ---------------------------------------------------------------- expressions

    def expr(self, e: ast.Expr) -> SeqFn:
        if isinstance(e, ast.FLWR):
            return self.flwr(e)
        if isinstance(e, ast.PathExpr):
            return self.path(e)
        if isinstance(e, ast.ElementConstructor):
            build = self.constructor(e)
            return lambda env: [build(env)]
        if isinstance(e, ast.SequenceExpr):
            parts = [self.expr(i) for i in e.items]
            return lambda env: [v for p in parts for v in p(env)]
        if isinstance(e, ast.IfExpr):
            cond = self.conjunction(e.condition)
            then, otherwise = self.expr(e.then), self.expr(e.otherwise)
            return lambda env: then(env) if cond(env, None) else otherwise(env)
        if isinstance(e, ast.AggregateCall):
            agg = self.aggregate(e)
            return lambda env: agg(env)
        if isinstance(e, ast.NumberLiteral):
            value = literal_value(e.number)
            return lambda env: [value]
        raise TypeError(type(e))  # pragma: no cover

    def content_part(self, part: ast.ElementConstructor | ast.Enclosed | ast.Text) -> SeqFn:
        if isinstance(part, ast.Text):
            node = TextNode(part.value)
            return lambda env: [node]
        if isinstance(part, ast.Enclosed):
            return self.expr(part.expr)
        return self.expr(part)

    def constructor(self, e: ast.ElementConstructor) -> Callable[[Env], etree._Element]:
        name = e.name
        parts: list[tuple[str, object]] = []
        for part in e.content:
            if isinstance(part, ast.Text):
                parts.append(("text", part.value))
            elif isinstance(part, ast.ElementConstructor):
                parts.append(("element", self.constructor(part)))
            else:
                parts.append(("enclosed", self.expr(part.expr)))
        attributes = [(a.name, [p.value if isinstance(p, ast.Text) else self.expr(p.expr) for p in a.parts])
                      for a in e.attributes]

        def build(env: Env) -> etree._Element:
            el = etree.Element(name)
            for attribute, values in attributes:
                el.set(attribute, "".join(v if isinstance(v, str) else " ".join(map(atomized, v(env)))
                                          for v in values))
            for kind, payload in parts:
                if kind == "text":
                    append_text(el, payload)  # type: ignore[arg-type]
                elif kind == "element":
                    el.append(payload(env))  # type: ignore[operator]
                else:
                    previous_atomic = False
                    for v in payload(env):  # type: ignore[operator]
                        if isinstance(v, etree._Element):
                            el.append(detached_copy(v))
                            previous_atomic = False
                        elif isinstance(v, Attribute):  # (first in the constructor: static checks)
                            if v.name not in el.attrib:  # (XQuery stops at a second one, XQDY0025)
                                el.set(v.name, v.value)
                        elif isinstance(v, TextNode):
                            append_text(el, v.text)
                            previous_atomic = False
                        else:
                            append_text(el, (" " if previous_atomic else "") + format_atomic(v))
                            previous_atomic = True
            return el

        return build

    # ---------------------------------------------------------------- paths

    def path(self, p: ast.PathExpr, prepared: Iterable | None = None, keyed: bool = True) -> SeqFn:
        """``keyed``: the key path of a partitioned window reads its key (``bound_roots``), as
        everywhere but in an aggregate, which reads every item's."""
        root = p.root
        steps = list(p.steps)
        if prepared is not None:
            item_filter = self.step_filter(steps[1])
            rest = self.steps(steps[2:])
            delivered = prepared

            return lambda env: navigate_items(delivered, item_filter, rest)
        if isinstance(root, ast.StreamCall):
            document = self.context.stream(root.name)
            root_step, item_step = steps[0], steps[1]
            item_filter = self.step_filter(item_step)
            rest = self.steps(steps[2:])
            return lambda env: navigate_items(document.items(root_step.name, item_step.name),
                                               item_filter, rest)
        rest = self.steps(steps)
        if isinstance(root, ast.VarRef):
            var = root.name
            if rest is None:
                return lambda env: env[var]
            if not keyed or p.has_predicates:  # (a key is only its path as written: no predicate on it)
                return lambda env: rest(env[var])
            names = p.names
            return lambda env: rest(bound_roots(env[var], names))
        # Context item inside a predicate.
        if rest is None:
            return lambda env: env["."]
        return lambda env: rest(env["."])

    def step_filter(self, step: ast.Step) -> Callable[[etree._Element], bool] | None:
        if not step.predicates:
            return None
        conds = [self.conjunction(c) for c in step.predicates]

        def keep(el: etree._Element) -> bool:
            env = {".": [el]}
            return all(cond(env, el) for cond in conds)

        return keep

    def steps(self, steps: list[ast.Step]) -> Callable[[list], list] | None:
        if not steps:
            return None
        if not any(s.predicates for s in steps):
            return navigator(tuple(s.name for s in steps))
        compiled = [(s.name, self.step_filter(s)) for s in steps]

        def navigate(elements: list) -> list:
            current = elements
            for name, keep in compiled:
                current = child_elements(current, name)
                if keep is not None:
                    current = [el for el in current if keep(el)]
            return current

        return navigate

    # ---------------------------------------------------------------- conditions

    def conjunction(self, c: ast.Conjunction) -> CondFn:
        applied = self.context.applied
        atoms = [self.comparison(a) for a in c.atoms if id(a) not in applied]
        atoms += [self.term(t) for t in c.terms]  # (never applied upstream: see ``ast.Conjunction``)
        if not atoms:
            return lambda env, ctx: True
        if len(atoms) == 1:
            return atoms[0]

        def all_hold(env: Env, ctx: object) -> bool:
            for atom in atoms:
                if not atom(env, ctx):
                    return False
            return True

        return all_hold

    def term(self, t: ast.Disjunction | ast.Negation) -> CondFn:
        """XQuery's 'or' of conditions, or fn:not of one (its effective boolean value)."""
        if isinstance(t, ast.Negation):
            inner = self.conjunction(t.condition)
            return lambda env, ctx: not inner(env, ctx)
        alternatives = [self.conjunction(a) for a in t.alternatives]

        def any_holds(env: Env, ctx: object) -> bool:
            for alternative in alternatives:
                if alternative(env, ctx):
                    return True
            return False

        return any_holds

    def operand(self, p: ast.PathExpr) -> Callable[[Env], list[float]]:
        """The atomized values of a condition operand as doubles."""
        root = p.root
        names = p.names
        key = root.name if isinstance(root, ast.VarRef) else "."
        if p.has_predicates:  # (a name test: Param[@name = "RA"]/@value)
            through = self.steps(list(p.steps))
            assert through is not None
            return lambda env: [atomize(v) for v in through(env[key])]

        if len(names) == 1:
            name = names[0]

            if name.startswith("@"):
                return lambda env: [atomize(v) for v in child_elements(
                    [el for el in bound_roots(env[key], names) if isinstance(el, etree._Element)], name)]

            def single_step(env: Env) -> list[float]:
                out = []
                for el in bound_roots(env[key], names):
                    if isinstance(el, etree._Element):
                        for child in el.iterchildren(name):
                            out.append(cast_double(string_value(child)))
                return out

            return single_step

        navigate = navigator(names) if names else (lambda elements: list(elements))

        def values(env: Env) -> list[float]:
            return [atomize(v) for v in navigate(bound_roots(env[key], names))]

        return values

    def string_operand(self, p: ast.PathExpr) -> Callable[[Env], list[str]]:
        """The string values of a condition operand compared with a string literal (not cast)."""
        key = p.root.name if isinstance(p.root, ast.VarRef) else "."
        navigate = (self.steps(list(p.steps)) if p.has_predicates else navigator(p.names) if p.names
                    else (lambda elements: list(elements)))
        assert navigate is not None
        names = () if p.has_predicates else p.names  # (a key is only its path as written)
        return lambda env: [text_of(v) for v in navigate(bound_roots(env[key], names))
                            if isinstance(v, (etree._Element, Attribute))]

    def comparison(self, a: ast.Comparison) -> CondFn:
        """An atom of a condition: ``operators.comparisons`` over its operands' values."""
        if a.constant is None:
            return self.untyped_comparison(a)
        holds = compiled_comparison(a.op, a.constant.value).holds
        if isinstance(a.constant, ast.String):
            strings = self.string_operand(a.left)
            return lambda env, ctx: holds(strings(env))
        left = self.operand(a.left)
        if a.right is None:
            return lambda env, ctx: holds(left(env))
        right = self.operand(a.right)
        return lambda env, ctx: holds(left(env), right(env))

    def untyped_comparison(self, a: ast.Comparison) -> CondFn:
        """Two paths compared without arithmetic: as strings, as XQuery compares two untyped
        values — unless one side is an aggregate's value (a number), to which the other is cast
        (``static_checks.CheckedQuery.compared_constant`` decides the same for the network)."""
        assert a.right is not None
        as_numbers = compiled_comparison(a.op, 0).holds if a.op != "!=" else None  # (refused on numbers)
        as_strings = compiled_comparison(a.op, "").holds
        left, right = self.operand(a.left), self.operand(a.right)
        left_strings, right_strings = self.string_operand(a.left), self.string_operand(a.right)
        keys = [p.root.name for p in (a.left, a.right) if isinstance(p.root, ast.VarRef) and not p.names]

        def holds(env: Env, ctx: object) -> bool:
            if as_numbers is not None and any(_typed(env[k]) for k in keys):
                return as_numbers(left(env), right(env))
            return as_strings(left_strings(env), right_strings(env))

        return holds

    # ---------------------------------------------------------------- aggregates

    def aggregate(self, call: ast.AggregateCall) -> Callable[[Env], list]:
        plain = self.plain_aggregate(call)
        root = call.argument.root
        if not isinstance(root, ast.VarRef):
            return plain
        var = root.name
        element = "/".join(call.argument.names) or "."
        fn = call.function

        def aggregate(env: Env) -> list:
            bound = env[var]
            if isinstance(bound, WindowRecord):  # the window was aggregated upstream
                return bound.final(fn, element)
            if isinstance(bound, Partitioned) and bound.record is not None:
                return bound.record.final(fn, element)  # type: ignore[attr-defined]
            return plain(env)

        return aggregate

    def plain_aggregate(self, call: ast.AggregateCall) -> Callable[[Env], list]:
        arg = self.path(call.argument, keyed=False)
        fn = call.function
        if fn == "count":
            return lambda env: [sum(1 for _ in arg(env))]

        def compute(env: Env) -> list:
            return aggregate_values(fn, [atomize(v) for v in arg(env)])

        return compute

    # ---------------------------------------------------------------- FLWR


def _typed(bound: object) -> bool:
    """Whether a variable holds a typed number (an aggregate's value), not untyped content."""
    values = bound if isinstance(bound, list) else [bound]
    return any(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in values)


def atomized(v: object) -> str:
    """The string an attribute's value takes of one item: a node's string value (an element's
    text, descendants' included), a number as XQuery casts it to a string."""
    if isinstance(v, (etree._Element, Attribute)):
        return text_of(v)
    if isinstance(v, TextNode):
        return v.text
    return format_atomic(v)
