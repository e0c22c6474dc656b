"""The Spark executor's input buffer: a durable, offset-addressed log served over a socket.

Spark's Python data source runs in separate processes (on a Spark cluster, on other hosts), so
the items a super-peer hands to its executor are appended here (one global offset per item or
end-of-stream marker, across all input streams) and fetched by the source's reader over a TCP
connection that must prove it knows the feed's secret before anything is read from it. The log is written to
segment files before ``append`` returns, so a super-peer killed and restarted with the same
checkpoint directory replays every uncommitted offset; segments are deleted once the driver
commits past them, and the in-memory buffer is trimmed at the same time.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, Listener, answer_challenge, deliver_challenge
from pathlib import Path

import numpy as np

SEGMENT_ITEMS = 100_000
_HEADER = struct.Struct("<iI")  # src (-1: name record, -2: segment header), payload length
_END = 0xFFFFFFFF  # payload length of an end-of-stream marker
HANDSHAKE_TIMEOUT_S = 10.0


@dataclass
class FeedSlice:
    """What a reader gets: item offsets, the items' UTF-8 back to back, their byte lengths, and
    whether the stream's end-of-stream marker closes the range."""

    offsets: np.ndarray
    joined: bytes
    lengths: np.ndarray
    ended: bool


class FeedLog:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.trimmed = threading.Condition(self.lock)  # (``commit``: room for producers held back)
        self.backlog_bytes = 0  # UTF-8 bytes appended and not yet committed
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.totals: dict[int, int] = {}  # items ever appended per source (not markers)
        self.base = 0  # offset of entries[0]
        self.srcs: list[int] = []
        self.texts: list[bytes | None] = []  # UTF-8, as written to the segment and parsed by tasks
        self.committed = 0
        self._end = 0  # base + len(texts), kept as one number: ``end`` is read without the lock
        self._segment = None
        self._segment_first = 0
        self._load()
        self.backlog_bytes = sum(len(t) for t in self.texts if t is not None)  # (all of it is uncommitted)

    # ------------------------------------------------------------------ durability

    def _segments(self) -> list[Path]:
        return sorted(self.directory.glob("*.log"))

    def _load(self) -> None:
        segments = self._segments()
        if not segments:
            return
        self.base = int(segments[0].stem)
        for k, path in enumerate(segments):
            data = path.read_bytes()
            at = 0
            while at + _HEADER.size <= len(data):
                src, length = _HEADER.unpack_from(data, at)
                payload_end = at + _HEADER.size + (0 if length == _END else length)
                if payload_end > len(data):
                    break  # torn write at a kill: the append never returned
                payload = data[at + _HEADER.size: payload_end]
                at = payload_end
                if src == -2:
                    if k == 0:
                        head = json.loads(payload)
                        self.names = head["names"]
                        self.totals = {int(s): n for s, n in head["totals"].items()}
                        self.committed = self.base
                elif src == -1:
                    self._name(payload.decode())
                else:
                    self.srcs.append(src)
                    self.texts.append(None if length == _END else payload)
                    if length != _END:
                        self.totals[src] = self.totals.get(src, 0) + 1
            if at < len(data):
                with open(path, "r+b") as f:
                    f.truncate(at)
        self.ids = {n: i for i, n in enumerate(self.names)}
        self._end = self.base + len(self.texts)
        self._segment_first = int(segments[-1].stem)
        self._segment = open(segments[-1], "ab")

    def _name(self, name: str) -> int:
        if name not in self.ids:
            self.ids[name] = len(self.names)
            self.names.append(name)
        return self.ids[name]

    def _open_segment(self) -> None:
        if self._segment is not None:
            self._segment.close()
        self._segment_first = self.end
        self._segment = open(self.directory / f"{self.end:020d}.log", "ab")
        head = json.dumps({"names": self.names, "totals": self.totals}).encode()
        self._segment.write(_HEADER.pack(-2, len(head)) + head)

    @property
    def end(self) -> int:
        """The offset the next entry gets. Readers without the lock (the executor's loop, an
        install) see it move forward only: ``commit`` trims the lists and raises ``base`` in two
        steps, and their sum would be too small between them."""
        return self._end

    # ------------------------------------------------------------------ producer side

    def append(self, source: str, texts: list[str], end: bool) -> int:
        """Returns the offset of the first of ``texts``."""
        with self.lock:
            first = self.end
            if self._segment is None or self.end - self._segment_first >= SEGMENT_ITEMS:
                self._open_segment()
            out = bytearray()
            if source not in self.ids:
                name = source.encode()
                out += _HEADER.pack(-1, len(name)) + name
            src = self._name(source)
            encoded = [t.encode("utf-8") for t in texts]
            for b in encoded:
                out += _HEADER.pack(src, len(b)) + b
            if end:
                out += _HEADER.pack(src, _END)
            assert self._segment is not None
            self._segment.write(out)
            self._segment.flush()  # in the OS before we return: survives a killed process
            self.srcs.extend([src] * (len(texts) + end))
            self.texts.extend(encoded)
            self.backlog_bytes += sum(map(len, encoded))
            if end:
                self.texts.append(None)
            self._end = self.base + len(self.texts)
            self.totals[src] = self.totals.get(src, 0) + len(texts)
            return first

    def accepted(self, source: str) -> int:
        with self.lock:
            return self.totals.get(self.ids.get(source, -1), 0)

    def backlog(self) -> int:
        return self.end - self.committed

    # ------------------------------------------------------------------ reader side

    def plan(self, start: int, end: int) -> list[tuple[int, int]]:
        """The sources with entries in ``[start, end)`` and how many each has."""
        with self.lock:
            lo, hi = max(start - self.base, 0), max(end - self.base, 0)
            srcs = self.srcs[lo:hi]
            return [(src, srcs.count(src)) for src in sorted(set(srcs))]

    def read(self, src: int, start: int, end: int) -> FeedSlice:
        """The items of one source in ``[start, end)``, joined into one buffer: a task then
        receives one bytes object rather than one per item."""
        with self.lock:
            if start < self.base:
                raise RuntimeError(f"offsets {start}..{self.base} were already committed and trimmed")
            lo, hi = start - self.base, end - self.base
            srcs, texts = self.srcs[lo:hi], self.texts[lo:hi]
        if srcs.count(src) == len(srcs):
            offsets = np.arange(start, start + len(srcs), dtype=np.int64)
        else:
            offsets = np.array([start + i for i, s in enumerate(srcs) if s == src], dtype=np.int64)
            texts = [texts[o - start] for o in offsets.tolist()]
        ended = None in texts  # a stream ends once: nothing of it follows its marker
        if ended:
            cut = texts.index(None)
            offsets, texts = offsets[:cut], texts[:cut]
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        return FeedSlice(offsets, b"".join(texts), lengths, ended)  # type: ignore[arg-type]

    def commit(self, end: int) -> None:
        with self.lock:
            if end <= self.committed:
                return
            self.committed = end
            drop = min(end, self.end) - self.base
            if drop > 0:
                self.backlog_bytes -= sum(len(t) for t in self.texts[:drop] if t is not None)
                del self.srcs[:drop]
                del self.texts[:drop]
                self.base += drop
            segments = self._segments()
            for path, following in zip(segments, segments[1:]):
                if int(following.stem) <= end:
                    path.unlink(missing_ok=True)
            self.trimmed.notify_all()

    def wait_below(self, max_bytes: int, max_items: int, timeout_s: float) -> bool:
        """Whether the backlog is below both bounds, waiting up to ``timeout_s`` for it to be
        (back-pressure: a producer holds its batch until the micro-batches catch up)."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while self.backlog_bytes >= max_bytes or self.end - self.committed >= max_items:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.trimmed.wait(left)
            return True

    def close(self) -> None:
        with self.lock:
            if self._segment is not None:
                self._segment.close()
                self._segment = None


def reachable_host(listen: str) -> str:
    """The address to advertise for a socket bound to ``listen``: for a wildcard, the address
    this host's name resolves to (in a container: its address on the network) unless that is a
    loopback address (Debian maps its host name to 127.0.1.1), else the address of the
    interface that routes outwards."""
    if listen not in ("0.0.0.0", "", "::"):
        return listen
    try:
        named = socket.gethostbyname(socket.gethostname())
    except OSError:
        named = "127.0.0.1"
    if not named.startswith("127."):
        return named
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))  # UDP: no packet is sent, only a route chosen
            return probe.getsockname()[0]
        except OSError:
            return named


def receive_timeout(conn: Connection, seconds: float) -> None:
    """Reads on the connection fail after ``seconds`` without data (0: wait for ever)."""
    whole = int(seconds)
    timeval = struct.pack("ll", whole, int((seconds - whole) * 1e6))
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)


def no_delay(conn: Connection) -> None:
    """Turn off Nagle's algorithm on a connection's socket: a request, answered while its
    header's ACK is delayed, would otherwise wait ~40 ms for it."""
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class FeedRoom:
    """The feed's backlog (not yet through a micro-batch) as a place a batch may have to wait
    for (``backpressure.Room``); ``alive``: whether the executor takes anything at all."""

    name = "the Spark executor"

    def __init__(self, feed: FeedLog, max_bytes: int, max_items: int, alive: Callable[[], bool]) -> None:
        self.feed, self.max_bytes, self.max_items, self.alive = feed, max_bytes, max_items, alive

    def has_room(self, timeout_s: float) -> bool:
        return self.feed.wait_below(self.max_bytes, self.max_items, timeout_s)

    def fullness(self) -> str:
        return (f"{self.feed.backlog_bytes / (1 << 20):.1f} MiB in {self.feed.backlog():,} items not yet "
                f"through a micro-batch (bound {self.max_bytes / (1 << 20):.1f} MiB)")

    @property
    def reachable(self) -> bool:
        return self.alive()


class FeedServer:
    """Answers the scan tasks' reads (other processes, possibly on other hosts).

    ``listen``: the address the socket binds (loopback for a local Spark master; the host's
    address, or ``0.0.0.0``, when Spark's workers are elsewhere). ``advertise``: the address the
    readers are told to connect to (default: ``listen``, or this host's address for a wildcard).

    Every connection first passes a mutual HMAC challenge on a random per-feed secret (the one
    the tasks receive with the job); a peer that does not know it is dropped before
    a single message is unpickled. The challenge runs on the connection's own thread, so a
    client that connects and stays silent holds up no one else.
    """

    def __init__(self, log: FeedLog, listen: str = "127.0.0.1", advertise: str | None = None) -> None:
        self.log = log
        self.listen, self.advertise = listen, advertise
        self.authkey = secrets.token_bytes(32)
        self.listener: Listener | None = None
        self.address: tuple[str, int] | None = None  # where the tasks reach it, once started
        self.rejected = 0  # connections that failed the challenge
        self._stopped = False

    def start(self) -> tuple[str, int]:
        """Listen (on a free port) and accept connections; the address the tasks reach."""
        self.listener = Listener((self.listen, 0))
        self.address = (self.advertise or reachable_host(self.listen), self.listener.address[1])
        threading.Thread(target=self._accept, name="spark-feed", daemon=True).start()
        return self.address

    def _accept(self) -> None:
        assert self.listener is not None
        while not self._stopped:
            try:
                conn = self.listener.accept()
            except Exception:  # noqa: BLE001 — a closed listener, or a client gone at once
                if self._stopped:
                    return
                continue
            threading.Thread(target=self._authenticated, args=(conn,), daemon=True).start()

    def _authenticated(self, conn: Connection) -> None:
        try:
            receive_timeout(conn, HANDSHAKE_TIMEOUT_S)  # a silent client gives up its thread
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            receive_timeout(conn, 0)
        except Exception:  # noqa: BLE001 — wrong secret, garbage, silence, or a client gone
            self.rejected += 1
            conn.close()
            return
        self._serve(conn)

    def _serve(self, conn: Connection) -> None:
        no_delay(conn)
        handlers = {"read": self.log.read, "base": lambda: self.log.base}
        try:
            while True:
                method, *args = conn.recv()
                try:
                    conn.send(("ok", handlers[method](*args)))
                except Exception as exc:  # noqa: BLE001 — reported to the reader, which raises it
                    conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def stop(self) -> None:
        self._stopped = True
        try:
            if self.listener is not None:
                self.listener.close()
        except OSError:
            pass

