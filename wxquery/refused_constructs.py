"""What the parser says when a query steps outside the WXQuery fragment.

WXQuery accepts a small fragment of XQuery and refuses everything else *by name*, with the
place it starts, instead of guessing what an unsupported construct means. The wording of those
refusals is part of the user interface (tests pin it), and several grammar layers raise the same
ones, so the messages and the code that picks one for an unexpected token live here together.
"""

from __future__ import annotations

from .errors import WXQuerySyntaxError
from .lexer import Lexer

SUPPORTED = (
    "WXQuery supports element constructors, for/let/where/return, windows |count N step M| and "
    "|path diff N step M|, min/max/sum/count/avg, comparisons joined by and, or and not(), if-then-else, "
    "sequences and stream(\"name\")"
)

OR_IN_PREDICATE_REFUSED = ("'or' is not supported inside a path predicate (it filters the items before "
                           "anything else reads them): move the condition into a where clause")
NOT_IN_PREDICATE_REFUSED = ("not() is not supported inside a path predicate (it filters the items before "
                            "anything else reads them): move the condition into a where clause")
OR_OUTSIDE_CONDITION = "'or' is only allowed between conditions, in a where clause or an if condition"
NOT_EQUAL_REFUSED = ("'!=' compares strings only (a path with a string literal, or two paths); compare "
                     "numbers with =, <, <=, > or >=")
DESCENDANT_AXIS_REFUSED = "the descendant axis '//' is not supported; use child steps '/'"

# Keywords of full XQuery that start constructs outside the fragment, with the reason we give.
REFUSED_EXPRESSION_KEYWORDS = {
    "some": "quantified expressions ('some ... satisfies') are not supported",
    "every": "quantified expressions ('every ... satisfies') are not supported",
    "typeswitch": "'typeswitch' is not supported",
    "switch": "'switch' is not supported",
    "declare": "prolog declarations ('declare ...') are not supported",
    "import": "module imports are not supported",
    "module": "library modules are not supported",
    "xquery": "version declarations are not supported",
    "try": "'try/catch' is not supported",
    "element": "computed element constructors are not supported; use a direct constructor <name>...</name>",
    "attribute": "attributes are not supported: WXQuery deals with elements only",
    "document": "computed document constructors are not supported",
    "text": "computed text constructors are not supported",
    "comment": "computed comment constructors are not supported",
    "function": "inline functions are not supported",
    "validate": "'validate' is not supported",
    "ordered": "'ordered' expressions are not supported",
    "unordered": "'unordered' expressions are not supported",
}


def ordering_refused(keyword: str) -> str:
    """``order by``, ``group by`` and ``stable order by`` have no meaning on an unbounded stream."""
    return f"'{keyword} by' is not supported: streams keep their arrival order"


def unexpected_after_expression(lexer: Lexer) -> WXQuerySyntaxError:
    """Explain what is wrong with a token that cannot continue an expression."""
    lexer.skip_ws()
    name = lexer.peek_name()
    t = lexer.text[lexer.pos:]
    if name in ("or", "and"):
        return lexer.error(f"'{name}' is only allowed between comparisons in a where clause, "
                           "a predicate or an if condition" if name == "and" else OR_OUTSIDE_CONDITION)
    if name in ("div", "idiv", "mod"):
        return lexer.error(f"arithmetic ('{name}') is not supported outside comparisons")
    if name in ("union", "intersect", "except"):
        return lexer.error(f"'{name}' is not supported")
    if name in ("order", "group", "stable"):
        return lexer.error(ordering_refused(name))
    if t.startswith(("=", "<", ">", "!=")):
        return lexer.error("comparisons are only allowed in where clauses, predicates and if "
                           "conditions")
    if t.startswith(("+", "-", "*")):
        return lexer.error(f"arithmetic ('{t[0]}') is not supported outside comparisons")
    if t.startswith("|"):
        return lexer.error("'|' (union) is not supported; a window |...| must follow the path "
                           "of a for clause")
    if t.startswith("!"):
        return lexer.error("the simple map operator '!' is not supported")
    if t.startswith("||"):
        return lexer.error("string concatenation '||' is not supported")
    return lexer.error(f"unexpected {lexer.describe_here()}")


def unexpected_in_condition(lexer: Lexer, what: str) -> WXQuerySyntaxError:
    """Where a condition may end, 'or' (in a path predicate) and '!=' are the usual mistakes;
    name them, else say what was expected."""
    lexer.skip_ws()
    if lexer.peek_name() == "or":
        return lexer.error(OR_IN_PREDICATE_REFUSED)
    if lexer.text.startswith("!=", lexer.pos):
        return lexer.error(NOT_EQUAL_REFUSED)
    return lexer.expected(what)
