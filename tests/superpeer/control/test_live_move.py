"""What a live move does at the subscriber's peer, before and after its switch (``live_move``):
the switch goes in front of the runtime starting from what the old stream already fed it, and a
subscription that left streams for its followers holds off them, longer each time."""

from __future__ import annotations

import time

from sharing.scenarios import paper_example_backbone
from superpeer.control.live_move import (
    STALLED_ITEMS,
    STALLED_S,
    Move,
    attach,
    detach,
    stalled_new_plan,
)
from superpeer.peer_state import PeerState
from superpeer.subscriptions.record import SubscriptionRecord
from superpeer.subscriptions.track_switch import TrackSwitch


class Input:
    """What a switch feeds: the subscription's input, as a list."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.resume_at: dict[str, int | None] = {}  # (as ``SubscriptionRuntime`` notes it)

    def feed(self, variable: str, values: list, end: bool, origins=None) -> None:
        self.items.extend(values)
        if values:
            self.resume_at[variable] = origins[-1] + 1 if origins is not None else None


def deliver(state: PeerState, stream: str, origins: list[int]) -> None:
    """What the data plane does with a batch of ``stream`` here (``DataPlane.ingest``)."""
    from superpeer.data.origins import fed_high

    state.fed_high[stream] = fed_high(state.fed_high.get(stream), origins, origins)
    for consumer, variable in state.deliveries.get(stream, ()):
        consumer.feed(variable, origins, False, origins)


def test_two_moves_in_a_row_take_nothing_twice_though_the_streams_lag():
    """The subscription moves from A onto B, which reaches this peer behind A, and then from B
    onto C, behind B again: what each stream delivers late is not taken a second time."""
    state = PeerState("SP1", paper_example_backbone())
    got = Input()
    state.deliveries["A"] = [(got, "p")]
    deliver(state, "A", [1, 2, 3, 4, 5, 6])
    first = TrackSwitch(got, "p", "A", "B")  # type: ignore[arg-type]
    attach(state, first, got)  # type: ignore[arg-type]
    deliver(state, "B", [4])  # (B lags: 4–6 are had already)
    deliver(state, "A", [7, 8])
    assert first.done and got.items == [1, 2, 3, 4, 5, 6]
    detach(state, first, old_to_runtime=False, keep_new=True)
    second = TrackSwitch(got, "p", "B", "C")  # type: ignore[arg-type]
    attach(state, second, got)  # type: ignore[arg-type]  (B has delivered 4 only, but took over at 7)
    deliver(state, "C", [5, 6, 7, 8, 9])
    deliver(state, "B", [5, 6, 7, 8, 9, 10])
    deliver(state, "C", [10])
    assert got.items == list(range(1, 11))


def test_a_subscription_that_leaves_the_same_streams_again_holds_off_longer():
    record = SubscriptionRecord(None, None, {}, None, ())  # type: ignore[arg-type]
    record.leave_for_followers(frozenset({"S"}), 10.0)
    first = record.left_hold_until - time.time()
    assert record.held_off() == {"S"} and 9 < first <= 10
    record.leave_for_followers(frozenset({"S", "R"}), 10.0)  # (the others did not follow)
    assert 19 < record.left_hold_until - time.time() <= 20
    record.leave_for_followers(frozenset({"T"}), 10.0)  # (other streams: from the start)
    assert 9 < record.left_hold_until - time.time() <= 10
    record.no_longer_left()  # (the move was cancelled)
    assert record.held_off() == frozenset()


def test_a_new_plan_that_delivers_nothing_while_the_old_one_delivers_much_is_given_up():
    """It may reuse a stream removed between its planning and its commit: the move is cancelled
    long before the switch's deadline (the old plan goes on; it is tried again later)."""
    got = Input()
    switch = TrackSwitch(got, "p", "A", "B")  # type: ignore[arg-type]
    move = Move(switch, None, {}, [], set(), (), {}, "x~1", set(), None,  # type: ignore[arg-type]
                since=time.monotonic() - STALLED_S - 1)
    switch.old.feed("p", list(range(STALLED_ITEMS - 1)), False, list(range(STALLED_ITEMS - 1)))
    assert stalled_new_plan(move) == ""  # (not many yet)
    switch.old.feed("p", [500], False, [500])
    assert "delivered nothing" in stalled_new_plan(move)
    switch.sample = 4  # (a coarser sample: given four times as many)
    assert stalled_new_plan(move) == ""
    switch.sample = None
    switch.new.feed("p", [501], False, [501])  # (it delivers: the switch goes on as usual)
    assert stalled_new_plan(move) == ""
    fresh = Move(TrackSwitch(got, "p", "A", "C"), None, {}, [], set(), (), {}, "x~2", set(),  # type: ignore[arg-type]
                 None)
    fresh.switch.old.feed("p", list(range(1000)), False, list(range(1000)))
    assert stalled_new_plan(fresh) == ""  # (not long enough)


def test_a_move_right_after_a_resumed_replan_takes_nothing_the_runtime_has():
    """A failure's re-plan resumed the subscription on a new stream R from item 1000 (the
    failed plan fed it up to 999); R has delivered nothing yet when a move onto S, which reaches
    this peer behind (from 905), begins: nothing below 1000 is fed again."""
    state = PeerState("SP1", paper_example_backbone())
    got = Input()
    got.feed("p", list(range(900, 1000)), False, list(range(900, 1000)))  # (from the failed plan)
    state.deliveries["R"] = [(got, "p")]
    switch = TrackSwitch(got, "p", "R", "S")  # type: ignore[arg-type]
    attach(state, switch, got)  # type: ignore[arg-type]
    deliver(state, "S", list(range(905, 1010)))
    deliver(state, "R", list(range(1000, 1005)))
    assert switch.done and got.items == list(range(900, 1010))
