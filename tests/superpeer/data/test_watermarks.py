"""Watermarks: a stream registered with an event time that goes quiet still advances event time,
so time windows downstream close and their results arrive without the next item or the end.

Unit level: the origin's idle watermark, and a window chain closing on a watermark as it would
on an item with that value. Network level (real daemons, both executors): Query 3's windows
(computed on another super-peer than the subscriber's) all arrive while the stream is still
open; an item published below the watermark afterwards is late — dropped and counted, as
documented."""

from __future__ import annotations

import math
import time
from fractions import Fraction
from pathlib import Path

import pytest
from lxml import etree
from network_harness import paper_example_part, reference_results, same, until

from photons.generator import generate
from sharing.scenarios import example_query
from superpeer.data.event_time import EventTime, check_event_time
from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import up
from wxquery.operators import definitions as alg
from wxquery.operators.chains import normalise
from wxquery.operators.runner import ChainGroup


def _item(t: float, en: float = 1.0) -> str:
    return f"<photon><en>{en}</en><det_time>{t}</det_time></photon>"


def test_the_origin_sends_a_watermark_only_after_the_idle_time() -> None:
    clock = EventTime("det_time", rate=10.0)
    assert clock.idle_watermark(100.0, 1.0) is None  # nothing published yet
    clock.observe([etree.fromstring(_item(t)) for t in (3.0, 7.5, 5.0)], now=100.0)
    assert clock.high == 7.5
    assert clock.idle_watermark(100.5, 1.0) is None  # not idle long enough
    assert clock.idle_watermark(102.0, 1.0) == pytest.approx(7.5 + 10.0 * 2.0)
    assert clock.idle_watermark(102.0, 1.0) is None  # event time did not move since


def test_an_event_time_must_be_a_child_path_and_a_positive_rate() -> None:
    assert check_event_time("det_time", 1.0) == "" and check_event_time("coord/cel/ra", 0.5) == ""
    assert check_event_time("@t", 1.0) == "" and check_event_time("pos/@t", 1.0) == ""
    assert "path" in check_event_time("@t/x", 1.0) and "path" in check_event_time("@@t", 1.0)
    assert "path" in check_event_time("../x", 1.0) and "positive" in check_event_time("t", 0.0)
    assert "positive" in check_event_time("t", math.inf)


def test_an_event_time_in_an_attribute_is_followed_and_closes_windows_on_it() -> None:
    clock = EventTime("@t", rate=1.0)
    clock.observe([etree.fromstring(f'<ev t="{t}"><en>1</en></ev>') for t in (3.0, 7.5, 5.0)], now=100.0)
    assert clock.high == 7.5
    spec = alg.WindowSpec("diff", Fraction(10), Fraction(10), "@t")
    group = ChainGroup()
    group.add(normalise(0, "w", "in", "items", (alg.WindowAggregate(spec, (("count", "en"),)),)))
    assert group.push(['<ev t="1"><en>1</en></ev>', '<ev t="12"><en>1</en></ev>'], end=False)["w"]
    closed = group.advance("@t", 25.0)  # closes [10, 20): the item at 12
    assert len(closed["w"]) == 1 and ">1<" in closed["w"][0]


def test_a_time_window_closes_on_a_watermark_as_on_an_item() -> None:
    spec = alg.WindowSpec("diff", Fraction(10), Fraction(10), "det_time")
    group = ChainGroup()
    group.add(normalise(0, "w", "in", "items", (alg.WindowAggregate(spec, (("count", "en"),)),)))
    assert len(group.push([_item(1), _item(4), _item(12)], end=False)["w"]) == 1  # [0, 10) by the item at 12
    assert group.advance("other", 99.0) == {}  # a watermark on another element closes nothing
    closed = group.advance("det_time", 25.0)  # closes [10, 20): the item at 12
    assert len(closed["w"]) == 1 and ">1<" in closed["w"][0]
    assert group.advance("det_time", 25.0) == {}  # nothing more to close
    assert group.push([_item(15)], end=False)["w"] == []  # below the watermark: late
    assert group.counters()["w"].late_items == 1


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("executor", ["inline", "spark"])
def test_an_idle_stream_closes_its_windows_downstream(tmp_path: Path, executor: str) -> None:
    path = paper_example_part({"SP4", "SP5", "SP1"}, tmp_path / "route.toml")  # (q3's route: one executor each)
    network = up(path, executor, state_dir=tmp_path / "state",
                 serve_args=("--heartbeat-s", "0.3", "--watermark-idle-s", "0.5"))
    idle = 30 if executor == "inline" else 240  # (Spark's first micro-batch takes a while)
    try:
        address = network.addresses
        publisher = SuperPeerClient(address["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=500, event_time="det_time",
                                  event_time_rate=1000.0)
        photons = [p.to_xml() for p in generate(2000, seed=3)]
        publisher.publish("photons", photons[:200])
        time.sleep(1.0)
        subscriber = SuperPeerClient(address["SP1"])
        sid = subscriber.subscribe(example_query("q3")).subscription
        publisher.publish("photons", photons[200:])  # not closed: only watermarks close windows
        expected = reference_results(example_query("q3"), photons[200:])
        got: list[str] = []
        for batch in subscriber.result_batches(sid, 0, idle_timeout=idle):
            got.extend(batch.items)
            if len(got) >= len(expected):
                break
        assert same(got, expected), (len(got), len(expected))
        status = publisher.status()["streams_registered_here"]["photons"]["event_time"]
        assert status["path"] == "det_time" and status["last_watermark"] > status["highest"]
        # an item far below the watermark is late wherever the window runs: dropped and counted
        inside = next(x for x in reversed(photons) if _in_query_3(x))  # passes its selection
        publisher.publish("photons", [inside.replace("<det_time>", "<det_time>-5", 1)])

        def late() -> int:
            return sum(op.get("late_items", 0) for a in address.values()
                       for op in SuperPeerClient(a).status()["operators"])
        until(lambda: late() >= 1, seconds=idle)
    finally:
        network.stop()


def _in_query_3(xml: str) -> bool:
    el = etree.fromstring(xml)
    ra, dec = float(el.findtext("coord/cel/ra")), float(el.findtext("coord/cel/dec"))
    return 120.0 <= ra <= 138.0 and -49.0 <= dec <= -40.0
