"""What one query may cost: size limits checked while parsing, and cooperative interruption.

A subscription is text from a possibly hostile client, and everything downstream of the parser
(static checks, property extraction, predicate reasoning, compilation, evaluation) costs time
and stack in proportion to what the text holds. The parser therefore refuses, with the position
of the offending construct, a query that is longer, more deeply nested, or holds more
comparisons or distinct paths than ``QueryLimits`` allow: later passes may then recurse and loop
freely. The defaults are far above any real subscription (and above the 4,000-atom benchmark
queries), and every limit is configurable.

Analysis that is fast in theory can still be slow on a crafted input, and a client that gave up
should not keep a super-peer busy: the analysis takes a ``Check`` — a callable it calls often in
its loops, which raises ``AnalysisInterrupted`` to stop it. This module stays pure: it knows
nothing of gRPC or threads; the super-peer builds an ``Interruption`` from its request context.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .errors import QueryLimitError

__all__ = ["DEFAULT_LIMITS", "AnalysisInterrupted", "Check", "Interruption", "QueryLimitError",
           "QueryLimits", "never_interrupted"]


@dataclass(frozen=True)
class QueryLimits:
    """How much one query may hold; each limit is named in the error that enforces it."""

    max_query_chars: int = 1_000_000
    """Characters of query text."""
    max_nesting_depth: int = 100
    """Nested expressions, element constructors, for/let bindings (each binding nests the rest
    of its FLWR) and parenthesised condition groups."""
    max_comparisons: int = 20_000
    """Comparisons (atomic predicates) in the whole query."""
    max_paths: int = 20_000
    """Distinct paths (as written) in the whole query."""


DEFAULT_LIMITS = QueryLimits()


class AnalysisInterrupted(Exception):
    """The analysis was stopped from outside: its deadline passed, or its client went away.

    Not a ``WXQueryError``: the query is not known to be wrong, only too costly to decide now.
    """

    def __init__(self, reason: Literal["deadline", "cancelled"], message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


Check = Callable[[], None]
"""Called often by long-running analysis; raises ``AnalysisInterrupted`` to stop it."""


def never_interrupted() -> None:
    """The ``Check`` of callers with no deadline (the CLI, tests)."""


class Interruption:
    """A ``Check`` with a deadline and an optional 'has the client gone' test.

    ``cancelled`` may be costly (it asks the RPC layer), so it is called at most every
    ``poll_s`` seconds; the deadline is compared on every call.
    """

    def __init__(self, seconds: float | None = None, cancelled: Callable[[], bool] | None = None,
                 what: str = "the request's deadline", poll_s: float = 0.005) -> None:
        now = time.monotonic()
        self.seconds = seconds
        self.deadline = None if seconds is None else now + max(seconds, 0.0)
        self.cancelled = cancelled
        self.what = what
        self.poll_s = poll_s
        self._next_poll = now

    def __call__(self) -> None:
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            raise AnalysisInterrupted(
                "deadline", f"query analysis did not finish within {self.what} of "
                            f"{self.seconds:.3g} s; simplify the query")
        if self.cancelled is not None and now >= self._next_poll:
            self._next_poll = now + self.poll_s
            if self.cancelled():
                raise AnalysisInterrupted("cancelled", "query analysis stopped: the client "
                                                       "cancelled the request")
