"""Windows partitioned by a key (issue 36): ``|count Δ step μ by path|`` and
``|ref diff Δ step μ by path|`` — the reference evaluator against Saxon-HE running XQuery 3.1
twins (``group by`` the key's string, then a window clause per group; ``$w/key`` is
``$w[1]/key``) on generated items (keys on elements and attributes, missing, empty, differing
only in whitespace or written with references) and on real VOEvent packets; what sharing makes
of the key; and misuse refused with its position."""

from __future__ import annotations

from pathlib import Path

import pytest
import voeventparse.fixtures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import result_items, saxon_query

from sharing.analysis import analyze
from sharing.matching import match_subscriptions
from thinpeer.voevent.shape import voevent_item
from wxquery.errors import WXQueryError
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

KEYS = ["A", "B", " A", "", "a&amp;b", "A&#9;"]
CODEPOINT = "http://www.w3.org/2005/xpath-functions/collation/codepoint"


@st.composite
def events(draw) -> list[str]:
    out, t = [], 0
    for k in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0, 1, 1, 2, 5]))
        band = draw(st.sampled_from(KEYS + [None]))
        said = "" if band is None else f' band="{band}"'
        src = draw(st.sampled_from(KEYS + [None]))
        held = "" if src is None else f"<src>{src}</src>"
        out.append(f'<ev id="{k}"{said}>{held}<en>{draw(st.integers(0, 9))}.5</en><t>{t}</t></ev>')
    return out


def ours(query: str, items: list[str]) -> list[str]:
    document = "<events>" + "".join(items) + "</events>"
    return result_items(evaluate(analyze(query).checked, StreamDocument.from_text(document)).document())[1]


def saxon(twin: str, items: list[str]) -> list[str]:
    return result_items(saxon_query(twin, "<events>" + "".join(items) + "</events>"))[1]


def count_twin(key: str, size: int, step: int) -> str:
    """Per key, count windows closed by the key's items, in the order of the items closing them
    (the window clause nested: Saxon-HE gives one window for a window clause right after
    group by)."""
    return f"""<r>{{
      for $x in (
        for $e at $i in /events/ev
        group by $key := ($e/{key})[1]/string()
        return
          for sliding window $w in $e start at $s when ($s - 1) mod {step} eq 0
              only end at $end when $end - $s + 1 eq {size}
          return <x at="{{ $i[$end] }}"><g>{{ $w[1]/{key} }}<n>{{ count($w) }}</n><s>{{ sum($w/en) }}</s></g></x>
      )
      order by xs:integer($x/@at)
      return $x/*
    }}</r>"""


def time_twin(key: str, size: int, step: int) -> str:
    """Per key, window k holds the key's items with t in [k·step, k·step + size); by k, then key."""
    return f"""<r>{{
      let $t := /events/ev/t ! xs:double(.)
      for $k in xs:integer(floor((min($t) - {size}) div {step})) to xs:integer(ceiling(max($t) div {step}))
      for $e in /events/ev[t >= $k * {step} and t < $k * {step} + {size}]
      let $key := ($e/{key})[1]/string()
      group by $k, $key
      order by $k, $key empty least collation "{CODEPOINT}"
      return <g>{{ $e[1]/{key} }}<n>{{ count($e) }}</n><s>{{ sum($e/en) }}</s></g>
    }}</r>"""


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=events(), key=st.sampled_from(["src", "@band"]), kind=st.sampled_from(["count", "diff"]),
       size=st.integers(1, 4), steps=st.integers(1, 2))
def test_partitioned_windows_give_what_saxon_gives(items, key, kind, size, steps) -> None:
    step = size if steps == 1 else max(1, size // 2)
    window = f"count {size} step {step}" if kind == "count" else f"t diff {size} step {step}"
    query = (f"<r>{{ for $w in stream(\"events\")/events/ev |{window} by {key}| let $n := count($w) "
             f"let $s := sum($w/en) return <g>{{ $w/{key} }}<n>{{ $n }}</n><s>{{ $s }}</s></g> }}</r>")
    twin = count_twin(key, size, step) if kind == "count" else time_twin(key, size, step)
    assert ours(query, items) == saxon(twin, items)


PACKETS = sorted(Path(voeventparse.fixtures.__file__).parent.glob("*.xml"))


def test_real_voevent_packets_per_author_give_what_saxon_gives() -> None:
    items = [voevent_item(PACKETS[k % len(PACKETS)].read_bytes()).replace("<voevent>", "<ev>", 1)
             .replace("</voevent>", "</ev>") for k in (0, 1, 3, 1, 4, 3, 3, 0, 2, 4, 1, 3, 5, 3)]
    query = ('<r>{ for $w in stream("events")/events/ev |count 2 by author/ivorn| let $r := max($w/ra) '
             'where $w/author/ivorn != "ivo://voevent.4pisky.org/robots" '
             'return <g>{ $w/author/ivorn }<ra>{ $r }</ra><n>{ count($w/role) }</n></g> }</r>')
    twin = """<r>{
      for $x in (
        for $e at $i in /events/ev
        group by $key := ($e/author/ivorn)[1]/string()
        return
          for tumbling window $w in $e start at $s when true() only end at $end when $end - $s + 1 eq 2
          let $r := max($w/ra)
          where $w[1]/author/ivorn != "ivo://voevent.4pisky.org/robots"
          return <x at="{ $i[$end] }"><g>{ $w[1]/author/ivorn }<ra>{ $r }</ra><n>{ count($w/role) }</n></g></x>
      )
      order by xs:integer($x/@at)
      return $x/*
    }</r>"""
    expected = saxon(twin, items)
    assert len(expected) >= 3
    assert ours(query, items) == expected


HEAD = 'for $w in stream("p")/p/photon'


def test_a_partitioned_window_is_computed_upstream_with_its_key() -> None:
    props = analyze(f"<r>{{ {HEAD} |count 4 by chip| let $n := count($w) where $w/chip = \"I0\" "
                    f"return <w>{{ $w/chip }}{{ $n }}</w> }}</r>").properties
    (inp,) = props.inputs
    assert str(inp.window) == "|count 4 step 4 by chip|"
    assert "chip" in inp.projection.referenced and not props.post_processing.local_windows
    local = analyze(f"<r>{{ {HEAD} |count 4 by chip| return <w>{{ $w/chip }}{{ $w/en }}</w> }}</r>").properties
    assert local.post_processing.local_windows == ("$w |count 4 step 4 by chip|",)


@pytest.mark.parametrize("old, new, shareable", [
    ("|t diff 5 by chip|", "|t diff 10 step 5 by chip|", True),
    ("|count 2 by chip|", "|count 4 step 2 by chip|", True),
    ("|t diff 5 by chip|", "|t diff 5 by @chip|", False),
    ("|t diff 5 by chip|", "|t diff 5|", True),  # (a time window over all items: every key's merged)
    ("|t diff 5 by chip|", "|t diff 10 step 5|", True),
    ("|count 2 by chip|", "|count 2|", False),
    ("|t diff 5|", "|t diff 5 by chip|", False),
])
def test_a_stream_partitioned_by_a_key_serves_the_same_key_and_time_windows_over_all_items(old: str, new: str, shareable: bool) -> None:
    def props(window: str):
        return analyze(f"<r>{{ {HEAD} {window} let $s := sum($w/en) return <w>{{ $s }}</w> }}</r>").properties

    match = match_subscriptions(props(old), props(new))
    assert match.shareable == shareable, match.reason
    if not shareable and "by" in old + new:
        assert "partitioned" in match.reason or "per chip" in match.reason


@pytest.mark.parametrize("text, anchor, fragment", [
    (f"<r>{{ {HEAD} |count 4 by| return count($w) }}</r>", "|", "the key path after 'by'"),
    (f"<r>{{ {HEAD} |count 4 by chip[x = 1]| return count($w) }}</r>", "[x", "without predicates"),
    (f"<r>{{ {HEAD} |t diff 4 by chip by x| return count($w) }}</r>", "by x", "'|' closing the window"),
    (f"<r>{{ {HEAD} |count 4 step 2 chip| return count($w) }}</r>", "chip|", "'by'"),
])
def test_misused_keys_are_refused_with_their_position(text: str, anchor: str, fragment: str) -> None:
    with pytest.raises(WXQueryError) as err:
        analyze(text)
    assert fragment in err.value.message, err.value.message
    at = text.index(anchor) if anchor != "|" else text.index("by|") + 2
    assert (err.value.position.line, err.value.position.column) == (1, at + 1), err.value.format()


def test_the_key_of_a_window_without_it_is_nothing() -> None:
    items = ["<photon><en>1</en></photon>", "<photon><chip>I0</chip><en>2</en></photon>",
             "<photon><en>3</en></photon>"]
    query = f'<r>{{ {HEAD} |count 2 by chip| return <w>{{ $w/chip }}{{ sum($w/en) }}</w> }}</r>'
    document = "<p>" + "".join(items) + "</p>"
    got = evaluate(analyze(query).checked, StreamDocument.from_text(document)).serialized_items()
    assert list(got) == ["<w>4</w>"]


def test_a_predicate_on_the_key_path_reads_the_windows_items() -> None:
    """Only the key path as written is the key: with a predicate it is a path over the window's
    items, as in XQuery (and the window is then cut over the items, at the subscriber)."""
    items = ['<photon><chip x="1">A</chip><en>1</en></photon>', '<photon><chip x="2">A</chip><en>2</en></photon>']
    query = (f'<r>{{ {HEAD} |count 2 by chip| where $w/chip[@x = "2"] = "A" '
             f'return <w>{{ $w/chip[@x = "1"] }}</w> }}</r>')
    props = analyze(query).properties
    assert props.post_processing.local_windows
    document = "<p>" + "".join(items) + "</p>"
    got = evaluate(analyze(query).checked, StreamDocument.from_text(document)).serialized_items()
    assert list(got) == ['<w><chip x="1">A</chip></w>']


def test_a_stream_per_key_filtered_on_its_aggregates_serves_only_the_same_key() -> None:
    """The filter dropped the windows of keys that failed it: their items are missing from the
    windows over all items merged from it."""
    def props(window: str, where: str = "where $s > 5"):
        return analyze(f"<r>{{ {HEAD} {window} let $s := sum($w/en) {where} return <w>{{ $s }}</w> }}</r>").properties

    assert match_subscriptions(props("|t diff 5 by chip|"), props("|t diff 5 by chip|")).shareable
    refused = match_subscriptions(props("|t diff 5 by chip|"), props("|t diff 5|"))
    assert not refused.shareable and "same key" in refused.reason
    assert match_subscriptions(props("|t diff 5 by chip|", ""), props("|t diff 5|")).shareable
