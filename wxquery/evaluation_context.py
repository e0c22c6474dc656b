"""What an evaluation of the reference evaluator works with: its inputs and its value types.

The compiler turns the AST into closures over an environment; these are the names for the
environment, the values in it and the two shapes of compiled code (a sequence-producing
expression and a condition), and the ``EvaluationContext`` every compiled closure reads its
inputs from — stream documents, or in post-processing what the network delivered.

Values: lxml elements (stream items, copies, constructed results), ``float`` (xs:double),
``int`` (xs:integer) and ``Decimal`` (xs:decimal literals). A sequence is a Python list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from .errors import InputDocumentError
from .operators.windows import WindowCounters
from .stream_document import StreamDocument

Env = dict
Value = object
SeqFn = Callable[[Env], Iterable[Value]]
CondFn = Callable[[Env, object], bool]


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
        """The document of ``stream("name")``; a single document serves every name."""
        if isinstance(self.streams, StreamDocument):
            return self.streams
        try:
            return self.streams[name]
        except KeyError:
            known = ", ".join(sorted(self.streams)) or "none"
            raise InputDocumentError(f'no input given for stream("{name}") (inputs: {known})',
                                     "<inputs>") from None

