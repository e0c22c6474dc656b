"""The VOEvent Transport Protocol (IVOA VTP 2.0) over plain sockets: a broker's subscriber.

A broker pushes every event to the subscribers connected to its broadcasting port, which answer
each with ``ack`` (or ``nak``), and each ``iamalive`` with one of their own; Comet drops a
subscriber that leaves one ``iamalive`` unanswered until the next (60 s) or sends a ``nak``. The
messages themselves, and handing an event to a broker, are ``transport``'s.

Plain sockets and threads, so that a thin peer needs no event loop (Twisted stays a test-only
dependency, through Comet). Every message is parsed with the safe settings of
``wxquery.xml_safety`` (no entities, no DTD, no network), and nothing a broker sends can end the
subscriber: a message that is not XML or not a VOEvent is refused with a ``nak`` and the reason.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable

from .transport import (
    DEFAULT_BROADCAST_PORT,
    DEFAULT_LOCAL_IVO,
    MAX_MESSAGE_BYTES,
    POLL_S,
    Frames,
    Rejected,
    Stopped,
    frame,
    parse_address,
    read_message,
    transport,
)

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
        frames = Frames(sock)
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
