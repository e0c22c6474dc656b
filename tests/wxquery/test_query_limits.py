"""What one query may hold: nesting depth, text size, comparisons and distinct paths are limited
in the parser, each with a positioned error that names the limit — so that no later pass can run
out of stack (a RecursionError used to escape from property extraction for element constructors
nested ~450–980 deep) and no query costs unbounded work."""

from __future__ import annotations

import json
import sys

import pytest

from deep_queries import DEEP, constructors, parentheses
from sharing.analysis import analyze
from sharing.matching import full_pipeline
from wxquery.errors import Position, QueryLimitError, WXQueryError
from wxquery.evaluator import evaluate
from wxquery.limits import DEFAULT_LIMITS, QueryLimits
from wxquery.parser import parse
from wxquery.stream_document import StreamDocument


def offset_of(text: str, position: Position) -> int:
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:position.line - 1]) + position.column - 1


def nesting_error(text: str) -> QueryLimitError:
    with pytest.raises(QueryLimitError) as info:
        analyze(text)
    return info.value


@pytest.mark.parametrize("case", sorted(DEEP))
@pytest.mark.parametrize("levels", [450, 980, 5000])
def test_deep_nesting_is_a_positioned_error(case: str, levels: int):
    build, opener = DEEP[case]
    text = build(levels)
    err = nesting_error(text)
    assert "nested too deeply" in err.message and "max_nesting_depth" in err.message
    at = offset_of(text, err.position)
    assert text.startswith(opener, at), (err.format(), text[at:at + 20])


def test_the_error_names_the_level_that_exceeds_the_limit():
    """Levels: the query (1), <r> (2), the enclosed for (3), its binding $p (4), its return
    starts at the first '(' (5), then one more per '(': the 7th '(' is the 11th level."""
    text = parentheses(20)
    with pytest.raises(QueryLimitError) as info:
        parse(text, QueryLimits(max_nesting_depth=10))
    err = info.value
    seventh = [i for i, c in enumerate(text) if c == "("][7]  # stream("s") holds the first '('
    assert offset_of(text, err.position) == seventh
    assert err.format("q.wxq").startswith(f"q.wxq:1:{seventh + 1}: error: query is nested too deeply")


def test_the_same_construct_at_the_limit_is_accepted():
    limits = QueryLimits(max_nesting_depth=10)
    parse(parentheses(5), limits)  # the innermost $p/x is the 10th level
    with pytest.raises(QueryLimitError):
        parse(parentheses(6), limits)


def deepest_accepted(build) -> str:
    """The most deeply nested query of this shape the default limits accept."""
    lo, hi = 1, DEFAULT_LIMITS.max_nesting_depth
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            parse(build(mid))
            lo = mid
        except QueryLimitError:
            hi = mid - 1
    return build(lo)


DOCUMENT = StreamDocument.from_text("<s>" + "<i><x>2</x><y><x>3</x><y><x>4</x></y></y></i>" * 2 + "</s>")


@pytest.mark.parametrize("case", sorted(DEEP))
def test_every_pass_has_stack_to_spare_at_the_deepest_accepted_nesting(case: str):
    """Analysis, properties, matching, evaluation and serialisation of the deepest query the
    parser accepts all run within half of Python's default recursion limit."""
    text = deepest_accepted(DEEP[case][0])
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(500)
    try:
        analysis = analyze(text)
        json.dumps(analysis.properties.to_json())
        for inp in analysis.properties.inputs:
            full_pipeline(inp)
        list(evaluate(analysis.checked, DOCUMENT).serialized_items())
    finally:
        sys.setrecursionlimit(old)


def test_long_text_is_refused_where_it_exceeds_the_limit():
    text = "<r>{ for $p in stream(\"s\")/s/i\nreturn $p/x }</r>"
    with pytest.raises(QueryLimitError) as info:
        parse(text, QueryLimits(max_query_chars=35))
    err = info.value
    assert "max_query_chars" in err.message and "35 characters" in err.message
    assert offset_of(text, err.position) == 35 and err.position.line == 2


def test_comparisons_are_counted_and_the_first_one_too_many_is_named():
    atoms = " and ".join(f"$p/v{i} >= $p/v{i + 1} + 1" for i in range(12))
    text = f"<r>{{ for $p in stream(\"s\")/s/i where {atoms} return $p/v0 }}</r>"
    with pytest.raises(QueryLimitError) as info:
        parse(text, QueryLimits(max_comparisons=10))
    assert "max_comparisons" in info.value.message
    assert text.startswith("$p/v10 >=", offset_of(text, info.value.position))


def test_distinct_paths_are_counted_and_the_first_one_too_many_is_named():
    atoms = " and ".join(f"$p/v{i % 3} >= {i}" for i in range(30))  # 3 distinct paths
    text = f"<r>{{ for $p in stream(\"s\")/s/i where {atoms} and $p/w > 1 return $p/v0 }}</r>"
    parse(text, QueryLimits(max_paths=5))  # stream("s")/s/i, $p/v0..2, $p/w
    with pytest.raises(QueryLimitError) as info:
        parse(text, QueryLimits(max_paths=4))
    assert "max_paths" in info.value.message
    assert text.startswith("$p/w > 1", offset_of(text, info.value.position))


def test_the_defaults_admit_the_4000_atom_benchmark_queries():
    chain = " and ".join(f"$p/v{i} >= $p/v{i + 1} + 1" for i in range(4000))
    analysis = analyze(f"<r>{{ for $p in stream(\"s\")/s/i where {chain} return $p/v0 }}</r>")
    assert len(analysis.properties.inputs[0].selection.atoms) == 4000


def test_a_query_error_is_still_the_only_kind_of_error():
    """Limits are WXQuery errors: the CLI and the daemon report them like any other."""
    assert issubclass(QueryLimitError, WXQueryError)
    with pytest.raises(WXQueryError):
        analyze(constructors(2000))
