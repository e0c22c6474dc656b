"""Live input and durable output as a user runs them: a writer feeding `publish --input -` item
by item, a document followed while it grows, results to a directory and to a webhook whose
processes are killed and restarted mid-way — real daemons, real processes, a real HTTP server;
every result checked against the reference evaluator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from network_harness import reference_results, running_network, same, until

from sharing.scenarios import EXAMPLE_QUERIES
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("thin_peer_state")]
CLI = [sys.executable, "-m", "thinpeer.cli"]
RECEIVER = Path(__file__).with_name("webhook_receiver.py")
EVENTS_QUERY = """<hot>
  { for $e in stream("live")/events/e
    where $e/en > 2
    return <hit> { $e/id } { $e/en } </hit> }
</hot>"""


def popen(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            **kwargs)


def event(k: int) -> str:
    return f"<e><id>{k}</id><en>{k % 5}</en></e>"


def results_until(client: SuperPeerClient, sid: str, count: int, seconds: float = 30.0) -> list[str]:
    got: list[str] = []

    def more() -> bool:
        got.extend(client.read(sid, len(got), wait_ms=200, peek=True).items)
        return len(got) >= count

    until(more, seconds, what=lambda: f"{len(got)} of {count} results")
    return got


def test_a_live_writer_through_stdin_reaches_the_subscriber_item_by_item(tmp_path):
    """Before: stdin was read whole before the first item was sent. Each line now reaches the
    subscriber while the writer still holds the pipe open (latency printed)."""
    with running_network(tmp_path) as (topology, _):
        client = SuperPeerClient(topology.address("SP1"))
        publisher = popen("publish", "--superpeer", topology.address("SP4"), "--stream", "live",
                          "--input", "-", "--format", "lines", "--root", "events", "--item", "e",
                          stdin=subprocess.PIPE)
        try:
            sid = client.subscribe(EVENTS_QUERY, wait_for_streams=True).subscription
            latencies, sent = [], []
            for k in range(12):
                line = event(k) + "\n"
                sent.append(event(k))
                start = time.monotonic()
                publisher.stdin.write(line.encode())
                publisher.stdin.flush()
                expected = reference_results(EVENTS_QUERY, sent, "events")
                got = results_until(client, sid, len(expected), seconds=10.0)
                assert same(got, expected)
                if k % 5 > 2:
                    latencies.append(time.monotonic() - start)
            publisher.stdin.close()
            assert publisher.wait(60) == 0, publisher.stderr.read().decode()
            print(f"stdin → subscriber, per item: {', '.join(f'{x * 1000:.0f} ms' for x in latencies)}")
        finally:
            publisher.kill()


def test_a_followed_document_is_published_as_it_grows(tmp_path):
    doc = tmp_path / "growing.xml"
    doc.write_text("<?xml version='1.0'?>\n<events>\n")
    with running_network(tmp_path) as (topology, _):
        client = SuperPeerClient(topology.address("SP1"))
        with open(doc, "a") as writer:
            writer.write(event(0) + "\n")  # the first item names the stream's items
            writer.flush()
            publisher = popen("publish", "--superpeer", topology.address("SP4"), "--stream", "live",
                              "--input", str(doc), "--follow")
            try:
                sid = client.subscribe(EVENTS_QUERY, wait_for_streams=True).subscription
                sent = [event(0)]
                for k in range(1, 9):
                    writer.write(event(k) + "\n")
                    writer.flush()
                    sent.append(event(k))
                    expected = reference_results(EVENTS_QUERY, sent, "events")
                    # the first item may have gone before the subscription: from the second on
                    got = results_until(client, sid, len(expected), seconds=10.0)
                    assert same(got, expected)
                writer.write("</events>\n")  # the document is complete: the publisher ends
                writer.flush()
                assert publisher.wait(60) == 0, publisher.stderr.read().decode()
            finally:
                publisher.kill()


def _files_in_order(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def test_a_directory_sink_killed_and_started_again_has_no_gap_and_no_duplicate(tmp_path):
    query = (EXAMPLE_QUERIES / "q1.wxq").read_text()
    out = tmp_path / "out"
    with running_network(tmp_path) as (topology, _):
        sp1 = topology.address("SP1")
        client = SuperPeerClient(sp1)
        publisher = popen("publish", "--superpeer", topology.address("SP4"), "--stream", "photons",
                          "--synthetic", "--count", "4000", "--seed", "7", "--rate", "800")
        sid = client.subscribe(query, wait_for_streams=True).subscription
        sink = popen("subscribe", "--superpeer", sp1, "--resume", sid, "--offset", "0", "--to-dir", str(out),
                     "--format", "lines", "--rotate-items", "7", "--rotate-s", "0.3")
        try:
            until(lambda: len(_files_in_order(out)) >= 3 if out.exists() else False, 60)
            sink.send_signal(signal.SIGKILL)  # mid-way: no chance to finish a file or record an offset
            sink.wait(10)
            sink = popen("subscribe", "--superpeer", sp1, "--resume", sid, "--to-dir", str(out),
                         "--format", "lines", "--rotate-items", "7", "--rotate-s", "0.3")
            assert publisher.wait(120) == 0, publisher.stderr.read().decode()
            _, err = sink.communicate(timeout=120)
            assert sink.returncode == 0 and "stopped: the stream closed" in err.decode(), err.decode()
        finally:
            publisher.kill()
            sink.kill()
    from photons.generator import generate

    photons = [p.to_xml() for p in generate(4000, 7, rate=10.0)]
    expected = reference_results(query, photons)
    lines = [line for f in _files_in_order(out) for line in f.read_text().splitlines()]
    assert same(lines, expected)
    assert all(len(f.read_text().splitlines()) <= 7 for f in _files_in_order(out))
    assert not list(out.glob(".*.partial"))


def test_a_webhook_receiver_and_its_sink_killed_and_restarted_lose_nothing(tmp_path):
    query = (EXAMPLE_QUERIES / "q1.wxq").read_text()
    port, = free_ports(1)
    received = tmp_path / "received.jsonl"

    def receiver() -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, str(RECEIVER), str(port), str(received)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout.readline().strip() == b"ready"
        return process

    server = receiver()
    with running_network(tmp_path) as (topology, _):
        sp1 = topology.address("SP1")
        client = SuperPeerClient(sp1)
        publisher = popen("publish", "--superpeer", topology.address("SP4"), "--stream", "photons",
                          "--synthetic", "--count", "3000", "--seed", "3", "--rate", "1000")
        sid = client.subscribe(query, wait_for_streams=True).subscription
        sink = popen("subscribe", "--superpeer", sp1, "--resume", sid, "--offset", "0",
                     "--to-webhook", f"http://127.0.0.1:{port}/hook", "--format", "lines",
                     "--webhook-batch", "10", "--webhook-linger", "0.1")
        try:
            until(lambda: received.exists() and len(received.read_text().splitlines()) >= 3, 60)
            server.kill()
            server.wait(10)
            time.sleep(1.0)  # the sink finds nobody there and retries meanwhile
            server = receiver()
            posts = len(received.read_text().splitlines())
            until(lambda: len(received.read_text().splitlines()) > posts + 2, 60)
            sink.send_signal(signal.SIGKILL)  # and the sink itself, mid-way
            _, err = sink.communicate(timeout=10)
            assert "trying again" in err.decode()
            sink = popen("subscribe", "--superpeer", sp1, "--resume", sid,
                         "--to-webhook", f"http://127.0.0.1:{port}/hook", "--format", "lines",
                         "--webhook-batch", "10", "--webhook-linger", "0.1")
            assert publisher.wait(120) == 0, publisher.stderr.read().decode()
            _, err = sink.communicate(timeout=120)
            assert sink.returncode == 0 and "stopped: the stream closed" in err.decode(), err.decode()
        finally:
            publisher.kill()
            sink.kill()
            server.kill()
    from photons.generator import generate

    expected = reference_results(query, [p.to_xml() for p in generate(3000, 3, rate=10.0)])
    batches: dict[str, dict] = {}
    for line in received.read_text().splitlines():
        post = json.loads(line)
        if post["key"] in batches:  # a redelivery: the same batch under the same key
            assert batches[post["key"]]["body"] == post["body"]
        batches[post["key"]] = post
    ordered = sorted(batches.values(), key=lambda post: int(post["first"]))
    offsets = [int(post["first"]) for post in ordered]
    assert offsets == [sum(int(p["count"]) for p in ordered[:k]) for k in range(len(ordered))]  # no gap
    got = [line for post in ordered for line in post["body"].splitlines()]
    assert same(got, expected)


def test_sink_arguments_are_checked_before_subscribing():
    r = subprocess.run([*CLI, "subscribe", "--superpeer", "127.0.0.1:9", "--query", "q.wxq",
                        "--to-webhook", "ftp://x"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 1 and "not an http:// or https:// URL" in r.stderr
    r = subprocess.run([*CLI, "subscribe", "--superpeer", "127.0.0.1:9", "--query", "q.wxq",
                        "--to-dir", "d", "--count", "3"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 1 and "--count is for results printed on stdout" in r.stderr
    r = subprocess.run([*CLI, "publish", "--superpeer", "127.0.0.1:9", "--stream", "s", "--input", "-",
                        "--follow"], capture_output=True, text=True, cwd=ROOT, env={**os.environ}, check=False)
    assert r.returncode == 1 and "--follow is for a file" in r.stderr


def test_json_lines_in_and_out_with_bad_lines_rejected_one_by_one(tmp_path):
    """JSON lines published as items (a malformed line rejected with its line number, the rest
    going on); a WXQuery subscription over them unchanged; its results rendered back as JSON."""
    rows = [{"id": k, "en": k % 5 + 0.5, "det": {"chip": k % 3}, "tags": ["x"] * (k % 2)} for k in range(40)]
    lines = [json.dumps(row) for row in rows]
    lines.insert(7, '{"id": 999, "en": }')  # line 8: not JSON
    lines.insert(20, '{"id": 1, "id": 2}')  # line 21: a duplicate key
    source = tmp_path / "events.ndjson"
    source.write_text("\n".join(lines) + "\n")
    query = """<hot>{ for $e in stream("events")/events/event
                      where $e/en > 2 and $e/det/chip = 1
                      return <hit>{ $e/id }{ $e/en }</hit> }</hot>"""
    (tmp_path / "hot.wxq").write_text(query)
    with running_network(tmp_path) as (topology, _):
        SuperPeerClient(topology.address("SP4")).register_stream("events", "events", "event")
        subscriber = popen("subscribe", "--superpeer", topology.address("SP1"), "--query",
                           str(tmp_path / "hot.wxq"), "--format", "ndjson", "--timeout", "20")
        said = subscriber.stderr.readline().decode()  # once it is installed
        assert said.startswith("subscription "), said
        r = subprocess.run([*CLI, "publish", "--superpeer", topology.address("SP4"), "--stream", "events",
                            "--input", str(source), "--format", "ndjson", "--root", "events", "--item", "event"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
        assert r.returncode == 1, r.stderr  # rejections make the exit status 1
        assert "40 items published" in r.stderr and "2 rejected" in r.stderr
        assert "line 8: not JSON" in r.stderr and "line 21: duplicate key 'id'" in r.stderr
        out, err = subscriber.communicate(timeout=120)
    assert subscriber.returncode == 0, err.decode()
    got = [json.loads(line) for line in out.decode().splitlines()]
    expected = [{"id": row["id"], "en": row["en"]} for row in rows if row["en"] > 2 and row["det"]["chip"] == 1]
    assert got == expected


def test_resume_after_a_line_rejected_here_repeats_nothing(tmp_path):
    """A line refused by the publisher itself keeps its number (a gap in the stream), so
    --resume skips exactly what the super-peer has: before, every such line made the resumed
    run start one item early and publish an item twice."""
    source = tmp_path / "e.ndjson"
    source.write_text('{"id": 0}\nnot json\n{"id": 2}\n')
    everything = '<all>{ for $e in stream("events")/events/event return $e/id }</all>'
    with running_network(tmp_path) as (topology, _):
        sp4 = topology.address("SP4")
        SuperPeerClient(sp4).register_stream("events", "events", "event")
        client = SuperPeerClient(topology.address("SP1"))
        sid = client.subscribe(everything).subscription
        publish = [*CLI, "publish", "--superpeer", sp4, "--stream", "events", "--input", str(source),
                   "--format", "ndjson", "--root", "events", "--item", "event", "--keep-open"]
        r = subprocess.run(publish, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
        assert "line 2: not JSON" in r.stderr, r.stderr
        with open(source, "a") as f:
            f.write('{"id": 3}\n')
        r = subprocess.run([*publish[:-1], "--resume"], capture_output=True, text=True, cwd=ROOT,
                           timeout=120, check=False)
        assert "resuming at item 3" in r.stderr, r.stderr
        got = results_until(client, sid, 3)
        assert got == ["<id>0</id>", "<id>2</id>", "<id>3</id>"]
        assert client.read(sid, 3, wait_ms=1000, peek=True).closed  # and nothing more came


def test_ctrl_c_ends_a_followed_input_and_closes_its_stream(tmp_path):
    doc = tmp_path / "growing.xml"
    doc.write_text("<events>\n" + "".join(event(k) + "\n" for k in range(5)))  # not finished
    everything = '<all>{ for $e in stream("live")/events/e return $e/id }</all>'
    with running_network(tmp_path) as (topology, _):
        client = SuperPeerClient(topology.address("SP1"))
        SuperPeerClient(topology.address("SP4")).register_stream("live", "events", "e")
        sid = client.subscribe(everything).subscription
        publisher = popen("publish", "--superpeer", topology.address("SP4"), "--stream", "live",
                          "--input", str(doc), "--follow")
        try:
            results_until(client, sid, 5)
            publisher.send_signal(signal.SIGINT)
            _, err = publisher.communicate(timeout=60)
            assert publisher.returncode == 0, err.decode()
            assert "5 items published and the stream closed" in err.decode()
        finally:
            publisher.kill()
        assert client.read(sid, 5, wait_ms=2000, peek=True).closed
