"""Real super-peer daemons (gRPC on loopback): message and item sizes, memory over time, and the
status code and reason of every refusal."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import time
import traceback

import grpc
import pytest
from network_harness import running_network

from photons.generator import generate
from proto import streamglobe_pb2 as pb
from thinpeer.client import SuperPeerClient, ThinPeerError

pytestmark = pytest.mark.slow
WHOLE = '<r>{ for $p in stream("photons")/photons/photon return $p }</r>'
SELECTED = ('<r>{ for $p in stream("photons")/photons/photon where $p/en >= 1.3 '
            'return <e>{ $p/en }{ $p/det_time }</e> }</r>')


def big_item(n: int, mb: int = 14) -> str:
    """A well-formed item of ``mb`` MB (text nodes stay below the XML parser's 10 MB bound)."""
    half = "x" * (mb << 19)
    return f"<photon><en>{n}</en><a>{half}</a><b>{half}</b></photon>"


def test_results_beyond_the_message_limit_are_read_in_pieces(tmp_path):
    """Before: five 14 MB results made every ReadResults of the CLI's 1,000 items fail with
    RESOURCE_EXHAUSTED, the 70 MB Transfer towards SP1 was retried forever, and the client
    sent the five in one 70 MB Publish."""
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon")
        readers = {peer: SuperPeerClient(topology.address(peer), timeout=60) for peer in ("SP4", "SP1")}
        sids = {peer: c.subscribe(WHOLE, "data-shipping").subscription for peer, c in readers.items()}
        items = [big_item(n) for n in range(5)]
        assert publisher.publish("photons", items[:1]).accepted == 1
        summary = publisher.publish("photons", items[1:])  # the client splits the batch by bytes
        assert (summary.accepted, summary.rejected) == (4, 0), summary.reasons
        publisher.close_stream("photons")
        for peer, reader in readers.items():
            first = reader.read(sids[peer], 0, max_items=1000, wait_ms=20_000)
            assert 0 < len(first.items) < 5, peer  # bounded in bytes, not only in items
            got = [item for _, item, _ in reader.results(sids[peer], idle_timeout=30)]
            assert got == items, peer


def test_the_item_size_limit_is_configurable_and_named(tmp_path):
    from superpeer.data.limits import DataLimits

    with running_network(tmp_path, limits=DataLimits(max_item_bytes=2000)) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon")
        photons = [p.to_xml() for p in generate(3, seed=1)]
        fat = "<photon><en>1</en><pad>" + "x" * 3000 + "</pad></photon>"
        summary = publisher.publish("photons", [photons[0], fat, photons[1]])
        assert (summary.accepted, summary.rejected) == (2, 1)
        assert summary.reasons == [f"item 1: {len(fat):,} bytes, more than the 2,000 bytes the "
                                   "super-peer accepts per item (not sent)"]
        publisher.max_item_bytes.clear()  # a publisher that does not know the limit: refused there
        summary = publisher.publish("photons", [fat, photons[2]])
        assert (summary.accepted, summary.rejected) == (1, 1)
        assert summary.reasons == [f"item 0: {len(fat):,} bytes, more than the 2,000 bytes an item "
                                   "may have at this super-peer (its --max-item-bytes)"]


def test_an_item_that_is_not_utf8_is_rejected_alone(tmp_path):
    """Before: the whole raw batch failed as INTERNAL ("Exception deserializing request!")."""
    with running_network(tmp_path) as (topology, _):
        SuperPeerClient(topology.address("SP4")).register_stream("photons", "photons", "photon")
        publish = grpc.insecure_channel(topology.address("SP4")).unary_unary(
            "/streamglobe.v1.ThinPeer/Publish", request_serializer=lambda b: b,
            response_deserializer=pb.PublishReply.FromString)
        good = "<photon><en>1</en></photon>".encode()
        request = pb.PublishRequest(stream="photons", first_sequence=7).SerializeToString()
        for item in (good, b"<photon><en>\xff</en></photon>", good):  # field 3, length-delimited
            request += b"\x1a" + bytes([len(item)]) + item
        reply = publish(request, timeout=10)
        assert (reply.accepted, reply.rejected) == (2, 1)
        assert list(reply.rejections) == ["item 8: not UTF-8 text (byte 0xff at offset 12)"]


def test_a_failed_subscription_tells_its_reader_the_code_and_the_reason(tmp_path):
    """Before: ReadResults answered ``INTERNAL: ReadResults failed: `` and nothing more."""
    with running_network(tmp_path) as (topology, _):
        reader = SuperPeerClient(topology.address("SP1"))
        sid = reader.subscribe('<r>{ for $e in stream("events")/events/event return $e }</r>',
                               wait_for_streams=True).subscription
        SuperPeerClient(topology.address("SP3")).register_stream("events", "log", "entry")
        with pytest.raises(ThinPeerError) as failed:
            reader.read(sid, 0, wait_ms=5000)
        assert failed.value.code == "FAILED_PRECONDITION"
        assert failed.value.message == (
            f'subscription {sid} failed: stream "events" (registered at SP3) has root <log> and '
            'items <entry>, but the query reads stream("events")/events/event: write '
            'stream("events")/log/entry')


def test_a_query_reading_a_stream_under_another_root_is_told_which(tmp_path):
    """Before: NOT_FOUND 'unknown stream "photons"', for a stream that is registered."""
    with running_network(tmp_path) as (topology, _):
        SuperPeerClient(topology.address("SP4")).register_stream("photons", "photons", "photon")
        with pytest.raises(ThinPeerError) as wrong:
            SuperPeerClient(topology.address("SP1")).subscribe(
                '<r>{ for $p in stream("photons")/events/photon return $p }</r>')
        assert wrong.value.code == "FAILED_PRECONDITION"
        assert 'has root <photons> and items <photon>' in wrong.value.message
        assert 'write stream("photons")/photons/photon' in wrong.value.message


def test_registering_a_name_again_with_another_shape_is_refused(tmp_path):
    """Before: a second registration of "photons" as <events>/<event> returned OK; the
    subscription reading the stream then saw every item rejected as not a <photon>."""
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon")
        reader = SuperPeerClient(topology.address("SP1"))
        sid = reader.subscribe(WHOLE).subscription
        publisher.register_stream("photons", "photons", "photon")  # a publisher reconnecting
        for root, item in (("events", "event"), ("photons", "event"), ("events", "photon")):
            with pytest.raises(ThinPeerError) as again:
                publisher.register_stream("photons", root, item)
            assert again.value.code == "ALREADY_EXISTS"
            assert (f'already registered here as <photons> with <photon> items, not <{root}> '
                    f'with <{item}> items') in again.value.message
        with pytest.raises(ThinPeerError) as elsewhere:
            SuperPeerClient(topology.address("SP3")).register_stream("photons", "events", "event")
        assert elsewhere.value.code == "ALREADY_EXISTS" and "at SP4 (photons/photon)" in elsewhere.value.message
        photons = [p.to_xml() for p in generate(20, seed=2)]
        assert publisher.publish("photons", photons).accepted == 20
        publisher.close_stream("photons")
        assert [i for _, i, _ in reader.results(sid, idle_timeout=20)] == photons


def _rss_mb() -> float:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # memory freed by Python and libxml2 goes back
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def test_memory_stays_flat_over_repeated_subscribe_publish_unsubscribe(tmp_path):
    """Soak: rounds of subscribe (two subscriptions), publish, read, unsubscribe on one long
    stream; after warm-up, the daemons' memory (this process: the harness runs them in it) and
    their threads do not grow with the rounds. Before: every batch sampled by the statistics
    kept its whole parsed batch alive, and every delivered item stayed in its subscription's
    input feed."""
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=1000)
        photons = [p.to_xml() for p in generate(60_000, seed=3)]
        readers = {peer: SuperPeerClient(topology.address(peer)) for peer in ("SP1", "SP7")}

        def round_(k: int) -> None:
            sids = {peer: c.subscribe(WHOLE if peer == "SP1" else SELECTED).subscription
                    for peer, c in readers.items()}
            batch = photons[(k % 30) * 2000:(k % 30 + 1) * 2000]
            assert publisher.publish("photons", batch).accepted == len(batch)
            got = []
            while len(got) < len(batch):
                reply = readers["SP1"].read(sids["SP1"], len(got), wait_ms=5000)
                assert reply.items, "results stopped"
                got.extend(reply.items)
            for peer, c in readers.items():
                c.unsubscribe(sids[peer])

        earlier = set(threading.enumerate())  # other tests' daemons share this process

        def subscription_threads() -> list[str]:
            return [t.name for t in threading.enumerate() if t.name.startswith("post-") and t not in earlier]

        for k in range(8):
            round_(k)
        before = _rss_mb()
        for k in range(8, 40):
            round_(k)
        deadline = time.monotonic() + 10
        while subscription_threads() and time.monotonic() < deadline:
            time.sleep(0.05)  # post-processing of the last unsubscribed subscriptions ending
        grown = _rss_mb() - before
        print(f"memory grew by {grown:.1f} MB over 32 rounds")
        lingering = {t.name: t.ident for t in threading.enumerate()
                     if t.name.startswith("post-") and t not in earlier}
        frames = sys._current_frames()
        assert lingering == {}, {name: "".join(traceback.format_stack(frames[ident]))[-1500:]
                                 for name, ident in lingering.items() if ident in frames}
        assert grown < 40, f"memory grew by {grown:.0f} MB over 32 rounds"
