"""Recent history at the source (issue 15): a stream's log bounded by ``--history`` (items,
bytes, duration), ``subscribe --since``, and what a subscription over more past than is retained
is told. Results are compared with the reference evaluator over the items from where the
subscription starts; live subscribers keep their pins (what their recovery may replay)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import ROOT
from network_harness import reference_results, running_network, same, until

from photons.generator import generate
from sharing.scenarios import example_query
from superpeer.history.bounds import (
    HistoryBound,
    cut_for,
    parse_duration,
    parse_history,
    since_position,
    trim_below,
)
from superpeer.history.state_store import StateStore
from thinpeer.client import SuperPeerClient

PHOTONS = [p.to_xml() for p in generate(1600, seed=33)]


# ---------------------------------------------------------------------- bounds


@pytest.mark.parametrize("spec, bound", [
    ("", HistoryBound()), ("unlimited", HistoryBound()), ("all", HistoryBound()),
    ("100000", HistoryBound(items=100000)), ("250 items", HistoryBound(items=250)),
    ("64MB", HistoryBound(bytes=64_000_000)), ("1GiB", HistoryBound(bytes=1024 ** 3)),
    ("10m", HistoryBound(seconds=600)), ("1.5h", HistoryBound(seconds=5400)),
    ("10m, 1GB, 500", HistoryBound(500, 1_000_000_000, 600)), ("10m,5m", HistoryBound(seconds=300)),
    ("1h30m", HistoryBound(seconds=5400)), ("2 weeks", HistoryBound(seconds=1_209_600)),
])
def test_history_bounds_parse(spec, bound) -> None:
    assert parse_history(spec) == bound


@pytest.mark.parametrize("spec", ["ten minutes", "10x", "-5", "1.5 items", "10m;1GB"])
def test_a_bad_history_bound_says_what_is_wrong(spec) -> None:
    with pytest.raises(ValueError, match="history"):
        parse_history(spec)


@pytest.mark.parametrize("spec, seconds", [("90s", 90), ("10m", 600), ("2", 2), ("1.5h", 5400), ("2d", 172800),
                                           ("1w", 604800), ("1h30m", 5400), ("1 hour 30 minutes", 5400),
                                           ("10 min", 600), ("PT10M", 600), ("P1DT2H", 93600), ("pt1.5s", 1.5), (" 2 H ", 7200)])
def test_durations_parse(spec, seconds) -> None:
    assert parse_duration(spec) == seconds


@pytest.mark.parametrize("spec", ["10 parsecs", "", "P", "PT", "1h 2", "-5", "1e3", "10m foo", "1" * 40 + "!"])
def test_a_bad_duration_says_what_is_wrong(spec) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(spec)  # (at once: a long run of digits is not tried in every split)


def test_cut_keeps_at_most_the_bound() -> None:
    # batches of 10 items of 100 bytes each, one per second, items 0..99, at t = 0..9
    arrivals = [(10 * k, float(k), 1000) for k in range(10)]
    sizes = lambda a, b: [100] * (b - a)  # noqa: E731
    assert cut_for(HistoryBound(items=25), 0, 100, arrivals, 10.0, sizes) == 75
    assert cut_for(HistoryBound(seconds=3.5), 0, 100, arrivals, 10.0, sizes) == 70  # batches at t >= 6.5
    assert cut_for(HistoryBound(bytes=2550), 0, 100, arrivals, 10.0, sizes) == 75  # 25 items of 100 bytes
    assert cut_for(HistoryBound(bytes=3000), 0, 100, arrivals, 10.0, sizes) == 70
    assert cut_for(HistoryBound(items=500), 40, 100, arrivals, 10.0, sizes) == 40  # nothing more to cut
    assert cut_for(HistoryBound(items=25, seconds=1.5), 0, 100, arrivals, 10.0, sizes) == 90  # less kept wins
    assert since_position(arrivals, 100, 4.0) == 40 and since_position(arrivals, 100, 99.0) == 100


def test_trim_stops_at_pins_and_at_peers_not_heard() -> None:
    assert trim_below("s", 70, {}, {"B": {}, "C": {"s": 40}}, []) == 40
    assert trim_below("s", 70, {"s": 30}, {"B": {"other": 0}}, [55]) == 30
    assert trim_below("s", 70, {}, {"B": None}, []) == 0  # B's subscriptions are not known yet


def test_the_store_trims_and_still_counts_every_item_logged(tmp_path) -> None:
    store = StateStore(tmp_path)
    store.add_original("s", "r", "i", 0.0, 0.0)
    for k in range(5):
        store.append("s", 10 * k, [f"<i>{10 * k + j}</i>" for j in range(10)], 10 * k + 10, 10 * k + 10, 0, 0,
                     at=100.0 + k)
    store.add_watermark("s", 20, "t", 1.0)
    store.add_watermark("s", 40, "t", 2.0)
    assert store.trim("s", 25) == 25
    assert store.read_log("s", 0, 30) == [f"<i>{j}</i>" for j in range(25, 30)]
    assert store.read_watermarks("s", 0, 50) == [(40, "t", 2.0)]
    extent = store.extent("s")
    assert (extent.first, extent.stop, extent.oldest_at) == (25, 50, 102.0)  # the batch holding item 25
    store.close()
    again = StateStore(tmp_path).originals()[0]  # restarted: where the stream stands is kept
    assert (again.logged, again.retained_from) == (50, 25)


# ---------------------------------------------------------------------- a live network


def _registered(status: dict, name: str) -> dict:
    return status["streams_registered_here"][name]


def test_a_bounded_history_is_trimmed_and_from_start_says_how_far_back_it_goes(tmp_path) -> None:
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500, history="400")
        assert publisher.history_bounds["photons"] == "400 items"
        publisher.publish("photons", PHOTONS[:1000])
        until(lambda: _registered(publisher.status(), "photons")["history"]["retained_from"] == 600,
              what=lambda: str(_registered(publisher.status(), "photons")["history"]))
        client = SuperPeerClient(topology.address("SP7"))
        reply = client.subscribe(example_query("q3"), from_start=True)
        assert "retains items 600–999" in reply.history and "400 items" in reply.history, reply.history
        publisher.publish("photons", PHOTONS[1000:])
        publisher.close_stream("photons")
        got = [item for _, item, _ in client.results(reply.subscription, idle_timeout=30)]
        expected = reference_results(example_query("q3"), PHOTONS[600:])
        assert expected and same(got, expected), (len(got), len(expected))


def test_since_starts_at_the_items_of_the_last_seconds_with_windows_across_the_seam(tmp_path) -> None:
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500)
        publisher.publish("photons", PHOTONS[:500])
        time.sleep(6.0)  # the input: an old part, then a recent one (not a wait for a condition)
        publisher.publish("photons", PHOTONS[500:800])
        subs = {}
        for name, peer in (("q1", "SP1"), ("q3", "SP7"), ("q4", "SP0")):
            client = SuperPeerClient(topology.address(peer))
            reply = client.subscribe(example_query(name), since_s=3.0)
            assert reply.history == ""  # nothing was trimmed: everything asked for is there
            subs[name] = (client, reply.subscription)
        live = SuperPeerClient(topology.address("SP1"))
        live_sid = live.subscribe(example_query("q1")).subscription
        publisher.publish("photons", PHOTONS[800:])
        publisher.close_stream("photons")
        for name, (client, sid) in subs.items():
            got = [item for _, item, _ in client.results(sid, idle_timeout=30)]
            expected = reference_results(example_query(name), PHOTONS[500:])
            assert expected and same(got, expected), (name, len(got), len(expected))
        got = [item for _, item, _ in live.results(live_sid, idle_timeout=30)]
        assert same(got, reference_results(example_query("q1"), PHOTONS[800:]))


def test_a_running_subscription_keeps_what_its_recovery_needs_beyond_the_bound(tmp_path) -> None:
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500, history="100")
        client = SuperPeerClient(topology.address("SP7"))
        publisher.publish("photons", PHOTONS[:200])
        sid = client.subscribe(example_query("q3")).subscription  # starts at item 200, at another peer
        publisher.publish("photons", PHOTONS[200:900])

        def history() -> dict:
            return _registered(publisher.status(), "photons")["history"]

        until(lambda: history()["retained_from"] == 200 and history()["kept_beyond_bound"], what=lambda: str(history()))
        time.sleep(2.5)  # more heartbeat rounds: still pinned (a condition that must stay false)
        assert history()["retained_from"] == 200
        client.unsubscribe(sid)
        until(lambda: history()["retained_from"] == 800, what=lambda: str(history()))


def test_the_cli_checks_since_and_history_before_connecting() -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "thinpeer.cli", *args, "--superpeer", "127.0.0.1:9"], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)

    r = run("subscribe", "--query", "q.wxq", "--since", "10 parsecs")
    assert r.returncode != 0 and "--since" in r.stderr and "duration" in r.stderr, r.stderr
    r = run("subscribe", "--query", "q.wxq", "--since", "10m", "--from-start")
    assert r.returncode != 0 and "not both" in r.stderr, r.stderr


def test_a_log_from_an_earlier_version_is_read_and_counts_as_arrived_now(tmp_path) -> None:
    """Logged item by item, before arrivals were recorded: its items come back in order, in
    batches of consecutive items, and count as arrived when the directory is opened."""
    store = StateStore(tmp_path)
    store.add_original("s", "r", "i", 0.0, 0.0)
    store._write([("CREATE TABLE log (stream TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL, "
                   "PRIMARY KEY (stream, idx)) WITHOUT ROWID", ()),
                  ("INSERT INTO log (stream, idx, text) VALUES (?, ?, ?)",
                   [("s", k, f"<i>é{k}</i>") for k in [*range(10), *range(12, 15)]])])
    store.close()
    before = time.time()
    reopened = StateStore(tmp_path)
    extent = reopened.extent("s")
    assert (extent.first, extent.stop) == (0, 15) and extent.oldest_at >= before
    assert reopened.read_log("s", 8, 13) == ["<i>é8</i>", "<i>é9</i>", "<i>é12</i>"]


def test_a_replay_never_sends_items_the_log_no_longer_has(tmp_path) -> None:
    from superpeer.history.history_source import HistorySource

    store = StateStore(None)
    store.add_original("s", "r", "i", 0.0, 0.0)
    store.append("s", 0, [f"<i>{k}</i>" for k in range(10)], 10, 10, 0, 0, at=1.0)
    store.trim("s", 4)
    with pytest.raises(RuntimeError, match="no longer in the log"):
        HistorySource(store).read("s", 2, 8, 0)
    assert HistorySource(store).read("s", 4, 6, 4) == ["<i>4</i>", "<i>5</i>"]


def test_the_log_reads_across_its_batches_and_after_a_trim_inside_one(tmp_path) -> None:
    store = StateStore(tmp_path)
    store.add_original("s", "r", "i", 0.0, 0.0)
    items = [f"<i>{k}{'é' * (k % 3)}</i>" for k in range(30)]
    for first in (0, 10, 20):
        store.append("s", first, items[first:first + 10], first + 10, first + 10, 0, 0, at=1.0)
    assert store.read_log("s", 5, 25) == items[5:25]
    assert store.read_log("s", 0, 100) == items
    assert store.trim("s", 15) == 15
    assert store.read_log("s", 0, 30) == items[15:]  # (the batch holding item 15 keeps its row)
    extent = store.extent("s")
    assert (extent.first, extent.stop) == (15, 30)
    assert store.originals()[0].logged == 30
