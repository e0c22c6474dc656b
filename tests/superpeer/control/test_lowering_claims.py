"""Who lowers first on a pressured link (issue 35): the link's sender gathers the claims of
every super-peer with an approximate subscription on it, and grants the one that keeps the
largest share of its items for its weight — one at a time, with time for the rates to show."""

from __future__ import annotations

import pytest

from superpeer.control.lowering_claims import FORGET_S, GATHER_S, SETTLE_S, LoweringClaims


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_claims_are_gathered_then_the_highest_priority_goes_first_and_alone():
    clock = Clock()
    claims = LoweringClaims("A", clock)
    first = claims.claim("B", "C-1", 0.5)  # (the first to see the pressure: not granted at once)
    assert not first.granted and "gathered" in first.reason
    clock.now += 1.0
    assert not claims.claim("B", "D-1", 1.0).granted  # (another peer's, weight 1 whole: first)
    clock.now += GATHER_S
    lost = claims.claim("B", "C-1", 0.5)
    assert not lost.granted and "D-1 goes first on link A–B" in lost.reason
    assert claims.claim("B", "D-1", 1.0).granted
    clock.now += 1.0
    waits = claims.claim("B", "C-1", 0.5)  # (the link settles before the next grant)
    assert not waits.granted and "D-1 lowered for link A–B" in waits.reason
    assert claims.claim("B", "D-1", 1.0).granted  # (its move failed: it may try again within the settle)
    clock.now += SETTLE_S
    assert "gathered" in claims.claim("B", "C-1", 0.5).reason  # (every claimant says its priority now)
    clock.now += GATHER_S
    lost = claims.claim("B", "C-1", 0.5)  # (D-1 has not claimed since: half its 1.0, and "D-1" > "C-1")
    assert not lost.granted and "D-1 goes first" in lost.reason
    claims.claim("B", "D-1", 0.4)  # (lowered, with its weight: it keeps 0.4 per weight now)
    assert claims.claim("B", "C-1", 0.5).granted
    assert claims.grants == 2


def test_the_highest_claim_keeps_its_turn_after_a_settle_whoever_asks_first():
    clock = Clock()
    claims = LoweringClaims("A", clock)
    claims.claim("B", "B-1", 1.0)
    claims.claim("B", "C-1", 0.25)
    clock.now += GATHER_S
    assert claims.claim("B", "B-1", 1.0).granted
    clock.now += SETTLE_S + 0.1
    assert not claims.claim("B", "C-1", 0.25).granted  # (asked first after the settle: gathered)
    clock.now += GATHER_S
    assert not claims.claim("B", "C-1", 0.25).granted  # (B-1 at 1/2 still keeps 0.5 per weight)
    assert claims.claim("B", "B-1", 0.5).granted


def test_a_priority_that_is_no_share_is_refused():
    claims = LoweringClaims("A", Clock())
    for bad in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ValueError, match="priority"):
            claims.claim("B", "C-1", bad)
    assert claims.claims.get("B", {}) == {}

def test_equal_priorities_go_by_the_subscriptions_id_as_every_peer_would():
    clock = Clock()
    claims = LoweringClaims("A", clock)
    claims.claim("B", "SP1-aa", 0.5)
    claims.claim("B", "SP2-bb", 0.5)
    clock.now += GATHER_S
    assert not claims.claim("B", "SP1-aa", 0.5).granted
    assert claims.claim("B", "SP2-bb", 0.5).granted

def test_links_are_judged_apart_and_claims_not_renewed_are_forgotten():
    clock = Clock()
    claims = LoweringClaims("A", clock)
    claims.claim("B", "C-1", 0.25)
    clock.now += GATHER_S
    assert claims.claim("B", "C-1", 0.25).granted  # (alone on its link)
    claims.claim("E", "D-1", 1.0)  # (another link: judged apart)
    claims.claim("E", "X-1", 2.0)  # (X-1 then stops asking: its pressure went)
    for _ in range(3):  # (D-1 asks again each round; X-1's claim lapses)
        clock.now += FORGET_S / 2
        got = claims.claim("E", "D-1", 1.0)
        assert got.granted or "X-1 goes first" in got.reason or "gathered" in got.reason
    assert got.granted
    status = claims.status()
    assert status["grants"] == 2 and status["last_granted"]["A–E"]["subscription"] == "D-1"



def test_a_new_episode_of_pressure_is_gathered_again_long_after_the_last_grant():
    clock = Clock()
    claims = LoweringClaims("A", clock)
    claims.claim("B", "C-1", 0.5)
    clock.now += GATHER_S
    assert claims.claim("B", "C-1", 0.5).granted
    clock.now += 3600  # (the pressure went, and came back an hour later)
    assert "gathered" in claims.claim("B", "D-1", 0.25).reason  # (not granted to the first who asks)
    claims.claim("B", "E-1", 1.0)
    clock.now += GATHER_S
    assert not claims.claim("B", "D-1", 0.25).granted
    assert claims.claim("B", "E-1", 1.0).granted
