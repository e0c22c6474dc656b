"""The reference evaluator: WXQuery over finite streams, with exactly the semantics of DESIGN.md §3.

It is the semantic yardstick for every executor (inline, Spark) and is checked differentially
against Saxon-HE. It compiles the AST into nested Python closures once and then pulls items
through them one at a time, so results stream out while the input is still being read.

Values: lxml elements (stream items, copies, constructed results), ``float`` (xs:double),
``int`` (xs:integer) and ``Decimal`` (xs:decimal literals). A sequence is a Python list.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Callable, Iterable, Iterator, Mapping

from lxml import etree

from . import ast
from .errors import InputDocumentError
from .static_checks import CheckedQuery, check
from .stream_document import StreamDocument, string_value
from .values import NAN, cast_double, compare, format_atomic
from .algebra import WindowSpec
from .operators.aggregates import aggregate_values
from .operators.records import WindowRecord
from .operators.windows import CountWindows, TimeWindows, WindowClock, WindowCounters

Env = dict
Value = object
SeqFn = Callable[[Env], Iterable[Value]]
CondFn = Callable[[Env, object], bool]

DEFAULT_RESULT_ROOT = "results"


@dataclass
class EvaluationContext:
    """Inputs of an evaluation. In post-processing at a subscriber's super-peer, ``prepared``
    maps a for clause (by id) to the items or window records the network delivered for it, and
    ``applied``/``aggregated`` name the conditions (ids of comparisons) and windows (ids of for
    clauses) already applied upstream, which must not be applied twice."""

    streams: Mapping[str, StreamDocument] | StreamDocument
    lateness: float = 0.0
    stats: WindowCounters = field(default_factory=WindowCounters)
    prepared: Mapping[int, Iterable] = field(default_factory=dict)
    applied: frozenset[int] = frozenset()
    aggregated: frozenset[int] = frozenset()

    def stream(self, name: str) -> StreamDocument:
        if isinstance(self.streams, StreamDocument):
            return self.streams
        try:
            return self.streams[name]
        except KeyError:
            known = ", ".join(sorted(self.streams)) or "none"
            raise InputDocumentError(f'no input given for stream("{name}") (inputs: {known})',
                                     "<inputs>") from None


# ============================================================================ public API


class Evaluation:
    """A compiled query bound to its inputs; iterate ``serialized_items()`` to run it."""

    def __init__(self, checked: CheckedQuery, context: EvaluationContext) -> None:
        self.checked = checked
        self.context = context
        self.compiler = _Compiler(context)
        body = checked.query.body
        if isinstance(body, ast.ElementConstructor):
            self.root_name = body.name
            self.parts = body.content
        else:
            self.root_name = DEFAULT_RESULT_ROOT
            self.parts = (ast.Enclosed(body, body.pos),)
        self.compiled = [self.compiler.content_part(p) for p in self.parts]

    @property
    def stats(self) -> WindowCounters:
        return self.context.stats

    def values(self) -> Iterator[tuple[int, Value]]:
        """(part index, value) of every result value, in order, as they are produced."""
        for index, fn in enumerate(self.compiled):
            for v in fn({}):
                yield index, v

    def serialized_items(self) -> Iterator[str]:
        """The result items as XML text, with XQuery's content rules: adjacent atomic values of
        one enclosed expression are separated by a single space."""
        previous_part = -1
        previous_atomic = False
        for part, value in self.values():
            if isinstance(value, etree._Element):
                yield etree.tostring(value, encoding="unicode", with_tail=False)
                previous_atomic = False
            elif isinstance(value, _TextNode):
                yield _escape(value.text)
                previous_atomic = False
            else:
                text = format_atomic(value)
                if previous_atomic and part == previous_part:
                    yield " "
                yield _escape(text)
                previous_atomic = True
            previous_part = part

    def document(self) -> str:
        body = "".join(self.serialized_items())
        if not body:
            return f"<{self.root_name}/>"
        return f"<{self.root_name}>{body}</{self.root_name}>"


def evaluate(query: ast.Query | CheckedQuery, streams: Mapping[str, StreamDocument] | StreamDocument,
             lateness: float = 0.0) -> Evaluation:
    checked = query if isinstance(query, CheckedQuery) else check(query)
    return Evaluation(checked, EvaluationContext(streams, lateness))


def post_process(query: CheckedQuery, delivered: Mapping[int, Iterable], applied: frozenset[int],
                 aggregated: frozenset[int], lateness: float = 0.0) -> Evaluation:
    """Evaluate a subscription at its super-peer over what the network delivered for each input
    (by id of the input's for clause): items with the upstream conditions applied, or window
    records for windows aggregated upstream."""
    context = EvaluationContext({}, lateness, prepared=delivered, applied=applied,
                                aggregated=aggregated)
    return Evaluation(query, context)


def run_to_string(query_text: str, document: str) -> str:
    """Convenience for tests: parse, check and evaluate a query over one document text."""
    from .parser import parse

    return evaluate(parse(query_text), StreamDocument.from_text(document)).document()


# ============================================================================ helpers


@dataclass(frozen=True)
class _TextNode:
    """Literal text of a constructor that ends up directly in the result stream."""

    text: str


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _atomize(value: Value) -> float:
    """Untyped element content → xs:double; numbers stay numbers (as doubles for comparison)."""
    if isinstance(value, etree._Element):
        return cast_double(string_value(value))
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Decimal):
        return float(value)
    return NAN


def _children(elements: Iterable[Value], name: str) -> list:
    """Child elements named ``name`` of every element (static checks ensure paths only start
    at nodes)."""
    out: list = []
    for el in elements:
        out.extend(el.iterchildren(name))
    return out


def _navigate_items(items: Iterable[Value], item_filter: Callable[[Value], bool] | None,
                    rest: Callable[[list], list] | None) -> Iterator[Value]:
    """Stream items that pass the item step's predicates, then the path's remaining steps."""
    for item in items:
        if item_filter is not None and not item_filter(item):
            continue
        if rest is None:
            yield item
        else:
            yield from rest([item])


def _navigator(names: tuple[str, ...]) -> Callable[[Iterable[Value]], list]:
    """Child-axis navigation along ``names`` from a sequence of elements, in document order.

    One step iterates children directly; longer paths use a compiled XPath (explicit ``child::``
    axes, so that element names such as ``and`` or ``count`` are never read as operators).
    """
    if len(names) == 1:
        name = names[0]
        return lambda elements: _children(elements, name)
    xpath = etree.XPath("/".join(f"child::{n}" for n in names))

    def navigate(elements: Iterable[Value]) -> list:
        out: list = []
        for el in elements:
            out.extend(xpath(el))
        return out

    return navigate


def _append_text(parent: etree._Element, text: str) -> None:
    if len(parent):
        last = parent[-1]
        last.tail = (last.tail or "") + text
    else:
        parent.text = (parent.text or "") + text


def _copy(el: etree._Element) -> etree._Element:
    c = copy.deepcopy(el)
    c.tail = None
    return c


def _literal_value(number: ast.Number) -> Value:
    text = number.text.lstrip("+")
    if "e" in text or "E" in text:
        return float(text)
    if "." in text:
        return Decimal(text)
    return int(text)


# ============================================================================ compiler


class _Compiler:
    def __init__(self, context: EvaluationContext) -> None:
        self.context = context

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
            value = _literal_value(e.number)
            return lambda env: [value]
        raise TypeError(type(e))  # pragma: no cover

    def content_part(self, part: ast.ElementConstructor | ast.Enclosed | ast.Text) -> SeqFn:
        if isinstance(part, ast.Text):
            node = _TextNode(part.value)
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

        def build(env: Env) -> etree._Element:
            el = etree.Element(name)
            for kind, payload in parts:
                if kind == "text":
                    _append_text(el, payload)  # type: ignore[arg-type]
                elif kind == "element":
                    el.append(payload(env))  # type: ignore[operator]
                else:
                    previous_atomic = False
                    for v in payload(env):  # type: ignore[operator]
                        if isinstance(v, etree._Element):
                            el.append(_copy(v))
                            previous_atomic = False
                        elif isinstance(v, _TextNode):
                            _append_text(el, v.text)
                            previous_atomic = False
                        else:
                            _append_text(el, (" " if previous_atomic else "") + format_atomic(v))
                            previous_atomic = True
            return el

        return build

    # ---------------------------------------------------------------- paths

    def path(self, p: ast.PathExpr, prepared: Iterable | None = None) -> SeqFn:
        root = p.root
        steps = list(p.steps)
        if prepared is not None:
            item_filter = self.step_filter(steps[1])
            rest = self.steps(steps[2:])
            delivered = prepared

            return lambda env: _navigate_items(delivered, item_filter, rest)
        if isinstance(root, ast.StreamCall):
            document = self.context.stream(root.name)
            root_step, item_step = steps[0], steps[1]
            item_filter = self.step_filter(item_step)
            rest = self.steps(steps[2:])
            return lambda env: _navigate_items(document.items(root_step.name, item_step.name),
                                               item_filter, rest)
        rest = self.steps(steps)
        if isinstance(root, ast.VarRef):
            var = root.name
            if rest is None:
                return lambda env: env[var]
            return lambda env: rest(env[var])
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
            return _navigator(tuple(s.name for s in steps))
        compiled = [(s.name, self.step_filter(s)) for s in steps]

        def navigate(elements: list) -> list:
            current = elements
            for name, keep in compiled:
                current = _children(current, name)
                if keep is not None:
                    current = [el for el in current if keep(el)]
            return current

        return navigate

    # ---------------------------------------------------------------- conditions

    def conjunction(self, c: ast.Conjunction) -> CondFn:
        applied = self.context.applied
        atoms = [self.comparison(a) for a in c.atoms if id(a) not in applied]
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

    def operand(self, p: ast.PathExpr) -> Callable[[Env], list[float]]:
        """The atomized values of a condition operand as doubles."""
        root = p.root
        names = p.names
        key = root.name if isinstance(root, ast.VarRef) else "."

        if len(names) == 1:
            name = names[0]

            def single_step(env: Env) -> list[float]:
                out = []
                for el in env[key]:
                    if isinstance(el, etree._Element):
                        for child in el.iterchildren(name):
                            out.append(cast_double(string_value(child)))
                return out

            return single_step

        navigate = _navigator(names) if names else (lambda elements: list(elements))

        def values(env: Env) -> list[float]:
            return [_atomize(v) for v in navigate(env[key])]

        return values

    def comparison(self, a: ast.Comparison) -> CondFn:
        left = self.operand(a.left)
        op = a.op
        constant = float(a.constant)
        if a.right is None:
            def against_constant(env: Env, ctx: object) -> bool:
                for x in left(env):
                    if compare(op, x, constant):
                        return True
                return False

            return against_constant
        right = self.operand(a.right)
        plus = a.constant.value != 0

        def against_path(env: Env, ctx: object) -> bool:
            rights = right(env)
            if not rights:
                return False
            if plus:
                rights = [y + constant for y in rights]
            for x in left(env):
                for y in rights:
                    if compare(op, x, y):
                        return True
            return False

        return against_path

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
            return plain(env)

        return aggregate

    def plain_aggregate(self, call: ast.AggregateCall) -> Callable[[Env], list]:
        arg = self.path(call.argument)
        fn = call.function
        if fn == "count":
            return lambda env: [sum(1 for _ in arg(env))]

        def compute(env: Env) -> list:
            return aggregate_values(fn, [_atomize(v) for v in arg(env)])

        return compute

    # ---------------------------------------------------------------- FLWR

    def flwr(self, e: ast.FLWR) -> SeqFn:
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

            def bind_records(env: Env) -> Iterator[Env]:
                for bound in upstream(env):
                    for record in records:
                        yield {**bound, var: record}

            return bind_records
        source = self.path(clause.source, prepared)
        window = clause.window
        windows: Callable[[Iterable[Value]], Iterator[list]] | None
        if window is None:
            windows = None
        elif isinstance(window, ast.CountWindow):
            windows = _count_windows(window.size, window.step)
        else:
            windows = self.time_windows(window)

        def bind_for(env: Env) -> Iterator[Env]:
            for bound in upstream(env):
                if windows is None:
                    for item in source(bound):
                        yield {**bound, var: [item]}
                else:
                    for contents in windows(source(bound)):
                        yield {**bound, var: contents}

        return bind_for

    def time_windows(self, w: ast.TimeWindow) -> Callable[[Iterable[Value]], Iterator[list]]:
        return _time_windows(w.ref, w.size.value, w.step.value, self.context.lateness,
                             self.context.stats)


# ============================================================================ windows


def _count_windows(size: int, step: int) -> Callable[[Iterable[Value]], Iterator[list]]:
    def windows(items: Iterable[Value]) -> Iterator[list]:
        assigner: CountWindows[Value] = CountWindows(size, step)
        for item in items:
            for w in assigner.push(item):
                yield w.items

    return windows


def reference_value(ref: tuple[str, ...]) -> Callable[[Value], float]:
    """The window reference of an item: its first ``ref`` element as a double (NaN if absent)."""

    def reference(item: Value) -> float:
        current = [item]
        for name in ref:
            current = _children(current, name)
        return _atomize(current[0]) if current else NAN

    return reference


def _time_windows(ref: tuple[str, ...], size: Fraction, step: Fraction, lateness: float,
                  stats: WindowCounters) -> Callable[[Iterable[Value]], Iterator[list]]:
    spec = WindowSpec("diff", size, step, "/".join(ref))
    reference = reference_value(ref)

    def windows(items: Iterable[Value]) -> Iterator[list]:
        clock = WindowClock()
        assigner: TimeWindows[Value] = TimeWindows(spec, reference, lateness, clock)
        try:
            for item in items:
                for w in assigner.push(item):
                    yield w.items
            for w in assigner.flush():
                yield w.items
        finally:
            stats.add(clock.counters())

    return windows
