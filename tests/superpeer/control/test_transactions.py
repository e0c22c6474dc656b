"""The transaction store (``control.transactions``): a reservation, its lease, its holder and the
replays it holds, in one record — with a clock the test moves."""

from __future__ import annotations

import threading

import pytest

from sharing.matching import raw_properties
from sharing.properties import InputStream
from sharing.statistics import StreamEstimate
from sharing.stream_table import NetworkStream
from superpeer.control.transactions import Transactions


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def stream(sid: str) -> NetworkStream:
    inp = InputStream("photons", ("photons", "photon"))
    return NetworkStream(id=sid, input=inp, properties=raw_properties(inp), kind="items", origin="SP4",
                         parent="photons", operators=(), route=("SP4", "SP5"), estimate=StreamEstimate(10, 100))


@pytest.fixture
def store() -> tuple[Transactions, Clock]:
    clock = Clock()
    return Transactions(threading.RLock(), clock, ttl_s=60.0), clock


def test_a_reservation_counts_until_it_commits_and_its_holder_is_kept(store) -> None:
    t, _ = store
    t.reserve("t1", [stream("SP1.1")], "SP1", "SP1-abc")
    assert [s.id for s in t.reserved()] == ["SP1.1"] and t.granted == 1
    held = t.get("t1")
    assert (held.coordinator, held.subscription) == ("SP1", "SP1-abc")
    assert [s.id for s in t.commit("t1")] == ["SP1.1"]
    assert t.reserved() == [] and t.get("t1") is None  # (it held no replay: nothing left)


def test_a_lease_that_runs_out_ends_the_reservation_and_refuses_the_commit(store) -> None:
    t, clock = store
    t.reserve("t1", [stream("SP1.1")], "SP1", "SP1-abc")
    clock.now += 61
    assert t.reserved() == [] and t.is_expired("t1")
    assert t.known("t1").subscription == "SP1-abc"  # (who it was for: its holder alone may end it)
    clock.now += 10 * 60 + 1
    assert not t.is_expired("t1") and t.known("t1") is None  # forgotten in the end


def test_a_replay_hold_outlasts_the_commit_until_the_abort(store) -> None:
    t, clock = store
    t.reserve("t1", [stream("SP7.1")], "SP7", "SP7-abc")
    t.hold_replay("t1", "SP1.5", 120)
    assert t.replay_limit("SP1.5") == 120 and t.holds_replay("t1", "SP1.5")
    clock.now += 50
    t.renew("t1")  # (the origin commits first and keeps it past the others' commits)
    t.commit("t1")
    clock.now += 50
    assert t.replay_limit("SP1.5") == 120 and t.lost_replays("t1") == []
    ended = t.end("t1")
    assert ended is not None and not ended.lapsed and t.replay_limit("SP1.5") is None


def test_a_hold_that_lapsed_or_whose_replay_went_is_reported(store) -> None:
    t, clock = store
    t.reserve("t1", [], "SP7", "SP7-abc")
    t.hold_replay("t1", "SP1.5", 10)
    t.replay_gone("SP1.5")
    assert t.lost_replays("t1") == ["SP1.5"] and not t.holds_replay("t1", "SP1.5")
    t.reserve("t2", [], "SP7", "SP7-def")
    t.hold_replay("t2", "SP1.6", 10)
    clock.now += 61
    assert t.replay_limit("SP1.6") is None  # (the replay goes on)
    assert t.end("t2").lapsed == {"SP1.6"}  # the coordinator's last abort learns it


def test_a_replay_is_held_only_for_an_open_transaction(store) -> None:
    t, _ = store
    with pytest.raises(KeyError):
        t.hold_replay("nobody", "SP1.5", 10)
