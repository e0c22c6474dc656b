"""``streamglobe connect voevent`` and ``subscribe --to-vtp`` as a user runs them: real processes,
a real network, real Comet brokers on both sides; stopped with SIGTERM, started again."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from comet_broker import fixture_packets, running_comet
from conftest import ROOT
from network_harness import running_network, until

from thinpeer.client import SuperPeerClient
from thinpeer.voevent.shape import parse_voevent
from thinpeer.voevent.transport import send_event
from thinpeer.voevent.vtp import VtpSubscriber

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("thin_peer_state")]
CLI = [sys.executable, "-m", "thinpeer.cli"]
PACKETS = fixture_packets()
SOUTH = """<south>
  { for $v in stream("voevents")/voevents/voevent
    where $v/dec < 0
    return <alert> { $v/ivorn } { $v/ra } { $v/dec } </alert> }
</south>"""


class Lines:
    """A process's stderr, read as it comes, so a test can wait for a line with a deadline."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, seconds: float = 30.0) -> str:
        return until(lambda: next((l for l in self.lines if text in l), None), seconds,
                     what=lambda: "".join(self.lines))

    def text(self) -> str:
        return "".join(self.lines)


def connect(superpeer: str, remote: str, state: Path) -> tuple[subprocess.Popen, Lines]:
    process = subprocess.Popen([*CLI, "connect", "voevent", "--superpeer", superpeer, "--remote", remote,
                                "--stream", "voevents", "--state-dir", str(state)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines = Lines(process)
    lines.wait_for("subscribed to broker")
    return process, lines


def stop(process: subprocess.Popen, lines: Lines) -> str:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, lines.text()
    lines.thread.join(10)
    return lines.text()


def test_connect_voevent_and_subscribe_to_vtp(tmp_path):
    names = list(PACKETS)
    with running_network(tmp_path) as (topology, _), running_comet(tmp_path, "upstream") as upstream, \
            running_comet(tmp_path, "downstream") as downstream:
        state = tmp_path / "bridge"
        bridge, lines = connect(topology.address("SP4"), upstream.broadcast, state)
        for name in names[:2]:
            send_event(upstream.receive, PACKETS[name])
        lines.wait_for("published 2")
        err = stop(bridge, lines)
        assert "stopped: received 2, published 2, duplicates 0, rejected 0" in err

        # results of a subscription at SP1 go to the second broker as VOEvents (the lead's flag)
        got: list[bytes] = []
        listener = VtpSubscriber(downstream.broadcast, got.append)
        listener.start()
        until(listener.connected.is_set, 10)
        query = tmp_path / "south.wxq"
        query.write_text(SOUTH)
        subscriber = subprocess.Popen(
            [*CLI, "subscribe", "--superpeer", topology.address("SP1"), "--query", str(query),
             "--from-start", "--to-vtp", downstream.receive, "--vtp-ivorn", "ivo://streamglobe.test/r",
             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        sub_lines = Lines(subscriber)
        try:
            # started again: the journal says what was taken; the rest comes in
            bridge, lines = connect(topology.address("SP4"), upstream.broadcast, state)
            lines.wait_for("from position 2")
            send_event(upstream.receive, PACKETS[names[0]] + b"\n")  # again, other bytes: a duplicate
            for name in names[2:]:
                send_event(upstream.receive, PACKETS[name])
            lines.wait_for("received 3, published 2, duplicates 1")
            err = stop(bridge, lines)
            until(lambda: len(got) >= 2, 60, what=lambda: sub_lines.text())
        finally:
            subscriber.send_signal(signal.SIGTERM)
            subscriber.wait(timeout=30)
            listener.stop()
            listener.join(10)
        assert subscriber.returncode == 0, sub_lines.text()
        ivorns = [parse_voevent(p).get("ivorn") for p in got]
        assert [i.split("#")[0] for i in ivorns] == ["ivo://streamglobe.test/r"] * 2
        assert [i.rsplit("-", 1)[1] for i in ivorns] == ["0", "1"]
        alerts = [{p.get("name"): p.get("value") for p in parse_voevent(g).iter("Param")}["ivorn"] for g in got]
        assert alerts == [parse_voevent(PACKETS[n]).get("ivorn") for n in names if b"<C2>-" in PACKETS[n]]
        reader = SuperPeerClient(topology.address("SP4"))
        assert reader.register_stream("voevents", "voevents", "voevent") == 4  # nothing twice


def test_connect_voevent_refuses_bad_arguments(tmp_path):
    r = subprocess.run([*CLI, "connect", "voevent", "--superpeer", "127.0.0.1:1", "--remote", "host:port",
                        "--stream", "v"], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert r.returncode == 1 and "--remote" in r.stderr and "not HOST:PORT" in r.stderr
    r = subprocess.run([*CLI, "connect", "voevent", "--superpeer", "127.0.0.1:1", "--remote", "h:1",
                        "--stream", "v", "--local-ivo", "me"], capture_output=True, text=True, timeout=60, check=False,
                       cwd=ROOT)
    assert r.returncode == 1 and "not an IVORN" in r.stderr
