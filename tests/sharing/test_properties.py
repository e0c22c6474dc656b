"""Properties extracted from subscriptions (paper §3.1, DESIGN.md §4)."""

from __future__ import annotations

from fractions import Fraction

from sharing.analysis import analyze
from sharing.scenarios import example_query
from sharing.properties import WindowSpec



def props(name: str):
    return analyze(example_query(name)).properties


def test_query1_selection_and_projection():
    p = props("q1")
    (inp,) = p.inputs
    assert inp.input.stream == "photons" and inp.input.items == ("photons", "photon")
    assert {str(a) for a in inp.selection.atoms} == {
        "coord/cel/ra >= 120", "coord/cel/ra <= 138", "coord/cel/dec >= -49", "coord/cel/dec <= -40"}
    assert inp.projection.output == {"coord/cel/ra", "coord/cel/dec", "phc", "en", "det_time"}
    assert inp.window is None and inp.aggregates == ()


def test_query2_is_contained_in_query1():
    q1, q2 = props("q1").inputs[0], props("q2").inputs[0]
    assert q2.selection.graph.implies(q1.selection.graph)
    assert not q1.selection.graph.implies(q2.selection.graph)
    assert q2.projection.referenced <= q1.projection.output


def test_query3_window_and_avg_travels_as_sum_and_count():
    (inp,) = props("q3").inputs
    assert inp.window == WindowSpec("diff", Fraction(20), Fraction(10), "det_time")
    (agg,) = inp.aggregates
    assert (agg.function, agg.element, agg.internal) == ("avg", "en", ("sum", "count"))
    assert inp.projection.output == frozenset()
    assert {"en", "det_time", "coord/cel/ra", "coord/cel/dec"} <= inp.projection.referenced
    assert inp.aggregate_selection is None


def test_query4_filters_its_aggregate():
    (inp,) = props("q4").inputs
    assert [str(a) for a in inp.aggregate_selection.atoms] == ["avg(en) >= 1.3"]
    assert inp.window.size == 60 and inp.window.step == 40


def test_where_on_item_is_pushed_but_join_and_if_are_post_processing():
    text = ('<r>{ for $p in stream("a")/s/i, $q in stream("b")/s/j '
            'where $p/x > 1 and $q/y <= 2 and $p/t <= $q/t + 5 '
            'return if ($p/z > 0) then <o>{ $p/x }{ $q/k }</o> else () }</r>')
    p = analyze(text).properties
    a, b = p.inputs
    assert [str(x) for x in a.selection.atoms] == ["x > 1"]
    assert [str(x) for x in b.selection.atoms] == ["y <= 2"]
    # join and if conditions run at the subscriber's super-peer, so their elements travel
    assert a.projection.output == {"x", "t", "z"} and a.projection.referenced == {"x", "t", "z"}
    assert b.projection.output == {"k", "t"} and b.projection.referenced == {"y", "t", "k"}
    assert p.post_processing.join_predicates == ("$p/t <= $q/t + 5",)
    assert p.post_processing.residual_conditions == ("if $p/z > 0",)


def test_whole_item_output_and_count_window():
    p = analyze('<r>{ for $w in stream("s")/s/i[v >= 1] |count 10 step 5| return <b>{ $w }</b> }</r>'
                ).properties
    (inp,) = p.inputs
    assert inp.projection.output == {"."}
    # the window's contents are returned, so the window runs at the subscriber's super-peer
    assert inp.window is None
    assert p.post_processing.local_windows == ("$w |count 10 step 5|",)


def test_properties_json_is_complete():
    j = props("q4").to_json()
    ops = [o["op"] for o in j["inputs"][0]["operators"]]
    assert ops == ["selection", "projection", "window", "aggregate", "aggregate-selection"]
    sel = j["inputs"][0]["operators"][0]
    assert {"from": "0", "to": "coord/cel/ra", "weight": "-120", "strict": False} in sel["graph"]["edges"]


def test_window_is_pushed_only_when_used_solely_in_aggregates():
    pushed = analyze('<r>{ for $w in stream("s")/s/i[v > 1] |count 10| let $a := avg($w/e) '
                     'return <a>{ $a }{ count($w) }</a> }</r>').properties
    (inp,) = pushed.inputs
    assert inp.window is not None
    assert [a.name for a in inp.aggregates] == ["avg(e)", "count(.)"]
    assert inp.projection.output == frozenset() and inp.projection.referenced == {"v", "e", "."}
    local = analyze('<r>{ for $w in stream("s")/s/i[v > 1] |t diff 10| let $a := avg($w/e) '
                    'where $w/x > 3 return <a>{ $a }</a> }</r>').properties
    (inp,) = local.inputs
    assert inp.window is None and inp.aggregates == ()
    assert {"e", "x", "t"} <= inp.projection.output
    assert local.post_processing.local_windows == ("$w |t diff 10 step 10|",)


def test_applied_upstream_marks_pushed_conditions():
    text = ('<r>{ for $p in stream("s")/s/i[v > 1] where $p/x < 2 '
            'return if ($p/y > 0) then $p/z else () }</r>')
    analysis = analyze(text)
    flwr = analysis.query.body.content[0].expr
    pred_atom = flwr.clauses[0].source.steps[1].predicates[0].atoms[0]
    where_atom = flwr.where.atoms[0]
    if_atom = flwr.ret.condition.atoms[0]
    applied = analysis.properties.applied_upstream
    assert id(pred_atom) in applied and id(where_atom) in applied and id(if_atom) not in applied
