"""The publish summary says what held the publisher back longest, not what held it last: a
stalled neighbour, once it takes again, may leave another link full for a moment."""

from __future__ import annotations

from thinpeer.publishing import Batches
from thinpeer.replies import HELD_BACK


def test_the_reason_said_is_the_one_that_cost_the_most_time() -> None:
    batches = Batches("photons")
    stalled = HELD_BACK + "stream photons waits for the link to SP5, which holds {} MiB"
    for seconds, full in ((1.5, "0.3"), (1.5, "0.4"), (1.0, "0.2")):
        batches.held(stalled.format(full), seconds)
    batches.held(HELD_BACK + "stream photons waits for the link to SP3, which holds 0.8 MiB", 0.4)
    assert batches.summary.held_back_s == 4.4
    assert batches.summary.held_back == "stream photons waits for the link to SP5, which holds 0.2 MiB"
    batches.held(HELD_BACK + "stream photons waits for the link to SP3, which holds 0.9 MiB", 4.0)
    assert "SP3" in batches.summary.held_back


def test_not_held_back_says_nothing() -> None:
    assert Batches("photons").summary.held_back == ""
