"""VTP as it goes over the wire: the subscriber against a scripted broker that checks every
answer (iamalive, authenticate, ack after the handler, nak with the reason, reconnection, stop),
and the sender against a real Comet broker (ack, nak with Comet's reason, no broker, silence)."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from comet_broker import ScriptedBroker, fixture_packets, running_comet
from lxml import etree
from network_harness import until

from thinpeer.voevent.shape import result_voevent
from thinpeer.voevent.transport import (
    TRANSPORT_NS,
    Rejected,
    VtpError,
    VtpNak,
    parse_address,
    read_message,
    send_event,
    transport,
)
from thinpeer.voevent.vtp import VtpSubscriber

PACKETS = fixture_packets()
SWIFT = PACKETS["SWIFT_bat_position_v2.0_example.xml"]
GAIA = PACKETS["Gaia16aac.xml"]
BROKER_IVO = "ivo://scripted/broker"


def transport_of(element: etree._Element) -> tuple[str, str, str, str]:
    assert element.tag == f"{{{TRANSPORT_NS}}}Transport" and element.get("version") == "1.0"
    assert element.findtext("TimeStamp")
    return (element.get("role"), element.findtext("Origin") or "", element.findtext("Response") or "",
            element.findtext("Meta/Result") or "")


@pytest.fixture
def broker():
    scripted = ScriptedBroker()
    yield scripted
    scripted.close()


def test_the_subscriber_answers_as_vtp_requires(broker):
    handled: list[bytes] = []
    release = threading.Event()

    def handler(packet: bytes) -> None:
        if b"Gaia16aac" in packet:
            raise Rejected("not wanted here")
        release.wait(10)  # a slow handler: iamalive is answered meanwhile, the ack waits
        handled.append(packet)

    subscriber = VtpSubscriber(broker.address, handler, local_ivo="ivo://test/sub")
    subscriber.start()
    conn = broker.accept()
    try:
        broker.send(conn, transport("authenticate", BROKER_IVO))
        assert transport_of(broker.receive(conn)) == ("authenticate", BROKER_IVO, "ivo://test/sub", "")
        broker.send(conn, SWIFT)
        broker.send(conn, transport("iamalive", BROKER_IVO))
        assert transport_of(broker.receive(conn)) == ("iamalive", BROKER_IVO, "ivo://test/sub", "")
        assert handled == []  # no ack before the handler returned
        release.set()
        assert transport_of(broker.receive(conn)) == \
            ("ack", "ivo://nasa.gsfc.gcn/SWIFT#BAT_GRB_Pos_532871-729", "ivo://test/sub", "")
        assert handled == [SWIFT]
        broker.send(conn, GAIA)  # the handler refuses it: nak with its reason
        assert transport_of(broker.receive(conn)) == \
            ("nak", "ivo://gaia.cam.uk/alerts#Gaia16aac", "ivo://test/sub", "not wanted here")
        for junk, why in [(b"<photon><en>1</en></photon>", "the root element is <photon>"),
                          (b"\x00\xffnot xml", "not well-formed XML"),
                          (b'<VOEvent role="observation"/>', "it has no ivorn")]:
            broker.send(conn, junk)
            role, _, _, reason = transport_of(broker.receive(conn))
            assert role == "nak" and why in reason, reason
        conn.sendall(struct.pack(">I", 17 << 20) + b"x" * 1000)  # too long: refused, then skipped
        assert "more than" in transport_of(broker.receive(conn))[3]
        conn.sendall(b"y" * ((17 << 20) - 1000))
        broker.send(conn, SWIFT)
        assert transport_of(broker.receive(conn))[0] == "ack"
        assert subscriber.naks == 5 and len(handled) == 2
    finally:
        conn.close()
        subscriber.stop()
        subscriber.join(10)


def test_the_subscriber_connects_again_after_the_broker_drops_it_and_stops_cleanly(broker):
    handled: list[bytes] = []
    subscriber = VtpSubscriber(broker.address, handled.append, first_backoff_s=0.05)
    subscriber.start()
    first = broker.accept()
    broker.send(first, SWIFT)
    assert transport_of(broker.receive(first))[0] == "ack"
    first.close()  # the broker goes away (a restart)
    second = broker.accept()  # … and the subscriber is back
    broker.send(second, GAIA)
    assert transport_of(broker.receive(second))[0] == "ack"
    assert handled == [SWIFT, GAIA] and subscriber.connections == 2
    began = time.monotonic()
    subscriber.stop()
    subscriber.join(10)
    assert time.monotonic() - began < 5
    assert second.recv(10) == b""  # it closed its end


def test_a_subscriber_whose_broker_goes_quiet_connects_again(broker):
    subscriber = VtpSubscriber(broker.address, lambda packet: None, alive_timeout_s=0.5,
                               first_backoff_s=0.05)
    subscriber.start()
    first = broker.accept()
    second = broker.accept()  # nothing heard for 0.5 s: it assumed the broker forgot it
    until(lambda: subscriber.connections == 2, 10)
    subscriber.stop()
    subscriber.join(10)
    first.close()
    second.close()


def test_a_handler_failure_stops_the_subscriber_and_is_raised(broker):
    def handler(packet: bytes) -> None:
        raise RuntimeError("the disk is full")

    subscriber = VtpSubscriber(broker.address, handler)
    subscriber.start()
    conn = broker.accept()
    broker.send(conn, SWIFT)
    with pytest.raises(RuntimeError, match="the disk is full"):
        subscriber.join(10)
    conn.close()


def test_transport_messages_and_addresses():
    ack = read_message(transport("ack", "ivo://me/x", "ivo://a.b/c#1"))
    assert (ack.kind, ack.role, ack.origin) == ("transport", "ack", "ivo://a.b/c#1")
    nak = read_message(transport("nak", "ivo://me/x", "ivo://a.b/c#1", "bad \x01 reason"))
    assert nak.result == "bad ? reason"
    assert read_message(b'<VOEvent ivorn="ivo://a.b/c#1"/>').role == "observation"  # the default
    assert parse_address("broker.example:8099", 1) == ("broker.example", 8099)
    assert parse_address("broker.example", 8099) == ("broker.example", 8099)
    assert parse_address("[::1]:5", 1) == ("::1", 5)
    for bad in ("", ":5", "host:port", "host:70000"):
        with pytest.raises(ValueError):
            parse_address(bad, 1)


@pytest.mark.slow
def test_the_sender_against_comet(tmp_path):
    with running_comet(tmp_path) as comet:
        send_event(comet.receive, SWIFT)  # ack
        with pytest.raises(VtpNak, match="Previously seen") as seen:
            send_event(comet.receive, SWIFT)
        assert "previously seen" in seen.value.reason.lower()
        packet = result_voevent("<hit><a>1</a></hit>", "ivo://streamglobe.test/r#s-0",
                                "ivo://streamglobe.test/r")
        send_event(comet.receive, packet)
        bad = packet.replace(b"ivo://streamglobe.test/r#s-0", b"ivo://streamglobe.test/r#s-1") \
            .replace(b"<What>", b"<What><Bogus/>")
        with pytest.raises(VtpNak, match="Bogus"):
            send_event(comet.receive, bad)
        no_fragment = packet.replace(b"ivo://streamglobe.test/r#s-0", b"ivo://streamglobe.test/r")
        with pytest.raises(VtpNak, match="local ID"):
            send_event(comet.receive, no_fragment)


def test_the_sender_without_a_broker_or_an_answer():
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    with pytest.raises(VtpError, match="Connection"):
        send_event(f"127.0.0.1:{port}", SWIFT, timeout_s=2)
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        began = time.monotonic()
        with pytest.raises(VtpError, match="did not answer within 0.5 s"):
            send_event(f"127.0.0.1:{silent.getsockname()[1]}", SWIFT, timeout_s=0.5)
        assert time.monotonic() - began < 3
    finally:
        silent.close()
