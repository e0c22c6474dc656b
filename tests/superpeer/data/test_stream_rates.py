"""Measured stream rates (issue 31): after a warm-up, a peer knows the rate and item size each
stream passing it was measured to carry, and reports a drift."""

from __future__ import annotations

import time

import pytest
from superpeer_fakes import in_process_network

from photons.generator import generate
from sharing.scenarios import example_query
from superpeer.data import stream_rates

PHOTONS = [p.to_xml() for p in generate(3000, seed=2)]


@pytest.fixture
def net(monkeypatch):
    monkeypatch.setattr(stream_rates, "WARM_UP_S", 0.0)
    network = in_process_network()
    sp4 = network.peers["SP4"]
    sp4.control.register_stream("photons", "photons", "photon", rate=5)  # (a wrong rate, on purpose)
    sp4.data.publish("photons", PHOTONS[:200])
    yield network
    for p in network.peers.values():
        p.stop()


def test_a_stream_is_measured_where_it_passes(net):
    sp4 = net.peers["SP4"]
    q1 = net.peers["SP1"].control.subscribe(example_query("q1"))
    stream = q1.plan.parts[0].result_stream
    for k in range(200, 2200, 100):
        sp4.data.publish("photons", PHOTONS[k:k + 100])
    time.sleep(0.2)
    began = sp4.data.rates.meters[stream].since  # (its first item here)
    interval = time.monotonic() - began
    sp4._measure()
    received = net.peers["SP5"].data.positions.next[stream]  # what SP4 sent of it
    measured = sp4.data.status()["measured_rates"][stream]
    # its rate: what passed over the interval (smoothed once from nothing); its size: the mean
    assert measured["items_per_s"] == pytest.approx(received / interval, rel=0.2)
    assert 50 < measured["bytes_per_item"] < 400
    assert measured["items_per_s"] > 10 * sp4.state.table.get(stream).estimate.freq  # (the rate given: 5/s)


def test_a_rate_that_drifts_is_reported_once(monkeypatch):
    rates = stream_rates.StreamRates()
    monkeypatch.setattr(stream_rates, "WARM_UP_S", 0.0)

    class Table(dict):
        def has_ended(self, stream):
            return False

    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("photons", "photons", "photon", rate=5)
        sp4.data.publish("photons", PHOTONS[:50])
        q1 = net.peers["SP1"].control.subscribe(example_query("q1"))
        sid = q1.plan.parts[0].result_stream
        table = Table({sid: sp4.state.table.get(sid)})
        rates.add(sid, 100, 10_000)
        meter = rates.meters[sid]
        assert rates.measure(table, now=meter.since + 1.0) == []  # first measured: the price
        rates.add(sid, 100, 10_000)
        assert rates.measure(table, now=meter.since + 1.0) == []  # same rate
        rates.add(sid, 5, 500)
        assert rates.measure(table, now=meter.since + 1.0) == []  # too few items to say: no interval yet
        rates.add(sid, 995, 99_500)
        assert rates.measure(table, now=meter.since + 1.0) == [sid]  # ten times the items: drifted
        assert rates.status()[sid]["bytes_per_item"] == pytest.approx(100.0)
    finally:
        for p in net.peers.values():
            p.stop()
