"""Estimates measured on the sample, against what the operators produce over the whole stream:
correlated elements, window records' sizes, and filters on aggregates over data that varies in
time (the photons' flares)."""

from __future__ import annotations

from conftest import photon_document
from per_item_operators import Pipeline

from sharing.analysis import analyze
from sharing.planner import Strategy
from sharing.scenarios import SCENARIOS
from sharing.simulator import simulate
from sharing.statistics import StreamStatistics
from wxquery.operators import definitions as alg
from wxquery.operators.records import serialize
from wxquery.operators.runner import run_operators
from wxquery.stream_document import StreamDocument

# 8,000 photons at 10/s of det_time: 800 s, the first 120 s of every 600 s a flare of hard ones
ITEMS = list(StreamDocument.from_text(photon_document(8000, seed=11)).items("photons", "photon"))
TEXTS = [serialize(i) for i in ITEMS]


def observed() -> StreamStatistics:
    s = StreamStatistics(frequency=10.0)
    for item in ITEMS:
        s.observe(item)
    return s


def one_input(query: str):
    (inp,) = analyze(query).properties.inputs
    return inp


def photons(where: str, body: str = "$p") -> str:
    return f'<r>{{ for $p in stream("photons")/photons/photon where {where} return {body} }}</r>'


def test_a_conjunction_of_correlated_elements_is_measured_not_multiplied():
    """The pulse-height channel is the energy's: ``en >= 1.2 and phc <= 135`` keeps a thin band
    that the product of their own shares (independent elements) puts far higher."""
    s = observed()
    sel = one_input(photons("$p/en >= 1.2 and $p/phc <= 135")).selection
    kept = Pipeline([alg.Select(sel.atoms)]).run(ITEMS)
    actual = len(kept) / len(ITEMS)
    assert actual > 0.01
    assert abs(s.selectivity(sel) - actual) / actual < 0.3  # (independence: 13× too high)


def test_a_selection_too_narrow_for_the_sample_is_still_priced_above_zero():
    s = observed()
    sel = one_input(photons("$p/en >= 2.399 and $p/coord/cel/ra >= 359")).selection
    assert 0 < s.selectivity(sel) <= 8 / len(s.sample)


def window_stream(query: str) -> tuple[float, float]:
    """Records per second and bytes per record the operators produce over the whole stream."""
    inp = one_input(query)
    ops: list = []
    if inp.selection is not None:
        ops.append(alg.Select(inp.selection.atoms))
    partials = tuple(dict.fromkeys(p for a in inp.aggregates for p in alg.partials_of(a.function, a.element)))
    ops.append(alg.WindowAggregate(inp.window, partials))
    if inp.aggregate_selection is not None:
        ops.append(alg.AggregateFilter(inp.aggregate_selection.atoms))
    records = run_operators(tuple(ops), "items", TEXTS)
    seconds = len(ITEMS) / 10.0
    return len(records) / seconds, sum(len(r.encode()) for r in records) / max(len(records), 1)


def windowed(path: str, window: str, let: str, where: str = "") -> str:
    return (f'<r>{{ for $w in stream("photons")/photons/photon{path} |{window}| let $a := {let} '
            f'{where} return <a>{{ $a }}</a> }}</r>')


WINDOWED = [
    windowed("", "det_time diff 20 step 10", "avg($w/en)"),
    windowed("[en >= 1.0]", "det_time diff 30 step 30", "count($w)"),
    windowed("", "count 50 step 25", "max($w/en)"),
]


def test_window_records_rates_and_sizes():
    s = observed()
    for query in WINDOWED:
        rate, size = window_stream(query)
        est = s.estimate(one_input(query))
        assert abs(est.freq - rate) / rate < 0.1, query
        assert abs(est.size - size) / size < 0.1, (query, est.size, size)


def test_a_filter_on_averages_follows_the_flares():
    """Windows whose average energy is high are the flare's: a share of the windows that
    windows of photons drawn at random from the whole sample would put near zero."""
    s = observed()
    query = windowed("", "det_time diff 20 step 10", "avg($w/en)", "where $a >= 1.2")
    rate, _ = window_stream(query)
    assert rate > 0
    assert abs(s.estimate(one_input(query)).freq - rate) / rate < 0.25


def test_simulated_links_are_within_a_quarter_of_the_model():
    """After a warm-up (a fifth of the photons: 400 s, a flare and a quiet time) the model's
    rate for every link is within ±25 % of what the link carries over the whole run."""
    report = simulate(SCENARIOS["paper-example"](0), photons=20000, verify=False,
                      strategies=[Strategy.SHARING, Strategy.QUERY_SHIPPING])
    for name, strategy in report["strategies"].items():
        accuracy = strategy["model_accuracy"]["estimates"]
        assert accuracy["within_25_percent"] >= 0.9, (name, accuracy)


def test_a_planner_holding_the_sample_gets_only_the_counters_until_it_changes():
    """What a super-peer answers a planner (``GetStatistics``): the sample once, then the
    counters only, until the sample is refreshed (1/64 more items)."""
    from sharing.serialization import statistics_from_json, statistics_to_json

    s = StreamStatistics(frequency=10.0)
    for item in ITEMS[:4000]:
        s.observe(item)
    first = statistics_to_json(s)
    held = statistics_from_json(first)
    sel = one_input(photons("$p/en >= 1.2 and $p/phc <= 135")).selection
    before = held.selectivity(sel)
    s.observe(ITEMS[4000])
    s.frequency = 12.5
    again = statistics_to_json(s, sample_of=held.sample_id)
    assert again["same_sample"] and "sample" not in again and "sample_items" not in again
    assert statistics_from_json(again, held) is held and held.items == 4001 and held.frequency == 12.5
    assert held.selectivity(sel) == before
    for item in ITEMS[4001:4200]:  # (past 1/64 more: a new sample)
        s.observe(item)
    fresh = statistics_to_json(s, sample_of=held.sample_id)
    assert "same_sample" not in fresh and len(fresh["sample"]) == 512
    renewed = statistics_from_json(fresh, held)
    assert renewed is not held and renewed.sample_id == fresh["sample_id"] != held.sample_id
    # (a relational predicate is measured on the values sent)
    relational = one_input(photons("$p/coord/det/dx <= $p/coord/det/dy - 500")).selection
    assert 0 < renewed.selectivity(relational) < 1
