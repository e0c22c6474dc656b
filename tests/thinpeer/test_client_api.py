"""The client library as a program uses it, against real super-peers (gRPC on loopback): typed
replies, context managers that close what they open, the ``asyncio`` client, errors with their
gRPC status and the query's line and column, and a reader that survives its super-peer's
restart without missing or repeating a result. The reference evaluator is the oracle."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import grpc
import pytest
from network_harness import reference_results, running_network, same, until

from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.aio import AsyncSuperPeerClient
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import up
from thinpeer.ops.topologies import shipped_topology
from thinpeer.replies import Plan, ResultBatch, Status, Subscription, ThinPeerError

pytestmark = pytest.mark.slow

Q1 = example_query("q1")


def photons(n: int, seed: int = 11) -> list[str]:
    return [p.to_xml() for p in generate(n, seed=seed)]


def test_sync_client_typed_replies_and_context_managers(tmp_path: Path) -> None:
    items = photons(1500)
    with running_network(tmp_path) as (topology, _):
        with SuperPeerClient(topology.address("SP4")) as publisher, \
                SuperPeerClient(topology.address("SP1")) as reader:
            with publisher.stream("photons", "photons", "photon", rate=100) as stream:
                assert stream.position == 0
                first = stream.publish(items[:500])
                assert (first.accepted, first.next_position) == (500, 500)
                with reader.subscription(Q1) as sub:
                    assert isinstance(sub, Subscription) and sub.id == sub.subscription
                    assert isinstance(sub.plan, Plan) and sub.plan.admitted and sub.plan.target == "SP1"
                    assert sub.plan.parts and sub.plan.parts[0].input == "photons"
                    assert sub.description.startswith(sub.id)
                    status = reader.status()
                    assert isinstance(status, Status) and status.superpeer == "SP1"
                    assert status.subscriptions[sub.id].health == "ok"
                    assert stream.publish(items[500:]).next_position == 1500
                    assert publisher.status().streams["photons"].accepted == 1500
                    stream.close()
                    batches = list(reader.result_batches(sub.id, idle_timeout=20))
                    assert all(isinstance(b, ResultBatch) for b in batches) and batches[-1].closed
                    got = [item for b in batches for item in b.items]
                    assert same(got, reference_results(Q1, items[500:]))
                    assert all(b.next_offset == b.offset + len(b.items) for b in batches)
            # the with blocks ended: unsubscribed (released) and the stream closed
            assert sub.id not in reader.status().subscriptions
            assert publisher.status().streams["photons"].closed


def test_errors_carry_the_grpc_status_and_where_the_query_is_wrong(tmp_path: Path) -> None:
    with running_network(tmp_path) as (topology, _):
        with SuperPeerClient(topology.address("SP1")) as client:
            bad = 'for $p in stream("photons")/photons/photon\nwhere $p/en >= \nreturn $p'
            with pytest.raises(ThinPeerError) as caught:
                client.subscribe(bad)
            error = caught.value
            assert error.status is grpc.StatusCode.INVALID_ARGUMENT and not error.transient
            assert (error.line, error.column) != (None, None) and error.line >= 2, error.message
            with pytest.raises(ThinPeerError) as caught:
                client.read("no-such-subscription")
            assert caught.value.status is grpc.StatusCode.NOT_FOUND
            assert caught.value.line is None
        with SuperPeerClient("127.0.0.1:1", timeout=2) as nobody:
            with pytest.raises(ThinPeerError) as caught:
                nobody.status()
            assert caught.value.status is grpc.StatusCode.UNAVAILABLE and caught.value.transient


def test_async_client_end_to_end_with_a_live_source(tmp_path: Path) -> None:
    items = photons(1200, seed=5)

    async def live():  # a source that delivers in bursts, with pauses longer than linger_s
        for i in range(200, len(items), 100):
            for item in items[i:i + 100]:
                yield item
            await asyncio.sleep(0.05)

    async def run(sp4: str, sp1: str) -> tuple[list[str], int, Status]:
        async with AsyncSuperPeerClient(sp4) as publisher, AsyncSuperPeerClient(sp1) as reader:
            async with publisher.stream("photons", "photons", "photon", rate=100) as stream:
                await stream.publish(items[:200])
                async with reader.subscription(Q1) as sub:
                    assert sub.plan is not None and sub.plan.admitted
                    summary = await stream.publish(live(), linger_s=0.02)
                    assert summary.accepted == 1000 and stream.position == 1200
                    await stream.close()
                    got = [item async for _, item, _ in reader.results(sub.id, idle_timeout=20)]
                    status = await publisher.status()
            return got, sub.id, status

    with running_network(tmp_path) as (topology, _):
        got, _, status = asyncio.run(run(topology.address("SP4"), topology.address("SP1")))
        assert same(got, reference_results(Q1, items[200:]))
        assert status.streams["photons"].closed and status.streams["photons"].accepted == 1200


def test_a_reader_resumes_from_its_offset_across_its_superpeers_restart(tmp_path: Path) -> None:
    """One ``results`` iterator, never restarted by the caller, while SP1 (the subscriber's
    super-peer) is killed and started again on its state directory: every result once."""
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    network = up(path, state_dir=tmp_path / "state", serve_args=("--heartbeat-s", "0.3", "--heartbeat-misses", "2"))
    items = photons(3000, seed=7)
    try:
        publisher = SuperPeerClient(network.addresses["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=500)
        publisher.publish("photons", items[:200], position=0)
        until(lambda: SuperPeerClient(network.addresses["SP1"]).status()["peers_last_heard_s_ago"], 30)
        sid = SuperPeerClient(network.addresses["SP1"]).subscribe(Q1).id
        restarted = threading.Event()

        def publish_and_restart() -> None:
            publisher.publish("photons", items[200:1500], rate=1000, position=200, retry_s=120)
            network.kill("SP1")
            time.sleep(1.0)
            network.start("SP1")
            restarted.set()
            publisher.publish("photons", items[1500:], rate=1000, position=1500, retry_s=120)
            publisher.close_stream("photons")

        worker = threading.Thread(target=publish_and_restart, daemon=True)
        worker.start()
        reader = SuperPeerClient(network.addresses["SP1"], timeout=10)
        got = [item for _, item, _ in reader.results(sid, idle_timeout=60)]
        worker.join(120)
        assert restarted.is_set()
        assert same(got, reference_results(Q1, items[200:])), (len(got),)
    finally:
        network.stop()
