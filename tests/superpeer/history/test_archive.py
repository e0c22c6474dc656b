"""Archives (issue 15): a super-peer with ``--archive`` persists its streams as Parquet; archive
queries run with Spark in batch mode and equal the reference evaluator over the archived items
(several partitions, time ranges, count and time windows); ``subscribe --since`` reaches into
the archive past the log's history (archive, then history, then live); approximate answers'
intervals hold the true value as often as they say."""

from __future__ import annotations

import math
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from network_harness import reference_results, running_network, same, until

from photons.generator import generate
from sharing.analysis import analyze
from sharing.matching import match_properties, raw_properties
from sharing.scenarios import example_query, paper_example_backbone
from superpeer.data.event_time import EventTime
from superpeer.executors.spark.session import spark_session
from superpeer.history.archive.layout import SAMPLE_RATES, ArchiveLayout, in_sample
from superpeer.history.archive.query import ArchiveQueryError, ArchiveRequest, query_archive
from superpeer.history.archive.writer import Archiver, ArchiveSettings
from superpeer.history.bounds import parse_history
from superpeer.peer_state import OriginalState, PeerState
from thinpeer.client import SuperPeerClient
from wxquery.operators.records import WindowRecord
from wxquery.operators.runner import run_operators

PHOTONS = [p.to_xml() for p in generate(4000, seed=44)]
COUNT_QUERY = """<photons>
  { for $w in stream("photons")/photons/photon[en >= 1.0] |count 40 step 15|
    return <w><n>{ count($w/en) }</n><s>{ sum($w/en) }</s><m>{ max($w/phc) }</m></w> }
</photons>"""
TIME_AGGREGATES = """<photons>
  { for $w in stream("photons")/photons/photon |det_time diff 50 step 50|
    return <w><n>{ count($w/en) }</n><s>{ sum($w/en) }</s><a>{ avg($w/en) }</a></w> }
</photons>"""

PER_KEY = ["""<w>{ for $w in stream("photons")/photons/photon[en >= 0.5] |count 4 step 2 by phc|
  return <w>{ $w/phc }{ sum($w/en) }</w> }</w>""", """<w>{ for $w in stream("photons")/photons/photon
  |det_time diff 50 step 25 by phc| let $n := count($w) where $n > 1 return <w>{ $w/phc }{ $n }</w> }</w>""",
           # (two key paths, the second in no photon: counted per combination across the archive's units)
           """<w>{ for $w in stream("photons")/photons/photon[en >= 0.5] |count 3 by coord/chip, phc|
  return <w>{ $w/phc }{ $w/coord/chip }{ sum($w/en) }</w> }</w>"""]


def det_time(item: str) -> float:
    return float(item.split("<det_time>")[1].split("<")[0])


@pytest.fixture(scope="module")
def spark():
    return spark_session("local[2]")


def archived_network(tmp_path, samples: str = "eager", history: str = "", **options):
    settings = ArchiveSettings(tmp_path / "archive", span=60.0, samples=samples)
    options = {"SP4": {"archive": settings, **({"history": parse_history(history)} if history else {}), **options}}
    return running_network(tmp_path, peer_options=options), settings


def publish_in_chunks(topology, peers, parts: list[list[str]], close: bool = True) -> SuperPeerClient:
    publisher = SuperPeerClient(topology.address("SP4"))
    publisher.register_stream("photons", "photons", "photon", rate=500, event_time="det_time")
    for part in parts:
        publisher.publish("photons", part)
        peers["SP4"].node.archiver.drain()  # one chunk per part (the writer also flushes on its own)
    if close:
        publisher.close_stream("photons")
    return publisher


def test_samples_are_nested_and_take_each_item_with_probability_one_in_r() -> None:
    positions = np.arange(400_000)
    previous = np.ones(positions.size, dtype=bool)
    for rate in SAMPLE_RATES:
        mask = in_sample(positions, rate)
        assert not (mask & ~previous).any()  # inside the finer sample
        expected, sd = positions.size / rate, math.sqrt(positions.size * (1 / rate) * (1 - 1 / rate))
        assert abs(mask.sum() - expected) < 4 * sd, (rate, mask.sum(), expected)
        previous = mask


def test_archive_queries_equal_the_reference_over_several_partitions(tmp_path, spark) -> None:
    network, settings = archived_network(tmp_path)
    with network as (topology, peers):
        publish_in_chunks(topology, peers, [PHOTONS[:1500], PHOTONS[1500:2600], PHOTONS[2600:]])
        peers["SP4"].node.archiver.drain()
    layout = ArchiveLayout(settings.directory)
    files = layout.files("photons")
    assert len({f.bucket for f in files}) >= 4 and len({f.first for f in files}) == 3, files
    assert sum(pq.ParquetFile(f.path).metadata.num_rows for f in files) == len(PHOTONS)
    table = pq.read_table(files[0].path)
    assert table.column("item").to_pylist()[0] in PHOTONS  # the item kept as it was published
    assert "v_coord__cel__ra" in table.column_names and "v_en" in table.column_names
    for name, query in (("q1", example_query("q1")), ("q3", example_query("q3")), ("q4", example_query("q4")),
                        ("count", COUNT_QUERY), ("count by phc", PER_KEY[0]), ("time by phc", PER_KEY[1]),
                        ("count by coord/chip, phc", PER_KEY[2])):
        answer = query_archive(ArchiveRequest(query, settings.directory), spark)
        expected = reference_results(query, PHOTONS)
        assert answer.rate == 1 and expected and same(answer.items, expected), (name, len(answer.items), len(expected))
    lo, hi = 100.0, 250.0
    inside = [p for p in PHOTONS if lo <= det_time(p) < hi]
    for query in (example_query("q3"), COUNT_QUERY, *PER_KEY):
        answer = query_archive(ArchiveRequest(query, settings.directory, lo, hi), spark)
        assert same(answer.items, reference_results(query, inside))


def test_archive_query_errors_say_what_is_wrong(tmp_path, spark) -> None:
    network, settings = archived_network(tmp_path)
    with network as (topology, peers):
        publish_in_chunks(topology, peers, [PHOTONS[:300]])
    with pytest.raises(ArchiveQueryError, match='"stars" is not in the archive'):
        query_archive(ArchiveRequest(example_query("q1").replace('"photons"', '"stars"'), settings.directory), spark)
    with pytest.raises(ArchiveQueryError, match="query:2:13"):
        query_archive(ArchiveRequest("<a>\n{ for $p in }</a>", settings.directory), spark)
    with pytest.raises(ArchiveQueryError, match="count window"):
        query_archive(ArchiveRequest(COUNT_QUERY, settings.directory, approximate=True), spark)


def test_since_reaches_into_the_archive_then_the_log_then_live(tmp_path) -> None:
    # no idle watermark in the pause: the items after it are not late (that case: the next test)
    network, settings = archived_network(tmp_path, history="500", watermark_idle_s=60.0)
    with network as (topology, peers):
        publisher = publish_in_chunks(topology, peers, [PHOTONS[:1200]], close=False)
        time.sleep(4.0)  # the input: an old part, then a recent one
        publisher.publish("photons", PHOTONS[1200:2000])
        peers["SP4"].node.archiver.drain()

        def retained() -> int:
            return publisher.status()["streams_registered_here"]["photons"]["history"]["retained_from"]

        until(lambda: retained() == 1500, what=lambda: str(retained()))  # the log keeps 500 items
        client = SuperPeerClient(topology.address("SP7"))
        everything = client.subscribe(example_query("q3"), from_start=True)
        assert everything.history == ""  # the archive reaches back to item 0
        recent = client.subscribe(example_query("q3"), since_s=3.0)  # items 1200-1499 are archived only
        publisher.publish("photons", PHOTONS[2000:])
        publisher.close_stream("photons")
        for sub, expected_from in ((everything, 0), (recent, 1200)):
            got = [item for _, item, _ in client.results(sub.subscription, idle_timeout=30)]
            expected = reference_results(example_query("q3"), PHOTONS[expected_from:])
            assert expected and same(got, expected), (expected_from, len(got), len(expected))


def test_a_replay_from_the_archive_sends_the_watermarks_where_they_were_sent(tmp_path, spark) -> None:
    """An idle watermark closed a time window and made an item published after it late (dropped);
    once only the archive holds them, a subscription from the start drops that item too, and so
    does a query over the archive."""
    def item(t: float) -> str:
        return f"<photon><en>{1 + t % 7}</en><det_time>{t}</det_time></photon>"

    early, late, later = [item(t) for t in range(600)], item(620.5), [item(1000 + t) for t in range(600)]
    network, settings = archived_network(tmp_path, history="500")
    with network as (topology, peers):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500, event_time="det_time",
                                  event_time_rate=100.0)
        publisher.publish("photons", early)
        time.sleep(0.6)
        peers["SP4"].node.data.idle_watermarks(0.5)  # event time 599 + ~60: past the next item's
        watermark = publisher.status()["streams_registered_here"]["photons"]["event_time"]["last_watermark"]
        assert watermark is not None and watermark > 621
        publisher.publish("photons", [late, *later])
        peers["SP4"].node.archiver.drain()

        def retained() -> int:
            return publisher.status()["streams_registered_here"]["photons"]["history"]["retained_from"]

        until(lambda: retained() >= 700, what=lambda: str(retained()))  # the watermark's place: archived only
        client = SuperPeerClient(topology.address("SP7"))
        everything = client.subscribe(TIME_AGGREGATES, from_start=True)
        publisher.close_stream("photons")
        got = [x for _, x, _ in client.results(everything.subscription, idle_timeout=30)]
        expected = reference_results(TIME_AGGREGATES, early + later)  # without the late item
        assert not same(expected, reference_results(TIME_AGGREGATES, early + [late] + later))
        assert expected and same(got, expected), (len(got), len(expected))
        peers["SP4"].node.archiver.drain()
    answer = query_archive(ArchiveRequest(TIME_AGGREGATES, settings.directory), spark)
    assert same(answer.items, expected), (len(answer.items), len(expected))


def test_an_archive_query_obeys_the_watermarks_of_its_range(tmp_path, spark) -> None:
    """Three chunks with idle watermarks between them, the last making some items late: over
    any range the answer is the query over the items the live run kept in that range (a
    watermark at or beyond the range's end counts as an item there: not at all)."""
    def item(t: float) -> str:
        return f"<photon><en>{1 + t % 5}</en><det_time>{t}</det_time></photon>"

    parts = [[item(t) for t in range(0, 90)], [item(t) for t in range(100, 190)],
             [item(t) for t in range(270, 330)]]
    marks = {90: 95.0, 180: 300.0}  # after the first part, after the second: 270–299 come late
    state = PeerState("SP4", paper_example_backbone())
    state.add_original(OriginalState("photons", "photons", "photon", event_time=EventTime("det_time")))
    original, archiver, at = state.originals["photons"], Archiver(state, tmp_path / "a", span=60.0, samples="lazy"), 0
    for part in parts:
        state.store.append("photons", at, part, at + len(part), at + len(part), 0, 0, at=time.time())
        if at + len(part) in marks:
            state.store.add_watermark("photons", at + len(part), "det_time", marks[at + len(part)])
        original.logged = at + len(part)
        archiver.write_chunk(original, at, at + len(part))
        at += len(part)
    kept = [x for x in parts[0] + parts[1] + parts[2] if not 270 <= det_time(x) < 300]
    for lo, hi in ((-math.inf, math.inf), (0.0, 250.0), (0.0, 290.0), (120.0, 400.0)):
        answer = query_archive(ArchiveRequest(TIME_AGGREGATES, tmp_path / "a", lo, hi), spark)
        expected = reference_results(TIME_AGGREGATES, [x for x in (kept if hi > 300 else
                                                                   parts[0] + parts[1] + parts[2])
                                                       if lo <= det_time(x) < hi])
        assert expected and same(answer.items, expected), (lo, hi, len(answer.items), len(expected))


def write_archive(directory, items: list[str], samples: str, chunk: int = 1500) -> None:
    """An archive written by the super-peer's writer from a log, without a network."""
    state = PeerState("SP4", paper_example_backbone())
    state.add_original(OriginalState("photons", "photons", "photon", event_time=EventTime("det_time")))
    original = state.originals["photons"]
    archiver = Archiver(state, directory, span=60.0, samples=samples)
    for first in range(0, len(items), chunk):
        part = items[first:first + chunk]
        state.store.append("photons", first, part, first + len(part), first + len(part), 0, 0, at=time.time())
        original.logged = first + len(part)
        archiver.write_chunk(original, first, first + len(part))


def window_truth(query: str, items: list[str]) -> dict[int, dict[str, float]]:
    """Per window, the true count/sum/avg of en (the inline operators: the reference semantics)."""
    analysis = analyze(query)
    inp = analysis.properties.inputs[0]
    residual = match_properties(raw_properties(inp.input), inp).residual
    truth = {}
    for text in run_operators(residual, "items", items):
        record = WindowRecord.from_xml(text)
        truth[record.index] = {fn: (record.final(fn, "en") or [math.nan])[0] for fn in ("count", "sum", "avg")}
    return truth


@pytest.mark.parametrize("samples", ["eager", "lazy", "hybrid"])
def test_approximate_intervals_hold_the_true_value_in_most_seeded_trials(tmp_path, spark, samples) -> None:
    held = tried = 0
    for seed in range(4):
        items = [p.to_xml() for p in generate(3000, seed=100 + seed)]
        directory = tmp_path / f"archive-{seed}"
        write_archive(directory, items, samples)
        truth = window_truth(TIME_AGGREGATES, items)
        for rate in (4, 16):
            answer = query_archive(ArchiveRequest(TIME_AGGREGATES, directory, budget_rows=-(-len(items) // rate)), spark)
            assert answer.rate == rate and answer.items
            for e in answer.estimates:
                if e.function in ("count", "sum", "avg") and e.low is not None and e.window in truth:
                    tried += 1
                    held += e.low <= truth[e.window][e.function] <= e.high
        layout = ArchiveLayout(directory)
        assert layout.files("photons", 4) and layout.files("photons", 16)  # built eagerly or by the query
    assert tried >= 100 and held / tried >= 0.9, (held, tried)


def test_a_budget_picks_the_finest_sample_that_fits_and_the_answer_says_so(tmp_path, spark) -> None:
    items = PHOTONS[:3200]
    write_archive(tmp_path / "a", items, "hybrid")
    exact = query_archive(ArchiveRequest(TIME_AGGREGATES, tmp_path / "a", budget_rows=10 ** 9), spark)
    assert exact.rate == 1 and "exact" in " ".join(exact.notes)
    coarse = query_archive(ArchiveRequest(TIME_AGGREGATES, tmp_path / "a", approximate=True), spark)
    assert coarse.rate == 64 and 'sample="1/64"' in coarse.approximation_xml()
    assert query_archive(ArchiveRequest(TIME_AGGREGATES, tmp_path / "a", budget_rows=1000), spark).rate == 4


def test_a_chunk_half_written_by_a_crash_is_written_again_and_never_read(tmp_path, spark) -> None:
    write_archive(tmp_path / "a", PHOTONS[:3000], "lazy")
    layout = ArchiveLayout(tmp_path / "a")
    one = layout.files("photons")[0]
    stray = layout.file("photons", 1, one.bucket, 3000, 4499)  # a bucket file of a chunk never committed
    stray.write_bytes(one.path.read_bytes())
    assert layout.archived_upto("photons") == 3000 and stray not in [f.path for f in layout.files("photons")]
    state = PeerState("SP4", paper_example_backbone())
    state.add_original(OriginalState("photons", "photons", "photon", event_time=EventTime("det_time")))
    archiver = Archiver(state, tmp_path / "a", span=60.0, samples="lazy")
    assert archiver.position("photons") == 3000 and not stray.exists()
    answer = query_archive(ArchiveRequest(example_query("q1"), tmp_path / "a"), spark)
    assert same(answer.items, reference_results(example_query("q1"), PHOTONS[:3000]))


def test_an_archive_begun_after_the_log_was_trimmed_starts_at_the_log_and_says_so(tmp_path) -> None:
    state = PeerState("SP4", paper_example_backbone())
    state.add_original(OriginalState("photons", "photons", "photon", retained_from=500, logged=800))
    archiver = Archiver(state, tmp_path / "a")
    assert archiver.position("photons") == 500 and archiver.status()["gaps"] == {"photons": [0, 500]}


def test_aggregate_filters_apply_to_the_scaled_estimates(tmp_path, spark) -> None:
    query = """<photons>
  { for $w in stream("photons")/photons/photon |det_time diff 50 step 50|
    let $n := count($w/en)
    where $n >= 450
    return <n>{ $n }</n> }
</photons>"""
    write_archive(tmp_path / "a", PHOTONS, "eager")
    exact = query_archive(ArchiveRequest(query, tmp_path / "a"), spark)
    sampled = query_archive(ArchiveRequest(query, tmp_path / "a", budget_rows=len(PHOTONS) // 4 + 1), spark)
    assert sampled.rate == 4 and exact.items
    assert abs(len(sampled.items) - len(exact.items)) <= max(2, len(exact.items) // 4), (sampled.items, exact.items)
