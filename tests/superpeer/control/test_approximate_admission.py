"""Approximate admission under overload (issue 15, OSCAR): a subscription the network cannot
carry whole is refused — unless it asks `--approximate`, when it is planned on the finest sample
of its stream (1/2 … 1/64) that fits, told the rate, and gets exactly the query over that sample
with its window counts and sums scaled; a later approximate subscription shares the sampled
stream. The sample is the one ``wxquery.operators.sampling`` defines (a hash of the item text)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest
from approximate_cases import WINDOWS, scaled
from lxml import etree
from network_harness import photon_windows, reference_results, running_network, same

from photons.generator import generate
from sharing.analysis import analyze
from sharing.estimates import samplable
from thinpeer.approximation import merged
from thinpeer.client import SuperPeerClient, ThinPeerError
from wxquery.operators.sampling import kept

PHOTONS = [p.to_xml() for p in generate(4000, seed=3)]
ITEMS = '<all>{ for $p in stream("photons")/photons/photon return <e>{ $p/en }{ $p/det_time }</e> }</all>'
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
        if rate > 1:  # (its bound holds at admission too: no sample coarser than --min-rate)
            bound = "allows no sample" if rate == 2 else f"1/{rate // 2} sample"
            with pytest.raises(ThinPeerError, match=f"RESOURCE_EXHAUSTED.*{bound}.*min-rate|min-rate.*{bound}"):
                client.subscribe(ITEMS, approximate=True, min_rate=rate // 2)
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


FINE = """<photons>{ for $w in stream("photons")/photons/photon |det_time diff 20 step 20|
    return <w><n>{ count($w/en) }</n><s>{ sum($w/en) }</s><a>{ avg($w/en) }</a></w> }</photons>"""


def test_an_approximate_subscription_reads_its_windows_intervals_with_its_results(tmp_path) -> None:
    """Each read carries the intervals of the windows that arrived with its items (each window's
    once, over reads that follow one another), in the ``<sg:approximation>`` form of archive
    answers; the true counts, sums and averages lie inside their 95 % intervals about as often
    as that promises (checked loosely: ≥ 80 % of the windows, each aggregate)."""
    photons = [p.to_xml() for p in generate(12_000, seed=11)]
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100_000)
        client = SuperPeerClient(topology.address("SP1"))
        client.subscribe(ITEMS, approximate=True)  # the network's capacity goes to a sample of the items
        reply = client.subscribe(FINE, approximate=True)
        rate = reply.sample
        assert rate > 1, reply.description
        for k in range(0, len(photons), 1000):
            publisher.publish("photons", photons[k:k + 1000])
        publisher.close_stream("photons")
        got, elements = [], []
        for batch in client.result_batches(reply.subscription, idle_timeout=30, max_items=7):
            got.extend(batch.items)
            elements.append(batch.approximation)
        assert batch.closed
        sampled = [p for p, keep in zip(photons, kept(photons, rate)) if keep]
        assert same(got, [_scaled_avg_kept(t, rate) for t in reference_results(FINE, sampled)])
        whole = etree.fromstring(merged(elements))
        ns = {"sg": "urn:streamglobe:approximation"}
        assert whole.get("sample") == f"1/{rate}" and whole.get("confidence") == "0.95"
        windows = whole.findall("sg:window", ns)
        ks = [int(w.get("k")) for w in windows]
        assert ks == sorted(set(ks)) and len(ks) == len(got)  # every window once, in order
        truth = photon_windows(photons)  # (window k covers det_time [20k, 20k + 20))
        held = {"count": 0, "sum": 0, "avg": 0}
        seen = {"count": 0, "sum": 0, "avg": 0}
        for w in windows:
            values = dict(truth[int(w.get("k"))])
            values["avg"] = values["sum"] / values["count"]
            for agg in w.findall("sg:aggregate", ns):
                fn = agg.get("function")
                if agg.get("low") is None:
                    continue
                seen[fn] += 1
                held[fn] += float(agg.get("low")) <= values[fn] <= float(agg.get("high"))
        assert all(seen[fn] >= 20 for fn in seen), seen
        assert all(held[fn] >= 0.8 * seen[fn] for fn in seen), (held, seen)
        status = client.status()["subscriptions"][reply.subscription]["intervals"]
        assert status["rate"] == rate and status["windows"] == len(windows)


def test_intervals_come_at_the_confidence_the_subscription_asked(tmp_path) -> None:
    """``subscribe --approximate --confidence 0.8``: the same windows as at 0.95, intervals
    narrower by z(0.8)/z(0.95); a confidence outside (0, 1) is refused with the reason."""
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100_000)
        client = SuperPeerClient(topology.address("SP1"))
        with pytest.raises(ThinPeerError, match="confidence: 1.5 is not between 0 and 1"):
            client.subscribe(FINE, approximate=True, confidence=1.5)
        client.subscribe(ITEMS, approximate=True)
        wide = client.subscribe(FINE, approximate=True)
        narrow = client.subscribe(FINE, approximate=True, confidence=0.8)
        assert wide.sample == narrow.sample > 1
        for k in range(0, len(PHOTONS), 1000):
            publisher.publish("photons", PHOTONS[k:k + 1000])
        publisher.close_stream("photons")
        answers = {}
        for reply in (wide, narrow):
            elements = [b.approximation for b in client.result_batches(reply.subscription, idle_timeout=30)]
            answers[reply.subscription] = etree.fromstring(merged(elements))
        wide, narrow = answers[wide.subscription], answers[narrow.subscription]
        assert narrow.get("confidence") == "0.8"
        ns = {"sg": "urn:streamglobe:approximation"}

        def widths(answer) -> list[float]:
            return [float(a.get("high")) - float(a.get("low")) for a in answer.iterfind("sg:window/sg:aggregate", ns)
                    if a.get("low") is not None]

        assert len(widths(wide)) == len(widths(narrow)) > 10
        z = NormalDist().inv_cdf
        for w, n in zip(widths(wide), widths(narrow)):
            assert n == pytest.approx(w * z(0.9) / z(0.975), rel=1e-9, abs=1e-12)


def _scaled_avg_kept(text: str, rate: int) -> str:
    """A window of the sample as the subscriber gets it: count and sum × rate, the average kept."""
    el = etree.fromstring(text)
    el.find("n").text = str(int(el.findtext("n")) * rate)
    el.find("s").text = repr(float(el.findtext("s")) * rate)
    return etree.tostring(el, encoding="unicode")



def test_a_filter_on_aggregates_compares_the_scaled_estimates(tmp_path) -> None:
    """``where $n >= C`` is about the whole stream: on a 1/R sample, the network keeps the
    windows whose scaled count R·n reaches C (its constant divided by R), as an archive answer
    does; a filter comparing a count with an average cannot be rewritten and is not sampled."""
    filtered = """<photons>{ for $w in stream("photons")/photons/photon |det_time diff 20 step 20|
        let $n := count($w/en) where $n >= 190 return <w><n>{ $n }</n></w> }</photons>"""
    photons = [p.to_xml() for p in generate(8000, seed=13)]
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100_000)
        client = SuperPeerClient(topology.address("SP1"))
        client.subscribe(ITEMS, approximate=True)
        reply = client.subscribe(filtered, approximate=True)
        rate = reply.sample
        assert rate > 1, reply.description
        publisher.publish("photons", photons)
        publisher.close_stream("photons")
        got = [item for _, item, _ in client.results(reply.subscription, idle_timeout=30)]
        sampled = [p for p, keep in zip(photons, kept(photons, rate)) if keep]
        every = reference_results(filtered.replace("where $n >= 190 ", ""), sampled)
        expected = [f"<w><n>{int(etree.fromstring(t).findtext('n')) * rate}</n></w>" for t in every
                    if int(etree.fromstring(t).findtext("n")) * rate >= 190]
        assert expected and len(expected) < len(every) and got == expected
    mixed = filtered.replace("where $n >= 190", "let $a := avg($w/en) where $n > $a")
    assert not samplable(analyze(mixed).properties)
    alike = filtered.replace("where $n >= 190", "let $s := sum($w/en) where $s > $n")
    assert samplable(analyze(alike).properties)
