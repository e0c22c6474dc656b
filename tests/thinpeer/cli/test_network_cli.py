"""The network as a user drives it: `network up`, `publish`, `subscribe`, `status`, `network down`,
and `demo` — real processes, real gRPC, results compared with the reference evaluator."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import photon_document
from network_harness import paper_example_part, running_network
from photons.generator import generate
from sharing.analysis import analyze
from sharing.scenarios import EXAMPLE_QUERIES
from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import _alive
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("thin_peer_state")]
from conftest import ROOT  # the checkout
CLI = [sys.executable, "-m", "thinpeer.cli"]


def run(*args: str, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def as_admin(monkeypatch, state: Path) -> None:
    """A `network up` is secure by default: what it says to export, for the commands (and
    clients) this test runs next."""
    monkeypatch.setenv("STREAMGLOBE_CA", str(state / "tls" / "ca.pem"))
    monkeypatch.setenv("STREAMGLOBE_TOKEN", (state / "admin.token").read_text().strip())


@pytest.mark.parametrize("executor", ["inline", "spark"])
def test_network_up_publish_subscribe_status_down(tmp_path, executor, monkeypatch):
    peers = {"SP4", "SP5", "SP1", "SP7"}  # (q1's route and q2's, which reuses it at SP5: one executor each)
    topology = paper_example_part(peers, tmp_path / "t.toml")
    state = tmp_path / "state"
    idle = "30" if executor == "inline" else "150"
    launcher = subprocess.Popen([*CLI, "network", "up", "--topology", str(topology), "--state-dir", str(state),
                                 "--executor", executor],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        addresses = {}
        deadline = time.monotonic() + 60
        while len(addresses) < len(peers) and time.monotonic() < deadline:
            line = launcher.stdout.readline()
            if not line:
                break
            peer, address = line.split()
            addresses[peer] = address
        if len(addresses) < len(peers) and not line:  # the launcher closed its output: it is exiting
            launcher.wait(timeout=30)
        assert len(addresses) == len(peers), launcher.stderr.read() if launcher.poll() is not None else "timeout"
        plain = run("status", "--superpeer", addresses["SP1"], "--ca", "", "--token", "")
        assert plain.returncode != 0 and "UNAVAILABLE" in plain.stderr  # TLS only
        as_admin(monkeypatch, state)
        doc = tmp_path / "photons.xml"
        doc.write_text(photon_document(1500, seed=17))
        queries = {name: Path(str(EXAMPLE_QUERIES / f"{name}.wxq")) for name in ("q1", "q2")}
        # subscriptions first, so that they see the whole stream
        subscribers = {}
        for name, peer in (("q1", "SP1"), ("q2", "SP7")):
            subscribers[name] = subprocess.Popen(
                [*CLI, "subscribe", "--superpeer", addresses[peer], "--query", str(queries[name]),
                 "--timeout", idle], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
            # wait until registered (the plan is printed on stderr)
            first = subscribers[name].stderr.readline()
            assert first.startswith("subscription"), first + subscribers[name].stderr.read()
        r = run("publish", "--superpeer", addresses["SP4"], "--stream", "photons", "--input", str(doc))
        assert r.returncode == 0, r.stderr
        outputs = {n: p.communicate(timeout=60 + float(idle)) for n, p in subscribers.items()}
        for name, (out, err) in outputs.items():
            expected = evaluate(analyze(queries[name].read_text()).checked,
                                StreamDocument.from_file(doc)).document()
            assert out.strip() == expected, (name, err)
            assert "the stream closed" in err
        status = json.loads(run("status", "--superpeer", addresses["SP5"]).stdout)
        table = status["stream_table"]
        reused = [s for s in table if s["origin"] == "SP5" and s["route"] == ["SP5", "SP7"]]
        # a loaded machine can miss heartbeats and re-plan q2 around a peer it thought down;
        # then its plan history says so, and the table shows the new plan instead
        q2 = json.loads(run("status", "--superpeer", addresses["SP7"]).stdout)["subscriptions"]
        replans = [e for s in q2.values() for e in s["plan_history"]]
        assert (reused and reused[0]["operators"]) or replans, table
    finally:
        down = run("network", "down", "--state-dir", str(state))
        launcher.wait(timeout=30)
    assert down.returncode == 0, down.stderr
    assert launcher.returncode == 0


def test_subscribe_before_the_stream_exists_is_a_clear_error(tmp_path, monkeypatch):
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    launcher = subprocess.Popen([*CLI, "network", "up", "--topology", str(topology), "--state-dir",
                                 str(tmp_path / "s")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=ROOT)
    try:
        sp1 = launcher.stdout.readline().split()[1]
        for _ in range(7):
            launcher.stdout.readline()
        as_admin(monkeypatch, tmp_path / "s")
        r = run("subscribe", "--superpeer", sp1, "--no-wait", "--query",
                str(EXAMPLE_QUERIES / "q1.wxq"))
        assert r.returncode != 0 and 'NOT_FOUND: unknown stream "photons"' in r.stderr
    finally:
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=30)


def test_demo_runs_and_exits_cleanly():
    r = run("demo", "--photons", "1500", timeout=300)
    assert r.returncode == 0, r.stderr
    for text in ("Query 1 registered at SP1", "reuse stream", "Query 4:", "Traffic per link",
                 "Network stopped."):
        assert text in r.stdout, r.stdout


def test_subscribe_count_resume_and_offset(tmp_path, thin_peer_state):
    """`subscribe --count` stops early and saves its offset; `--resume` continues from the saved
    offset (or `--offset`) to the end of the stream, from any working directory (before, the
    offset was saved under the working directory, and a resume elsewhere started again at 0),
    and the pieces are the reference results."""
    query = EXAMPLE_QUERIES / "q1.wxq"
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100)
        photons = [p.to_xml() for p in generate(1200, seed=21)]
        publisher.publish("photons", photons[:200])
        sp1 = topology.address("SP1")
        first = subprocess.Popen([*CLI, "subscribe", "--superpeer", sp1, "--query", str(query),
                                  "--count", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=tmp_path)
        line = first.stderr.readline()
        assert line.startswith("subscription "), line + first.stderr.read()
        sid = line.split()[1]
        publisher.publish("photons", photons[200:])
        publisher.close_stream("photons")
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        assert err.endswith(f"5 result item(s); stopped: count reached; resume with --resume {sid}\n")
        offsets = thin_peer_state / "offsets"
        assert (offsets / f"{sid}.offset").read_text() == "5"
        expected = list(evaluate(analyze(query.read_text()).checked, StreamDocument.from_text(
            "<photons>" + "".join(photons[200:]) + "</photons>")).serialized_items())
        assert len(expected) > 10
        assert out == "<photons>" + "".join(expected[:5]) + "</photons>\n"

        r = run("subscribe", "--superpeer", sp1, "--resume", sid, "--offset", "3", "--count", "4",
                cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stderr.startswith(f"resuming subscription {sid} at offset 3\n")
        assert r.stdout == "<photons>" + "".join(expected[3:7]) + "</photons>\n"
        assert (offsets / f"{sid}.offset").read_text() == "7"

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        r = run("subscribe", "--superpeer", sp1, "--resume", sid, "--timeout", "20", cwd=elsewhere)
        assert r.returncode == 0, r.stderr
        assert r.stderr.startswith(f"resuming subscription {sid} at offset 7\n")
        assert r.stdout == "<photons>" + "".join(expected[7:]) + "</photons>\n"
        assert r.stderr.endswith(f"{len(expected) - 7} result item(s); stopped: the stream closed; "
                                 f"resume with --resume {sid}\n")


def test_subscribe_count_zero_prints_an_empty_result_document(tmp_path):
    """Before: `subscribe --count 0` printed only `</results>`."""
    with running_network(tmp_path) as (topology, _):
        r = run("subscribe", "--superpeer", topology.address("SP1"), "--count", "0", "--query",
                str(EXAMPLE_QUERIES / "q1.wxq"), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "<photons></photons>\n"
        assert "0 result item(s); stopped: count reached" in r.stderr


def test_publish_reports_what_is_not_an_item(tmp_path):
    """Before: children of the document's root that are not items were skipped silently."""
    photons = [p.to_xml() for p in generate(6, seed=5)]
    doc = tmp_path / "mixed.xml"
    doc.write_text("<photons>" + "".join(photons[:3]) + "<calibration><gain>2</gain></calibration>"
                   + photons[3] + "<!-- a comment --><note/>" + "".join(photons[4:]) + "<trailer/></photons>")
    with running_network(tmp_path) as (topology, _):
        reader = SuperPeerClient(topology.address("SP1"))
        sid = reader.subscribe('<r>{ for $p in stream("photons")/photons/photon return $p }</r>',
                               wait_for_streams=True).subscription
        r = run("publish", "--superpeer", topology.address("SP4"), "--stream", "photons",
                "--input", str(doc))
        assert r.returncode == 1
        assert "rejected: item 3: element <calibration> is not a <photon> item" in r.stderr
        assert "rejected: item 5: element <note> is not a <photon> item" in r.stderr
        assert "rejected: item 8: element <trailer> is not a <photon> item" in r.stderr
        assert "photons: 6 items published and the stream closed; 3 rejected" in r.stderr
        assert [item for _, item, _ in reader.results(sid, idle_timeout=20)] == photons


def test_publish_resume_continues_after_the_items_the_superpeer_has(tmp_path):
    """A publisher cut off mid-stream leaves the stream open; `publish --resume` with the same
    input skips what the super-peer has and goes on. A batch sent twice (its reply was lost)
    is taken once. The subscriber sees every item once: the reference results."""
    query = (EXAMPLE_QUERIES / "q1.wxq").read_text()
    photons = [p.to_xml() for p in generate(1000, 0, rate=10.0)]  # what --synthetic --seed 0 sends
    with running_network(tmp_path) as (topology, _):
        sp4 = topology.address("SP4")
        publisher = SuperPeerClient(sp4)
        assert publisher.register_stream("photons", "photons", "photon") == 0
        publisher.publish("photons", photons[:100], position=0)
        subscriber = SuperPeerClient(topology.address("SP1"))
        sid = subscriber.subscribe(query).subscription
        publisher.publish("photons", photons[100:300], position=100)
        again = publisher.publish("photons", photons[100:300], position=100)  # the reply was lost
        assert (again.accepted, again.duplicates) == (0, 200)
        shown = publisher.status()["streams_registered_here"]["photons"]
        assert (shown["next_position"], shown["duplicates"]) == (300, 200)
        assert publisher.register_stream("photons", "photons", "photon") == 300
        r = run("publish", "--superpeer", sp4, "--stream", "photons", "--synthetic", "--seed", "0",
                "--count", "1000", "--resume")
        assert r.returncode == 0, r.stderr
        assert "resuming at item 300 (the super-peer has items 0..299)" in r.stderr
        assert "700 items published and the stream closed" in r.stderr
        got = [item for _, item, _ in subscriber.results(sid, idle_timeout=30)]
        expected = evaluate(analyze(query).checked,
                            StreamDocument.from_text("<photons>" + "".join(photons[100:]) + "</photons>"))
        assert got == list(expected.serialized_items())


def test_network_kill_and_start_a_publishers_superpeer_then_publish_resume(tmp_path, monkeypatch):
    """`network kill SP4` (a crash) and `network start SP4` (its state directory): the stream is
    still registered where the publisher left it, `publish --resume` goes on from there, the
    subscription is fed again from the stream's log, and the subscriber gets exactly the
    reference results. `network down` also stops the daemon started again."""
    query = (EXAMPLE_QUERIES / "q1.wxq").read_text()
    photons = [p.to_xml() for p in generate(1000, 0, rate=10.0)]  # what --synthetic --seed 0 sends
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    state = tmp_path / "state"
    launcher = subprocess.Popen([*CLI, "network", "up", "--topology", str(topology), "--state-dir", str(state)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        addresses = dict(launcher.stdout.readline().split() for _ in range(8))
        as_admin(monkeypatch, state)
        publisher = SuperPeerClient(addresses["SP4"])
        publisher.register_stream("photons", "photons", "photon")
        publisher.publish("photons", photons[:200], position=0)
        subscriber = SuperPeerClient(addresses["SP1"])
        sid = subscriber.subscribe(query).subscription
        killed = run("network", "kill", "SP4", "--state-dir", str(state))
        assert killed.returncode == 0 and "SIGKILL" in killed.stderr, killed.stderr
        shown = json.loads(run("network", "status", "--state-dir", str(state)).stdout)["superpeers"]
        assert shown["SP4"]["status"] == "exited" and shown["SP5"] == {**shown["SP5"], "status": "running",
                                                                        "health": "healthy"}, shown
        cut = run("network", "cut", "SP4", "SP5", "--state-dir", str(state))  # the same verbs as deploy's
        assert cut.returncode == 0 and "SP4 not running: told when started" in cut.stderr, cut.stderr
        assert SuperPeerClient(addresses["SP5"]).status()["cut_links"] == ["SP4"]
        started = run("network", "start", "SP4", "--state-dir", str(state))
        assert started.returncode == 0, started.stderr
        shown = json.loads(run("network", "status", "--state-dir", str(state)).stdout)
        assert shown["superpeers"]["SP4"]["health"] == "healthy" and shown["cut_links"] == [["SP4", "SP5"]], shown
        assert SuperPeerClient(addresses["SP4"]).status()["cut_links"] == ["SP5"]  # (cut again at its start)
        restored = run("network", "restore", "SP5", "SP4", "--state-dir", str(state))
        assert restored.returncode == 0 and "restored the link SP5–SP4" in restored.stderr, restored.stderr
        assert [SuperPeerClient(addresses[p]).status()["cut_links"] for p in ("SP4", "SP5")] == [[], []]
        not_a_link = run("network", "cut", "SP4", "SP1", "--state-dir", str(state))
        assert not_a_link.returncode == 1 and "SP4–SP1 is not a link of the backbone" in not_a_link.stderr
        exports = run("network", "credentials", "--state-dir", str(state)).stdout.strip()
        assert exports == (f"export STREAMGLOBE_CA={(state / 'tls' / 'ca.pem').resolve()} "
                           f"STREAMGLOBE_TOKEN=$(cat {(state / 'admin.token').resolve()})"), exports
        r = run("publish", "--superpeer", addresses["SP4"], "--stream", "photons", "--synthetic", "--seed", "0",
                "--count", "1000", "--resume")
        assert r.returncode == 0, r.stderr
        assert "resuming at item 200" in r.stderr
        got = [item for _, item, _ in subscriber.results(sid, idle_timeout=60)]
        expected = evaluate(analyze(query).checked,
                            StreamDocument.from_text("<photons>" + "".join(photons[200:]) + "</photons>"))
        assert got == list(expected.serialized_items())
        restarted = json.loads((state / "network.json").read_text())["superpeers"]["SP4"]["pid"]
    finally:
        down = run("network", "down", "--state-dir", str(state))
        launcher.wait(timeout=30)
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 10
    while _alive(restarted) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(restarted)
