"""Recursive-descent parser for WXQuery (Definition 2.1 of the StreamGlobe paper).

The parser works directly on the characters, because XQuery's direct element constructors
switch between expression and XML-content lexing. It accepts exactly the fragment and refuses
everything else *by name* (``or``, ``//``, ``order by``, unsupported functions, ...) with the
line and column of the offending construct — it never guesses what an unsupported construct
means. It raises only ``WXQueryError`` subclasses, whatever the input.

This module is the public entry point. The grammar is layered, one module per layer:

- ``lexer``: the cursor over the text — white space, comments, names, numbers, strings, positions;
- ``path_parser``: child steps and their predicates;
- ``condition_parser``: conjunctions of comparisons (where, predicates, if);
- ``flwr_parser``: for/let/where/return and the windows of for clauses;
- ``constructor_parser``: direct element constructors and their XML content;
- ``expression_parser``: expressions, tying the layers into the complete parser;
- ``refused_constructs``: the messages for constructs outside the fragment.
"""

from __future__ import annotations

from . import ast
from .errors import QueryLimitError, WXQueryError, WXQuerySyntaxError
from .expression_parser import ExpressionParser
from .lexer import Lexer
from .limits import DEFAULT_LIMITS, QueryLimits
from .refused_constructs import SUPPORTED

__all__ = ["SUPPORTED", "parse"]


def parse(text: str, limits: QueryLimits = DEFAULT_LIMITS) -> ast.Query:
    """Parse a WXQuery subscription into a typed AST (syntax only; see ``static_checks``).

    The query must stay within ``limits`` (text size, nesting depth, comparisons, distinct
    paths), so that no later pass over the AST can exhaust the stack or take unbounded time.
    """
    if len(text) > limits.max_query_chars:
        at = Lexer(text[:limits.max_query_chars + 1]).position(limits.max_query_chars)
        raise QueryLimitError(f"query is too long: more than {limits.max_query_chars} characters "
                              "(limit max_query_chars)", at)
    parser = ExpressionParser(text, limits)
    try:
        body = parser.parse_query()
    except WXQueryError:
        raise
    except RecursionError:  # only if the interpreter's recursion limit is set very low
        raise WXQuerySyntaxError("query is nested too deeply for this interpreter's recursion "
                                 "limit", parser.position()) from None
    return ast.Query(body=body, source=text)
