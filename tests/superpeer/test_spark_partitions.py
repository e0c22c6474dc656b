"""A micro-batch spread over several tasks gives what one task gives (the feed, the planner of
partitions and the scan task's evaluation; no Spark needed)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

from wxquery.operators.chains import normalise
from superpeer.executors.spark.feed import FeedLog
from superpeer.executors.spark.tasks import evaluate_task, partition_tasks
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
    by_src = {}
    for c in chains:
        by_src.setdefault(log.ids[c.parent], []).append(c)
    tasks = partition_tasks(log.plan(start, end), start, end, by_src, {}, 0.0, parallelism)
    rows = Counter()
    ends = set()
    for task in tasks:
        result = evaluate_task(task, log.read(task.src, task.start, task.end))
        for cid, out in result.outputs.items():
            rows.update((cid, "item", o, x) for o, x in out.items)
            rows.update((cid, "pane", p, repr(v)) for p, v in out.panes)
            rows.update((cid, "record", o, x) for o, x in out.records)
        if result.ended:
            ends.add(result.src)
    return tasks, rows, ends


def test_tasks_split_by_range_or_by_chains_give_one_task_s_rows(tmp_path) -> None:
    log = FeedLog(tmp_path / "feed")
    texts = [p.to_xml() for p in generate(12_000, seed=3, rate=100.0)]
    for k in range(0, 12_000, 1000):  # two interleaved streams; the second one ends
        log.append("a", texts[k:k + 1000], False)
        log.append("b", texts[k:k + 500], k == 11_000)
    items_only = [normalise(i, f"s{i}", "a", "items", chain_ops(0), 0) for i in range(3)]
    mixed = [normalise(10 + i, f"m{i}", "b", "items", chain_ops(i), 0) for i in range(6)]
    one_tasks, one, one_ends = run(log, items_only + mixed, 0, log.end, 1)
    assert len(one_tasks) == 2 and sum(one.values()) > 0
    two_tasks, two, two_ends = run(log, items_only + mixed, 0, log.end, 2)
    assert len(two_tasks) == 4  # "a" cut in two ranges, "b"'s six chains dealt into two groups
    assert {len(t.chains) for t in two_tasks if t.src == log.ids["b"]} == {3}
    assert two == one and two_ends == one_ends == {log.ids["b"]}


def test_small_batches_and_few_chains_stay_in_one_task(tmp_path) -> None:
    log = FeedLog(tmp_path / "feed")
    texts = [p.to_xml() for p in generate(3000, seed=4, rate=100.0)]
    log.append("a", texts, False)
    few = [normalise(i, f"s{i}", "a", "items", chain_ops(i), 0) for i in range(3)]
    tasks, _, _ = run(log, few, 0, log.end, 2)
    assert len(tasks) == 1  # 3,000 items: two tasks of 1,500 would not pay
    log.append("a", [p.to_xml() for p in generate(9000, seed=5, rate=100.0)], False)
    tasks, _, _ = run(log, few, 0, log.end, 2)
    assert len(tasks) == 1  # windows in only three chains: parsing twice would not pay


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
