"""A micro-batch spread over several tasks gives what one task gives (the feed, the planner of
partitions, the scan tasks' evaluation and the driver's fold; no Spark needed)."""

from __future__ import annotations

from fractions import Fraction as F

from wxquery.operators.chains import normalise
from superpeer.executors.spark.feed import FeedLog
from superpeer.executors.spark.driver_state import DriverState
from superpeer.executors.spark.tasks import evaluate_task, plan_batch, redo_piece
from operator_cases import assert_same
from photons.generator import generate
from wxquery.operators import definitions as alg

EN, T, RA = "en", "det_time", "coord/cel/ra"


def chain_ops(i: int):
    if i % 3 == 0:
        return (alg.Select((alg.Atom(EN, ">=", None, F(1) + F(i, 10)),)), alg.Project(frozenset({EN, T})))
    if i % 3 == 1:
        return (alg.WindowAggregate(alg.WindowSpec("diff", F(5), F(5, 2), T), (("sum", EN), ("count", EN))),)
    return (alg.Select((alg.Atom(RA, ">", None, F(130)),)),
            alg.WindowAggregate(alg.WindowSpec("count", F(7), F(3)), (("max", EN), ("count", "."))))


def run(log: FeedLog, chains, start: int, end: int, parallelism: int):
    """The tasks of one micro-batch, and per stream the texts the driver hands on after it."""
    tasks = plan_batch(log, chains, {}, start, end, 0.0, parallelism)
    results = [evaluate_task(task, log.read(task.src, task.start, task.end)) for task in tasks]
    ended = {r.src for r in results if r.ended}
    state = DriverState().fold(0, end, {c.id: c for c in chains}, results, ended, log.ids, 0.0,
                               lambda chain, piece, clock: redo_piece(log, chain, piece, clock, 0.0))
    return tasks, {stream: texts for stream, _, texts, _ in state.outputs}, ended


def test_a_batch_cut_into_ranges_gives_what_one_task_gives(tmp_path) -> None:
    log = FeedLog(tmp_path / "feed")
    texts = [p.to_xml() for p in generate(12_000, seed=3, rate=100.0)]
    for k in range(0, 12_000, 1000):  # two interleaved streams; the second one ends
        log.append("a", texts[k:k + 1000], False)
        log.append("b", texts[k:k + 500], k == 11_000)
    items_only = [normalise(i, f"s{i}", "a", "items", chain_ops(0), 0) for i in range(3)]
    mixed = [normalise(10 + i, f"m{i}", "b", "items", chain_ops(i), 0) for i in range(6)]
    one_tasks, one, one_ends = run(log, items_only + mixed, 0, log.end, 1)
    assert len(one_tasks) == 2 and all(one.values())
    for parallelism in (2, 3):
        tasks, got, ends = run(log, items_only + mixed, 0, log.end, parallelism)
        assert len(tasks) == 2 * parallelism  # each stream cut in ranges, every chain in each
        assert {len(t.chains) for t in tasks if t.src == log.ids["b"]} == {6}
        assert ends == one_ends == {log.ids["b"]}
        assert got.keys() == one.keys()
        for stream in one:
            assert_same(one[stream], got[stream])


def test_small_batches_stay_in_one_task(tmp_path) -> None:
    log = FeedLog(tmp_path / "feed")
    texts = [p.to_xml() for p in generate(3000, seed=4, rate=100.0)]
    log.append("a", texts, False)
    few = [normalise(i, f"s{i}", "a", "items", chain_ops(i), 0) for i in range(3)]
    tasks, _, _ = run(log, few, 0, log.end, 2)
    assert len(tasks) == 1  # 3,000 items: two tasks of 1,500 would not pay
    log.append("a", [p.to_xml() for p in generate(9000, seed=5, rate=100.0)], False)
    tasks, _, _ = run(log, few, 0, log.end, 2)
    assert len(tasks) == 2


def test_feed_slice_of_one_stream_among_others(tmp_path) -> None:
    log = FeedLog(tmp_path / "feed")
    log.append("a", ["<i>1</i>", "<i>é</i>"], False)
    log.append("b", ["<j>2</j>"], True)
    log.append("a", ["<i>3</i>"], False)
    a = log.read(log.ids["a"], 0, log.end)
    assert a.offsets.tolist() == [0, 1, 4] and a.joined == "<i>1</i><i>é</i><i>3</i>".encode()
    assert a.lengths.tolist() == [8, 9, 8] and not a.ended
    b = log.read(log.ids["b"], 0, log.end)
    assert b.offsets.tolist() == [2] and b.ended
    assert log.plan(0, log.end) == [(log.ids["a"], 3), (log.ids["b"], 2)]
