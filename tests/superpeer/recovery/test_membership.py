"""Membership by gossip (``superpeer.recovery.membership``): records are authored only by their
peer and ordered by their stamps; digests ask for what is missing; the verdict on a peer one
does not watch comes from its watchers' records; and the rounds that spread them cost each peer
the same number of messages however large the network, while the news still reaches everyone in
a few rounds."""

from __future__ import annotations

import math
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from superpeer.recovery.failure_detector import FailureDetector, HeartbeatSettings
from superpeer.recovery.membership import (MAX_RECORDS, SAME, settled_usage, Membership, Record, digest_from_json, records_from_json,
                                           records_to_json)


def _author(m: Membership, now: float = 1.0, hears=(), down=None, usage=None, originals=(), pins=None,
            waiting=()):
    return m.author(now, hears, down or {}, usage or {}, originals, pins or {}, waiting)


def test_a_record_changes_version_only_when_its_content_does_and_urgently_only_for_failures() -> None:
    m = Membership("A", "e1", 10.0)
    first, urgent = _author(m, hears={"B"})
    assert first.version == 0 and not urgent  # (a network starting up pushes nothing)
    same, urgent = _author(m, now=2.0, hears={"B"})
    assert same is first and not urgent
    busier, urgent = _author(m, now=3.0, hears={"B", "C"}, usage={"load": 0.5})
    assert busier.version == 1 and not urgent  # (usage, and a neighbour heard, follow by anti-entropy)
    cut, urgent = _author(m, now=4.0, hears={"C"}, usage={"load": 0.5})
    assert cut.version == 2 and urgent
    declared, urgent = _author(m, now=5.0, hears={"C"}, down={"B": ("b1", 0)}, usage={"load": 0.5})
    assert urgent and declared.concerns(cut) == {"A", "B", "C"}
    waits, urgent = _author(m, now=6.0, hears={"C"}, down={"B": ("b1", 0)}, usage={"load": 0.5}, waiting={"alerts"})
    assert urgent and Record.from_json(waits.to_json()) == waits
    restarted = Record("A", "e2", 20.0, 0, 20.0)
    assert restarted.urgent_change(waits)


def test_merge_keeps_the_newer_record_and_a_later_process_wins_over_any_version() -> None:
    m = Membership("A", "eA", 0.0)
    old_process = Record("B", "old", 5.0, 40, 6.0)
    assert [r for r, _ in m.merge([old_process])] == [old_process]
    assert m.merge([Record("B", "old", 5.0, 39, 6.0)]) == []  # older version of the same process
    restarted = Record("B", "new", 9.0, 0, 9.5)
    assert m.merge([restarted]) == [(restarted, old_process)]
    assert m.merge([old_process]) == []
    assert m.merge([Record("A", "stale", 99.0, 7, 99.0)]) == []  # nobody else writes this peer's record


def test_a_digest_asks_for_what_is_missing_or_older() -> None:
    m = Membership("A", "eA", 0.0)
    _author(m)
    m.merge([Record("B", "eB", 1.0, 3, 1.0), Record("C", "eC", 1.0, 0, 1.0)])
    asker = digest_from_json('{"B": [1.0, "eB", 3], "C": [1.0, "eC", 0]}')
    assert [r.peer for r in m.missing(asker)] == ["A"]
    asker["A"] = m.own().stamp
    assert m.missing(asker) == []
    m.merge([Record("C", "eC", 1.0, 1, 2.0)])
    assert [r.peer for r in m.missing(asker)] == ["C"]
    many = Membership("X", "eX", 0.0)
    many.merge([Record(f"P{i}", "e", 0.0, 0, 0.0) for i in range(MAX_RECORDS + 10)])
    assert len(many.missing({})) == MAX_RECORDS
    assert records_from_json('[{"peer": "B"}, {"peer": "C", "epoch": "e", "started": 0, "version": 1}]') == [
        Record("C", "e", 0.0, 1, 0.0)]  # (a malformed record is skipped, the others taken)


def test_peers_holding_the_same_records_exchange_only_a_hash() -> None:
    a, b = Membership("A", "eA", 0.0), Membership("B", "eB", 0.0)
    _author(a)
    _author(b)
    a.merge([b.own()])
    b.merge([a.own()])
    assert a.digest_hash() == b.digest_hash() and len(SAME + a.digest_hash()) < 30
    assert b.missing_for(SAME + a.digest_hash()) == []
    _author(b, now=2.0, hears={"A"})
    assert a.digest_hash() != b.digest_hash()  # (A then sends its whole digest, and gets it)
    assert [r.peer for r in b.missing_for(a.digest_json())] == ["B"]


def test_the_verdict_on_a_peer_comes_from_its_watchers_records() -> None:
    m = Membership("R", "eR", 0.0)
    assert m.verdict("X").up is None
    m.merge([Record("X", "x1", 0.0, 0, 0.0), Record("Y", "y", 0.0, 0, 0.0, hears=frozenset({"X"})),
             Record("Z", "z", 0.0, 0, 0.0, hears=frozenset({"X"}))])
    assert m.verdict("X").up is True
    m.merge([Record("Y", "y", 0.0, 1, 1.0, down={"X": ("x1", 0)})])
    assert m.verdict("X").up is True  # Z still hears it: only the link Y–X is cut
    m.merge([Record("Z", "z", 0.0, 1, 1.0)])
    v = m.verdict("X")
    assert v.up is False and "declared down by Y" in v.reason
    m.merge([Record("X", "x2", 5.0, 0, 5.0)])  # a new process of X: the declaration was of the old one
    assert m.verdict("X").up is True


def test_a_peer_declared_down_while_running_refutes_and_only_a_newer_declaration_counts() -> None:
    x, y, far = (Membership(p, f"e{p}", 0.0) for p in ("X", "Y", "F"))
    _author(x, hears={"Y"})
    y.merge([x.own()])
    _author(y, now=2.0, down={"X": ("eX", y.alive_of("X", "eX"))})  # (Y's heartbeats to X go unanswered: slow)
    assert y.own().down == {"X": ("eX", 0)}
    far.merge([x.own(), y.own()])
    assert far.verdict("X").up is False
    assert not x.refute([Record("Y", "eY", 0.0, 0, 0.0, down={"X": ("old process", 0)})])
    assert x.refute([y.own()])  # X reads it and refutes: a new record, pushed at once
    refuted, urgent = _author(x, now=3.0, hears={"Y"})
    assert refuted.alive == 1 and urgent and not x.refute([y.own()])
    far.merge([refuted])
    assert far.verdict("X").up is True  # Y's declaration was of alive 0: refuted
    y.merge([refuted])
    assert y.refutes_mine(refuted, None)
    _author(y, now=5.0, down={"X": ("eX", y.alive_of("X", "eX"))})  # nobody reaches X still: at its count
    far.merge([y.own()])
    assert y.own().down == {"X": ("eX", 1)} and far.verdict("X").up is False
    assert Record.from_json(y.own().to_json()) == y.own()
    old_peer = {**y.own().to_json(), "down_alive": {}}  # (a peer of before refutation: epochs alone)
    assert Record.from_json(old_peer).down == {"X": ("eX", 0)}


def test_a_slow_super_peer_asks_for_more_misses_before_declaring_a_neighbour_down() -> None:
    detector = FailureDetector("A", frozenset({"B"}), HeartbeatSettings(1.0, misses=3))
    for _ in range(3):  # rounds that began late: this process is overloaded
        assert detector.health.observe(late_s=0.8, took_s=1.0, interval_s=1.0)
    for t in range(5):
        detector.missed("B", float(t), "DEADLINE_EXCEEDED")
    assert detector.peer_state("B") == "unknown"  # 5 misses: not enough while this peer is slow
    detector.missed("B", 5.0, "DEADLINE_EXCEEDED")
    assert detector.peer_state("B") == "down"
    for _ in range(10):
        assert not detector.health.observe(late_s=0.0, took_s=0.1, interval_s=1.0)
    assert detector.health.score == 0 and detector.status(6.0)["local_health"]["misses_to_declare"] == 3


def test_partners_are_taken_in_turn() -> None:
    m = Membership("A", "eA", 0.0, random.Random(3))
    peers = ["B", "C", "D", "E"]
    assert sorted(m.partner(peers) for _ in range(4)) == peers
    assert sorted(m.partner(peers) for _ in range(4)) == peers
    assert m.partner(["A"]) is None


def _grid(k: int) -> nx.Graph:
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(k, k))


def _gossip_rounds(graph: nx.Graph, rng: random.Random, changed: int, max_rounds: int = 60):
    """Rounds of the heartbeats' exchange (each peer asks its neighbours and one partner, sending
    its digest and getting what it lacks) until every peer holds ``changed``'s new record; the
    rounds it took and the most questions one peer sent in a round."""
    nodes = [str(n) for n in graph.nodes]
    ms = {n: Membership(n, f"e{n}", 0.0, random.Random(rng.random())) for n in nodes}
    for n, m in ms.items():
        _author(m)
    for n, m in ms.items():  # (everyone knows everyone's first record)
        for o in nodes:
            m.merge([ms[o].own()])
    _author(ms[str(changed)], now=2.0, hears={"changed"})
    goal = ms[str(changed)].own().stamp
    neighbours = {str(n): [str(x) for x in graph.neighbors(n)] for n in graph.nodes}
    most, theirs = 0, {}  # (asker, asked) -> the digest hash the asked peer answered with last
    for rounds in range(1, max_rounds + 1):
        for n in nodes:
            partner = ms[n].partner(p for p in nodes if p not in neighbours[n])
            asked = neighbours[n] + ([partner] if partner else [])
            most = max(most, len(asked))
            for p in asked:  # (as ``Heartbeats._gossip``: the hash alone when the digests agreed)
                mine = ms[n].digest_hash()
                digest = SAME + mine if theirs.get((n, p)) == mine else ms[n].digest_json()
                ms[n].merge(records_from_json(records_to_json(ms[p].missing_for(digest))))
                theirs[n, p] = ms[p].digest_hash()
        if all(m.records[str(changed)].stamp == goal for m in ms.values()):
            return rounds, most
    raise AssertionError(f"not spread after {max_rounds} rounds")


@pytest.mark.parametrize("k", [3, 6, 10])
def test_a_change_reaches_every_peer_in_logarithmic_rounds_at_constant_messages_per_peer(k: int) -> None:
    rounds, most = _gossip_rounds(_grid(k), random.Random(k), changed=0)
    assert most <= 5  # four neighbours and one partner, whatever the size
    assert rounds <= 2 * math.log2(k * k) + 2, rounds  # (without the partner: the diameter, 2k - 2)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=4, max_value=40), st.integers(min_value=0, max_value=10_000))
def test_every_change_spreads_on_any_connected_backbone(n: int, seed: int) -> None:
    rng = random.Random(seed)
    graph = nx.connected_watts_strogatz_graph(n, 4, 0.2, seed=seed)
    _gossip_rounds(graph, rng, changed=rng.randrange(n))


def test_a_new_stream_is_told_to_the_peers_waiting_for_it_and_to_those_not_heard_of_yet() -> None:
    m = Membership("O", "eO", 0.0)
    m.merge([Record("P1", "e", 0.0, 0, 0.0, waiting=("photons",)), Record("P2", "e", 0.0, 0, 0.0)])
    assert m.waiters("photons", ["O", "P1", "P2", "P3"]) == ["P1", "P3"]
    assert m.waiters("alerts", ["O", "P1", "P2", "P3"]) == ["P3"]


def test_every_peer_finds_the_same_homes_and_a_new_peer_takes_over_few_names() -> None:
    from superpeer.control.announcements import homes
    peers = [f"SP{i}" for i in range(36)]
    names = [f"stream{i}" for i in range(500)]
    before = {n: homes(n, peers) for n in names}
    assert all(len(set(h)) == 3 and h == homes(n, list(reversed(peers))) for n, h in before.items())
    after = {n: homes(n, [*peers, "SP36"]) for n in names}
    moved = sum(before[n] != after[n] for n in names)
    assert 0 < moved < 0.2 * len(names)  # (about 3 in 37 of the names)


def test_measured_rates_that_wobble_do_not_make_a_new_record_each_round() -> None:
    m = Membership("A", "eA", 0.0)
    busy = {"version": 3, "measured_links": {"B": 812_345.6}, "measured_load": 0.123456}
    first, _ = _author(m, usage=settled_usage(busy))
    assert first.usage["measured_links"] == {"B": 820_000.0} and first.usage["measured_load"] == 0.13  # (up)
    wobble = {**busy, "measured_links": {"B": 815_871.2}, "measured_load": 0.12111}
    assert _author(m, now=2.0, usage=settled_usage(wobble))[0] is first  # (the digest stays: a hash goes)
    doubled = {**busy, "measured_links": {"B": 1_624_000.0}}
    assert _author(m, now=3.0, usage=settled_usage(doubled))[0].version == 1
    assert settled_usage({"version": 4}) == {"version": 4}
