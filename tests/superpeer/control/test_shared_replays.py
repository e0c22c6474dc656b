"""Subscriptions over the same past share a replay that is running (issue 15): a later
``--since`` subscription takes a new copy of the stream an earlier ``--from-start`` one's replay
is filling, at a peer of its route, from the item where the later one starts — the log crosses
the links up to there once — and both get exactly the query over their part of the stream,
windows across the seam included. A replay that has already sent that item cannot serve it:
the subscription is planned again on a replay of its own."""

from __future__ import annotations

import time

import pytest

from network_harness import reference_results, running_network, same, until
from photons.generator import generate
from sharing.scenarios import example_query
from superpeer.errors import NodeError
from superpeer_fakes import buffered_results, in_process_network
from thinpeer.client import SuperPeerClient

PHOTONS = [p.to_xml() for p in generate(4000, seed=33)]
OLD, RECENT = 2500, 3200  # published long ago / lately / after the subscriptions
REPLAY_RATE = 250.0  # items/s: the first replay takes ten seconds to reach the recent items


def _replays(client: SuperPeerClient) -> dict:
    return client.status()["replays"]


def _part(client: SuperPeerClient, sid: str) -> dict:
    [part] = client.status()["subscriptions"][sid]["plan"]["parts"]
    return part


@pytest.mark.parametrize("event_time", ["", "det_time"])  # with watermarks in the log, too
def test_a_since_subscription_shares_a_running_replay_from_its_own_first_item(tmp_path, event_time) -> None:
    with running_network(tmp_path, peer_options={"SP4": {"replay_rate": REPLAY_RATE, "watermark_idle_s": 0.5}}
                         ) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500, event_time=event_time)
        publisher.publish("photons", PHOTONS[:OLD // 2])
        publisher.publish("photons", PHOTONS[OLD // 2:OLD])
        time.sleep(3.0)  # the input: an old part, then a recent one (not a wait for a condition)
        publisher.publish("photons", PHOTONS[OLD:RECENT])
        recent_at = time.time()
        first = SuperPeerClient(topology.address("SP1"))
        everything = first.subscribe(example_query("q1"), from_start=True).subscription
        running = _part(first, everything)["new_streams"][0]  # the copy its replay fills
        later = SuperPeerClient(topology.address("SP7"))
        since = time.time() - recent_at + 1.5  # the recent items, not the old ones
        recent = later.subscribe(example_query("q3"), since_s=since)
        part = _part(later, recent.subscription)
        assert part["reused_stream"] == running and part["reuse_peer"] == "SP5", recent.description
        assert _replays(publisher).get(running, {}).get("next_item", 0) < RECENT  # it was still replaying
        publisher.publish("photons", PHOTONS[RECENT:])
        publisher.close_stream("photons")
        got = [item for _, item, _ in later.results(recent.subscription, idle_timeout=30)]
        expected = reference_results(example_query("q3"), PHOTONS[OLD:])
        assert expected and same(got, expected), (len(got), len(expected))
        got = [item for _, item, _ in first.results(everything, idle_timeout=30)]
        assert same(got, reference_results(example_query("q1"), PHOTONS))


def test_a_replay_past_the_first_item_is_not_shared_and_the_subscription_gets_its_own(tmp_path) -> None:
    with running_network(tmp_path, peer_options={"SP4": {"replay_rate": REPLAY_RATE}}) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500)
        publisher.publish("photons", PHOTONS[:RECENT])
        first = SuperPeerClient(topology.address("SP1"))
        everything = first.subscribe(example_query("q1"), from_start=True).subscription
        running = _part(first, everything)["new_streams"][0]
        until(lambda: _replays(publisher).get(running, {}).get("next_item", 0) > 0,
              what=lambda: str(_replays(publisher)))
        later = SuperPeerClient(topology.address("SP7"))
        also = later.subscribe(example_query("q3"), from_start=True)  # from item 0: already sent
        part = _part(later, also.subscription)
        assert part["reused_stream"] == "photons" and part["reuse_peer"] == "SP4", also.description
        now = later.subscribe(example_query("q3"), since_s=0.0)  # from the live end: nothing past to share
        part = _part(later, now.subscription)
        assert part["reused_stream"] == "photons" and part["reuse_peer"] == "SP4", now.description
        publisher.publish("photons", PHOTONS[RECENT:])
        publisher.close_stream("photons")
        got = [item for _, item, _ in later.results(also.subscription, idle_timeout=30)]
        expected = reference_results(example_query("q3"), PHOTONS)
        assert expected and same(got, expected), (len(got), len(expected))
        got = [item for _, item, _ in later.results(now.subscription, idle_timeout=30)]
        assert same(got, reference_results(example_query("q3"), PHOTONS[RECENT:]))
        got = [item for _, item, _ in first.results(everything, idle_timeout=30)]
        assert same(got, reference_results(example_query("q1"), PHOTONS))


def test_a_held_replay_stops_before_the_item_and_goes_on_when_let_go() -> None:
    """``LogReplays.hold``: what the stream's super-peer does at reservation — refuses an item
    already sent, holds the replay before a later one (not even going live past it) until the
    transaction ends, and says so in ``status``."""
    net = in_process_network()
    try:
        sp4 = net.peers["SP4"]
        sp4.control.register_stream("photons", "photons", "photon", rate=100)
        sp4.data.publish("photons", PHOTONS[:400])
        replays = sp4.data.replays
        replays.rate = 200.0
        record = net.peers["SP1"].control.subscribe(example_query("q1"), from_start=True)
        copy = record.plan.parts[0].new_streams[0].id
        until(lambda: replays.status().get(copy, {}).get("next_item", 0) > 0, what=replays.status)
        with sp4.state.lock:  # (held for transactions open here, as a reservation opens them)
            sp4.state.transactions.reserve("t0", [], None, "SP1-test")
            sp4.state.transactions.reserve("t1", [], None, "SP1-test")
            assert "has sent item 0 already" in replays.hold(copy, "t0", 0)
            at = replays.status()[copy]["next_item"] + 50
            assert replays.hold(copy, "t1", at) == ""
        until(lambda: replays.status()[copy]["next_item"] == at, what=replays.status)
        time.sleep(0.5)  # (it stays there: nothing to wait for but time)
        assert replays.status()[copy] == {"stream": "photons", "next_item": at, "error": "", "held_before": at}
        sp4.participant.abort("t0")
        sp4.participant.abort("t1")
        until(lambda: copy not in replays.status(), what=replays.status)  # caught up: live
        assert sp4.state.table.get(copy).live_from == 400
    finally:
        for p in net.peers.values():
            p.stop()


@pytest.mark.parametrize("lapse_at", ["SP4", "SP5"])
def test_a_hold_that_lapsed_is_planned_again_before_the_commit_and_said_after_it(lapse_at) -> None:
    """The replay's origin (SP4) commits first and finds the hold gone (its coordinator took
    longer than a reservation lasts, and the replay went on): nothing has started yet, so the
    plan is undone and made again without that replay — the subscription is installed, not
    failed, and gets exactly its part of the stream. A hold gone later (at SP5's commit, after
    SP4's) cannot be undone quietly: the subscription fails, saying why, and nothing is left."""
    net = in_process_network()
    lapsed: list[str] = []
    try:
        sp4 = net.peers["SP4"]
        replays = sp4.data.replays

        def lapse(call) -> None:  # the first commit of SP7's shared plan there: the hold runs out
            if call.method == "commit" and call.peer == lapse_at and call.sender == "SP7" and not lapsed:
                txn = call.args[0]
                with sp4.state.lock:
                    held = sp4.state.transactions.get(txn)
                    if held is not None and held.replays:
                        held.lease_until = 0.0
                        lapsed.append(txn)

        net.hook = lapse
        sp4.control.register_stream("photons", "photons", "photon", rate=100)
        sp4.data.publish("photons", PHOTONS[:OLD])
        time.sleep(1.5)  # the input: an old part, then a recent one (not a wait for a condition)
        sp4.data.publish("photons", PHOTONS[OLD:RECENT])
        recent_at = time.time()
        replays.rate = REPLAY_RATE
        first = net.peers["SP1"].control.subscribe(example_query("q1"), from_start=True)
        copy = first.plan.parts[0].new_streams[0].id
        until(lambda: replays.status().get(copy, {}).get("next_item", 0) > 0, what=replays.status)
        since = time.time() - recent_at + 0.7
        if lapse_at == "SP5":
            with pytest.raises(NodeError) as failed:
                net.peers["SP7"].control.subscribe(example_query("q3"), since_s=since)
            assert lapsed and failed.value.code == "ABORTED" and "was let go before" in failed.value.message
            assert not [s for s in net.peers["SP5"].state.table if s.parent == copy]  # (removed again)
            sp4.data.publish("photons", PHOTONS[RECENT:])
            sp4.data.close_stream("photons")
            assert same(buffered_results(first, timeout=60), reference_results(example_query("q1"), PHOTONS))
            return
        later = net.peers["SP7"].control.subscribe(example_query("q3"), since_s=since)
        assert lapsed, "the later subscription was not planned on the running replay first"
        [part] = later.plan.parts
        assert part.reused == "photons" and not later.error, part
        shipped = net.peers["SP7"].control.subscribe(example_query("q3"), strategy="data-shipping",
                                                     since_s=time.time() - recent_at + 0.7)
        [part] = shipped.plan.parts  # (not the sharing strategy: never on a running replay)
        assert part.reused == "photons", part
        sp4.data.publish("photons", PHOTONS[RECENT:])
        sp4.data.close_stream("photons")
        got = buffered_results(later, timeout=60)
        expected = reference_results(example_query("q3"), PHOTONS[OLD:])
        assert expected and same(got, expected), (len(got), len(expected))
        assert same(buffered_results(shipped, timeout=60), expected)
        assert same(buffered_results(first, timeout=60), reference_results(example_query("q1"), PHOTONS))
    finally:
        for p in net.peers.values():
            p.stop()
