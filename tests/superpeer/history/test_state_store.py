"""What a super-peer keeps across a restart (``state_store``), a result buffer that skips what
it has (recomputation after re-planning), and the plan made around a failure."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import photon_document

from sharing.analysis import analyze
from sharing.backbone import Backbone, Link, Peer, TopologyError
from sharing.matching import raw_properties
from sharing.network_state import NetworkState
from sharing.planner import Planner, RegistrationError
from sharing.planning_view import PlanningSnapshot
from sharing.properties import InputStream
from sharing.replay import ReplayInput, ReplayLevel
from sharing.scenarios import example_query
from sharing.serialization import stream_from_json, stream_to_json
from sharing.statistics import StreamStatistics
from superpeer.history.state_store import StateStore
from superpeer.subscriptions.results import ResultBuffer
from wxquery.operators import definitions as alg
from wxquery.stream_document import StreamDocument


def test_a_reopened_store_has_the_streams_their_logs_and_where_publishers_stand(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.add_original("photons", "photons", "photon", 500.0, 1.0, "det_time", 2.0)
    store.append("photons", 0, ["<photon>a</photon>", "<photon>b</photon>"], 3, 2, 1, 0)
    store.append("photons", 2, ["<photon>c</photon>"], 4, 3, 1, 0)
    store.close_original("photons")
    again = StateStore(tmp_path)
    [o] = again.originals()
    assert (o.name, o.next_position, o.accepted, o.rejected, o.closed, o.logged) == ("photons", 4, 3, 1, True, 3)
    assert (o.event_time, o.event_time_rate) == ("det_time", 2.0)
    assert again.read_log("photons", 1, 3) == ["<photon>b</photon>", "<photon>c</photon>"]


def test_a_batch_is_logged_whole_or_not_at_all(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.add_original("s", "r", "i", 0.0, 1.0)
    store.append("s", 0, ["<i/>"], 1, 1, 0, 0)
    with pytest.raises(sqlite3.IntegrityError):  # item 0 again: the whole batch is refused
        store.append("s", 0, ["<i>x</i>", "<i>y</i>"], 3, 3, 0, 0)
    [o] = store.originals()
    assert (o.logged, o.next_position) == (1, 1)


def test_subscriptions_keep_their_results_plan_ids_and_starts(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.add_subscription("SP1-a", "<q/>", "sharing", 5.0, confidence=0.9)
    raw = raw_properties(InputStream("photons", ("photons", "photon")))
    chains = {"p": ReplayInput((ReplayLevel(raw, "items", (alg.Project(frozenset({"en"})),), 180),), 7)}
    store.set_plan("SP1-a", "SP1-a~1f2e3d", ["SP1-a"], {"photons": 200}, chains,
                   touched={"SP1-a~1f2e3d": frozenset({"SP4", "SP5", "SP1"})})
    buffer = ResultBuffer(retention=10, root="r", store=store, sid="SP1-a")
    for i in range(3):
        assert buffer.offer(i, f"<x>{i}</x>")
    buffer.release()  # read after the end: the stored results are freed too
    buffer.base = 3
    assert buffer.offer(3, "<x>3</x>")
    assert StateStore(tmp_path).subscriptions()[0].results == []  # stored in batches (recomputed if lost)
    buffer.close()  # the end stores what is left
    [s] = StateStore(tmp_path).subscriptions()
    assert (s.owner, s.stale, s.starts, s.closed) == ("SP1-a~1f2e3d", ["SP1-a"], {"photons": 200}, True)
    assert s.chains == chains and s.chains["p"].start == 180
    assert s.confidence == 0.9  # of its intervals, if it is ever planned on a sample
    # where its plan was committed (removed there only after a restart); "SP1-a": not known
    assert s.touched == {"SP1-a~1f2e3d": ["SP1", "SP4", "SP5"]}
    assert (s.base, s.results) == (3, ["<x>3</x>"])
    store.remove_subscription("SP1-a")
    assert StateStore(tmp_path).subscriptions() == []


def test_results_are_stored_a_batch_a_row_and_those_retention_dropped_do_not_come_back(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.add_subscription("SP1-a", "<q/>", "sharing", 5.0)
    store.add_result_runs("SP1-a", [(0, [f"<x>{k}ü</x>" for k in range(600)])])
    store.add_result_runs("SP1-a", [(600, [f"<x>{k}ü</x>" for k in range(600, 700)])])
    rows = sqlite3.connect(tmp_path / "superpeer.sqlite3").execute(
        "SELECT COUNT(*) FROM result_batches").fetchone()[0]
    assert rows == 2  # (not a row per result)
    store.forget_results("SP1-a", 650)  # (retention dropped the first 650)
    [s] = StateStore(tmp_path).subscriptions()
    assert (s.base, s.results) == (650, [f"<x>{k}ü</x>" for k in range(650, 700)])
    store.add_result_runs("SP1-a", [(690, [f"<x>{k}ü</x>" for k in range(690, 705)])])  # (again: kept once)
    [s] = StateStore(tmp_path).subscriptions()
    assert (s.base, s.results) == (650, [f"<x>{k}ü</x>" for k in range(650, 705)])
    store.add_result_runs("SP1-a", [(710, [f"<x>{k}ü</x>" for k in range(710, 712)])])  # (705–709 lost)
    [s] = StateStore(tmp_path).subscriptions()
    assert len(s.results) == 55  # up to the gap: what follows is computed again, not renumbered


def test_results_an_earlier_version_stored_a_row_each_are_read_with_the_new_batches(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.add_subscription("SP1-a", "<q/>", "sharing", 5.0)
    db = sqlite3.connect(tmp_path / "superpeer.sqlite3")
    db.executemany("INSERT INTO results (sid, idx, text) VALUES (?, ?, ?)", [("SP1-a", k, f"<x>{k}</x>") for k in range(3, 6)])
    db.commit()
    again = StateStore(tmp_path)
    again.add_result_runs("SP1-a", [(6, ["<x>6</x>"])])
    [s] = StateStore(tmp_path).subscriptions()
    assert (s.base, s.results) == (3, ["<x>3</x>", "<x>4</x>", "<x>5</x>", "<x>6</x>"])
    again.remove_subscription("SP1-a")
    assert StateStore(tmp_path).subscriptions() == []


def test_stream_numbers_are_never_handed_out_twice(tmp_path: Path) -> None:
    first = StateStore(tmp_path).reserve_ids(1000)
    assert StateStore(tmp_path).reserve_ids(1000) == first + 1000  # a restarted peer goes on


def test_a_result_buffer_skips_the_results_it_has() -> None:
    buffer = ResultBuffer(retention=100, root="r")
    for i in range(3):
        buffer.offer(i, f"<x>{i}</x>")
    # recomputed from the first input item: 0-2 again, then new ones
    assert [buffer.offer(i, f"<x>{i}</x>") for i in range(5)] == [False, False, False, True, True]
    assert buffer.read(0, 10, 0)[1] == [f"<x>{i}</x>" for i in range(5)]


def _line() -> Backbone:
    return Backbone([Peer("A"), Peer("B"), Peer("C"), Peer("D")],
                    [Link("A", "B", 1e8), Link("B", "C", 1e8), Link("A", "D", 1e8), Link("D", "C", 1e8)])


def test_the_backbone_around_a_failure_routes_the_other_way() -> None:
    square = _line()
    assert square.route("A", "C") == ("A", "B", "C")
    assert square.without(peers=["B"]).route("A", "C") == ("A", "D", "C")
    assert square.without(links=[frozenset(("A", "B"))]).route("A", "C") == ("A", "D", "C")
    with pytest.raises(TopologyError, match="no route"):
        square.without(peers=["B", "D"]).route("A", "C")


def _line_with_photons(backbone: Backbone | None = None, frequency: float = 100.0) -> NetworkState:
    """The square's line A–B–C (or ``backbone``) with photons registered at A."""
    state = NetworkState(backbone or _line())
    stats = StreamStatistics(frequency=frequency)
    for item in StreamDocument.from_text(photon_document(300, seed=3)).items("photons", "photon"):
        stats.observe(item)
    photons = InputStream("photons", ("photons", "photon"))
    state.register_original(photons, "A", raw_properties(photons), stats)
    return state


def test_a_replay_plan_ships_a_new_copy_from_the_origin_and_runs_every_operator_at_the_target() -> None:
    state = _line_with_photons()
    props = analyze(example_query("q3")).properties
    planner = Planner(state)
    plan = planner.replay_plan("s~1", props, "C")
    [part] = plan.parts
    copy, result = part.new_streams
    assert copy.parent == "photons" and not copy.operators and copy.route == ("A", "B", "C")
    assert result.parent == copy.id and result.operators and result.route == ("C",)
    with pytest.raises(RegistrationError, match="not in the backbone"):
        planner.replay_plan("s~2", props, "X")


def _line_with_photons_at(frequency: float) -> NetworkState:
    """The line A–B–C of 10 Mbit/s links, photons at A arriving ``frequency`` a second."""
    return _line_with_photons(Backbone([Peer("A"), Peer("B"), Peer("C")],
                                       [Link("A", "B", 1e7), Link("B", "C", 1e7)]), frequency)


def test_a_replay_plan_runs_the_operators_at_the_origin_when_the_whole_stream_would_not_fit() -> None:
    """The copy the log fills stays at the origin, the operators run there, and only their
    result crosses the links — as a subscription admitted on a sample needs after a failure."""
    props = analyze(example_query("q3")).properties
    for frequency in (100.0, 20_000.0):
        plan = Planner(_line_with_photons_at(frequency)).replay_plan("s~1", props, "C")
        [part] = plan.parts
        copy, result = part.new_streams
        assert plan.admitted and copy.parent == "photons" and not copy.operators and result.operators
        if frequency == 100.0:  # fits whole: the copy to the subscriber, the operators there
            assert copy.route == ("A", "B", "C") and result.route == ("C",)
        else:
            assert copy.route == ("A",) and result.origin == "A" and result.route == ("A", "B", "C")
            assert plan.usage.links[frozenset(("A", "B"))] < 1e7


def test_a_live_subscription_never_reuses_a_stream_filled_from_the_past() -> None:
    """A subscription over the past (``--from-start``, ``--since``, or one re-planned after a
    failure) runs on new streams filled from the log: reused by a live subscription, they would
    hand it items from before it was registered. Another subscription to the same query at the
    same super-peer reuses the original instead."""
    state = _line_with_photons()
    props = analyze(example_query("q1")).properties
    past = Planner(state).replay_plan("s~1", props, "C")
    Planner(state).install(past)
    filled = {s.id for part in past.parts for s in part.new_streams}
    assert filled and all(state.streams[sid].past for sid in filled)
    live = Planner(state).subscribe("s~2", props, "C")
    assert live.admitted and not {part.reused for part in live.parts} & filled
    Planner(state).install(live)
    later = Planner(state).subscribe("s~3", props, "C")  # the live one's streams are shared
    assert {part.reused for part in later.parts} & {s.id for part in live.parts for s in part.new_streams}


def test_a_state_directory_from_before_exact_replays_is_taken_as_it_is(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "superpeer.sqlite3")
    db.execute("CREATE TABLE subscriptions (sid TEXT PRIMARY KEY, query TEXT NOT NULL, strategy TEXT NOT NULL, "
               "registered_at REAL NOT NULL, owner TEXT NOT NULL DEFAULT '', closed INTEGER NOT NULL DEFAULT 0, "
               "error TEXT NOT NULL DEFAULT '', code TEXT NOT NULL DEFAULT '', stale TEXT NOT NULL DEFAULT '[]', "
               "released INTEGER NOT NULL DEFAULT 0, starts TEXT NOT NULL DEFAULT '{}')")
    db.execute("INSERT INTO subscriptions (sid, query, strategy, registered_at, starts) "
               "VALUES ('SP1-a', '<q/>', 'sharing', 1.0, '{\"photons\": 5}')")
    db.commit()
    db.close()
    [s] = StateStore(tmp_path).subscriptions()
    assert (s.sid, s.starts, s.chains) == ("SP1-a", {"photons": 5}, {})


def test_a_stream_filled_from_the_past_is_reused_only_where_its_replayed_items_have_passed() -> None:
    """In the planning view of a daemon: the peer filling the copy says it caught up with the log
    at item 700 (``live_from``); a live subscription at C reuses it only at peers that report
    the copy's next item there at 700 or beyond (items may still be queued towards C)."""
    state = _line_with_photons()
    props = analyze(example_query("q1")).properties
    past = Planner(state).replay_plan("s~1", props, "C")
    Planner(state).install(past)
    copy = past.parts[0].new_streams[0]
    photons = InputStream("photons", ("photons", "photon"))

    def snapshot(live_from: int | None, reached: dict[str, int]) -> PlanningSnapshot:
        snap = PlanningSnapshot(state.backbone, state.new_stream_id, dict(state.link_used), dict(state.peer_used),
                                dict(state.statistics))
        snap.originals["photons"] = snap.streams["photons"] = state.original(photons)
        for peer in state.backbone.peers:
            found = [stream_from_json(stream_to_json(x)) for g in state.groups_at(peer, photons).values()
                     for x in g.values()]
            for x in found:
                if x.id == copy.id and peer == copy.origin:
                    x.live_from = live_from
            snap.add_table(peer, photons, found, {copy.id: reached[peer]} if peer in reached else {})
        return snap

    filled = {s.id for s in past.parts[0].new_streams}
    everywhere = {"A": 900, "B": 900, "C": 900}
    for live_from, reached, allowed in ((None, everywhere, set()), (700, {"A": 900, "B": 650, "C": 650}, set()),
                                        (700, {}, set()), (700, {"A": 700, "B": 700, "C": 700}, {"C"}),
                                        (700, {"A": 900, "B": 900, "C": 650}, {"A", "B"})):
        plan = Planner(snapshot(live_from, reached)).subscribe("s~2", props, "C")
        [part] = plan.parts
        reused_past = part.reused in filled
        assert plan.admitted and reused_past == bool(allowed), (live_from, reached, part.reused)
        assert not reused_past or part.reuse_peer in allowed, (reached, part.reuse_peer)


def test_where_a_subscription_passing_its_items_through_resumes_is_stored_with_its_results(tmp_path: Path) -> None:
    """(variable, the original's item after the last stored result's, the next result's number),
    in the same transaction as the results; a batch without it (an item of unknown origin) takes
    the earlier one back, and the subscription's runtime resumes only where the kept results
    end exactly there."""
    from sharing.analysis import analyze
    from superpeer.recovery.restore import resumes_at
    from superpeer.subscriptions.results import ResultBuffer
    from superpeer.subscriptions.runtime import SubscriptionRuntime

    store = StateStore(tmp_path)
    store.add_subscription("SP1-a", "<q/>", "sharing", 5.0)
    store.add_result_runs("SP1-a", [(0, [f"<x>{k}</x>" for k in range(300)])], ("p", 1234))
    [s] = StateStore(tmp_path).subscriptions()
    assert s.resume == ("p", 1234, 300)
    query = '<r>{ for $p in stream("photons")/photons/photon where $p/en > 1 return $p }</r>'
    runtime = SubscriptionRuntime("SP1-a", analyze(query), 10_000, buffer=ResultBuffer(10_000, "r"))
    runtime.buffer.restore(s.base, s.results, False, "", "")
    resumes_at(runtime, s.resume)
    assert (runtime.resume_at, runtime.next_result) == ({"p": 1234}, 300)
    stale = SubscriptionRuntime("SP1-a", analyze(query), 10_000, buffer=ResultBuffer(10_000, "r"))
    stale.buffer.restore(s.base, s.results[:-1], False, "", "")  # (kept results end elsewhere)
    resumes_at(stale, s.resume)
    assert (stale.resume_at, stale.next_result) == ({}, 0)
    store.add_result_runs("SP1-a", [(300, ["<x>300</x>"])])
    assert StateStore(tmp_path).subscriptions()[0].resume is None
    store.remove_subscription("SP1-a")
    assert not sqlite3.connect(tmp_path / "superpeer.sqlite3").execute("SELECT * FROM result_resume").fetchall()
