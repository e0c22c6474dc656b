"""Windows across sample changes (issue 35): an approximate window subscription moved from the
whole stream onto a 1/2 and a 1/4 sample and back, live. Windows of the whole stream are exact;
those of a sample say its rate, and their 95 % intervals hold the true count and sum about as
often as that promises, over seeded trials. Real parts of eight super-peers in one process on
the fake transport; the moves are run by the test (what pressure would do: see
``test_adaptive_sampling`` for the pressure itself)."""

from __future__ import annotations

import pytest
from lxml import etree
from network_harness import photon_windows
from superpeer_fakes import buffered_results, in_process_network, publish_switching

from photons.generator import generate

WINDOWS = """<photons>{ for $w in stream("photons")/photons/photon |det_time diff 20 step 20|
    return <w><n>{ count($w/en) }</n><s>{ sum($w/en) }</s></w> }</photons>"""
NS = {"sg": "urn:streamglobe:approximation"}


@pytest.mark.parametrize("seed", [5, 11])
def test_windows_across_sample_changes_are_scaled_at_their_own_rate_and_their_intervals_hold(seed: int) -> None:
    photons = [p.to_xml() for p in generate(24_000, seed=seed)]  # (~200 photons a window)
    net = in_process_network()
    sp4, sp1 = net.peers["SP4"], net.peers["SP1"]
    try:
        sp4.control.register_stream("photons", "photons", "photon", rate=100)
        sub = sp1.control.subscribe(WINDOWS, approximate=True, min_rate=4)
        assert sub.sample == 1
        at = 0

        def publish(n: int) -> None:
            nonlocal at
            publish_switching(sp4, sp1, photons[at:at + n], 250)
            at += n

        publish(3_000)
        for rate in (2, 4, 1):
            assert sp1.adaptive.resample(sub, rate, f"test: sample → 1/{rate}"), sub.sampling
            publish(7_000)
            assert not sp1.reoptimiser.switches and sub.sample == rate
        sp4.data.close_stream("photons")
        got = buffered_results(sub)
        windows = etree.fromstring(sub.runtime.estimates.xml(0, len(got), True)).findall("sg:window", NS)
    finally:
        for p in net.peers.values():
            p.stop()
    truth = photon_windows(photons)  # (window k covers det_time [20k, 20k + 20))
    assert len(got) == len(truth) == max(truth) + 1  # (a result per window, in window order)
    assert {w.get("sample") for w in windows} == {"1/2", "1/4"}
    held, seen = {"count": 0, "sum": 0}, {"count": 0, "sum": 0}
    for w in windows:
        for agg in w.findall("sg:aggregate", NS):
            fn = agg.get("function")
            if fn in held and agg.get("low") is not None:
                seen[fn] += 1
                held[fn] += float(agg.get("low")) <= truth[int(w.get("k"))][fn] <= float(agg.get("high"))
    assert all(seen[fn] >= 40 for fn in seen), seen
    assert all(held[fn] >= 0.8 * seen[fn] for fn in seen), (held, seen)
    estimated = {int(w.get("k")) for w in windows}
    whole = [k for k in sorted(truth) if k not in estimated]  # (windows of the whole stream: exact)
    assert len(whole) >= 40 and all(float(etree.fromstring(got[k]).findtext("n")) == truth[k]["count"]
                                    for k in whole)
