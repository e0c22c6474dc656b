"""Malformed and out-of-fragment queries fail with a WXQueryError naming line, column and reason."""

from __future__ import annotations

import pytest

from sharing.analysis import analyze
from wxquery.errors import (UnsatisfiablePredicateError, WXQueryError, WXQueryStaticError,
                            WXQuerySyntaxError)
from wxquery.parser import parse

HEAD = 'for $p in stream("photons")/photons/photon'


def error_of(text: str) -> WXQueryError:
    with pytest.raises(WXQueryError) as info:
        analyze(text)
    return info.value


@pytest.mark.parametrize("text, anchor, fragment", [
    (f"<r>{{ {HEAD}[en > 1 or en < 0] return $p }}</r>", "or en < 0", "'or' is not supported inside a path predicate"),
    ('<r>{ for $p in stream("photons")//photon return $p }</r>', "//", "'//'"),
    (f"<r>{{ {HEAD} return $p/@* }}</r>", "@*", "wildcards ('@*')"),
    (f"<r>{{ {HEAD} return $p/* }}</r>", "* ", "wildcards"),
    (f"<r>{{ {HEAD} order by $p/en return $p }}</r>", "order", "'order by' is not supported"),
    (f"<r>{{ {HEAD} return string($p/en) }}</r>", "string(", "function string() is not supported"),
    (f"<r>{{ {HEAD} where $p/en != 1 return $p }}</r>", "!=", "'!=' compares strings only"),
    (f"<r>{{ {HEAD} where $p/en eq 1 return $p }}</r>", "eq 1", "value comparison 'eq'"),
    (f"<r>{{ {HEAD} where $p/name = 1 and 2 = \"x\" return $p }}</r>", "2 = ", "a number compared with a string"),
    (f"<r>{{ {HEAD} where \"x\" < 2 return $p }}</r>", "\"x\" <", "a string literal compared with a number"),
    (f"<r>{{ {HEAD} where \"x\" = 'y' return $p }}</r>", "\"x\" =", "both sides are constants"),
    (f"<r>{{ {HEAD} where $p/name = \"x\" + 1 return $p }}</r>", "+ 1", "arithmetic on a string"),
    (f"<r>{{ {HEAD} where $p/name = \"a&b\" return $p }}</r>", "&b", "'&' in a string literal"),
    (f"<r>{{ {HEAD}[1] return $p }}</r>", "1]", "positional predicates"),
    (f"<r>{{ {HEAD} return $p }}", "<r>", "element <r> is not closed"),
    (f"<r>{{ {HEAD} return $p }}</s>", "</s>", "does not match start tag <r>"),
    (f"<r>{{ {HEAD} where $p/en > 1 }}</r>", "}</r>", "expected 'return'"),
    ("<r>{ for $p in doc(\"x.xml\")/a/b return $p }</r>", "doc(", "doc() is not supported"),
    (f"<r>{{ {HEAD} return $p * 2 }}</r>", "* 2", "arithmetic"),
    (f"<r xmlns=\"urn:x\">{{ {HEAD} return $p }}</r>", "xmlns", "namespace prefixes and declarations"),
    (f"<r>{{ {HEAD} let $a := $p/en return $a }}</r>", "$p/en return", "a let clause binds an aggregate"),
    (f"<r>{{ {HEAD} where avg($p/en) > 1 return $p }}</r>", "avg(", "aggregates cannot appear"),
    ("<r>{ for tumbling window $w in stream(\"s\")/a/b start when true() return $w }</r>", "for",
     "XQuery 3 window clauses"),
    ("<r>{ some $x in stream(\"s\")/a/b satisfies $x > 1 }</r>", "some", "quantified"),
    ("(: unterminated comment", "(:", "unterminated comment"),
    (f"<r>{{ {HEAD} return $p | $p }}</r>", "| $p", "'|' (union) is not supported"),
    (f"<r>{{ {HEAD} where $p/en > 1 and $p/x return $p }}</r>", "return $p }", "comparison operator"),
])
def test_refused_with_position(text: str, anchor: str, fragment: str):
    err = error_of(text)
    assert isinstance(err, WXQuerySyntaxError), err
    assert fragment in err.message, err.message
    assert (err.position.line, err.position.column) == (1, text.index(anchor) + 1), err.format()


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_positions_are_the_same_whatever_the_line_ends(newline: str):
    """The query's line ends are read as XQuery reads them (CR LF and CR as LF): an error after
    them is at the same line and column as with LF."""
    err = error_of(f"<r>{{ {HEAD}{newline}{newline}  where $p/en != 1 return $p }}</r>")
    assert (err.position.line, err.position.column) == (3, 15), err.format()


def test_empty_query():
    err = error_of("   ")
    assert "empty query" in err.message


def test_position_on_a_later_line():
    text = f"<r>{{ {HEAD}\n  where $p/en >= 1\n    and $p/en <= 2\n    and $p/en != 5\n  return $p }}</r>"
    err = error_of(text)
    assert (err.position.line, err.position.column) == (4, 15)
    assert "'!=' compares strings only" in err.message


@pytest.mark.parametrize("text, fragment", [
    (f"<r>{{ {HEAD} return $q }}</r>", "undefined variable $q"),
    (f"<r>{{ {HEAD} where $x/en > 1 return $p }}</r>", "undefined variable $x"),
    ('<r>{ for $w in stream("s")/a/b |count 0| return $w }</r>', "must be positive"),
    ('<r>{ for $w in stream("s")/a/b |count 10 step -2| return $w }</r>', "must be positive"),
    ('<r>{ for $w in stream("s")/a/b |count 2.5| return $w }</r>', "whole number"),
    ('<r>{ for $w in stream("s")/a/b |t diff 0| return $w }</r>', "must be positive"),
    ('<r>{ for $w in stream("s")/a/b |t diff 10 step 0| return $w }</r>', "must be positive"),
    ('<r>{ let $a := count(stream("s")/a/b) return $a }</r>', "unbounded stream"),
    ('<r>{ for $p in stream("s")/a/b let $a := max(stream("s")/a/b/x) return $a }</r>',
     "unbounded stream"),
    ('<r>{ for $p in stream("s")/a return $p }</r>', "whole, unbounded stream"),
    ('<r>{ for $w in stream("s")/a/b |count 5| let $a := sum($w/x) return $a/y }</r>',
     "aggregate value and has no elements"),
])
def test_static_errors(text: str, fragment: str):
    err = error_of(text)
    assert isinstance(err, WXQueryStaticError), err
    assert fragment in err.message, err.message


ONE_VALUE_EACH = [  # (an attribute of the item has one value: these hold on no item)
    f"<r>{{ {HEAD} where $p/@en >= 2 and $p/@en <= 1 return $p }}</r>",
    f"<r>{{ {HEAD} where $p/@en > 1 and $p/@en < 1 return $p }}</r>",
    f"<r>{{ {HEAD}[@en > 3] where $p/@en <= 3 return $p }}</r>",
    f"<r>{{ {HEAD} where $p/@a <= $p/@b - 1 and $p/@b <= $p/@c + 0 and $p/@c <= $p/@a + 0 return $p }}</r>",
    f"<r>{{ {HEAD} where $p/@a = 1 and $p/@a = 1.0000001 return $p }}</r>",
]


def test_an_if_whose_condition_never_holds_gives_its_else_branch_with_a_warning():
    [warning] = analyze(f"<r>{{ {HEAD} return if ($p/@x > 5 and $p/@x < 2) then $p else $p/en }}</r>").warnings
    assert "the if always gives its else branch" in warning.message


@pytest.mark.parametrize("text", [
    *ONE_VALUE_EACH,
    '<r>{ for $w in stream("s")/a/b |count 5| let $a := avg($w/x) where $a > 2 and $a < 1 '
    'return $a }</r>',
])
def test_unsatisfiable_predicates_are_reported(text: str):
    err = error_of(text)
    assert isinstance(err, UnsatisfiablePredicateError), err
    assert "unsatisfiable" in err.message


@pytest.mark.parametrize("text", [t.replace("@", "") for t in ONE_VALUE_EACH])
def test_what_holds_only_where_an_element_repeats_is_kept_with_a_warning(text: str):
    """(XQuery compares each node a path selects: ``$p/en >= 2 and $p/en <= 1`` holds on a
    photon with two en)"""
    [warning] = analyze(text).warnings
    assert "occurs more than once" in warning.message


@pytest.mark.parametrize("text", [
    f"<r>{{ {HEAD} where $p/en >= 1 and $p/en <= 1 return $p }}</r>",
    f"<r>{{ {HEAD} where $p/a <= $p/b - 1 and $p/b <= $p/c + 1 and $p/c <= $p/a return $p }}</r>",
    # existential over a window: two different items can satisfy the two atoms
    '<r>{ for $w in stream("s")/a/b |count 5| where $w/x > 5 and $w/x < 2 return count($w) }</r>',
])
def test_satisfiable_predicates_are_accepted(text: str):
    analyze(text)


def test_error_format_is_compiler_style():
    err = error_of(f"<r>{{ {HEAD}\n return $nope }}</r>")
    assert err.format("sub.wxq") == ("sub.wxq:2:9: error: undefined variable $nope "
                                     "(variables in scope: $p)")


@pytest.mark.parametrize("text", [
    # the paper's syntax variants and XQuery conveniences inside the fragment
    f"<r>{{ {HEAD} return <e/> }}</r>",
    "<r/>",
    f"<r>{{ {HEAD}, $q in stream(\"other\")/x/y where $p/t <= $q/t + 2 return ($p, $q) }}</r>",
    f"<r>{{ {HEAD} where 1.3 <= $p/en return $p }}</r>",
    f"<r>{{ {HEAD} where ($p/en > 1 and ($p/phc < 3)) return $p }}</r>",
    f"<r>{{ {HEAD} return if $p/en > 1 then <hi/> else <lo/> }}</r>",
    f"(: comment (: nested :) :) <r>{{ {HEAD} return $p/en[. > 1] }}</r>",
    '<r>{ for $w in stream("s")/a/b |count diff 10| return count($w) }</r>',
    '<r>{ for $w in stream("s")/a/b |t diff 1.5e1 step .5| return count($w) }</r>',
    f"<r>{{ {HEAD} return <x>{{{{literal}}}} &lt; &#65;</x> }}</r>",
])
def test_accepted(text: str):
    analyze(text)


def test_count_named_element_is_a_time_window_reference():
    q = parse('<r>{ for $w in stream("s")/a/b |count diff 10| return count($w) }</r>')
    clause = q.body.content[0].expr.clauses[0]
    assert clause.window.kind == "diff" and clause.window.ref == ("count",)
