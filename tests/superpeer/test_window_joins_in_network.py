"""A window join over two live streams through eight real super-peers in one process (issue 36):
photons at SP4 joined with alerts at SP2 on the alert's author and a band of event time, at a
subscriber on SP1. Results come while both streams flow; once both have ended they are the
reference evaluator's over what was published after the subscription, in its order."""

from __future__ import annotations

import random

from network_harness import same, until
from superpeer_fakes import buffered_results, in_process_network

from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

SOURCES = ["ivo://nasa.gsfc.gcn/SWIFT", "ivo://nasa.gsfc.gcn/Fermi"]
JOIN = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
        'where $a/t >= $p/t - 3 and $a/t <= $p/t + 1 and $a/author = $p/src and $p/en > 0.5 '
        'return <m>{ $p/en }{ $a/ivorn }</m> }</r>')


def _streams(n: int, seed: int = 5) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    rng = random.Random(seed)
    photons, alerts = [], []
    for k in range(n):
        t = k * 0.1
        photons.append((t, (f"<photon><t>{t:.1f}</t><src>{rng.choice(SOURCES)}</src>"
                            f"<en>{rng.uniform(0, 2):.3f}</en></photon>")))
        if k % 7 == 0:
            alerts.append((t, (f"<alert><ivorn>ivo://x#{k}</ivorn><t>{t:.1f}</t>"
                               f"<author>{rng.choice(SOURCES)}</author></alert>")))
    return photons, alerts


def test_a_window_join_streams_through_the_network() -> None:
    photons, alerts = _streams(1500)
    net = in_process_network()
    try:
        sp4, sp2 = net.peers["SP4"], net.peers["SP2"]
        sp4.control.register_stream("photons", "photons", "photon", rate=10)
        sp2.control.register_stream("alerts", "alerts", "alert", rate=2)
        record = net.peers["SP1"].control.subscribe(JOIN)
        half = len(photons) // 2
        sp4.data.publish("photons", [x for _, x in photons[:half]])
        sp2.data.publish("alerts", [x for t, x in alerts if t <= photons[half][0] + 2])
        # results while neither stream has ended
        until(lambda: record.runtime.buffer.items, 20, what=lambda: record.runtime.joins[0].status())
        sp4.data.publish("photons", [x for _, x in photons[half:]])
        sp2.data.publish("alerts", [x for t, x in alerts if t > photons[half][0] + 2])
        sp4.data.close_stream("photons")
        sp2.data.close_stream("alerts")
        got = buffered_results(record)
        documents = {"photons": StreamDocument.from_text("<photons>" + "".join(x for _, x in photons) + "</photons>"),
                     "alerts": StreamDocument.from_text("<alerts>" + "".join(x for _, x in alerts) + "</alerts>")}
        expected = list(evaluate(analyze(JOIN).checked, documents).serialized_items())
        assert len(expected) > 50
        assert same(got, expected)
        status = net.peers["SP1"].control.status()[record.runtime.id]
        assert status["joins"][0]["late_outer_items"] == status["joins"][0]["late_inner_items"] == 0
    finally:
        for p in net.peers.values():
            p.stop()


def test_an_idle_inner_stream_with_an_event_time_does_not_hold_results_back() -> None:
    """The alerts stream goes quiet; its super-peer's watermarks (it was registered with an event
    time) reach the subscriber's join, which answers the photons after the last alert without
    waiting for the next one. Before: those photons waited for the next alert."""
    photons, alerts = _streams(600)
    net = in_process_network()
    try:
        sp4, sp2 = net.peers["SP4"], net.peers["SP2"]
        sp4.control.register_stream("photons", "photons", "photon", rate=10, event_time="t")
        sp2.control.register_stream("alerts", "alerts", "alert", rate=2, event_time="t", event_time_rate=1000)
        record = net.peers["SP1"].control.subscribe(JOIN)
        sp2.data.publish("alerts", [x for _, x in alerts])  # (then nothing more: idle)
        sp4.data.publish("photons", [x for _, x in photons])
        documents = {"photons": StreamDocument.from_text("<photons>" + "".join(x for _, x in photons) + "</photons>"),
                     "alerts": StreamDocument.from_text("<alerts>" + "".join(x for _, x in alerts) + "</alerts>")}
        expected = list(evaluate(analyze(JOIN).checked, documents).serialized_items())
        last = alerts[-1][0]
        assert any(f"#{round(last * 10)}<" in e for e in expected)  # (results that need the watermark)
        buffer = record.runtime.buffer

        def answered() -> bool:
            sp2.data.idle_watermarks(0.0)  # (what the heartbeat does while the stream is idle)
            return len(buffer.items) >= len(expected)

        until(answered, 30,
              what=lambda: str((len(buffer.items), len(expected), record.runtime.joins[0].status())))
        assert same(list(buffer.items), expected)
    finally:
        for p in net.peers.values():
            p.stop()
