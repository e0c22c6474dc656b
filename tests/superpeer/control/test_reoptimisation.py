"""Re-optimisation of running subscriptions (issue 31, DESIGN.md §12): real parts of eight
super-peers in one process on the fake transport; rounds are run by the test, so every step is
deterministic. Results are checked against the reference evaluator over the items published
from each subscription's start — no gap, no duplicate across the switch."""

from __future__ import annotations

import time

import pytest
from network_harness import same, until
from reoptimisation_harness import (
    Feed,
    link_items,
    photon_network,
    ranged,
    reference,
    switch_all,
)
from superpeer_fakes import buffered_results

from superpeer.control.reoptimisation_settings import ReoptimisationSettings
from superpeer.subscriptions.record import past_progress

NARROW = [ranged(120, 124), ranged(126, 130, en=1.0), ranged(131, 136)]
WIDE = ranged(110, 140)


@pytest.fixture
def net():
    yield from photon_network()


def test_narrow_subscriptions_registered_first_move_onto_the_wide_stream(net):
    feed = Feed(net)
    sp1 = net.peers["SP1"]
    subs = []
    for q in NARROW:
        subs.append((q, sp1.control.subscribe(q), feed.at))
        feed.publish(100)
    wide = sp1.control.subscribe(WIDE)
    subs.append((WIDE, wide, feed.at))
    feed.publish(200)
    before = link_items(net)
    feed.publish(400)
    frozen = link_items(net) - before
    # (each registration widened the stream before it: the older ones go as their readers move,
    # a round or two with the cool-downs passed)
    for _ in range(3):
        for _, record, _ in subs:
            record.last_replan = 0
        sp1.reoptimiser.round("test")
        feed.publish(200, switch_all(net))
    assert not sp1.reoptimiser.switches, "every switch is done"
    carried = [s for s in net.peers["SP5"].state.table if not s.original]
    assert len(carried) == 1, [s.describe() for s in carried]  # one stream on SP4–SP5–SP1
    for q, record, _ in subs[:3]:
        assert record.plan_history and record.plan_history[-1]["state"] == "switched"
        assert all(e["new_cost"] < e["old_cost"] for e in record.plan_history)
    before = link_items(net)
    feed.publish(400, switch_all(net))
    shared = link_items(net) - before
    assert shared < frozen  # one stream on the backbone instead of four
    # the narrow plans' streams are gone everywhere
    for p in net.peers.values():
        users = {u for s in p.state.table for u in s.users}
        assert not any(u.split("~")[0] == r.runtime.id and u != r.plan_id for _, r, _ in subs for u in users)
    feed.close()
    for q, record, first in subs:
        assert buffered_results(record) == reference(q, first, feed.at)


def moved_onto_the_wide_stream(net):
    """A narrow subscription at SP1, then a wide one; a round moves the narrow one onto it."""
    feed = Feed(net)
    sp1 = net.peers["SP1"]
    narrow = sp1.control.subscribe(NARROW[0])
    feed.publish(100)
    sp1.control.subscribe(WIDE)
    feed.publish(100)
    sp1.reoptimiser.round("test")
    feed.publish(200, switch_all(net))
    assert len(narrow.plan_history) == 1 and len(narrow.moves) == 1
    return sp1, narrow


def test_a_second_round_keeps_the_plans_and_the_cool_down_holds(net):
    sp1, narrow = moved_onto_the_wide_stream(net)
    sp1.reoptimiser.round("test")
    assert "cool-down" in narrow.reoptimisation
    narrow.last_replan = 0  # (past the cool-down) the plan it has is the best: kept
    sp1.reoptimiser.round("test")
    assert narrow.reoptimisation.startswith("kept") and len(narrow.plan_history) == 1


def test_a_subscription_that_keeps_moving_waits_twice_as_long_each_time(net):
    """Damping: moves made by rounds at several peers over views of one moment can undo each
    other; each recent move doubles the wait before the next (``staying.cool_down``)."""
    sp1, narrow = moved_onto_the_wide_stream(net)
    cooldown = sp1.reoptimiser.settings.cooldown_s
    now = time.time()
    narrow.moves = [now - 3 * cooldown, now - 2 * cooldown, now - 1.5 * cooldown]  # three moves lately
    narrow.last_replan = now - 1.5 * cooldown  # past one cool-down, within four
    sp1.reoptimiser.round("test")
    assert f"cool-down {4 * cooldown:g} s: moved 3 times" in narrow.reoptimisation, narrow.reoptimisation
    narrow.moves = [now - 17 * cooldown, now - 1.5 * cooldown]  # (the first long ago: it counts no more)
    sp1.reoptimiser.round("test")
    assert narrow.reoptimisation.startswith("kept"), narrow.reoptimisation


def test_a_peer_going_down_or_coming_back_ends_the_damping_of_earlier_moves(net):
    """The backbone changed: where the best plans are is another question now, so the moves
    before it no longer lengthen the wait (a subscription that moved three times lately waits
    one cool-down again, not four), and a round is woken."""
    sp1, narrow = moved_onto_the_wide_stream(net)
    cooldown, detector = sp1.reoptimiser.settings.cooldown_s, sp1.recovery.detector
    now = time.time()
    for p in net.backbone.peers:
        detector.judged(p, True, now)
    sp1.recovery.after_heartbeat()  # (the first round: every peer up)
    narrow.moves = [now - 3 * cooldown, now - 2 * cooldown, now - 1.5 * cooldown]
    sp1.recovery.after_heartbeat()  # (nothing changed: the damping stays)
    assert len(narrow.moves) == 3
    sp1.reoptimiser._why = ""  # (the round the registrations woke: run)
    detector.judged("SP6", False, now, "silent")
    sp1.recovery.after_heartbeat()
    assert narrow.moves == [] and "SP6 down" in sp1.reoptimiser._why
    narrow.moves, sp1.reoptimiser._why = [now - 2 * cooldown, now - 1.5 * cooldown], ""
    detector.judged("SP6", True, now)
    sp1.recovery.after_heartbeat()
    assert narrow.moves == [] and "SP6 up again" in sp1.reoptimiser._why


def test_when_the_wide_subscription_ends_the_narrow_one_moves_back_to_a_stream_of_its_own(net):
    feed = Feed(net)
    sp7 = net.peers["SP7"]
    narrow = sp7.control.subscribe(NARROW[1])
    first = feed.at
    feed.publish(100)
    wide = sp7.control.subscribe(WIDE)
    feed.publish(100)
    sp7.reoptimiser.round("test")
    feed.publish(300, switch_all(net))
    assert narrow.plan.parts[0].reused == wide.plan.parts[0].result_stream
    sp7.control.unsubscribe(wide.runtime.id)
    narrow.last_replan = 0
    feed.publish(100)
    sp7.reoptimiser.round("test")
    feed.publish(300, switch_all(net))
    assert [e["state"] for e in narrow.plan_history] == ["switched", "switched"]
    assert narrow.plan.parts[0].reused == "photons"  # its own narrow stream again
    wide_id = wide.plan.parts[0].result_stream
    assert all(wide_id not in {s.id for s in p.state.table} for p in net.peers.values())
    feed.close()
    assert buffered_results(narrow) == reference(NARROW[1], first, feed.at)
    # ended after two moves: only the peers its plans were committed at are asked to remove
    # them (not every peer of the backbone), and nothing of it is left anywhere
    net.calls.clear()
    sp7.control.unsubscribe(narrow.runtime.id)
    asked = {c.peer for c in net.calls_of("remove")}
    assert "SP7" in asked and asked < set(net.backbone.peers), asked
    assert not [s.describe() for p in net.peers.values() for s in p.state.table if not s.original]
    assert not any(u.split("~")[0] == narrow.runtime.id for p in net.peers.values()
                   for s in p.state.table for u in s.users)


def test_subscriptions_at_other_peers_move_onto_a_stream_that_passes_them(net):
    """Narrow subscriptions at SP1 and SP7, registered first, and a wide one at SP0 whose stream
    passes SP5: each narrow one reads the wide stream where it passes (fewer bytes on SP4–SP5)."""
    feed = Feed(net)
    subs = []
    for peer, q in (("SP1", NARROW[0]), ("SP7", NARROW[2])):
        subs.append((q, net.peers[peer].control.subscribe(q), feed.at, peer))
        feed.publish(100)
    wide = net.peers["SP0"].control.subscribe(WIDE)
    subs.append((WIDE, wide, feed.at, "SP0"))
    feed.publish(100)
    for _, _, _, peer in subs:
        net.peers[peer].reoptimiser.round("test")
    feed.publish(500, switch_all(net))
    moved = [r for _, r, _, _ in subs[:2] if r.plan_history]
    assert moved
    for r in moved:
        assert r.plan_history[-1]["state"] == "switched"
    feed.close()
    for q, record, first, _ in subs:
        assert buffered_results(record) == reference(q, first, feed.at)


def windowed(lo: float, hi: float, window: str) -> str:
    return f"""<r>{{ for $w in stream("photons")/photons/photon
      [coord/cel/ra >= {lo} and coord/cel/ra <= {hi}]
      |{window}|
      let $a := avg($w/en)
      return <avg_en>{{ $a }}</avg_en> }}</r>"""


@pytest.mark.parametrize("window", ["det_time diff 20 step 10", "det_time diff 60 step 40", "det_time diff 30"])
def test_a_time_window_subscription_moves_onto_a_wide_stream_window_for_window(net, window):
    """Its windows are aggregated in the network on its own stream; once a wide stream flows,
    it is moved onto it (its window computed anew here: the first windows of the new operator
    are partial, so the old plan finishes those) — every window once, none partial."""
    feed = Feed(net)
    sp7 = net.peers["SP7"]
    # (a window stream is small: the wide stream is cheaper by less than the default margin)
    sp7.reoptimiser.settings = ReoptimisationSettings(enabled=False, margin=0.0)
    query = windowed(120, 130, window)
    narrow = sp7.control.subscribe(query)
    first = feed.at
    feed.publish(300)
    sp7.control.subscribe(WIDE)
    feed.publish(150)
    sp7.reoptimiser.round("test")
    feed.publish(2000, switch_all(net))  # (photons come 10 per unit of det_time)
    (entry,) = narrow.plan_history
    assert entry["state"] == "switched", entry
    feed.close()
    # (sums of panes: the last bits may differ from the evaluator's sum over the window)
    assert same(buffered_results(narrow), reference(query, first, feed.at))


@pytest.mark.parametrize("window", ["count 5 step 5", "count 7 step 3", "count 4 step 10"])
def test_a_count_window_subscription_moves_with_its_windows_aligned(net, window):
    """Its count windows are aggregated in the network by its own operator, which counts from
    where it started; the new plan's operator is installed held and aligned with the old one's
    (``count_handover``), so every window holds the same items as before the move — checked
    against the evaluator over the items from the subscription's start, once each."""
    feed = Feed(net)
    sp7 = net.peers["SP7"]
    sp7.reoptimiser.settings = ReoptimisationSettings(enabled=False, margin=0.0)
    query = windowed(120, 130, window)
    narrow = sp7.control.subscribe(query)
    first = feed.at
    feed.publish(333)  # (not a whole number of windows: the new operator must not count from 0)
    sp7.control.subscribe(WIDE)
    feed.publish(150)
    sp7.reoptimiser.round("test")
    feed.publish(2000, switch_all(net))
    (entry,) = narrow.plan_history
    assert entry["state"] == "switched", entry
    feed.close()
    got, want = buffered_results(narrow), reference(query, first, feed.at)
    assert len(want) > 20 and same(got, want)


def test_a_count_window_move_that_cannot_be_aligned_is_cancelled_and_the_old_plan_goes_on(net, monkeypatch):
    """An anchor the new operator cannot take (here: its input ended before) fails the switch:
    the old plan, which fed every window so far, goes on alone — nothing lost, nothing twice."""
    from wxquery.operators import runner
    from wxquery.operators.count_alignment import Unalignable

    def refuse(self, stream, anchor):
        raise Unalignable("refused by the test")
    monkeypatch.setattr(runner.ChainGroup, "align", refuse)
    feed = Feed(net)
    sp7 = net.peers["SP7"]
    sp7.reoptimiser.settings = ReoptimisationSettings(enabled=False, margin=0.0)
    query = windowed(120, 130, "count 5 step 5")
    narrow = sp7.control.subscribe(query)
    first = feed.at
    feed.publish(333)
    sp7.control.subscribe(WIDE)
    feed.publish(150)
    sp7.reoptimiser.round("test")
    feed.publish(1000, switch_all(net))
    (entry,) = narrow.plan_history
    assert entry["state"] == "cancelled" and "refused by the test" in entry["why_cancelled"], entry
    feed.close()
    assert same(buffered_results(narrow), reference(query, first, feed.at))


def test_a_round_asks_only_the_peers_the_streams_reach(net):
    """SUBSCRIBE's breadth-first search, not every peer of the backbone: the photons' streams
    reach SP4, SP5 and SP1 only, so a round at SP1 asks those."""
    sp1 = net.peers["SP1"]
    narrow = sp1.control.subscribe(NARROW[0])
    Feed(net).publish(100)
    net.calls.clear()
    narrow.last_replan = 0
    sp1.reoptimiser.round("test")
    asked = {c.peer for c in net.calls_of("lookup")}
    assert asked == {"SP4", "SP5", "SP1"}, asked


def test_the_peers_a_lookup_reached_are_asked_at_once_the_next_time_and_forgotten_when_gone(net):
    """The search remembers, per input, the peers its streams reached: they are asked in the
    first wave the next time (one round trip instead of one per level). A peer remembered but
    reached no more (SP7: nothing of the photons passes it) is asked once, and then forgotten."""
    sp1 = net.peers["SP1"]
    narrow = sp1.control.subscribe(NARROW[0])
    Feed(net).publish(100)
    (inp,) = {i.input for i in narrow.runtime.analysis.properties.inputs}
    assert sp1.state.lookup_reach[inp] == {"SP4", "SP5", "SP1"}
    sp1.state.lookup_reach[inp] |= {"SP7"}
    net.calls.clear()
    narrow.last_replan = 0
    sp1.reoptimiser.round("test")
    assert {c.peer for c in net.calls_of("lookup")} == {"SP4", "SP5", "SP1", "SP7"}
    assert narrow.reoptimisation.startswith("kept"), narrow.reoptimisation
    assert sp1.state.lookup_reach[inp] == {"SP4", "SP5", "SP1"}


def test_a_switch_that_does_not_finish_in_time_is_cancelled_and_the_old_plan_goes_on(net, monkeypatch):
    """The new plan delivers nothing before the deadline (nothing is published after the move):
    the move is cancelled, the old plan feeds the subscription alone, the new plan's streams
    are removed."""
    from superpeer.control import reoptimisation

    feed = Feed(net)
    sp1 = net.peers["SP1"]
    rare = ranged(120, 122, en=1.8)  # (a photon now and then: the sample prices one that
    # nothing matches at next to nothing, and it would not move)
    narrow = sp1.control.subscribe(rare)
    first = feed.at
    feed.publish(100)
    sp1.control.subscribe(WIDE)
    feed.publish(100)
    old_stream = narrow.plan.parts[0].result_stream
    sp1.reoptimiser.round("test")
    (entry,) = narrow.plan_history
    new_id = entry["plan"]
    monkeypatch.setattr(reoptimisation, "SWITCH_DEADLINE_S", 0.0)
    switch_all(net)()
    assert entry["state"] == "cancelled" and narrow.plan.parts[0].result_stream == old_stream
    assert "cancelled" in narrow.reoptimisation
    # (no move until the back-off has passed - but a sample lowered under pressure)
    assert "cancelled in a row" in sp1.reoptimiser.why_not(narrow, cooled=False)
    assert sp1.reoptimiser.why_not(narrow, cooled=False, backoff=False) == ""  # (lowering under pressure)
    assert not any(new_id in s.users for p in net.peers.values() for s in p.state.table)
    feed.publish(1000)
    feed.close()
    assert buffered_results(narrow) == reference(rare, first, feed.at)


def test_the_look_ahead_prices_alone_only_the_readers_a_move_leaves_alone(net, monkeypatch):
    """Narrow subscriptions registered after a wide one read the wide stream. When one of them
    is planned again, the others on the wide stream are not left alone on anything by its move:
    they are priced as a group, never one by one (each one-by-one price plans that reader again,
    and counted what it would save by moving anyway: with a hundred readers, moves were taken
    for savings they did not make, and subscriptions moved round and round)."""
    from superpeer.control import reoptimisation

    feed = Feed(net)
    sp1 = net.peers["SP1"]
    wide = sp1.control.subscribe(WIDE)
    narrows = [sp1.control.subscribe(q) for q in NARROW]
    feed.publish(100)
    delivered = wide.plan.parts[0].result_stream
    assert all(delivered in [s.id for s in sp1.state.table.lineage(n.plan.parts[0].result_stream)]
               for n in narrows)
    priced, real = [], reoptimisation.FOLLOW

    def follow(snapshot, ts, margin):
        priced.append(ts)
        return real(snapshot, ts, margin)

    monkeypatch.setattr(reoptimisation, "FOLLOW", follow)
    narrows[0].last_replan = 0
    sp1.reoptimiser.round("test")
    assert priced and all(len(ts) > 1 for ts in priced), priced


def test_a_subscription_over_the_past_moves_onto_a_shared_stream_once_its_replay_caught_up(net):
    """Over the past, a subscription reads a copy of its own of the raw stream, filled from the
    log; once that has caught up with the live stream, it is a copy a shared stream can replace:
    re-optimisation moves it as any other, and its results are still the reference's over the
    whole stream."""
    feed = Feed(net)
    sp1 = net.peers["SP1"]
    wide = sp1.control.subscribe(WIDE)
    feed.publish(100)
    past = sp1.control.subscribe(NARROW[0], from_start=True)
    assert past.plan.parts[0].reused == "photons" and past.past  # (its own copy, replaying)
    until(lambda: not past_progress(past, sp1.control.positions.next), seconds=30)
    feed.publish(100)
    past.last_replan, wide.last_replan = 0, time.time()  # (the wide one in its cool-down: it stays)
    sp1.reoptimiser.round("test")
    feed.publish(300, switch_all(net))
    assert past.plan_history and past.plan_history[-1]["state"] == "switched", past.reoptimisation
    assert past.plan.parts[0].reused == wide.plan.parts[0].result_stream and not past.past
    feed.close()
    assert buffered_results(past) == reference(NARROW[0], 0, feed.at)


def test_a_subscription_neither_plan_feeds_is_planned_again_though_its_route_is_healthy(net):
    """A move whose commit failed after its switch had taken over (the new plan fed past the
    switch item) detaches both plans: the subscription must be planned again, though the old
    plan's path is healthy. The heartbeat's check of the paths took that back, and it stalled."""
    feed = Feed(net)
    sp1 = net.peers["SP1"]
    record = sp1.control.subscribe(NARROW[0])
    first = feed.at
    feed.publish(100)
    with sp1.state.lock:  # (what ``migrate`` does then)
        sp1.state.stop_delivering(record.runtime, record.inputs.values())
        record.must_replan = "switching plans: installing the new plan failed: test"
        record.recovering, record.degraded = True, record.must_replan
    sp1.recovery.after_heartbeat()
    assert record.recovering or record.replans == 1
    until(lambda: record.replans == 1 and not record.recovering, seconds=30)
    assert not record.must_replan and "resumed_at_item" in record.plan_history[-1]
    feed.publish(200)
    feed.close()
    assert buffered_results(record) == reference(NARROW[0], first, feed.at)
