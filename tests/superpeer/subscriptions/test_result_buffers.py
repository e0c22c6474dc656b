"""What a subscription holds at its super-peer: result reads bounded in bytes, inputs that let go
of what was read, and results released once an ended subscription was read (or kept long
enough). Real subscription runtimes and evaluators over the in-process network."""

from __future__ import annotations

import time

import pytest
from superpeer_fakes import in_process_network, photon_network

from photons.generator import generate
from sharing.analysis import analyze
from superpeer.subscriptions.results import ResultBuffer
from superpeer.subscriptions.runtime import SubscriptionRuntime
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

PHOTONS = [p.to_xml() for p in generate(300, seed=7)]
WHOLE = '<r>{ for $p in stream("photons")/photons/photon return $p }</r>'
JOIN = ('<r>{ for $a in stream("photons")/photons/photon for $b in stream("photons")/photons/photon '
        'where $a/phc = $b/phc and $a/det_time < $b/det_time return <pair>{ $a/en }{ $b/en }</pair> }</r>')


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def read_all(buffer: ResultBuffer, timeout: float = 10.0) -> list[str]:
    out: list[str] = []
    while True:
        _, items, closed, _ = buffer.read(len(out), 10_000, timeout)
        out.extend(items)
        if closed:
            return out
        assert items, "no results within the timeout"


def reference(query: str, items: list[str]) -> list[str]:
    doc = StreamDocument.from_text("<photons>" + "".join(items) + "</photons>")
    return list(evaluate(analyze(query).checked, doc).serialized_items())


def test_a_read_is_bounded_in_bytes_and_always_progresses():
    """Before: a read returned up to max_items whatever their size, so 1,000 results of a few
    MB each made a reply over gRPC's 64 MiB limit (RESOURCE_EXHAUSTED, for every read)."""
    buffer = ResultBuffer(retention=1000, root="r")
    big = "<x>" + "y" * (3 << 20) + "</x>"
    for _ in range(6):
        buffer.append(big)
    offset, items, closed, _ = buffer.read(0, 1000, 0)
    assert offset == 0 and 0 < sum(len(i) for i in items) <= 8 << 20 and len(items) == 2
    small = ResultBuffer(retention=1000, root="r", max_read_bytes=10)
    small.append(big)
    assert small.read(0, 1000, 0)[1] == [big]  # one item bigger than the bound still comes


def test_a_single_pass_input_lets_go_of_what_was_read():
    """Before: every item delivered to a subscription stayed in its input feed for as long as
    the subscription lived (parsed trees included)."""
    runtime = SubscriptionRuntime("s1", analyze(WHOLE), retention=1000)
    runtime.start()
    values = [el for el in StreamDocument.from_text("<photons>" + "".join(PHOTONS) + "</photons>")
              .items("photons", "photon")]
    runtime.feed("p", values[:150], False)
    wait_for(lambda: runtime.buffer.base + len(runtime.buffer.items) == 150)
    assert len(runtime.feeds["p"]._items) == 0
    runtime.feed("p", values[150:], True)
    assert read_all(runtime.buffer) == PHOTONS


def test_a_joins_inner_input_is_replayed_and_everything_is_freed_at_the_end():
    analysis = analyze(JOIN)
    runtime = SubscriptionRuntime("s2", analysis, retention=100_000)
    runtime.start()
    doc = StreamDocument.from_text("<photons>" + "".join(PHOTONS[:80]) + "</photons>")
    values = list(doc.items("photons", "photon"))
    for variable in runtime.feeds:
        runtime.feed(variable, values, True)
    assert read_all(runtime.buffer) == reference(JOIN, PHOTONS[:80])
    wait_for(lambda: not runtime.thread.is_alive() or all(len(f._items) == 0
                                                            for f in runtime.feeds.values()))
    assert all(len(f._items) == 0 for f in runtime.feeds.values())


@pytest.fixture
def network():
    yield from photon_network(PHOTONS[:100])


def test_an_ended_subscription_read_to_the_end_is_released(network):
    """Before: the results of an ended subscription stayed at its super-peer until an
    unsubscribe, read or not."""
    record = network.peers["SP1"].control.subscribe(WHOLE)
    network.peers["SP4"].data.publish("photons", PHOTONS[100:])
    network.peers["SP4"].data.close_stream("photons")
    got = read_all(record.runtime.buffer)
    assert got == PHOTONS[100:]
    buffer = record.runtime.buffer
    assert buffer.read(len(got), 1, 0) == (len(got), [], True, 0)  # the reader confirms
    status = network.peers["SP1"].control.status()[record.runtime.id]
    assert status["held"] == 0 and status["held_bytes"] == 0
    assert status["released_after_end"] == len(got) and status["results"] == len(got)
    # a late reader from an old offset is told how many it missed
    assert buffer.read(10, 5, 0) == (len(got), [], True, len(got) - 10)


def test_an_ended_subscription_nobody_reads_is_released_after_the_retention_period():
    from superpeer.data.limits import DataLimits

    net = in_process_network()
    try:
        net.peers["SP4"].state.limits = net.peers["SP1"].state.limits = DataLimits(
            finished_retention_s=0.2)
        net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
        net.peers["SP4"].data.publish("photons", PHOTONS[:50])
        record = net.peers["SP1"].control.subscribe(WHOLE)
        net.peers["SP4"].data.publish("photons", PHOTONS[50:100])
        net.peers["SP4"].data.close_stream("photons")
        buffer = record.runtime.buffer
        wait_for(lambda: buffer.released == 50)
        assert buffer.held_bytes == 0 and buffer.read(0, 10, 0) == (50, [], True, 50)
    finally:
        for p in net.peers.values():
            p.stop()


def test_status_shows_what_the_retention_bound_dropped():
    """Before: ``status`` showed a subscription's result count, not what retention dropped."""
    net = in_process_network()
    try:
        for p in net.peers.values():
            p.control.retention = 5
        net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
        net.peers["SP4"].data.publish("photons", PHOTONS[:20])
        record = net.peers["SP1"].control.subscribe(WHOLE)
        net.peers["SP4"].data.publish("photons", PHOTONS[20:40])
        net.peers["SP4"].data.close_stream("photons")
        wait_for(lambda: record.runtime.buffer.closed)
        status = net.peers["SP1"].control.status()[record.runtime.id]
        assert status["dropped_by_retention"] == 15 and status["held"] == 5
    finally:
        for p in net.peers.values():
            p.stop()
