"""A link's stream of batches (``Transfers``) at a real super-peer daemon: several batches in
flight, each acknowledged in order; a refused batch does not end the stream; a stream broken
with batches in flight is sent again on a new one and every item is taken once."""

from __future__ import annotations

import json
import queue

import grpc
import pytest
from network_harness import running_network

from photons.generator import generate
from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient

pytestmark = pytest.mark.slow


def test_batches_in_flight_on_a_broken_stream_are_taken_once(tmp_path):
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100)
        publisher.publish("photons", [p.to_xml() for p in generate(100, seed=1)])
        client = SuperPeerClient(topology.address("SP1"))
        reply = client.subscribe(example_query("q1"))
        stream = json.loads(reply.plan_json)["parts"][0]["delivered_stream"]
        items = [p.to_xml() for p in generate(60, seed=8)]
        stub = pb_grpc.SuperPeerStub(grpc.insecure_channel(topology.peer_address("SP1")))

        def batch(first: int, n: int, sender: str = "SP5") -> pb.TransferRequest:
            return pb.TransferRequest(stream=stream, items=items[first:first + n], first_sequence=first,
                                      sender=sender, sender_epoch="e1")

        # one stream: three batches sent before any reply is read, one of them refused
        requests: queue.Queue = queue.Queue()
        for r in (batch(0, 10), batch(10, 10, sender="SP3"), batch(10, 10)):
            requests.put(r)
        call = stub.Transfers(iter(requests.get, None))
        replies = [next(call) for _ in range(3)]
        assert [r.acknowledged for r in replies] == [10, 0, 20]
        assert replies[1].refused_code == "PERMISSION_DENIED" and "SP3" in replies[1].refused
        # the stream breaks with a batch in flight whose reply is never read …
        requests.put(batch(20, 20))
        call.cancel()
        # … so the sender sends it again on a new stream, overlapping what follows
        again = stub.Transfers(iter([batch(20, 20), batch(30, 30)]))
        assert [r.acknowledged for r in again] == [40, 60]
        got = [item for _, item, _ in client.results(reply.subscription, idle_timeout=3)]
        assert len(got) == len(set(got)) == 60, len(got)  # each item once
        assert client.status()["refused_transfers_from_the_wrong_peer"] == 1
        # a batch whose buffer and lengths disagree is refused as malformed; the stream goes on
        bad = pb.TransferRequest(stream=stream, payload=b"<photon/>", lengths=[4, 9], first_sequence=60,
                                 sender="SP5", sender_epoch="e1")
        other = pb.TransferRequest(stream="elsewhere", items=items[:1], sender="SP5", sender_epoch="e1")
        after = stub.Transfers(iter([bad, batch(60, 0), other]))
        first, second, third = list(after)
        assert first.refused_code == "INVALID_ARGUMENT" and "add up to 13 bytes" in first.refused
        # (the stream's later batches on the same link stream too: no hole behind a refusal)
        assert second.refused_code == "INVALID_ARGUMENT" and not third.refused_code
