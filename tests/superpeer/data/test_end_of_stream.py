"""Every subscription sees its stream's end exactly once, whatever the interleaving of the close
with the subscription's installation (issue 11, defect 2) — real parts of eight super-peers in
one process, joined by the fake transport, which lets a test close the stream (or fail a peer)
just before any one call of the installation; plus a run of real gRPC daemons."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from network_harness import reference_results, running_network
from superpeer_fakes import Call, FakeNetwork, in_process_network

from photons.generator import generate
from sharing.scenarios import paper_query
from superpeer.control import transactions
from superpeer.errors import NodeError
from superpeer.subscriptions.runtime import SubscriptionRuntime
from thinpeer.client import SuperPeerClient, ThinPeerError

PHOTONS = [p.to_xml() for p in generate(400, seed=21)]
WARMUP = 100


reference = reference_results  # the invariant: the reference evaluator's results


@pytest.fixture
def ends(monkeypatch) -> Counter:
    """How many times each (subscription, variable) was told its input ended."""
    seen: Counter = Counter()
    feed = SubscriptionRuntime.feed

    def counting(self, variable, values, end, origins=None):
        if end:
            seen[(self.id, variable)] += 1
        feed(self, variable, values, end, origins)

    monkeypatch.setattr(SubscriptionRuntime, "feed", counting)
    return seen


def network_with_photons() -> FakeNetwork:
    net = in_process_network()
    net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
    net.peers["SP4"].data.publish("photons", PHOTONS[:WARMUP])
    return net


def stop(net: FakeNetwork) -> None:
    for p in net.peers.values():
        p.stop()


def drained(record, timeout: float = 5.0) -> tuple[list[str], bool]:
    """(results, whether the subscription ended) — waiting at most ``timeout`` for the end."""
    buffer = record.runtime.buffer
    with buffer.cond:
        buffer.cond.wait_for(lambda: buffer.closed, timeout=timeout)
    _, items, closed, _ = buffer.read(0, 100_000, 0)
    return items, closed


SCENARIOS = {
    # (peer, query number, strategy, Query 1 installed at SP1 first)
    "q1 at SP1, filtered at SP4": ("SP1", 1, "sharing", False),
    "q1 at SP1, shipped and filtered at SP1": ("SP1", 1, "data-shipping", False),
    "q2 at SP7, reusing q1's stream at SP5": ("SP7", 2, "sharing", True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_close_anywhere_in_an_installation_ends_the_subscription_once(scenario, ends):
    """The stream is published one item per call of the installation and closed just before
    its n-th call, for every n (and after it): the subscription ends exactly once, without an
    error, with the reference results of the items that reached it — a contiguous tail of
    what was published, nothing missing after its first result."""
    peer, n_query, strategy, after_q1 = SCENARIOS[scenario]
    query = paper_query(n_query)
    failures = []
    n = 0
    while True:
        n += 1
        net = network_with_photons()
        sp4 = net.peers["SP4"]
        if after_q1:
            net.peers["SP1"].control.subscribe(paper_query(1))
        published: list[str] = []
        calls = 0
        lock = threading.Lock()

        def hook(call: Call) -> None:
            nonlocal calls
            with lock:  # lookups run in parallel
                calls += 1
                if sp4.state.originals["photons"].closed:
                    return
                if calls == n:
                    sp4.data.close_stream("photons")
                else:
                    item = PHOTONS[WARMUP + len(published)]
                    sp4.data.publish("photons", [item])
                    published.append(item)

        net.calls.clear()
        net.hook = hook
        record = net.peers[peer].control.subscribe(query, strategy=strategy)
        net.hook = lambda call: None
        installed_before_close = not sp4.state.originals["photons"].closed
        after = PHOTONS[WARMUP + len(published):WARMUP + len(published) + 50]
        if installed_before_close:
            sp4.data.publish("photons", after)
            published += after
            sp4.data.close_stream("photons")
        got, closed = drained(record)
        expected = reference(query, published)
        told = [ends[(record.runtime.id, v)] for v in record.runtime.feeds]
        if not closed or record.runtime.buffer.error or told != [1] * len(told) \
                or got != expected[len(expected) - len(got):]:
            failures.append((n, closed, record.runtime.buffer.error, told, len(got), len(expected)))
        stop(net)
        if installed_before_close:  # installed: everything published since arrives
            since = reference(query, after)
            assert since and got[len(got) - len(since):] == since
            break
    assert not failures, f"close before call n: (n, ended, error, ends told, got, published) {failures}"


def test_subscribing_to_a_stream_that_has_ended_ends_at_once(ends):
    """Reusing an ended stream at the subscriber's peer, deriving from it further up, or
    filtering the ended original: each subscription ends at once, told once."""
    net = network_with_photons()
    sp4 = net.peers["SP4"]
    q1 = net.peers["SP1"].control.subscribe(paper_query(1))
    sp4.data.publish("photons", PHOTONS[WARMUP:])
    sp4.data.close_stream("photons")
    assert drained(q1)[0] == reference(paper_query(1), PHOTONS[WARMUP:])
    late = {"same stream at SP1": net.peers["SP1"].control.subscribe(paper_query(1)),
            "derived at SP5": net.peers["SP7"].control.subscribe(paper_query(2)),
            "from the original": net.peers["SP0"].control.subscribe(paper_query(3))}
    assert not late["same stream at SP1"].plan.parts[0].new_streams
    for name, record in late.items():
        got, closed = drained(record, timeout=2.0)
        assert closed and got == [] and not record.runtime.buffer.error, name
        assert [ends[(record.runtime.id, v)] for v in record.runtime.feeds] == [1], name
    stop(net)


def leftovers(net: FakeNetwork, sid: str) -> list[str]:
    """Whatever of subscription ``sid`` is still installed anywhere."""
    found = []
    for name, p in net.peers.items():
        found += [f"{name}: stream {s.id}" for s in p.state.table if sid in s.users or not s.original]
        found += [f"{name}: operator {s}" for s in p.executor.installed()]
        found += [f"{name}: reservation {t}" for t in p.state.transactions.open]
        found += [f"{name}: delivery of {s}" for s, d in p.state.deliveries.items() if d]
    return found


def wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_source_peer_lost_while_committing_leaves_nothing_behind(ends, monkeypatch):
    """The stream's super-peer stops answering just as its part of the plan is committed: the
    subscriber is told why, and no peer keeps anything of the subscription — the lost peer's
    reservation, which nobody can abort, expires, and it installs subscriptions again."""
    monkeypatch.setattr(transactions, "RESERVATION_TTL_S", 0.3)
    net = network_with_photons()

    def source_goes_down(call: Call) -> None:
        if call.method == "commit" and call.peer == "SP4":
            net.down.add("SP4")

    net.hook = source_goes_down
    with pytest.raises(NodeError) as err:
        net.peers["SP1"].control.subscribe(paper_query(1))
    assert err.value.code == "UNAVAILABLE" and "SP4" in err.value.message
    assert not net.peers["SP1"].control.subscriptions
    sid = next(c.args[1] for c in net.calls_of("commit"))
    assert [x for x in leftovers(net, sid) if not x.startswith("SP4: reservation")] == []
    net.hook = lambda call: None
    net.down.clear()
    assert wait_for(lambda: not net.peers["SP4"].state.transactions.reserved())
    assert leftovers(net, sid) == []
    assert net.peers["SP1"].control.subscribe(paper_query(1)).plan.admitted
    stop(net)


def test_a_waiting_subscription_whose_installation_fails_ends_with_the_reason(ends):
    net = in_process_network()
    record = net.peers["SP1"].control.subscribe(paper_query(1), wait_for_streams=True)
    net.hook = lambda call: net.down.add("SP4") if (call.method, call.peer) == ("commit", "SP4") else None
    net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)
    got, closed = drained(record, timeout=2.0)
    assert closed and got == [] and record.runtime.buffer.code == "UNAVAILABLE" and "SP4" in record.runtime.buffer.error
    assert record.error.startswith("UNAVAILABLE") and record.plan is None
    assert [x for x in leftovers(net, record.runtime.id) if not x.startswith("SP4: reservation")] == []
    stop(net)


class BrokenPlanner:
    """A planner with a bug: what a subscription must survive is not a NodeError."""

    def __init__(self, view) -> None:
        pass

    def subscribe(self, *args, **kwargs):
        raise ZeroDivisionError("a planner bug")


def test_an_unexpected_error_while_planning_is_reported_and_leaves_nothing():
    net = network_with_photons()
    sp1 = net.peers["SP1"].control
    sp1.make_planner = BrokenPlanner
    with pytest.raises(NodeError) as err:
        sp1.subscribe(paper_query(1))
    assert err.value.code == "INTERNAL" and "ZeroDivisionError: a planner bug" in err.value.message
    assert not sp1.subscriptions
    stop(net)


def test_an_unexpected_error_activating_a_waiting_subscription_ends_it_and_not_the_others():
    net = in_process_network()
    broken = net.peers["SP1"].control.subscribe(paper_query(1), wait_for_streams=True)
    net.peers["SP1"].control.make_planner = BrokenPlanner
    fine = net.peers["SP7"].control.subscribe(paper_query(2), wait_for_streams=True)
    net.peers["SP4"].control.register_stream("photons", "photons", "photon", rate=100)  # no raise
    got, closed = drained(broken, timeout=2.0)
    assert closed and got == [] and broken.runtime.buffer.code == "INTERNAL" and broken.runtime.buffer.error
    assert "a planner bug" in broken.error
    assert fine.plan is not None and fine.plan.admitted
    stop(net)


def test_an_unexpected_error_while_committing_removes_what_was_installed(monkeypatch):
    net = network_with_photons()
    executor = net.peers["SP4"].executor

    def broken_install(*args, **kwargs):
        raise RuntimeError("the executor failed")

    monkeypatch.setattr(executor, "install", broken_install)
    with pytest.raises(NodeError) as err:
        net.peers["SP1"].control.subscribe(paper_query(1))
    assert err.value.code == "INTERNAL" and "the executor failed" in err.value.message
    sid = next(c.args[1] for c in net.calls_of("commit"))
    assert leftovers(net, sid) == []
    stop(net)


# ---------------------------------------------------------------------- real daemons

def per_item_query(k: int) -> str:
    return (f'<r>{{ for $p in stream("photons")/photons/photon where $p/en >= {0.5 + 0.1 * k:.1f} '
            "return <e>{ $p/en }{ $p/det_time }</e> }</r>")


@pytest.mark.slow
def test_a_stream_closed_while_subscriptions_install_ends_every_one_of_them(tmp_path):
    """The reproduction: a publisher at full speed, 16 subscriptions registered at once at the
    eight super-peers and the stream closed a few milliseconds later, for several rounds. Every
    admitted subscription ends, and its results are the reference results of a tail of the
    published items (nothing missing once it started)."""
    photons = [p.to_xml() for p in generate(30_000, seed=5)]
    for round_ in range(3):
        (tmp_path / f"r{round_}").mkdir()
        with running_network(tmp_path / f"r{round_}") as (topology, peers):
            publisher = SuperPeerClient(topology.address("SP4"))
            publisher.register_stream("photons", "photons", "photon", rate=100)
            publisher.publish("photons", photons[:200])
            stop_publishing = threading.Event()

            def publish() -> None:
                at = 200
                while not stop_publishing.is_set() and at < len(photons):
                    try:
                        publisher.publish("photons", photons[at:at + 200])
                    except ThinPeerError:
                        return  # closed
                    at += 200

            admitted: list[tuple[SuperPeerClient, str, str]] = []
            refused: list[ThinPeerError] = []

            def subscribe(k: int) -> None:
                client = SuperPeerClient(topology.address(f"SP{k % 8}"))
                try:
                    sid = client.subscribe(per_item_query(k)).subscription
                    admitted.append((client, per_item_query(k), sid))
                except ThinPeerError as exc:
                    refused.append(exc)

            threads = [threading.Thread(target=publish)]
            threads += [threading.Thread(target=subscribe, args=(k,)) for k in range(16)]
            for t in threads:
                t.start()
            time.sleep(0.011 + 0.02 * round_)  # the close races the installations
            accepted = publisher.close_stream("photons")
            stop_publishing.set()
            for t in threads:
                t.join(timeout=60)
            assert admitted and not refused, refused
            hung, expected = [], {}
            for client, query, sid in admitted:
                got, deadline = [], time.monotonic() + 20
                while time.monotonic() < deadline:
                    reply = client.read(sid, len(got), wait_ms=500)
                    got += list(reply.items)
                    if reply.closed:
                        break
                else:
                    hung.append(sid)
                    continue
                if query not in expected:
                    expected[query] = reference(query, photons[:accepted])
                assert got == expected[query][len(expected[query]) - len(got):], sid
            assert not hung, f"round {round_}: {len(hung)} of {len(admitted)} never ended"
