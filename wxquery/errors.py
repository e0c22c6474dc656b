"""Typed errors of the WXQuery front end.

Every error a user can trigger with a query carries the 1-based line and column of the place
that is wrong, so that the CLI can print ``FILE:LINE:COL: error: ...`` the way compilers do.
Nothing in this package raises anything else on bad input.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    """A 1-based line and column in the query text."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


class WXQueryError(Exception):
    """Base class of every error about a query: syntax, static semantics, satisfiability."""

    kind = "error"

    def __init__(self, message: str, position: Position | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position or Position(1, 1)

    def format(self, filename: str = "<query>") -> str:
        """The compiler-style one-line form: ``FILE:LINE:COL: error: message``."""
        return f"{filename}:{self.position.line}:{self.position.column}: error: {self.message}"

    def __str__(self) -> str:
        return f"{self.position}: {self.message}"


class WXQuerySyntaxError(WXQueryError):
    """The text is not a WXQuery expression, or uses a construct outside the fragment."""


class WXQueryStaticError(WXQueryError):
    """The query parses but is meaningless as a continuous query (undefined variable, bad window,
    aggregate over an unbounded stream, ...)."""


class UnsatisfiablePredicateError(WXQueryStaticError):
    """A conjunction of atomic predicates can never hold, so the subscription would never deliver."""


class QueryLimitError(WXQueryError):
    """The query is larger than a ``wxquery.limits.QueryLimits`` allows (text size, nesting,
    comparisons, distinct paths); the message names the limit and the position is where the
    query exceeds it."""


class InputDocumentError(Exception):
    """A stream document given to the reference evaluator is not well-formed XML."""

    def __init__(self, message: str, source: str = "<input>", line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: error: {self.message}"
