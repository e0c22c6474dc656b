"""How far a subscription over the past has come (issue 15): its super-peer tells, in
``status`` and with every read of its results, how many of the past items its replay has
brought (numbered as in the stream's log), until it reaches the items logged when the
subscription was installed — from there on it is live."""

from __future__ import annotations

from network_harness import reference_results, same, until
from superpeer_fakes import buffered_results, in_process_network

from photons.generator import generate
from sharing.scenarios import example_query
from superpeer.subscriptions.record import past_progress, past_text

PHOTONS = [p.to_xml() for p in generate(1200, seed=8)]


class _Record:  # (what ``past_progress`` reads of a subscription record)
    past = {"photons": ("SP1.1", 100, 600), "muons": ("SP1.2", 0, 10)}


def test_progress_counts_the_past_items_that_passed_and_ends_where_the_past_ends() -> None:
    assert past_text(past_progress(_Record(), {})) == ("muons: 0 of 10 past items replayed (0%); "
                                                       "photons: 0 of 500 past items replayed (0%)")
    progress = past_progress(_Record(), {"SP1.1": 350, "SP1.2": 10})
    assert progress == {"photons": {"first_item": 100, "next_item": 350, "live_from": 600, "fraction": 0.5}}
    assert past_text(progress) == "photons: 250 of 500 past items replayed (50%)"
    assert past_progress(_Record(), {"SP1.1": 600, "SP1.2": 11}) == {} and past_text({}) == ""


def test_a_from_start_subscription_shows_its_replay_in_status_until_it_is_live() -> None:
    net = in_process_network()
    try:
        sp4, sp1 = net.peers["SP4"], net.peers["SP1"]
        sp4.control.register_stream("photons", "photons", "photon", rate=100)
        sp4.data.publish("photons", PHOTONS[:1000])
        sp4.data.replays.rate = 400.0  # items/s: two and a half seconds of past
        record = sp1.control.subscribe(example_query("q1"), from_start=True)
        sid = record.runtime.id

        def past() -> dict:
            return sp1.control.status()[sid]["past"]

        until(lambda: past().get("photons", {}).get("next_item", 0) > 0, what=past)
        seen = past()["photons"]
        assert seen["first_item"] == 0 and seen["live_from"] == 1000 and 0 < seen["fraction"] < 1, seen
        until(lambda: not past(), seconds=60, what=past)
        sp4.data.publish("photons", PHOTONS[1000:])
        sp4.data.close_stream("photons")
        assert same(buffered_results(record, timeout=60), reference_results(example_query("q1"), PHOTONS))
        live = sp1.control.subscribe(example_query("q1"))  # (live: no past to tell)
        assert sp1.control.status()[live.runtime.id]["past"] == {}
    finally:
        for p in net.peers.values():
            p.stop()
