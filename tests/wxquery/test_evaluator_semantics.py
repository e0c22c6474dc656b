"""Stream semantics of the reference evaluator that standard XQuery has no opinion on."""

from __future__ import annotations

import pytest

from sharing.analysis import analyze
from wxquery.errors import InputDocumentError
from wxquery.evaluator import evaluate, run_to_string
from wxquery.stream_document import StreamDocument
from wxquery.values import format_double


def doc(*times, extra: str = "") -> str:
    items = "".join(f"<i><t>{t}</t><v>{k}</v></i>" for k, t in enumerate(times))
    return f"<s>{items}{extra}</s>"


TIME_Q = '<r>{ for $w in stream("s")/s/i |t diff 10 step 5| return <w>{ count($w) }</w> }</r>'


def test_time_windows_cover_k_step_to_k_step_plus_size():
    # t=1,4 fall in [-5,5) and [0,10); 7 in [0,10) and [5,15); 12 in [5,15) and [10,20)
    assert run_to_string(TIME_Q, doc(1, 4, 7, 12)) == \
        "<r><w>2</w><w>3</w><w>2</w><w>1</w></r>"


def test_negative_reference_values_and_alignment_at_zero():
    assert run_to_string(TIME_Q, doc(-7, -3, 2)) == "<r><w>1</w><w>2</w><w>2</w><w>1</w></r>"


def test_empty_windows_produce_nothing():
    q = '<r>{ for $w in stream("s")/s/i |t diff 1| return <w>{ sum($w/v) }</w> }</r>'
    assert run_to_string(q, doc(0.5, 10.5)) == "<r><w>0</w><w>1</w></r>"


def test_late_items_are_counted_and_dropped():
    analysis = analyze(TIME_Q)
    ev = evaluate(analysis.checked, StreamDocument.from_text(doc(1, 12, 3, 13)))
    assert ev.document() == "<r><w>1</w><w>1</w><w>2</w><w>2</w></r>"
    assert ev.stats.late_items == 1
    assert "out of order" in ev.stats.warnings()[0]


def test_lateness_allows_bounded_disorder():
    analysis = analyze(TIME_Q)
    ev = evaluate(analysis.checked, StreamDocument.from_text(doc(1, 12, 3, 13)), lateness=10)
    assert ev.stats.late_items == 0
    assert ev.document() == "<r><w>2</w><w>2</w><w>2</w><w>2</w></r>"


def test_items_without_a_numeric_reference_are_counted():
    analysis = analyze(TIME_Q)
    text = "<s><i><t>1</t></i><i><t>abc</t></i><i/><i><t>2</t></i></s>"
    ev = evaluate(analysis.checked, StreamDocument.from_text(text))
    assert ev.document() == "<r><w>2</w><w>2</w></r>"
    assert ev.stats.missing_reference == 2


def test_count_windows_only_complete_and_step_larger_than_size():
    q = '<r>{ for $w in stream("s")/s/i |count 2 step 3| return <w>{ sum($w/v) }</w> }</r>'
    # items v=0..7: windows start at 0,3,6 -> {0,1}, {3,4}, {6,7}
    assert run_to_string(q, doc(*range(8))) == "<r><w>1</w><w>7</w><w>13</w></r>"
    assert run_to_string(q, doc(*range(7))) == "<r><w>1</w><w>7</w></r>"


def test_non_numeric_values_compare_false_and_aggregate_to_nan():
    q = '<r>{ for $p in stream("s")/s/i where $p/t > 0 return $p/v }</r>'
    text = "<s><i><t>x</t><v>1</v></i><i><t>INF</t><v>2</v></i><i><t>inf</t><v>3</v></i></s>"
    assert run_to_string(q, text) == "<r><v>2</v></r>"
    q2 = '<r>{ for $w in stream("s")/s/i |count 3| return <m>{ max($w/t) }</m> }</r>'
    assert run_to_string(q2, text) == "<r><m>NaN</m></r>"


def test_missing_elements_make_comparisons_false():
    q = '<r>{ for $p in stream("s")/s/i where $p/t >= $p/u - 1 return $p/v }</r>'
    text = "<s><i><t>1</t><v>a</v></i><i><t>1</t><u>2</u><v>b</v></i></s>"
    assert run_to_string(q, text) == "<r><v>b</v></r>"


def test_results_stream_before_the_input_ends(tmp_path):
    """The first result is available after reading only the first item."""
    q = analyze('<r>{ for $p in stream("s")/s/i return $p/v }</r>')
    path = tmp_path / "big.xml"
    path.write_text(doc(*range(50000)))
    ev = evaluate(q.checked, StreamDocument.from_file(path))
    first = next(ev.serialized_items())
    assert first == "<v>0</v>"


def test_malformed_input_reports_line_and_column():
    q = analyze('<r>{ for $p in stream("s")/s/i return $p/v }</r>')
    ev = evaluate(q.checked, StreamDocument.from_text("<s>\n<i><v>1</v></i>\n<i><v>2</i>\n</s>", "d.xml"))
    with pytest.raises(InputDocumentError) as info:
        ev.document()
    assert info.value.line == 3 and "d.xml:3:" in str(info.value)


def test_named_inputs_and_unknown_stream():
    q = analyze('<r>{ for $a in stream("x")/s/i, $b in stream("y")/s/i where $a/t = $b/t - 1 '
                'return <p>{ $a/v }{ $b/v }</p> }</r>')
    inputs = {"x": StreamDocument.from_text(doc(1, 2, 3)), "y": StreamDocument.from_text(doc(3, 4))}
    assert evaluate(q.checked, inputs).document() == \
        "<r><p><v>1</v><v>0</v></p><p><v>2</v><v>1</v></p></r>"
    with pytest.raises(InputDocumentError, match='no input given for stream\\("y"\\)'):
        evaluate(q.checked, {"x": inputs["x"]}).document()


def test_document_with_other_root_has_no_items():
    assert run_to_string('<r>{ for $p in stream("s")/s/i return $p }</r>', "<other><i/></other>") \
        == "<r/>"


def test_double_formatting_follows_xquery():
    q = '<r>{ for $w in stream("s")/s/i |count 1| return <x>{ sum($w/t) }</x> }</r>'
    text = "<s><i><t>1e6</t></i><i><t>0.0000001</t></i><i><t>-0</t></i><i><t>123456.5</t></i></s>"
    assert run_to_string(q, text) == "<r><x>1.0E6</x><x>1.0E-7</x><x>-0</x><x>123456.5</x></r>"


def test_no_item_is_lost_across_parser_chunks(tmp_path):
    """Documents far larger than lxml's read buffer lose no item, with or without windows."""
    n = 30000
    path = tmp_path / "big.xml"
    path.write_text(doc(*range(n)))
    plain = analyze('<r>{ for $p in stream("s")/s/i return <x>{ $p/v }</x> }</r>')
    items = list(evaluate(plain.checked, StreamDocument.from_file(path)).serialized_items())
    assert len(items) == n and items[-1] == f"<x><v>{n - 1}</v></x>"
    windowed = analyze('<r>{ for $w in stream("s")/s/i |count 1000| return <n>{ sum($w/v) }</n> }</r>')
    sums = list(evaluate(windowed.checked, StreamDocument.from_file(path)).serialized_items())
    assert sums == [f"<n>{format_double(float(sum(range(k, k + 1000))))}</n>"
                    for k in range(0, n, 1000)]
