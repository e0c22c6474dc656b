"""A real Comet VOEvent broker (``twistd -n comet``) on free loopback ports, for tests and the
benchmark: it takes events on ``receive`` (one connection per event, schema-checked, answered
with ack or nak) and pushes them to the subscribers of ``broadcast``; and a scripted broadcasting port, for what
Comet never sends (a packet that is not a VOEvent), whose every byte the test decides."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from thinpeer.ops.ports import free_ports
from thinpeer.voevent.transport import frame

ATTEMPTS = 3  # a port found free may be taken before Comet binds it
READY_S = 30.0
FIXTURES = ("SWIFT_bat_position_v2.0_example.xml", "Gaia16aac.xml",
            "ASASSN#2016-09-25.47_2016fvf_PTSS-16nqb_PS16ejf.xml",
            "MOA_Lensing_Event_2015-07-10T14:50:54.00.xml")


@dataclass
class Broker:
    receive: str  # HOST:PORT authors send to
    broadcast: str  # HOST:PORT subscribers connect to
    local_ivo: str
    process: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def twistd() -> str:
    """The ``twistd`` of this Python's environment (the test extra installs Comet with it)."""
    found = Path(sys.executable).with_name("twistd")
    if found.exists():
        return str(found)
    other = shutil.which("twistd")
    if other is None:
        raise AssertionError("Comet's twistd is not installed next to this Python: "
                             "pip install -e '.[test]' (it brings comet>=3.1)")
    return other


def fixture_packets() -> dict[str, bytes]:
    """The real packets voevent-parse ships, by file name."""
    try:
        from voeventparse.fixtures import datapaths
    except ImportError:
        raise AssertionError("voevent-parse is not installed: pip install -e '.[test]'") from None
    directory = Path(datapaths.data_dir)
    return {name: (directory / name).read_bytes() for name in FIXTURES}


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def running_comet(directory: Path, name: str = "comet", local_ivo: str | None = None):
    """A broker with its event database and log in ``directory/name``; stopped at the end."""
    home = directory / name
    home.mkdir(parents=True, exist_ok=True)
    local_ivo = local_ivo or f"ivo://streamglobe.test/{name}"
    for attempt in range(ATTEMPTS):
        receive, broadcast = free_ports(2)
        log = home / f"comet-{attempt}.log"
        process = subprocess.Popen(
            [twistd(), "-n", "--pidfile=", f"--logfile={log}", "comet", "--receive", "--broadcast",
             f"--receive-port={receive}", f"--broadcast-port={broadcast}", f"--local-ivo={local_ivo}",
             f"--eventdb={home / 'eventdb'}", "--broadcast-test-interval=0"],
            cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + READY_S
        while process.poll() is None and time.monotonic() < deadline:
            if _accepting(receive) and _accepting(broadcast):
                break
            time.sleep(0.05)
        if process.poll() is None and _accepting(receive):
            break
        process.kill()
        process.wait()
        if attempt == ATTEMPTS - 1:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise AssertionError(f"Comet did not start: {process.stderr.read().decode(errors='replace') if process.stderr else ''}{text[-2000:]}")
    broker = Broker(f"127.0.0.1:{receive}", f"127.0.0.1:{broadcast}", local_ivo, process, log)
    try:
        yield broker
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class ScriptedBroker:
    """A broadcasting port driven by the test: each accepted connection, in turn."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(10)
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"

    def accept(self) -> socket.socket:
        conn, _ = self.server.accept()
        conn.settimeout(10)
        return conn

    @staticmethod
    def send(conn: socket.socket, payload: bytes) -> None:
        conn.sendall(frame(payload))

    @staticmethod
    def receive(conn: socket.socket) -> etree._Element:
        (length,) = struct.unpack(">I", _exactly(conn, 4))
        return etree.fromstring(_exactly(conn, length))

    def close(self) -> None:
        self.server.close()


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        assert chunk, "the subscriber closed the connection"
        data += chunk
    return data
