"""The VOEvent Transport Protocol (IVOA VTP 2.0) over plain sockets: a subscriber and a sender.

Every message is a 4-byte big-endian length and that many bytes of XML: a VOEvent, or a
``Transport`` message (``iamalive``, ``ack``, ``nak``, ``authenticate``). A *broker* (Comet, GCN's,
4 Pi Sky's) takes events from authors on its receiving port — one connection per event, answered
with ``ack`` or ``nak`` and closed — and pushes every event to the subscribers connected to its
broadcasting port, which answer each with ``ack`` (or ``nak``), and each ``iamalive`` with one of
their own. What Comet sends and expects (``comet/protocol``) is what this module is checked against:
Comet reads only the ``role`` attribute and ``Origin``, and drops a subscriber that leaves one
``iamalive`` unanswered until the next (60 s) or sends a ``nak``.

Plain sockets and threads, so that a thin peer needs no event loop (Twisted stays a test-only
dependency, through Comet). Every message is parsed with the safe settings of
``wxquery.xml_safety`` (no entities, no DTD, no network), and nothing a broker sends can end the
subscriber: a message that is not XML or not a VOEvent is refused with a ``nak`` and the reason.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from collections.abc import Callable
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


class _Frames:
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
            frames = _Frames(sock)
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


Handler = Callable[[bytes], None]
# several events at once (those already waiting): per event, None (ack) or a nak's reason
BatchHandler = Callable[[list[bytes]], list[str | None]]
MAX_BATCH = 256  # events a batch handler is given at most


class VtpSubscriber:
    """Subscribes to a broker's broadcasting port and hands every VOEvent to ``handler``, in the
    order they came, acknowledging each once the handler has returned (``nak`` with the reason
    when it raises ``Rejected``). Connects again with exponential back-off whenever the
    connection fails or goes quiet for ``alive_timeout_s``; events a broker sends while nobody is
    connected are not sent again (VTP has no replay).

    The handler runs in a thread of its own, so a slow handler (a super-peer that is restarting)
    does not leave the broker's ``iamalive`` unanswered. Any other exception from the handler
    stops the subscriber, and ``run`` raises it. ``stop()`` ends it cleanly: events already
    received are handled first.

    ``batch_handler`` instead of ``handler``: it is given every event waiting when it is free
    (up to ``MAX_BATCH``; one when they come one at a time) and answers each, so that a burst
    costs one round of its work (one write, one publish), not one per event.
    """

    def __init__(self, address: str, handler: Handler | None = None, local_ivo: str = DEFAULT_LOCAL_IVO,
                 say: Callable[[str], None] = lambda message: None, first_backoff_s: float = 0.2,
                 max_backoff_s: float = 30.0, alive_timeout_s: float = 150.0,
                 connect_timeout_s: float = 10.0, batch_handler: BatchHandler | None = None) -> None:
        if (handler is None) == (batch_handler is None):
            raise ValueError("give a handler or a batch_handler")
        self.host, self.port = parse_address(address, DEFAULT_BROADCAST_PORT)
        self.address = address
        self.handler = handler
        self.batch_handler = batch_handler
        self.local_ivo = local_ivo
        self.say = say
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.alive_timeout_s = alive_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.connected = threading.Event()  # set while a connection is up
        self.connections = 0  # connections made so far
        self.naks = 0  # packets answered with nak
        self.refused = 0  # of them, refused before the handler: not VOEvents, or too long
        self.error: BaseException | None = None
        self._stopping = threading.Event()
        self._events: queue.Queue[tuple[bytes, str, _Link] | None] = queue.Queue(maxsize=10_000)
        self._link: _Link | None = None
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self) -> threading.Thread:
        """Run in a background thread; ``stop`` and ``join`` end it."""
        self._thread = threading.Thread(target=self._run_quietly, name=f"vtp {self.address}", daemon=True)
        self._thread.start()
        return self._thread

    def _run_quietly(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - kept in self.error for whoever joins
            self.error = self.error or exc

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stopping.set()
        link = self._link
        if link is not None:
            link.close()

    def run(self) -> None:
        """Subscribe until ``stop``; raises what stopped the handler, if anything did."""
        worker = threading.Thread(target=self._work, name=f"vtp handler {self.address}", daemon=True)
        worker.start()
        delay = self.first_backoff_s
        try:
            while not self._stopping.is_set() and self.error is None:
                try:
                    self._session()
                except (OSError, ConnectionError) as exc:
                    if self._stopping.is_set() or self.error is not None:
                        break
                    if self.connected.is_set():
                        delay = self.first_backoff_s  # it had worked: start the back-off again
                    self.say(f"broker {self.address}: {exc}; connecting again in {delay:.1f} s")
                finally:
                    self.connected.clear()
                    self._link = None
                if self._stopping.wait(delay):
                    break
                delay = min(delay * 2, self.max_backoff_s)
        finally:
            while worker.is_alive():  # (a worker that stopped on an error takes nothing more)
                try:
                    self._events.put(None, timeout=POLL_S)
                    break
                except queue.Full:
                    continue
            worker.join()
        if self.error is not None:
            raise self.error

    def _session(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        link = _Link(sock)
        self._link = link
        if self._stopping.is_set():
            link.close()
            return
        sock.settimeout(POLL_S)
        self.connections += 1
        self.connected.set()
        self.say(f"subscribed to broker {self.address}")
        frames = _Frames(sock)
        heard = time.monotonic()
        try:
            while not self._stopping.is_set() and self.error is None:
                got = frames.next()
                if got is None:
                    if time.monotonic() - heard > self.alive_timeout_s:
                        raise ConnectionError(f"nothing heard for {self.alive_timeout_s:g} s")
                    continue
                heard = time.monotonic()
                if isinstance(got, int):
                    self.refused += 1
                    self._nak(link, "", f"a message of {got:,} bytes, more than the "
                                        f"{MAX_MESSAGE_BYTES:,} this subscriber accepts")
                    continue
                self._received(link, got)
        finally:
            link.close()

    def _received(self, link: _Link, data: bytes) -> None:
        try:
            message = read_message(data)
        except Rejected as exc:
            self.refused += 1
            self._nak(link, "", exc.reason)
            return
        if message.kind == "voevent":
            while not self._stopping.is_set():
                try:
                    self._events.put((data, message.ivorn, link), timeout=POLL_S)
                    return
                except queue.Full:
                    continue
        elif message.role == "iamalive":
            link.send(transport("iamalive", self.local_ivo, message.origin))
        elif message.role == "authenticate":  # we install no filters: every event, as Comet's does
            link.send(transport("authenticate", self.local_ivo, message.origin))
        # acks and naks are not sent to subscribers; anything else is ignored, as Comet does

    def _nak(self, link: _Link, origin: str, reason: str) -> None:
        self.naks += 1
        self.say(f"refused a packet from broker {self.address}: {reason}")
        link.send(transport("nak", self.local_ivo, origin, reason))

    def _work(self) -> None:
        while True:
            entry = self._events.get()
            if entry is None:
                return
            entries = [entry]
            while self.batch_handler is not None and len(entries) < MAX_BATCH:
                try:
                    more = self._events.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._events.put(None)  # (seen again once these are handled)
                    break
                entries.append(more)
            try:
                answers = self._handle([data for data, _, _ in entries])
            except Stopped:
                continue
            except BaseException as exc:  # noqa: BLE001 - stops the subscriber, raised by run()
                self.error = exc
                self.stop()
                return
            for (_, ivorn, link), reason in zip(entries, answers, strict=True):
                if reason is None:
                    link.send(transport("ack", self.local_ivo, ivorn))
                else:
                    self._nak(link, ivorn, reason)

    def _handle(self, packets: list[bytes]) -> list[str | None]:
        if self.batch_handler is not None:
            answers = self.batch_handler(packets)
            if len(answers) != len(packets):
                raise RuntimeError(f"the batch handler answered {len(answers)} of {len(packets)} events")
            return answers
        assert self.handler is not None
        try:
            self.handler(packets[0])
        except Rejected as exc:
            return [exc.reason]
        return [None]


class _Link:
    """A connection that the reader and the handler's thread both write to."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.closed = False

    def send(self, payload: bytes) -> None:
        """Send, or nothing when the connection is gone (an answer to it is moot)."""
        with self.lock:
            if self.closed:
                return
            try:
                self.sock.sendall(frame(payload))
            except OSError:
                self.closed = True

    def close(self) -> None:
        with self.lock:
            self.closed = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
