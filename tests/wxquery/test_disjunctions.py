"""``or`` and ``not()`` in where clauses and if conditions (issue 36): XQuery's results, checked
against Saxon-HE on generated events — numbers, strings and attributes, elements missing — and
the selection pushed into the network (the comparisons joined by 'and' outside them) never
drops an item the whole condition keeps."""

from __future__ import annotations

from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import result_items, saxon_query

from sharing.analysis import analyze
from wxquery.errors import UnsatisfiablePredicateError, WXQueryError
from wxquery.evaluator import evaluate
from wxquery.operators.batch import ItemBatch, selection_mask
from wxquery.pass_through import passed_through
from wxquery.stream_document import StreamDocument

ROLES = ["observation", "test", "utility"]
COMPARISONS = ["$e/en > 1.5", "$e/en <= 0.5", "$e/en = 1", "$e/phc < 100", "$e/phc >= 150",
               '$e/@role = "test"', '$e/@role != "observation"', '$e/author = "ivo://a"',
               'starts-with($e/author, "ivo://b")', "$e/pos/@ra > 180"]


@st.composite
def events(draw) -> list[str]:
    out = []
    for k in range(draw(st.integers(1, 12))):
        role = draw(st.sampled_from([*ROLES, None]))
        parts = [f"<id>{k}</id>"]
        if draw(st.integers(0, 5)):  # (else missing: not() holds, the comparison does not)
            parts.append(f"<en>{draw(st.sampled_from([0, 0.5, 1, 1.5, 2, 2.5]))}</en>")
        if draw(st.integers(0, 5)):
            parts.append(f"<phc>{draw(st.integers(50, 200))}</phc>")
        if draw(st.booleans()):
            parts.append(f"<author>{escape(draw(st.sampled_from(['ivo://a', 'ivo://b/x', 'ivo://c'])))}</author>")
        if draw(st.booleans()):
            parts.append(f'<pos ra="{draw(st.sampled_from([10, 180, 270]))}"/>')
        said = f' role="{role}"' if role else ""
        out.append(f"<event{said}>" + "".join(parts) + "</event>")
    return out


@st.composite
def conditions(draw, depth: int = 0) -> str:
    """A condition of comparisons joined by and, or and not(), parenthesised at random."""
    kind = draw(st.sampled_from(["atom", "atom", "and", "or", "not"] if depth < 3 else ["atom"]))
    if kind == "atom":
        return draw(st.sampled_from(COMPARISONS))
    if kind == "not":
        return f"not({draw(conditions(depth + 1))})"
    parts = [draw(conditions(depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    return "(" + f" {kind} ".join(parts) + ")"


def ours_and_theirs(query: str, items: list[str]) -> tuple[list[str], list[str]]:
    document = "<events>" + "".join(items) + "</events>"
    theirs = result_items(saxon_query(query.replace('stream("ev")', ""), document))[1]
    analysis = analyze(query)
    ours = result_items(evaluate(analysis.checked, StreamDocument.from_text(document)).document())[1]
    return ours, theirs


@pytest.mark.oracle
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=events(), condition=conditions(), extra=st.sampled_from(["", "$e/en >= 0.5", '$e/@role != "test"']))
def test_or_and_not_in_a_where_clause_give_what_saxon_gives(items: list[str], condition: str, extra: str) -> None:
    where = f"{extra} and {condition}" if extra else condition
    query = f'<r>{{ for $e in stream("ev")/events/event where {where} return $e/id }}</r>'
    try:
        ours, theirs = ours_and_theirs(query, items)
    except UnsatisfiablePredicateError:  # (only the comparisons joined by 'and' at the top)
        assert result_items(saxon_query(query.replace('stream("ev")', ""),
                                        "<events>" + "".join(items) + "</events>"))[1] == []
        return
    assert ours == theirs
    # what the network applies upstream keeps every item the whole condition keeps
    atoms = analyze(query).properties.inputs[0].selection
    if atoms is not None and atoms.atoms:
        mask = selection_mask(ItemBatch(items), atoms.atoms)
        kept = {f"<id>{k}</id>" for k in range(len(items)) if mask[k]}
        assert set(ours) <= kept


RANGES = ["$e/en > 1.5", "$e/en >= 1", "$e/en <= 0.5", "$e/en < 2", "$e/en = 1", "$e/phc < 100", "$e/phc >= 150",
          "$e/phc <= 180", "$e/pos/@ra > 100", "$e/pos/@ra <= 200", '$e/@role = "test"']


@st.composite
def alternatives(draw) -> str:
    """Conjunctions of range comparisons joined by 'or' at the top: the shape whose hull is pushed."""
    return " or ".join(" and ".join(draw(st.lists(st.sampled_from(RANGES), min_size=1, max_size=3)))
                       for _ in range(draw(st.integers(2, 3))))


@pytest.mark.oracle
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=events(), condition=alternatives())
def test_the_hull_pushed_for_alternatives_keeps_every_item_saxon_keeps(items: list[str], condition: str) -> None:
    query = f'<r>{{ for $e in stream("ev")/events/event where {condition} return $e/id }}</r>'
    try:
        ours, theirs = ours_and_theirs(query, items)
    except UnsatisfiablePredicateError:
        assert result_items(saxon_query(query.replace('stream("ev")', ""),
                                        "<events>" + "".join(items) + "</events>"))[1] == []
        return
    assert ours == theirs
    selection = analyze(query).properties.inputs[0].selection
    mask = selection_mask(ItemBatch(items), selection.atoms if selection is not None else ())
    assert set(ours) <= {f"<id>{k}</id>" for k in range(len(items)) if mask[k]}


@pytest.mark.oracle
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=events(), condition=conditions())
def test_or_and_not_in_an_if_condition_give_what_saxon_gives(items: list[str], condition: str) -> None:
    query = (f'<r>{{ for $e in stream("ev")/events/event return '
             f'if ({condition}) then <yes>{{ $e/id }}</yes> else <no>{{ $e/id }}</no> }}</r>')
    ours, theirs = ours_and_theirs(query, items)
    assert ours == theirs


@pytest.mark.oracle
def test_or_over_window_aggregates_gives_what_saxon_gives() -> None:
    items = [f"<event><id>{k}</id><en>{(k * 7) % 5 / 2}</en></event>" for k in range(40)]
    query = ('<r>{ for $w in stream("ev")/events/event |count 4| let $a := avg($w/en) let $m := max($w/en) '
             'where $a > 1.2 or ($m < 2 and not($a < 0.6)) return <w>{ $a }</w> }</r>')
    twin = ('<r>{ for tumbling window $w in /events/event start at $s when true() '
            'end at $e when $e - $s eq 3 where count($w) eq 4 '
            'let $a := avg($w/en) let $m := max($w/en) '
            'where $a > 1.2 or ($m < 2 and not($a < 0.6)) return <w>{ $a }</w> }</r>')
    document = "<events>" + "".join(items) + "</events>"
    analysis = analyze(query)
    ours = result_items(evaluate(analysis.checked, StreamDocument.from_text(document)).document())[1]
    theirs = result_items(saxon_query(twin, document))[1]
    assert ours == theirs and 0 < len(ours) < 10


def test_the_and_outside_is_pushed_and_the_or_is_left_to_the_subscribers_peer() -> None:
    query = ('<r>{ for $e in stream("ev")/events/event where $e/en >= 1 and ($e/phc < 100 or not($e/@role = "test")) '
             'return $e }</r>')
    analysis = analyze(query)
    inp = analysis.properties.inputs[0]
    assert [str(a) for a in inp.selection.atoms] == ["en >= 1"]
    assert {"phc", "@role"} <= set(inp.projection.referenced)  # (the term reads them where results are made)
    post = analysis.properties.post_processing
    assert post.residual_conditions == ('where ($e/phc < 100 or not($e/@role = "test"))',)
    applied = frozenset(id(a) for a in analysis.checked.query.body.content[0].expr.where.atoms)
    # its results are not the items as they come: the term is evaluated first
    assert passed_through(analysis.checked, applied, frozenset(), ("events", "event")) is None


@pytest.mark.parametrize("query, message, column", [
    ('<r>{ for $e in stream("ev")/events/event[en > 1 or phc < 2] return $e }</r>',
     "'or' is not supported inside a path predicate", 49),
    ('<r>{ for $e in stream("ev")/events/event[not(en > 1)] return $e }</r>',
     "not() is not supported inside a path predicate", 42),
    ('<r>{ for $e in stream("ev")/events/event return $e/en or $e/phc }</r>',
     "'or' is only allowed between conditions", 55),
    ('<r>{ for $e in stream("ev")/events/event where not($e/en > 1 return $e }</r>',
     "')' closing not(", 62),
    ('<r>{ for $e in stream("ev")/events/event where not $e/en > 1 return $e }</r>',
     "not is a function: write not(condition)", 48),
])
def test_misplaced_or_and_not_are_refused_with_their_position(query: str, message: str, column: int) -> None:
    with pytest.raises(WXQueryError) as raised:
        analyze(query)
    assert message in str(raised.value)
    assert raised.value.position.column == column, str(raised.value)


def test_the_box_around_alternatives_is_pushed_and_the_alternatives_are_left_to_the_subscribers_peer() -> None:
    """Two sky boxes joined by 'or' are filtered upstream by the box around both (each bound
    the widest of the alternatives'; a bound only one has is dropped)."""
    box = ("$p/coord/cel/ra >= {} and $p/coord/cel/ra <= {} and $p/coord/cel/dec >= {} and "
           "$p/coord/cel/dec <= {}")
    query = (f'<r>{{ for $p in stream("photons")/photons/photon where $p/en > 1 and '
             f'(({box.format(120, 130, -50, -45)}) or ({box.format(125, 140, -48, -40)} and $p/phc < 100)) '
             f'return $p }}</r>')
    inp = analyze(query).properties.inputs[0]
    assert sorted(str(a) for a in inp.selection.atoms) == sorted([
        "en > 1", "coord/cel/ra >= 120", "coord/cel/ra <= 140", "coord/cel/dec >= -50", "coord/cel/dec <= -40"])
    assert "phc" in inp.projection.referenced
