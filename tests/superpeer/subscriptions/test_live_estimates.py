"""The intervals of a live approximate subscription, by result offset: a read of results
``[o, o+n)`` carries the windows that arrived at those offsets, each window's once over reads
that follow one another, all that is left with the read that ends the stream; a window computed
again (a re-plan recomputes from the start) is not given twice. ``streamglobe subscribe``
merges the reads' elements into one."""

from __future__ import annotations

from functools import partial

from lxml import etree

from sharing.analysis import analyze
from superpeer.data.limits import DataLimits
from superpeer.history.state_store import StateStore
from superpeer.subscriptions.approximation import LiveEstimates
from superpeer.subscriptions.results import ResultBuffer
from superpeer.subscriptions.runtime import SubscriptionRuntime
from thinpeer.approximation import merged
from wxquery.operators.records import WindowRecord

ASKED = {"w": (("sum", "en"), ("count", "en"))}


def record(k: int, n: int = 10) -> WindowRecord:
    return WindowRecord(k, {("sum", "en"): 1.5 * n, ("count", "en"): n, ("sumsq", "en"): 2.5 * n})


def test_windows_are_read_with_the_results_that_arrived_with_them_once_each() -> None:
    live = LiveEstimates(4, ASKED)
    scaled = live.scale("w", [record(0), "an item"], position=0)
    assert scaled[0].values[("count", "en")] == 40 and ("sumsq", "en") not in scaled[0].values
    assert scaled[1] == "an item"
    live.scale("w", [record(1), record(2)], position=3)
    live.scale("w", [record(3)], position=9)
    assert {e.window for e in live.between(0, 3, last=False)} == {0}
    assert {e.window for e in live.between(3, 6, last=False)} == {1, 2}
    assert live.between(0, 0, last=False) == []  # no results read: nothing yet
    assert {e.window for e in live.between(9, 0, last=True)} == {3}  # the end: what is left
    live.scale("w", [record(1), record(2), record(4)], position=12)  # recomputed after a re-plan
    assert {e.window for e in live.between(12, 5, last=False)} == {4}
    by_fn = {e.function: e for e in live.between(0, 3, last=False)}
    assert by_fn["count"].estimate == 40 and by_fn["count"].low < 40 < by_fn["count"].high
    assert by_fn["avg"].estimate == 1.5 and by_fn["avg"].low < 1.5 < by_fn["avg"].high


def test_windows_per_key_keep_their_keys_and_each_keys_interval(tmp_path) -> None:
    """Time windows per key come by window, then key: each key's window is estimated (once,
    also when recomputed, and after a restart), and says its key — on the scaled record and in
    the intervals."""
    store = StateStore(tmp_path)
    live = LiveEstimates(4, ASKED, persist=partial(store.add_intervals, "s1"))

    def keyed(k: int, key: str | None) -> WindowRecord:
        r = record(k)
        r.key = key
        return r

    scaled = live.scale("w", [keyed(-1, None), keyed(-1, "A"), keyed(-1, "B"), keyed(0, "A")], position=0)
    assert [r.key for r in scaled] == [None, "A", "B", "A"]
    assert {(e.window, e.key) for e in live.between(0, 4, last=False)} == {(-1, None), (-1, "A"), (-1, "B"), (0, "A")}
    live.scale("w", [keyed(0, "A"), keyed(0, "B")], position=4)  # (0, A) again: recomputed
    assert {(e.window, e.key) for e in live.between(4, 2, last=True)} == {(0, "B")}
    windows = etree.fromstring(live.xml(0, 6, last=True))
    everything = [("-1", None), ("-1", "A"), ("-1", "B"), ("0", "A"), ("0", "B")]
    assert [(w.get("k"), w.get("key")) for w in windows] == everything
    store.close()
    again = LiveEstimates(4, ASKED)
    again.restore(StateStore(tmp_path).intervals("s1"))
    assert [(w.get("k"), w.get("key")) for w in etree.fromstring(again.xml(0, 6, last=True))] == everything
    again.scale("w", [keyed(0, "B"), keyed(1, None)], position=6)  # (recomputed up to (0, B): only (1, None) is new)
    assert {(e.window, e.key) for e in again.between(6, 2, last=True)} == {(1, None)}


def test_windows_per_several_keys_keep_their_keys_over_a_restart(tmp_path) -> None:
    """A window per (a, b) says each present key (``keys="2" key1=… key2=…``), its intervals
    are stored per combination, and a restart reads the keys back as they were."""
    store = StateStore(tmp_path)
    live = LiveEstimates(4, ASKED, persist=partial(store.add_intervals, "s1"))

    def keyed(k: int, key: tuple) -> WindowRecord:
        r = record(k)
        r.key = key
        return r

    keys = [(None, "x"), ("A", None), ("A", "x"), ("A", "y")]
    live.scale("w", [keyed(0, key) for key in keys], position=0)
    shown = [(w.get("k"), w.get("keys"), w.get("key1"), w.get("key2")) for w in etree.fromstring(live.xml(0, 4, last=True))]
    assert shown == [("0", "2", a, b) for a, b in keys]
    store.close()
    again = LiveEstimates(4, ASKED)
    again.restore(StateStore(tmp_path).intervals("s1"))
    assert {e.key for e in again.between(0, 4, last=True)} == set(keys)
    again.scale("w", [keyed(0, ("A", "y")), keyed(1, (None, None))], position=4)  # (0, A, y) again: recomputed
    assert {(e.window, e.key) for e in again.between(4, 2, last=True)} == {(1, (None, None))}


def test_the_reads_elements_merge_into_one_in_order() -> None:
    live = LiveEstimates(8, ASKED)
    live.scale("w", [record(0)], position=0)
    live.scale("w", [record(5)], position=1)
    first, second = live.xml(0, 1, last=False), live.xml(1, 1, last=True)
    whole = etree.fromstring(merged([first, "", second]))
    ns = {"sg": "urn:streamglobe:approximation"}
    assert whole.get("sample") == "1/8" and whole.get("rows-read") is None
    assert [w.get("k") for w in whole.findall("sg:window", ns)] == ["0", "5"]
    assert merged(["", ""]) == "" and live.xml(2, 5, last=False) == ""


def test_intervals_stored_with_the_results_are_not_given_again_after_a_restart(tmp_path) -> None:
    """A super-peer started again recomputes its subscription's windows from the log: those it
    had estimated keep the offsets they arrived at; only later windows are new."""
    store = StateStore(tmp_path)
    before = LiveEstimates(4, ASKED, persist=partial(store.add_intervals, "s1"))
    before.scale("w", [record(0)], position=0)
    before.scale("w", [record(1), record(2)], position=5)
    store.close()
    store = StateStore(tmp_path)
    after = LiveEstimates(4, ASKED, persist=partial(store.add_intervals, "s1"))
    after.restore(store.intervals("s1"))
    assert after.between(5, 3, last=False) == before.between(5, 3, last=False)
    after.scale("w", [record(0), record(1), record(2), record(3)], position=7)  # recomputed
    assert {e.window for e in after.between(7, 3, last=True)} == {3}
    assert {e.window for e in after.between(0, 7, last=False)} == {0, 1, 2}
    assert store.intervals("other") == [] and len(store.intervals("s1")) == 4
    store.forget_results("s1", 5)  # released results: their intervals go too
    assert [r[1] for r in store.intervals("s1")] == [1, 2, 3]
    store.forget_results("s1", 100)  # (but for the last window: which ones were estimated)
    assert [r[1] for r in store.intervals("s1")] == [3]


def test_a_restored_subscription_has_its_intervals_before_anything_is_fed(tmp_path) -> None:
    """Results read back after a restart, before the re-plan feeds anything, carry their
    windows' intervals; retention trimming keeps the record of the last window estimated."""
    store = StateStore(tmp_path)
    before = LiveEstimates(4, ASKED, persist=partial(store.add_intervals, "s1"))
    before.scale("w", [record(0), record(1)], position=0)
    before.scale("w", [record(2)], position=2)
    store.forget_results("s1", 100)  # every result released: the last window's row stays
    assert [r[1] for r in store.intervals("s1")] == [2]
    query = '<r>{ for $w in stream("photons")/photons/photon |count 10 step 10| return <n>{ sum($w/en) }</n> }</r>'
    buffer = ResultBuffer(100, "r", 1 << 20)
    buffer.store, buffer.sid = store, "s1"
    runtime = SubscriptionRuntime("s1", analyze(query), 100, DataLimits(), buffer=buffer)
    runtime.sample = 4
    estimates = runtime.ensure_estimates()
    assert estimates is not None and buffer.store_on_read
    assert {e.window for e in estimates.between(2, 1, last=False)} == {2}
    estimates.scale("w", [record(1), record(2), record(3)], position=3)  # recomputed: only 3 is new
    assert {e.window for e in estimates.between(3, 1, last=True)} == {3}


def test_a_subscription_raised_to_the_whole_stream_before_a_restart_keeps_its_earlier_intervals(tmp_path) -> None:
    """Its windows were estimated on a 1/4 sample, then it was raised back to every item
    (``adaptive_sampling``) and its super-peer restarted: the sampled windows read back still
    carry their intervals at the rate they were computed at, and new windows are exact."""
    store = StateStore(tmp_path)
    before = LiveEstimates(4, ASKED, persist=partial(store.add_intervals, "s1"))
    before.scale("w", [record(0), record(1)], position=0)
    query = '<r>{ for $w in stream("photons")/photons/photon |count 10 step 10| return <n>{ sum($w/en) }</n> }</r>'
    buffer = ResultBuffer(100, "r", 1 << 20)
    buffer.store, buffer.sid = store, "s1"
    runtime = SubscriptionRuntime("s1", analyze(query), 100, DataLimits(), buffer=buffer)
    assert runtime.sample == 1
    estimates = runtime.ensure_estimates()
    assert estimates is not None and buffer.store_on_read
    assert {e.window for e in estimates.between(0, 2, last=True)} == {0, 1}
    assert estimates.scale("w", [record(2)], position=2) == [record(2)]  # (whole again: exact)
    fresh = SubscriptionRuntime("s2", analyze(query), 100, DataLimits(), buffer=ResultBuffer(100, "r", 1 << 20))
    assert fresh.ensure_estimates() is None  # (an exact subscription with nothing stored)
