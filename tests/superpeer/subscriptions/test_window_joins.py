"""Window joins over live streams (issue 36): a band between the two inputs' elements lets the
nested loop of a join stream — results come while both streams flow, the inner input keeps only
the band — and the results are XQuery's (Saxon-HE on the same documents), in its order. Real
subscription runtimes and the reference evaluator; Saxon as the oracle."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import result_items, saxon_query

from sharing.analysis import analyze
from superpeer.subscriptions.join_feeds import InnerFeed, OuterFeed
from superpeer.subscriptions.runtime import SubscriptionRuntime
from wxquery.join_band import join_bands
from wxquery.operators.items import atom_test
from wxquery.stream_document import StreamDocument

SOURCES = ["ivo://nasa.gsfc.gcn/SWIFT", "ivo://nasa.gsfc.gcn/Fermi", "ivo://voevent.phys.soton.ac.uk/4PiSky"]


def _photons(n: int, rng: random.Random) -> list[str]:
    t, out = 0.0, []
    for k in range(n):
        t += rng.choice([0.0, 0.25, 0.5, 1.0, 2.5])  # (equal times too)
        out.append(f"<photon><id>{k}</id><t>{t}</t><src>{rng.choice(SOURCES)}</src>"
                   f"<en>{rng.choice(['0.5', '1.5', '3'])}</en></photon>")
    return out


def _alerts(n: int, rng: random.Random) -> list[str]:
    t, out = 0.0, []
    for k in range(n):
        t += rng.choice([0.5, 3.0, 7.0])
        out.append(f"<alert><ivorn>a{k}</ivorn><t>{t}</t><author>{rng.choice(SOURCES)}</author></alert>")
    return out


def _parsed(root: str, items: list[str]) -> list:
    return list(StreamDocument.from_text(f"<{root}>" + "".join(items) + f"</{root}>").items(root, root[:-1]))


def _query(source_p: str, source_a: str, where: str) -> str:
    return (f"<r>{{ for $p in {source_p}/photons/photon for $a in {source_a}/alerts/alert "
            f"where {where} return <m>{{ $p/id }}{{ $a/ivorn }}</m> }}</r>")


def _saxon(where: str, photons: list[str], alerts: list[str]) -> list[str]:
    document = "<both><photons>" + "".join(photons) + "</photons><alerts>" + "".join(alerts) + "</alerts></both>"
    return result_items(saxon_query(_query("/both", "/both", where), document))[1]


def _live(where: str, photons: list[str], alerts: list[str],
          rng: random.Random) -> tuple[list[str], SubscriptionRuntime]:
    """The join's results when both streams arrive in random batches, interleaved."""
    analysis = analyze(_query('stream("photons")', 'stream("alerts")', where))
    runtime = SubscriptionRuntime("j", analysis, 1_000_000)
    runtime.start()
    inputs = {"p": _parsed("photons", photons), "a": _parsed("alerts", alerts)}
    for inp in analysis.properties.inputs:  # (what the network applies before the join)
        tests = [atom_test(a) for a in (inp.selection.atoms if inp.selection else ())]
        inputs[inp.variable] = [i for i in inputs[inp.variable] if all(t(i) for t in tests)]
    sent = {"p": 0, "a": 0}
    while any(sent[v] < len(inputs[v]) for v in inputs):
        v = rng.choice([v for v in inputs if sent[v] < len(inputs[v])])
        k = rng.randint(1, 7)
        runtime.feed(v, inputs[v][sent[v]:sent[v] + k], False)
        sent[v] += k
    for v in inputs:
        runtime.feed(v, [], True)
    return _read_all(runtime), runtime


def _read_all(runtime: SubscriptionRuntime) -> list[str]:
    """Every result, up to the end (canonical form)."""
    out: list[str] = []
    while True:
        _, items, closed, _ = runtime.buffer.read(len(out), 100_000, 10)
        out.extend(items)
        if closed:
            return ["".join(result_items(f"<r>{x}</r>")[1]) for x in out]
        assert items, "no results within the timeout"


BANDS = ["$a/t >= $p/t - 5 and $a/t <= $p/t + 2",
         "$p/t <= $a/t + 5 and $p/t > $a/t - 2",  # (the same band written from the outer side)
         "$a/t >= $p/t - 3 and $a/t < $p/t + 0 and $a/author = $p/src",  # (an equi-join on strings)
         "$a/t = $p/t + 0.5",
         "$a/t >= $p/t - 4 and $a/t <= $p/t + 4 and $p/en > 1 and $a/author != \"ivo://nasa.gsfc.gcn/Fermi\""]


@pytest.mark.oracle
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), where=st.sampled_from(BANDS))
def test_a_window_join_over_live_streams_gives_what_saxon_gives(seed: int, where: str) -> None:
    rng = random.Random(seed)
    photons, alerts = _photons(rng.randint(0, 40), rng), _alerts(rng.randint(0, 15), rng)
    got, runtime = _live(where, photons, alerts, rng)
    assert runtime.joins, "the band was not found"
    assert got == _saxon(where, photons, alerts)
    assert runtime.joins[0].status()["late_outer_items"] == runtime.joins[0].status()["late_inner_items"] == 0


def test_results_come_while_both_streams_flow_and_the_inner_input_keeps_only_its_band() -> None:
    """Before: a join over live streams waited for its inner stream to end, holding all of it."""
    rng = random.Random(3)
    photons, alerts = _photons(600, rng), _alerts(120, rng)
    where = BANDS[0]  # (nothing applied upstream)
    runtime = SubscriptionRuntime("j", analyze(_query('stream("photons")', 'stream("alerts")', where)), 1_000_000)
    runtime.start()
    runtime.feed("a", _parsed("alerts", alerts), False)
    runtime.feed("p", _parsed("photons", photons[:200]), False)
    _until(lambda: runtime.buffer.items, "no results while the streams flow")  # (neither has ended)
    # once the evaluation is at the 200th photon, only the alerts of its band and later are kept
    last = float(photons[199].split("<t>")[1].split("<")[0])
    needed = [a for a in alerts if float(a.split("<t>")[1].split("<")[0]) >= last - 5]
    assert len(needed) < len(alerts) * 0.7
    _until(lambda: len(runtime.feeds["a"]) == len(needed), "the inner input keeps more than the band")
    runtime.stop()
    got, _ = _live(where, photons, alerts, random.Random(4))
    assert got == _saxon(where, photons, alerts)


def _until(condition, what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_items_out_of_order_are_counted_never_silent() -> None:
    where = BANDS[0]
    photons = [f"<photon><id>{k}</id><t>{t}</t></photon>" for k, t in enumerate([1, 5, 3, 9])]
    alerts = [f"<alert><ivorn>a{k}</ivorn><t>{t}</t></alert>" for k, t in enumerate([2, 6, 4, 20])]
    runtime = SubscriptionRuntime("j", analyze(_query('stream("photons")', 'stream("alerts")', where)), 1000)
    runtime.start()
    runtime.feed("a", _parsed("alerts", alerts), True)
    runtime.feed("p", _parsed("photons", photons), True)
    runtime.thread.join(10)
    status = runtime.joins[0].status()
    assert status["late_outer_items"] == 1 and status["late_inner_items"] == 1
    assert status["band"] == "$a/t within [$p/t - 5, $p/t + 2]"


@pytest.mark.parametrize("where, band", [
    (BANDS[0], "$a/t within [$p/t - 5, $p/t + 2]"),
    (BANDS[1], "$a/t within [$p/t - 5, $p/t + 2]"),
    ("$a/t >= $p/t - 5 and $a/t <= $p/t + 2 and $a/t >= $p/t - 1", "$a/t within [$p/t - 1, $p/t + 2]"),
    ("$a/t = $p/t", None),  # (compared as strings: no order)
    ("$a/t >= $p/t - 5", None),  # (one end only)
    ("$a/t >= $p/t - 5 and $a/x <= $p/t + 2", None),  # (two elements)
])
def test_the_band_is_found_in_the_where_clause(where: str, band: str | None) -> None:
    bands = join_bands(analyze(_query('stream("photons")', 'stream("alerts")', where)).checked)
    assert [str(b) for b in bands] == ([band] if band else [])


def test_a_join_without_a_band_keeps_the_nested_loop() -> None:
    runtime = SubscriptionRuntime("j", analyze(_query('stream("photons")', 'stream("alerts")',
                                                      "$a/author = $p/src")), 1000)
    assert not runtime.joins
    assert not isinstance(runtime.feeds["a"], InnerFeed) and not isinstance(runtime.feeds["p"], OuterFeed)


def _items(tag: str, times: list) -> list[str]:
    """Items with the given band values (a tuple: the element repeated; None: missing)."""
    out = []
    for k, t in enumerate(times):
        values = "" if t is None else "".join(f"<t>{v}</t>" for v in (t if isinstance(t, tuple) else (t,)))
        out.append(f"<{tag}><id>{k}</id><ivorn>{tag[0]}{k}</ivorn>{values}</{tag}>")
    return out


@pytest.mark.oracle
@pytest.mark.parametrize("where, photon_times, alert_times", [
    # a repeated inner element: the item is placed by its least and greatest values
    (BANDS[0], [1, 10, 20], [(0, 10.5), 11, (12, 30)]),
    # a repeated outer element, the band written from the outer side
    ("$p/t <= $a/t + 1 and $p/t >= $a/t - 1", [(100, 5), 101, (102, 101.2)], [4, 6, 100.5]),
    # no band value: matches nothing
    (BANDS[0], [1, None, 3, None], [2, None, 4]),
    # equal values, and a band of one point
    ("$a/t = $p/t + 0.5", [1, 1, 1.5, 2], [1.5, 1.5, 2, 2.5]),
])
def test_repeated_and_missing_band_values_give_what_saxon_gives(where: str, photon_times: list,
                                                                alert_times: list) -> None:
    photons, alerts = _items("photon", photon_times), _items("alert", alert_times)
    for seed in range(5):
        got, runtime = _live(where, photons, alerts, random.Random(seed))
        assert got == _saxon(where, photons, alerts), seed
        assert runtime.joins


def test_infinite_band_values_are_dropped_and_counted_and_the_join_goes_on() -> None:
    """Before: an outer INF stalled the join until the inner stream ended, and dropped every
    later outer item as late."""
    photons, alerts = _items("photon", [1, "INF", 5]), _items("alert", [0, 2, 4, "-INF", 6])
    got, runtime = _live(BANDS[0], photons, alerts, random.Random(1))
    finite = [r for r in _saxon(BANDS[0], photons, alerts) if "<id>1</id>" not in r and "a3<" not in r]
    assert got == finite and len(finite) == 6
    assert runtime.joins[0].status()["not_finite"] == 2


@pytest.mark.oracle
def test_two_inner_inputs_in_bands_of_one_outer_input_both_stream() -> None:
    where = "$a/t >= $p/t - 2 and $a/t <= $p/t + 2 and $b/t >= $p/t - 1 and $b/t <= $p/t + 1"
    query = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
             f'for $b in stream("alerts")/alerts/alert where {where} '
             'return <m>{ $p/id }{ $a/ivorn }{ $b/ivorn }</m> }</r>')
    bands = join_bands(analyze(query).checked)
    assert [b.inner for b in bands] == ["a", "b"]
    runtime = SubscriptionRuntime("j", analyze(query), 100_000)
    runtime.start()
    photons, alerts = _items("photon", [1, 3, 5, 7, 9]), _items("alert", [0, 2, 4, 6, 8, 10, 12])
    runtime.feed("p", _parsed("photons", photons), False)
    runtime.feed("a", _parsed("alerts", alerts), False)
    runtime.feed("b", _parsed("alerts", alerts), False)
    _until(lambda: len(runtime.buffer.items) >= 8, "a join of three inputs waits for the end of a stream")
    for v in ("p", "a", "b"):
        runtime.feed(v, [], True)
    out = _read_all(runtime)
    document = "<both><photons>" + "".join(photons) + "</photons><alerts>" + "".join(alerts) + "</alerts></both>"
    twin = query.replace('stream("photons")', "/both").replace('stream("alerts")', "/both")
    assert out == result_items(saxon_query(twin, document))[1]
