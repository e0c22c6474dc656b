"""The reference evaluator: WXQuery over finite streams, with exactly the semantics of DESIGN.md §3.

It is production code, not a test oracle: it is the post-processing that runs at a subscriber's
super-peer and in archive queries, so it is built on the one implementation of each rule in
``wxquery.operators`` (comparisons, windows and event time, aggregates) and ``values``, which the
executors run too. The independent oracle is Saxon-HE, which the differential tests
(``tests/wxquery/test_oracle_saxon.py`` and the suites built on ``tests/oracle.py``) compare it
and the executors with. It compiles the AST into nested Python closures once and then pulls
items through them one at a time, so results stream out while the input is still being read.

This module is the public API (``evaluate``, ``post_process``, ``Evaluation``) and the
serialization of results. The parts:

- ``evaluation_context``: the inputs of an evaluation and the value and closure types;
- ``expression_compiler``: expressions, paths, conditions, aggregates → closures;
- ``flwr_compiler``: FLWR clause chains and windows; ``QueryCompiler`` is the complete compiler;
- ``item_navigation``: child-axis navigation and atomization of stream items;
- ``result_content``: XQuery's content rules for constructed and serialized results.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from lxml import etree

from . import ast
from .evaluation_context import CondFn, Env, EvaluationContext, SeqFn, Value
from .flwr_compiler import QueryCompiler, reference_value
from .operators.windows import WindowCounters
from .result_content import TextNode, escape_text
from .static_checks import CheckedQuery, check
from .stream_document import StreamDocument
from .values import format_atomic

__all__ = ["DEFAULT_RESULT_ROOT", "CondFn", "Env", "Evaluation", "EvaluationContext", "SeqFn",
           "Value", "evaluate", "post_process", "reference_value", "run_to_string"]

DEFAULT_RESULT_ROOT = "results"


class Evaluation:
    """A compiled query bound to its inputs; iterate ``serialized_items()`` to run it."""

    def __init__(self, checked: CheckedQuery, context: EvaluationContext) -> None:
        self.checked = checked
        self.context = context
        self.compiler = QueryCompiler(context)
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
        """Late and missing items of the time windows, counted as the evaluation runs."""
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
            elif isinstance(value, TextNode):
                yield escape_text(value.text)
                previous_atomic = False
            else:
                text = format_atomic(value)
                if previous_atomic and part == previous_part:
                    yield " "
                yield escape_text(text)
                previous_atomic = True
            previous_part = part

    def document(self) -> str:
        """The whole result as one document under the constructor's (or the default) root."""
        body = "".join(self.serialized_items())
        if not body:
            return f"<{self.root_name}/>"
        return f"<{self.root_name}>{body}</{self.root_name}>"


def evaluate(query: ast.Query | CheckedQuery, streams: Mapping[str, StreamDocument] | StreamDocument,
             lateness: float = 0.0) -> Evaluation:
    """Evaluate a query (checked here if it is not yet) over stream documents, by name, or one
    document for every stream."""
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
