"""VOEvent Transport Protocol (IVOA VTP 2.0) messages, and handing one event to a broker.

Every message is a 4-byte big-endian length and that many bytes of XML: a VOEvent, or a
``Transport`` message (``iamalive``, ``ack``, ``nak``, ``authenticate``). A *broker* (Comet, GCN's,
4 Pi Sky's) takes events from authors on its receiving port — one connection per event, answered
with ``ack`` or ``nak`` and closed (``send_event``) — and pushes every event to the subscribers
connected to its broadcasting port (``vtp.VtpSubscriber``). What Comet sends and expects
(``comet/protocol``) is what this module is checked against: Comet reads only the ``role``
attribute and ``Origin``. Every message is parsed with the safe settings of
``wxquery.xml_safety`` (no entities, no DTD, no network).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from lxml import etree

from wxquery.xml_safety import SAFE_PARSER

TRANSPORT_NS = "http://telescope-networks.org/schema/Transport/v1.1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
VOEVENT_ROLES = frozenset({"observation", "prediction", "utility", "test"})
DEFAULT_LOCAL_IVO = "ivo://streamglobe/thinpeer"
DEFAULT_RECEIVE_PORT = 8098  # the ports brokers conventionally serve
DEFAULT_BROADCAST_PORT = 8099
MAX_MESSAGE_BYTES = 16 << 20  # what a subscriber accepts; a longer message is read, dropped and naked
COMET_MAX_BYTES = 99_999  # Comet (Twisted's Int32StringReceiver) drops a connection sending more
POLL_S = 0.25  # how often blocking reads look whether the subscriber was asked to stop


class VtpError(Exception):
    """The broker could not be reached, went away, or answered something VTP does not allow."""


class VtpNak(VtpError):
    """The broker refused the event; ``reason`` is its ``Meta/Result`` ("" when none was given)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the broker refused the event: {reason or 'no reason given'}")
        self.reason = reason


class Stopped(Exception):
    """Raised by a handler that gives up because the subscriber is stopping: the event is
    answered with neither ack nor nak (the broker will not send it again; VTP has no replay)."""


class Rejected(Exception):
    """Raised by a subscriber's handler: the event is answered with a ``nak`` giving this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_address(address: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT`` (or ``HOST``, or ``[v6]:PORT``) as a (host, port) pair; ValueError otherwise."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.removeprefix(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    if not host:
        raise ValueError(f"{address!r} is not HOST:PORT")
    try:
        number = int(port) if port else default_port
    except ValueError:
        raise ValueError(f"{address!r} is not HOST:PORT (the port is not a number)") from None
    if not 0 < number < 65536:
        raise ValueError(f"{address!r}: port {number} is out of range")
    return host, number


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def transport(role: str, local_ivo: str, origin: str | None = None, reason: str | None = None) -> bytes:
    """A Transport message. ``origin``: what is answered (the event's IVORN for ack/nak, the
    broker's for iamalive; None: ``local_ivo`` itself, as an unprompted message says);
    ``reason``: a nak's ``Meta/Result``. Elements in the schema's order: Origin, Response,
    TimeStamp, Meta."""
    root = etree.Element(f"{{{TRANSPORT_NS}}}Transport", nsmap={"trn": TRANSPORT_NS, "xsi": XSI_NS})
    root.set("role", role)
    root.set("version", "1.0")
    root.set(f"{{{XSI_NS}}}schemaLocation",
             f"{TRANSPORT_NS} http://telescope-networks.org/schema/Transport-v1.1.xsd")
    etree.SubElement(root, "Origin").text = local_ivo if origin is None else origin
    if origin is not None:
        etree.SubElement(root, "Response").text = local_ivo
    etree.SubElement(root, "TimeStamp").text = timestamp()
    if reason:
        etree.SubElement(etree.SubElement(root, "Meta"), "Result").text = xml_text(reason)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


@dataclass(frozen=True)
class Message:
    """One message read: ``kind`` "transport" or "voevent"; its ``role``; for a VOEvent its
    ``ivorn``; for a Transport message its ``Origin`` and ``Meta/Result``."""

    kind: str
    role: str
    ivorn: str = ""
    origin: str = ""
    result: str = ""


def read_message(data: bytes) -> Message:
    """What a message is; ``Rejected`` with the reason when it is neither Transport nor VOEvent."""
    try:
        root = etree.fromstring(data, parser=SAFE_PARSER)
    except etree.XMLSyntaxError as exc:
        raise Rejected(f"not well-formed XML: {exc}") from None
    name = etree.QName(root).localname if isinstance(root.tag, str) else ""
    role = root.get("role", "")
    if name == "Transport":
        return Message("transport", role, origin=(root.findtext("Origin") or "").strip(),
                       result=(root.findtext("Meta/Result") or "").strip())
    if name != "VOEvent":
        raise Rejected(f"not a VOEvent: the root element is <{name or root.tag}>")
    ivorn = root.get("ivorn", "")
    if not ivorn:
        raise Rejected("not a VOEvent: it has no ivorn")
    role = role or "observation"  # the schema's default
    if role not in VOEVENT_ROLES:
        raise Rejected(f"not a VOEvent: role {role!r} is not one of {', '.join(sorted(VOEVENT_ROLES))}")
    return Message("voevent", role, ivorn=ivorn)


class Frames:
    """Reads length-prefixed messages from a socket that times out every ``POLL_S``, so that a
    reader can stop between (and inside) messages; ``None`` on a timeout with nothing complete."""

    def __init__(self, sock: socket.socket, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.sock = sock
        self.limit = limit
        self.buffer = bytearray()
        self.discard = 0  # bytes of a too-long message still to be skipped

    def next(self) -> bytes | int | None:
        """A message; or the length of a message too long to keep (its bytes are skipped);
        None when nothing complete arrived in time. ConnectionError when the peer closed."""
        while True:
            if self.discard:
                dropped = min(self.discard, len(self.buffer))
                del self.buffer[:dropped]
                self.discard -= dropped
            if not self.discard and len(self.buffer) >= 4:
                (length,) = struct.unpack(">I", self.buffer[:4])
                if length > self.limit:
                    del self.buffer[:4]
                    self.discard = length
                    return length
                if len(self.buffer) >= 4 + length:
                    data = bytes(self.buffer[4:4 + length])
                    del self.buffer[:4 + length]
                    return data
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                return None
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buffer += chunk


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a reason quoting a bad packet)."""
    return "".join(c if c in "\t\n\r" or (" " <= c <= "\ud7ff") or ("\ue000" <= c <= "\ufffd")
                   or c >= "\U00010000" else "?" for c in text)


def send_event(address: str, packet: bytes, timeout_s: float = 30.0) -> None:
    """Hand one VOEvent to a broker's receiving port and wait for its answer: returns on ``ack``,
    raises ``VtpNak`` with the broker's reason on ``nak`` and ``VtpError`` when the broker cannot
    be reached, closes the connection without an answer or does not answer in ``timeout_s``
    (the caller may try again: a broker drops an event it has seen before with a nak)."""
    host, port = parse_address(address, DEFAULT_RECEIVE_PORT)
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(frame(packet))
            frames = Frames(sock)
            while True:
                sock.settimeout(max(0.01, min(POLL_S, deadline - time.monotonic())))
                got = frames.next()
                if isinstance(got, bytes):
                    break
                if got is not None:
                    raise VtpError(f"broker {address} answered with a message of {got:,} bytes")
                if time.monotonic() >= deadline:
                    raise VtpError(f"broker {address} did not answer within {timeout_s:g} s")
    except (OSError, ConnectionError) as exc:
        raise VtpError(f"broker {address}: {type(exc).__name__}: {exc}") from None
    try:
        answer = read_message(got)
    except Rejected as exc:
        raise VtpError(f"broker {address} answered with something that is not VTP ({exc})") from None
    if answer.kind == "transport" and answer.role == "ack":
        return
    if answer.kind == "transport" and answer.role == "nak":
        raise VtpNak(answer.result)
    raise VtpError(f"broker {address} answered with a {answer.kind} of role {answer.role!r}, "
                   "not ack or nak")
