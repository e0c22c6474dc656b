"""Approximate admission under overload (issue 15, OSCAR): a subscription the network cannot
carry whole is refused — unless it asks `--approximate`, when it is planned on the finest sample
of its stream (1/2 … 1/64) that fits, told the rate, and gets exactly the query over that sample
with its window counts and sums scaled; a later approximate subscription shares the sampled
stream. The sample is the one ``wxquery.operators.sampling`` defines (a hash of the item text)."""

from __future__ import annotations

import math

import pytest
from lxml import etree

from network_harness import reference_results, running_network, same
from photons.generator import generate
from sharing.analysis import analyze
from sharing.planner import samplable
from thinpeer.client import SuperPeerClient, ThinPeerError
from wxquery.operators.sampling import kept

PHOTONS = [p.to_xml() for p in generate(4000, seed=3)]
ITEMS = '<all>{ for $p in stream("photons")/photons/photon return <e>{ $p/en }{ $p/det_time }</e> }</all>'
WINDOWS = """<photons>{ for $w in stream("photons")/photons/photon |det_time diff 50 step 50|
    return <w><n>{ count($w/en) }</n><s>{ sum($w/en) }</s></w> }</photons>"""


def scaled(items: list[str], rate: int) -> list[str]:
    out = []
    for text in items:
        el = etree.fromstring(text)
        el.find("n").text = str(int(el.findtext("n")) * rate)
        el.find("s").text = repr(float(el.findtext("s")) * rate)
        out.append(etree.tostring(el, encoding="unicode"))
    return out


def test_an_overloading_subscription_is_admitted_on_a_sample_when_it_asks(tmp_path) -> None:
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100_000)  # ~2x the 100 Mbit/s links
        client = SuperPeerClient(topology.address("SP1"))
        with pytest.raises(ThinPeerError, match="RESOURCE_EXHAUSTED"):
            client.subscribe(ITEMS)
        items = client.subscribe(ITEMS, approximate=True)
        rate = items.sample
        assert rate in (2, 4, 8, 16, 32, 64) and f"1/{rate} sample" in items.description
        windows = client.subscribe(WINDOWS, approximate=True)
        assert windows.sample == rate and "reuse stream SP" in windows.description  # the sampled stream, shared
        status = client.status()["subscriptions"]
        assert status[items.subscription]["sample"] == rate
        publisher.publish("photons", PHOTONS)
        publisher.close_stream("photons")
        sampled = [p for p, keep in zip(PHOTONS, kept(PHOTONS, rate)) if keep]
        got = [item for _, item, _ in client.results(items.subscription, idle_timeout=30)]
        assert got == reference_results(ITEMS, sampled)
        got = [item for _, item, _ in client.results(windows.subscription, idle_timeout=30)]
        assert same(got, scaled(reference_results(WINDOWS, sampled), rate))
        truth = reference_results(WINDOWS, PHOTONS)
        assert len(got) == len(truth)
        for estimate, exact in zip(got, truth):  # each count within 5 standard deviations
            n, n_hat = int(etree.fromstring(exact).findtext("n")), int(etree.fromstring(estimate).findtext("n"))
            assert abs(n_hat - n) <= 5 * math.sqrt(n * (rate - 1)) + rate, (n, n_hat)


def test_joins_and_count_windows_are_not_sampled() -> None:
    count = '<r>{ for $w in stream("photons")/photons/photon |count 10| return <n>{ count($w/en) }</n> }</r>'
    assert not samplable(analyze(count).properties)
    assert samplable(analyze(WINDOWS).properties) and samplable(analyze(ITEMS).properties)
