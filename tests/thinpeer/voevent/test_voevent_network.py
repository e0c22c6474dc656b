"""VOEvents in and out of a real network: real packets sent by an author to a real Comet broker,
brought in by the bridge, filtered by a WXQuery subscription at another super-peer, and sent as
VOEvents by the VTP sink to a second Comet broker, whose subscriber receives them. Restarts of
the bridge and of the sink deliver nothing twice; what is not a VOEvent is refused with its
reason while the rest goes on."""

from __future__ import annotations

import threading

import pytest
from comet_broker import ScriptedBroker, fixture_packets, running_comet
from lxml import etree
from network_harness import reference_results, running_network, until

from thinpeer.client import SuperPeerClient
from thinpeer.sinks.base import SinkError, StateFile
from thinpeer.sinks.runner import deliver_results
from thinpeer.sinks.vtp import VtpSink
from thinpeer.voevent.bridge import PENDING, VoEventBridge
from thinpeer.voevent.shape import (
    ivorn_and_item,
    packet_of,
    parse_voevent,
    voevent_item,
)
from thinpeer.voevent.transport import TRANSPORT_NS, send_event, transport
from thinpeer.voevent.vtp import VtpSubscriber

pytestmark = pytest.mark.slow
PACKETS = fixture_packets()
ORDER = list(PACKETS)  # SWIFT, Gaia, ASASSN, MOA
SOUTH = """<south>
  { for $v in stream("voevents")/voevents/voevent
    where $v/dec < 0
    return <alert> { $v/ivorn } { $v/ra } { $v/dec } { $v/error } { $v/params/Rate_Signif } </alert> }
</south>"""
EVERY = '<all>{ for $v in stream("voevents")/voevents/voevent return $v/ivorn }</all>'
RESULTS = "ivo://streamglobe.test/results"


def ivorn(name: str) -> str:
    return parse_voevent(PACKETS[name]).get("ivorn")


def collecting(address: str) -> tuple[VtpSubscriber, list[bytes]]:
    got: list[bytes] = []
    subscriber = VtpSubscriber(address, got.append, local_ivo="ivo://streamglobe.test/listener")
    subscriber.start()
    until(subscriber.connected.is_set, 10, what=lambda: "no connection to the broker")
    return subscriber, got


def stream_ivorns(client: SuperPeerClient, count: int) -> list[str]:
    """Every item of the stream, from its start, as IVORNs (waits for ``count``; no more)."""
    sid = client.subscribe(EVERY, from_start=True).subscription
    got: list[str] = []

    def more() -> bool:
        got.extend(etree.fromstring(i).text for i in client.read(sid, len(got), wait_ms=200, peek=True).items)
        return len(got) >= count

    until(more, 30, what=lambda: f"{got}")
    extra = client.read(sid, len(got), wait_ms=500, peek=True).items
    client.unsubscribe(sid)
    return got + [etree.fromstring(i).text for i in extra]


def test_voevents_through_streamglobe_from_one_broker_to_another(tmp_path):
    with running_network(tmp_path) as (topology, _), running_comet(tmp_path, "upstream") as upstream, \
            running_comet(tmp_path, "downstream") as downstream:
        bridge = VoEventBridge(SuperPeerClient(topology.address("SP4")), "voevents", upstream.broadcast,
                               tmp_path / "bridge")
        bridge.start()
        until(bridge.connected.is_set, 10)
        reader = SuperPeerClient(topology.address("SP1"))
        sid = reader.subscribe(SOUTH).subscription
        listener, received = collecting(downstream.broadcast)
        sink = VtpSink(downstream.receive, sid, tmp_path / "sink.json", ivorn_base=RESULTS)
        stop = threading.Event()
        done: list = []
        runner = threading.Thread(target=lambda: done.append(
            deliver_results(reader, sid, sink, stop=stop.is_set)))
        runner.start()
        try:
            for name in ORDER:  # an author hands each real packet to the first broker
                send_event(upstream.receive, PACKETS[name])
            until(lambda: len(received) >= 2, 60, what=lambda: f"{bridge.progress()}, {len(received)}")
        finally:
            stop.set()
            runner.join(30)
            bridge.stop()
            bridge.join(10)
            listener.stop()
            listener.join(10)
        progress = bridge.progress()
        assert (progress.received, progress.published, progress.rejected, progress.duplicates) == (4, 4, 0, 0)
        assert done and done[0].committed == 2
        # what the second broker's subscriber got: valid VOEvents (Comet checked the schema),
        # one per result, in order, carrying the results the reference evaluator gives
        expected = reference_results(SOUTH, [voevent_item(PACKETS[n]) for n in ORDER], root="voevents")
        assert len(received) == len(expected) == 2
        for offset, (packet, result) in enumerate(zip(received, expected, strict=True)):
            root = parse_voevent(packet)
            assert root.get("ivorn") == f"{RESULTS}#{sid}-{offset}"
            assert root.get("role") == "observation"
            params = {p.get("name"): p.get("value") for p in root.iter("Param")}
            assert params == {e.tag: e.text for e in etree.fromstring(result)}
        assert [p["ivorn"] for p in ({e.tag: e.text for e in etree.fromstring(r)} for r in expected)] \
            == [ivorn("SWIFT_bat_position_v2.0_example.xml"),
                ivorn("MOA_Lensing_Event_2015-07-10T14:50:54.00.xml")]
        assert "Rate_Signif" in {p.get("name") for p in parse_voevent(received[0]).iter("Param")}

        # the sink restarted after a crash between sending and committing: each batch again, with
        # its Date, is "previously seen" by the broker — delivered, nothing twice. (The results may
        # have left as one batch or as two, each with its own Date: replay them as they left.)
        dates = [parse_voevent(packet).findtext("Who/Date") for packet in received]
        batches = [(0, 2)] if dates[0] == dates[1] else [(0, 1), (1, 1)]
        for first, count in batches:
            StateFile(tmp_path / "sink.json").save(
                {"committed": first, "pending": [first, count], "date": dates[first]})
            again = VtpSink(downstream.receive, sid, tmp_path / "sink.json", ivorn_base=RESULTS)
            assert again.pending() == (first, count)
            again.write(first, expected[first:first + count], "south")
            assert again.flush() == first + count and again.seen == count
        assert "Previously seen" in downstream.log_text()
        # a broker that refuses an event for another reason stops the sink with the reason
        bad = VtpSink(downstream.receive, "no spaces", tmp_path / "bad.json", ivorn_base=RESULTS)
        bad.write(0, expected[:1], "south")
        with pytest.raises(SinkError, match="Invalid IVOID"):
            bad.flush()


def test_a_bridge_started_again_publishes_no_event_twice(tmp_path):
    swift, gaia, asassn, moa = ORDER
    state = tmp_path / "bridge"
    with running_network(tmp_path) as (topology, _), running_comet(tmp_path, "upstream") as upstream:
        client = SuperPeerClient(topology.address("SP4"))
        with VoEventBridge(client, "voevents", upstream.broadcast, state) as first:
            until(first.connected.is_set, 10)
            send_event(upstream.receive, PACKETS[swift])
            send_event(upstream.receive, PACKETS[gaia])
            until(lambda: first.progress().published == 2, 30, what=lambda: str(first.progress()))
        with VoEventBridge(client, "voevents", upstream.broadcast, state) as second:
            assert second.progress().next_position == 2
            until(second.connected.is_set, 10)
            # the same event again, in other bytes (as from another broker): skipped by its IVORN
            send_event(upstream.receive, PACKETS[swift] + b"\n<!-- relayed again -->\n")
            send_event(upstream.receive, PACKETS[asassn])
            until(lambda: second.progress().duplicates + second.progress().published == 2, 30,
                  what=lambda: str(second.progress()))
            assert (second.progress().duplicates, second.progress().published) == (1, 1)
        # stopped while writing the journal, before publishing: what the bridge left on disk is
        # the pending batch and a torn journal line (the pending batch alone is enough)
        moa_ivorn, moa_item = ivorn_and_item(PACKETS[moa])
        StateFile(state / PENDING).save({"position": 3, "events": [[moa_ivorn, moa_item]]})
        with open(state / "journal", "a") as f:
            f.write(f"3 {moa_ivorn[:12]}")
        with VoEventBridge(client, "voevents", upstream.broadcast, state) as third:
            assert third.progress().recovered == 1 and third.progress().next_position == 4
            until(third.connected.is_set, 10)
            send_event(upstream.receive, PACKETS[moa])  # it arrives after all: already published
            until(lambda: third.progress().duplicates == 1, 30, what=lambda: str(third.progress()))
            assert third.progress().published == 1  # (the recovered one)
        assert stream_ivorns(SuperPeerClient(topology.address("SP1")), 4) == \
            [ivorn(swift), ivorn(gaia), ivorn(asassn), ivorn(moa)]


def test_what_is_not_a_voevent_is_refused_with_its_reason_and_the_bridge_goes_on(tmp_path):
    """Comet broadcasts only what passed its schema; a scripted broker sends the rest."""
    broker = ScriptedBroker()
    try:
        with running_network(tmp_path) as (topology, _):
            client = SuperPeerClient(topology.address("SP4"))
            with VoEventBridge(client, "voevents", broker.address, tmp_path / "bridge") as bridge:
                conn = broker.accept()
                answers = []
                for packet in (b"<photon><en>1.5</en></photon>", PACKETS[ORDER[0]],
                               (b'<voe:VOEvent xmlns:voe="http://www.ivoa.net/xml/VOEvent/v2.0" '
                               b'role="observation" ivorn="ivo://x.y/z#1"><What><Param'), PACKETS[ORDER[1]]):
                    broker.send(conn, packet)
                    answers.append(broker.receive(conn))
                broker.send(conn, transport("iamalive", "ivo://scripted/broker"))
                alive = broker.receive(conn)
                conn.close()
                progress = bridge.progress()
            roles = [(a.tag, a.get("role"), a.findtext("Meta/Result") or "") for a in answers]
            assert [r[:2] for r in roles] == [(f"{{{TRANSPORT_NS}}}Transport", role)
                                              for role in ("nak", "ack", "nak", "ack")]
            assert "not a VOEvent: the root element is <photon>" in roles[0][2]
            assert "not well-formed XML" in roles[2][2]
            assert alive.get("role") == "iamalive"
            assert (progress.received, progress.published, progress.rejected) == (4, 2, 2)
            assert stream_ivorns(SuperPeerClient(topology.address("SP1")), 2) == \
                [ivorn(ORDER[0]), ivorn(ORDER[1])]
            # and what was published is the packet, byte for byte
            sid = client.subscribe(
                '<x>{ for $v in stream("voevents")/voevents/voevent return $v }</x>', from_start=True
            ).subscription
            items = until(lambda: client.read(sid, 0, wait_ms=200, peek=True).items, 30)
            assert packet_of(items[0]) == PACKETS[ORDER[0]]
    finally:
        broker.close()
