"""Real super-peer daemons (gRPC on loopback) end to end, against the reference evaluator."""

from __future__ import annotations


import grpc
import pytest

from network_harness import running_network, same, reference_results
from sharing.analysis import analyze
from thinpeer.client import SuperPeerClient, ThinPeerError
from photons.generator import generate
from sharing.scenarios import example_query
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = pytest.mark.slow
# the Spark executor's first micro-batch in a process waits for the JVM and Python workers
IDLE = {"inline": 20, "spark": 120}
WAIT_MS = {"inline": 2000, "spark": 90_000}


@pytest.fixture(params=["inline", "spark"])
def executor(request) -> str:
    """Every end-to-end test runs on both executors."""
    return request.param
QUERIES = {n: example_query(n) for n in ("q1", "q2", "q3", "q4")}


reference = reference_results  # the invariant: the reference evaluator's results


def photon_source(topology, count: int, seed: int, warmup: int) -> tuple[SuperPeerClient, list[str]]:
    """Register "photons" at SP4, publish the first ``warmup`` items (statistics before any
    subscription), and return the publisher with all ``count`` items."""
    publisher = SuperPeerClient(topology.address("SP4"))
    publisher.register_stream("photons", "photons", "photon", rate=100)
    photons = [p.to_xml() for p in generate(count, seed=seed)]
    if warmup:
        publisher.publish("photons", photons[:warmup])
    return publisher, photons


def test_paper_example_end_to_end(tmp_path, executor):
    with running_network(tmp_path, executor=executor) as (topology, peers):
        address = topology.address
        publisher, photons = photon_source(topology, 2500, seed=9, warmup=400)
        subscriptions = {}
        for name, peer in (("q1", "SP1"), ("q2", "SP7"), ("q3", "SP0"), ("q4", "SP6")):
            client = SuperPeerClient(address(peer))
            subscriptions[name] = (client, client.subscribe(QUERIES[name]))
        q1_stream = next(p["delivered_stream"] for p in __import__("json").loads(
            subscriptions["q1"][1].plan_json)["parts"])
        summary = publisher.publish("photons", photons[400:] + ["<photon><en>1</photon>", "<nope/>"])
        assert (summary.accepted, summary.rejected) == (2100, 2)
        assert "Opening and ending tag mismatch" in summary.reasons[0]
        publisher.close_stream("photons")
        for name, (client, reply) in subscriptions.items():
            got = [item for _, item, _ in client.results(reply.subscription, idle_timeout=IDLE[executor])]
            expected = reference(QUERIES[name], photons[400:])
            assert expected, name
            assert same(got, expected), (name, len(got), len(expected))
        # Query 2 is served from Query 1's stream at SP5, as in the paper
        table = SuperPeerClient(address("SP5")).status()["stream_table"]
        q2 = next(s for s in table if s["origin"] == "SP5" and s["route"] == ["SP5", "SP7"])
        assert q2["parent"] == q1_stream and q2["operators"]
        q1_at_sp5 = next(s for s in table if s["id"] == q1_stream)
        assert q2["id"] in q1_at_sp5["derived_here"]
        sp4 = SuperPeerClient(address("SP4")).status()
        assert sp4["streams_registered_here"]["photons"]["rejected"] == 2


def test_unshared_subscriptions_and_unsubscribe(tmp_path, executor):
    with running_network(tmp_path, executor=executor) as (topology, peers):
        address = topology.address
        publisher, photons = photon_source(topology, 1500, seed=4, warmup=300)
        q = QUERIES["q1"]
        ds = SuperPeerClient(address("SP1")).subscribe(q, strategy="data-shipping")
        other = SuperPeerClient(address("SP2")).subscribe(
            '<r>{ for $p in stream("photons")/photons/photon where $p/phc >= 200 return <h>{ $p/phc }</h> }</r>')
        publisher.publish("photons", photons[300:])
        publisher.close_stream("photons")
        got = [i for _, i, _ in SuperPeerClient(address("SP1")).results(ds.subscription, idle_timeout=IDLE[executor])]
        assert got == reference(q, photons[300:])
        got2 = [i for _, i, _ in SuperPeerClient(address("SP2")).results(other.subscription, idle_timeout=IDLE[executor])]
        assert got2 == reference('<r>{ for $p in stream("photons")/photons/photon where $p/phc >= 200 '
                                 'return <h>{ $p/phc }</h> }</r>', photons[300:])
        removed = SuperPeerClient(address("SP1")).unsubscribe(ds.subscription)
        assert removed
        tables = [SuperPeerClient(address(p)).status()["stream_table"] for p in topology.backbone.peers]
        assert not any(ds.subscription in s["users"] for t in tables for s in t)


def test_bad_input_gets_clear_errors(tmp_path, executor):
    with running_network(tmp_path, executor=executor) as (topology, peers):
        client = SuperPeerClient(topology.address("SP1"))
        with pytest.raises(ThinPeerError) as bad_query:
            client.subscribe('<r>{ for $p in stream("photons")/a/b\nwhere $p/x > 1 and $p/x != 0 return $p }</r>')
        assert bad_query.value.code == "INVALID_ARGUMENT" and "query:2:25" in bad_query.value.message
        with pytest.raises(ThinPeerError) as unknown:
            client.subscribe('<r>{ for $p in stream("nope")/a/b return $p }</r>')
        assert unknown.value.code == "NOT_FOUND" and '"nope"' in unknown.value.message
        with pytest.raises(ThinPeerError) as unsat:
            client.subscribe('<r>{ for $p in stream("nope")/a/b where $p/@x > 2 and $p/@x < 1 return $p }</r>')
        assert unsat.value.code == "INVALID_ARGUMENT" and "unsatisfiable" in unsat.value.message
        with pytest.raises(ThinPeerError) as not_here:
            client.publish("photons", ["<photon/>"])
        assert not_here.value.code == "NOT_FOUND"
        # the daemon keeps serving
        assert client.status()["superpeer"] == "SP1"


def test_dead_neighbour_is_reported_and_others_keep_serving(tmp_path, executor):
    with running_network(tmp_path, executor=executor) as (topology, peers):
        peers["SP7"].stop(grace=0)
        sp5 = peers["SP5"].node
        sp5.heartbeat_once()
        status = SuperPeerClient(topology.address("SP5")).status()
        assert "SP7" in status["unreachable_peers"]
        client = SuperPeerClient(topology.address("SP4"))
        client.register_stream("photons", "photons", "photon", rate=50)
        assert client.publish("photons", [p.to_xml() for p in generate(10, 1)]).accepted == 10


def test_health_and_reflection(tmp_path, executor):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with running_network(tmp_path, executor=executor) as (topology, peers):
        channel = grpc.insecure_channel(topology.address("SP3"))
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_disconnected_reader_resumes_without_loss_and_retention_is_reported(tmp_path, executor):
    with running_network(tmp_path, retention=50, executor=executor) as (topology, peers):
        address = topology.address
        publisher, photons = photon_source(topology, 600, seed=2, warmup=0)
        everything = '<all>{ for $p in stream("photons")/photons/photon return $p/det_time }</all>'
        reader = SuperPeerClient(address("SP1"))
        sid = reader.subscribe(everything).subscription
        publisher.publish("photons", photons[:30])
        first: list[str] = []
        while len(first) < 10:  # results arrive as post-processing produces them
            reply = reader.read(sid, len(first), max_items=10 - len(first), wait_ms=WAIT_MS[executor])
            assert reply.offset == len(first) and reply.items
            first.extend(reply.items)
        reader.close()  # the thin peer goes away; results keep arriving at SP1
        publisher.publish("photons", photons[30:40])
        again = SuperPeerClient(address("SP1"))
        expected = reference(everything, photons[:40])
        assert first == expected[:10]
        resumed: list[str] = []
        while len(resumed) < 30:
            reply = again.read(sid, 10 + len(resumed), max_items=100, wait_ms=WAIT_MS[executor])
            assert reply.offset == 10 + len(resumed) and reply.items
            resumed.extend(reply.items)
        assert resumed == expected[10:40]
        # beyond the retention bound the oldest results are dropped, and the reader is told
        publisher.publish("photons", photons[40:])
        publisher.close_stream("photons")
        late = list(again.results(sid, offset=40, idle_timeout=IDLE[executor]))
        behind = again.read(sid, 40, max_items=1, wait_ms=0)
        assert behind.dropped > 0 and behind.offset > 40
        assert [item for _, item, _ in late][-1] == reference(everything, photons)[-1]


def test_subscribing_to_an_ended_stream_ends_at_once(tmp_path, executor):
    with running_network(tmp_path, executor=executor) as (topology, peers):
        publisher, _ = photon_source(topology, 50, seed=1, warmup=50)
        publisher.close_stream("photons")
        client = SuperPeerClient(topology.address("SP1"))
        sid = client.subscribe(QUERIES["q1"]).subscription
        reply = client.read(sid, 0, wait_ms=WAIT_MS[executor])
        assert reply.closed and list(reply.items) == []


def test_window_drops_are_counted_per_operator_in_status(tmp_path, executor):
    """Items a time window drops, out of order beyond the lateness or without a numeric reference,
    are counted per operator in ``status``: the numbers the reference evaluator reports."""
    with running_network(tmp_path, executor=executor) as (topology, peers):
        publisher, photons = photon_source(topology, 1200, seed=5, warmup=200)
        client = SuperPeerClient(topology.address("SP0"))
        sid = client.subscribe(QUERIES["q3"]).subscription
        messy = []
        for i, item in enumerate(photons[200:]):
            if i % 50 == 49:  # 30 s behind the stream: later than any window still open
                t = float(item.split("<det_time>")[1].split("</det_time>")[0])
                item = item.replace(item[item.index("<det_time>"):item.index("</det_time>")],
                                    f"<det_time>{t - 30:.4f}")
            elif i % 70 == 69:
                item = item.replace("det_time>", "time>")  # no window reference
            messy.append(item)
        publisher.publish("photons", messy)
        publisher.close_stream("photons")
        got = [item for _, item, _ in client.results(sid, idle_timeout=IDLE[executor])]
        ev = evaluate(analyze(QUERIES["q3"]).checked,
                      StreamDocument.from_text("<photons>" + "".join(messy) + "</photons>"))
        assert same(got, list(ev.serialized_items()))
        assert ev.stats.late_items > 0 and ev.stats.missing_reference > 0
        windows = [op for p in topology.backbone.peers
                   for op in SuperPeerClient(topology.address(p)).status()["operators"] if "late_items" in op]
        assert windows, "the window operator reports what it dropped"
        assert sum(op["late_items"] for op in windows) == ev.stats.late_items
        assert sum(op["missing_reference"] for op in windows) == ev.stats.missing_reference


def test_malformed_transfer_from_a_neighbour_is_dropped_and_counted(tmp_path, executor):
    from proto import streamglobe_pb2 as pb
    from proto import streamglobe_pb2_grpc as pb_grpc

    with running_network(tmp_path, executor=executor) as (topology, peers):
        publisher, _ = photon_source(topology, 100, seed=1, warmup=100)
        client = SuperPeerClient(topology.address("SP1"))
        reply = client.subscribe(QUERIES["q1"])
        stream = __import__("json").loads(reply.plan_json)["parts"][0]["delivered_stream"]
        good = [p.to_xml() for p in generate(20, seed=8)]
        stub = pb_grpc.SuperPeerStub(grpc.insecure_channel(topology.peer_address("SP1")))
        ack = stub.Transfer(pb.TransferRequest(stream=stream, items=["<photon><en>1</photon>"] + good,
                                               sender="SP5"))
        assert ack.acknowledged == 21
        status = client.status()
        assert status["dropped_malformed_transfers"] == 1
        assert "Opening and ending tag mismatch" in status["last_malformed_transfer"]


def test_a_retried_transfer_is_taken_once(tmp_path, executor):
    """A batch whose reply was lost arrives again (whole, or overlapping the next one): the
    receiver takes each numbered item once and acknowledges the next number it expects; a
    restarted sender (a new epoch) numbers from zero again and is taken as new."""
    from proto import streamglobe_pb2 as pb
    from proto import streamglobe_pb2_grpc as pb_grpc

    with running_network(tmp_path, executor=executor) as (topology, peers):
        photon_source(topology, 100, seed=1, warmup=100)
        client = SuperPeerClient(topology.address("SP1"))
        reply = client.subscribe(QUERIES["q1"])
        stream = __import__("json").loads(reply.plan_json)["parts"][0]["delivered_stream"]
        items = [p.to_xml() for p in generate(30, seed=8)]
        stub = pb_grpc.SuperPeerStub(grpc.insecure_channel(topology.peer_address("SP1")))

        def send(first: int, batch: list[str], epoch: str = "e1") -> int:
            return stub.Transfer(pb.TransferRequest(stream=stream, items=batch, first_sequence=first,
                                                    sender="SP5", sender_epoch=epoch)).acknowledged

        assert send(0, items[:10]) == 10
        assert send(0, items[:10]) == 10  # the reply was lost: the whole batch again
        assert send(5, items[5:15]) == 15  # overlapping
        assert send(0, items[15:30], epoch="e2") == 15  # the sender restarted
        status = client.status()
        assert status["duplicate_transfer_items"] == 15
        assert status["transfer_sequence_gaps"]["items"] == 0
        got = [item for _, item, _ in client.results(reply.subscription, idle_timeout=3)]
        assert len(got) == len(set(got)) == 30, len(got)


def test_unsubscribe_cuts_a_still_used_route_back(tmp_path, executor):
    import time

    with running_network(tmp_path, executor=executor) as (topology, peers):
        address = topology.address
        publisher, photons = photon_source(topology, 400, seed=6, warmup=100)
        q1 = SuperPeerClient(address("SP1")).subscribe(QUERIES["q1"])
        q2 = SuperPeerClient(address("SP7")).subscribe(QUERIES["q2"])
        SuperPeerClient(address("SP1")).unsubscribe(q1.subscription)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            sp5 = SuperPeerClient(address("SP5")).status()["stream_table"]
            if not any(s["next_hops"] == ["SP1"] for s in sp5):
                break
            time.sleep(0.1)
        assert not any(s["next_hops"] == ["SP1"] for s in sp5), sp5
        before = SuperPeerClient(address("SP5")).status()["links"].get("SP5->SP1", {}).get("items", 0)
        publisher.publish("photons", photons[100:])
        publisher.close_stream("photons")
        got = [i for _, i, _ in SuperPeerClient(address("SP7")).results(q2.subscription, idle_timeout=IDLE[executor])]
        assert same(got, reference(QUERIES["q2"], photons[100:]))
        after = SuperPeerClient(address("SP5")).status()["links"].get("SP5->SP1", {}).get("items", 0)
        assert after == before  # nothing flows towards SP1 any more


def test_concurrent_registrations_at_different_superpeers(tmp_path, executor):
    import threading

    with running_network(tmp_path, executor=executor) as (topology, peers):
        address = topology.address
        publisher, photons = photon_source(topology, 1500, seed=12, warmup=200)
        names = ["q1", "q2", "q3", "q4", "q1", "q2", "q3", "q4"]
        replies: dict[str, tuple] = {}
        errors: list[Exception] = []

        def register(peer: str, name: str) -> None:
            try:
                client = SuperPeerClient(address(peer))
                replies[peer] = (client, name, client.subscribe(QUERIES[name]))
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=register, args=(f"SP{i}", names[i])) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors and len(replies) == 8, errors
        publisher.publish("photons", photons[200:])
        publisher.close_stream("photons")
        for peer, (client, name, reply) in replies.items():
            got = [i for _, i, _ in client.results(reply.subscription, idle_timeout=IDLE[executor])]
            assert same(got, reference(QUERIES[name], photons[200:])), (peer, name)
