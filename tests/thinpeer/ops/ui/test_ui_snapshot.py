"""The web view's snapshot of the network (``thinpeer.ops.ui.snapshot``), built from the
super-peers' status as they report it: what the pages draw of each subscription."""

from __future__ import annotations

from thinpeer.ops.ui.snapshot import _subscriptions


def test_a_subscription_over_the_past_carries_how_far_its_replay_has_come() -> None:
    past = {"photons": {"first_item": 0, "next_item": 500, "live_from": 1000, "fraction": 0.5}}
    statuses = {"SP1": {"subscriptions": {"SP1-a": {"past": past, "user": "ann"}, "SP1-b": {"user": "bob"}}}}
    subs = _subscriptions(statuses, {})
    assert subs["SP1-a"]["past"] == past and subs["SP1-a"]["superpeer"] == "SP1"
    assert subs["SP1-b"]["past"] == {}  # (live, or a super-peer that does not report it)
