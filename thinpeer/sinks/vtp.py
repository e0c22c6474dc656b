"""``subscribe --to-vtp HOST:PORT``: each result as a VOEvent, handed to a broker's receiving port.

Result ``offset`` of subscription ``SID`` becomes the VOEvent ``IVORN_BASE#SID-OFFSET``
(``thinpeer.voevent.shape.result_voevent``: one Param per leaf element), sent over VTP
(``thinpeer.voevent.transport.send_event``: one connection per event, answered with ack or nak).

Exactly once, as far as the broker can tell. A batch is recorded as *pending* (first offset,
count, and the ``Date`` its packets carry) before its first event is sent and committed once
every one was acknowledged. A sink started again sends a pending batch again with the same
``Date``, so each packet is byte for byte the one sent before, and a broker that took it
answers ``nak`` "previously seen" (Comet keys its event database by the packet's digest): that
counts as delivered. Any other ``nak`` is the broker refusing the event, and the sink stops with
its reason; a connection that fails or goes unanswered is tried again with back-off for as long
as it takes (Ctrl-C stops).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from thinpeer.sinks.base import Held, SinkError, StateFile
from thinpeer.voevent.shape import result_voevent, utc_now
from thinpeer.voevent.transport import (
    COMET_MAX_BYTES,
    DEFAULT_RECEIVE_PORT,
    VOEVENT_ROLES,
    VtpError,
    VtpNak,
    parse_address,
    send_event,
)

BATCH = 100  # events per pending record: at most this many are sent again after a crash
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 30.0
IVORN_BASE = re.compile(r"ivo://[a-zA-Z0-9][\w\-.~*'()]{2,}(/[\w\-.~*'()/]*)?")  # IVOA Identifiers 2.0
SEEN = "previously seen"  # what Comet's nak says of an event it has taken before


class VtpSink:
    def __init__(self, address: str, subscription: str, state_path: Path,
                 ivorn_base: str = "ivo://streamglobe/results", role: str = "observation",
                 timeout_s: float = 30.0, say: Callable[[str], None] = lambda message: None,
                 max_packet_bytes: int = COMET_MAX_BYTES) -> None:
        """``max_packet_bytes``: a result whose packet is longer stops the sink with the reason
        (the default is Comet's limit, beyond which it drops the connection unanswered)."""
        try:
            parse_address(address, DEFAULT_RECEIVE_PORT)
        except ValueError as exc:
            raise SinkError(f"--to-vtp: {exc}") from None
        if not IVORN_BASE.fullmatch(ivorn_base) or "//" in ivorn_base[6:] or ivorn_base.endswith("/"):
            raise SinkError(f"{ivorn_base!r} is not an IVORN without a fragment (ivo://authority/"
                            "resource): each result's IVORN is it followed by #SID-OFFSET")
        if role not in VOEVENT_ROLES:
            raise SinkError(f"role {role!r} is not one of {', '.join(sorted(VOEVENT_ROLES))}")
        self.address = address
        self.subscription = subscription
        self.ivorn_base = ivorn_base
        self.role = role
        self.timeout_s = timeout_s
        self.say = say
        self.max_packet_bytes = max_packet_bytes
        self.description = f"VOEvent broker {address}"
        self.state = StateFile(state_path)
        record = self.state.load()
        self._committed: int | None = record.get("committed")
        pending = record.get("pending")
        self._pending: tuple[int, int] | None = (int(pending[0]), int(pending[1])) if pending else None
        self._date: str | None = record.get("date")
        self._held = Held()
        self.sent = 0  # events acknowledged in this run
        self.seen = 0  # of them, answered "previously seen" (sent before a crash)

    def ivorn(self, offset: int) -> str:
        return f"{self.ivorn_base}#{self.subscription}-{offset}"

    def committed(self) -> int | None:
        return self._committed

    def pending(self) -> tuple[int, int] | None:
        return self._pending

    def write(self, offset: int, items: list[str], root: str) -> None:
        if not self._held.continues(offset):
            self.flush()
        self._held.add(offset, items, root)

    def due(self) -> bool:
        return bool(self._held.items)  # an alert waits for nothing

    def flush(self) -> int | None:
        while self._held.items:
            first = self._held.first
            whole = self._pending == (first, len(self._held.items))  # the batch begun before a stop
            part = self._held.items[:] if whole else self._held.items[:BATCH]
            # it goes again with its Date: the same bytes, which the broker recognises
            date = self._date if self._date and self._pending == (first, len(part)) else utc_now()
            self._pending, self._date = (first, len(part)), date
            self.state.save({"committed": self._committed, "pending": list(self._pending), "date": date})
            for k, item in enumerate(part):
                self._deliver(first + k, item, date)
            self._committed, self._pending, self._date = self._held.delivered(len(part)), None, None
            self.state.save({"committed": self._committed, "pending": None})
        return self._committed

    def _deliver(self, offset: int, item: str, date: str) -> None:
        ivorn = self.ivorn(offset)
        try:
            packet = result_voevent(item, ivorn, self.ivorn_base, self.role, date,
                                    f"result {offset} of StreamGlobe subscription {self.subscription}")
        except ValueError as exc:
            raise SinkError(f"result {offset} cannot be made a VOEvent: {exc}") from None
        if len(packet) > self.max_packet_bytes:
            raise SinkError(f"result {offset} makes a VOEvent of {len(packet):,} bytes, more than the "
                            f"{self.max_packet_bytes:,} a broker takes")
        delay = FIRST_BACKOFF_S
        while True:
            try:
                send_event(self.address, packet, self.timeout_s)
                self.sent += 1
                return
            except VtpNak as exc:
                if SEEN in exc.reason.lower():
                    self.seen += 1
                    self.sent += 1
                    return
                raise SinkError(f"{self.description} refused result {offset} ({ivorn}): "
                                f"{exc.reason or 'no reason given'}") from None
            except VtpError as exc:
                self.say(f"{exc}; sending result {offset} again in {delay:.1f} s")
            time.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def close(self) -> None:
        pass
