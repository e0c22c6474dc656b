"""VOEvents per second through the VTP bridge: broker → bridge → SP4 → SP1 → subscriber.

Run: python benchmarks/voevent_bridge.py [--events 1000] [--burst 5000] [--rounds 2] [--authors 1] [--out FILE.json]

Real packets (voevent-parse's four fixtures, each copy with its own IVORN) are handed by
``--authors`` authors to a real Comet broker (``twistd comet``: one connection per event, each
schema-checked and looked up in its event database; without gdbm that is ``dbm.dumb``, which
rewrites its index per event, so Comet slows as a run grows). In the *bridge* mode,
``VoEventBridge`` subscribes to the broker and publishes the events at SP4 (numbered, after
their journal lines are synced; those waiting together in one Publish), and a subscription at
SP1 that returns every event's IVORN is read until all have arrived. In the *broker* mode — the
limit, in the same run — a plain VTP subscriber whose handler does nothing takes the same packets
from the same kind of broker. Both are timed from the first packet handed to the broker to the
last one seen at the end; a fresh broker serves every round, the modes alternate which goes first.

The bridge's own capacity, in the same run: a scripted broadcaster pushes ``--burst`` packets at
once (no broker limit) to the bridge, timed until SP1 has them all, and to a plain subscriber
that does nothing (its limit: framing, parsing and acks alone).
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from local_network import ROOT, alternating, local_network, write_report

sys.path.insert(0, str(ROOT / "tests" / "thinpeer" / "voevent"))
from comet_broker import fixture_packets, running_comet

from thinpeer.client import SuperPeerClient
from thinpeer.voevent.bridge import VoEventBridge
from thinpeer.voevent.transport import VtpError, frame, send_event
from thinpeer.voevent.vtp import VtpSubscriber

EVERY = '<all>{ for $v in stream("voevents")/voevents/voevent return $v/ivorn }</all>'


def packets(count: int, tag: str) -> list[bytes]:
    """``count`` distinct packets: the fixtures in turn, each IVORN's fragment made unique."""
    real = list(fixture_packets().values())
    out = []
    for k in range(count):
        suffix = f"-{tag}-{k}\"".encode()
        out.append(re.sub(rb'ivorn="[^"#]*#[^"]*"', lambda m, s=suffix: m.group(0)[:-1] + s,
                          real[k % len(real)], count=1))
    return out


def hand_over(receive: str, events: list[bytes], authors: int) -> float:
    """Every packet to the broker from ``authors`` threads; the seconds until all were acked."""
    began = time.perf_counter()
    failures: list[str] = []

    def author(part: list[bytes]) -> None:
        try:
            for packet in part:
                send_event(receive, packet)
        except VtpError as exc:
            failures.append(str(exc))

    threads = [threading.Thread(target=author, args=(events[a::authors],)) for a in range(authors)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(f"the broker refused an event: {failures[0]} (Comet's event database is not "
                         "safe for concurrent authors without gdbm: try --authors 1)")
    return time.perf_counter() - began


def wait(condition, seconds: float = 600.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the events did not all arrive")
        time.sleep(0.002)


def broker_alone(tmp: Path, events: list[bytes], authors: int) -> dict:
    with running_comet(tmp, f"limit-{time.monotonic_ns()}") as comet:
        got: list[int] = []
        subscriber = VtpSubscriber(comet.broadcast, lambda packet: got.append(1))
        subscriber.start()
        wait(subscriber.connected.is_set, 10)
        began = time.perf_counter()
        handed = hand_over(comet.receive, events, authors)
        wait(lambda: len(got) >= len(events))
        seconds = time.perf_counter() - began
        subscriber.stop()
        subscriber.join(10)
    return {"seconds": seconds, "authors_seconds": handed}


def through_bridge(tmp: Path, addresses: dict[str, str], events: list[bytes], authors: int, k: int) -> dict:
    stream = f"voevents{k}"
    with running_comet(tmp, f"bridge-{k}") as comet:
        bridge = VoEventBridge(SuperPeerClient(addresses["SP4"]), stream, comet.broadcast, tmp / f"state-{k}")
        bridge.start()
        wait(bridge.connected.is_set, 10)
        reader = SuperPeerClient(addresses["SP1"])
        sid = reader.subscribe(EVERY.replace('"voevents"', f'"{stream}"')).subscription
        got = 0
        began = time.perf_counter()
        handed = hand_over(comet.receive, events, authors)
        published_at = None
        while got < len(events):
            got += len(reader.read(sid, got, max_items=1000, wait_ms=200).items)
            if published_at is None and bridge.progress().published >= len(events):
                published_at = time.perf_counter() - began
        seconds = time.perf_counter() - began
        progress = bridge.progress()
        bridge.stop()
        bridge.join(10)
    assert progress.published == len(events) and progress.duplicates == 0, progress
    return {"seconds": seconds, "authors_seconds": handed,
            "published_seconds": published_at or seconds}


class Burst:
    """A broadcasting port that pushes every packet at once to the one subscriber it accepts and
    counts the acks: what a subscriber can take when the broker is no limit."""

    def __init__(self, events: list[bytes]) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.data = b"".join(frame(p) for p in events)
        self.acks = 0
        self.began = 0.0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        self.began = time.perf_counter()
        threading.Thread(target=conn.sendall, args=(self.data,), daemon=True).start()
        buffer = b""
        while chunk := conn.recv(1 << 16):
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
                n = int.from_bytes(buffer[:4], "big")
                self.acks += b'role="ack"' in buffer[4:4 + n]
                buffer = buffer[4 + n:]

    def close(self) -> None:
        self.server.close()


def burst(tmp: Path, addresses: dict[str, str], events: list[bytes], mode: str, k: int) -> dict:
    """All ``events`` at once to a plain subscriber, or to the bridge (until SP1 has them all)."""
    source = Burst(events)
    try:
        if mode == "broker":
            subscriber = VtpSubscriber(source.address, lambda packet: None)
            subscriber.start()
            wait(lambda: source.acks >= len(events))
            seconds = time.perf_counter() - source.began
            subscriber.stop()
            subscriber.join(10)
            return {"seconds": seconds}
        stream = f"burst{k}"
        client = SuperPeerClient(addresses["SP4"])
        client.register_stream(stream, "voevents", "voevent")
        reader = SuperPeerClient(addresses["SP1"])
        sid = reader.subscribe(EVERY.replace('"voevents"', f'"{stream}"')).subscription
        bridge = VoEventBridge(client, stream, source.address, tmp / f"burst-{k}")
        bridge.start()
        got, published = 0, None
        while got < len(events):
            got += len(reader.read(sid, got, max_items=1000, wait_ms=50).items)
            if published is None and bridge.progress().published >= len(events):
                published = time.perf_counter() - source.began
        seconds = time.perf_counter() - source.began
        bridge.stop()
        bridge.join(10)
        return {"seconds": seconds, "acks": source.acks, "published_seconds": published or seconds,
                "published_per_s": round(len(events) / (published or seconds))}
    finally:
        source.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--authors", type=int, default=1,
                        help="concurrent authors handing events to the broker (Comet's event database "
                             "without gdbm is not safe for more than one)")
    parser.add_argument("--burst", type=int, default=5000,
                        help="events a scripted broadcaster pushes at once (the bridge's own capacity)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"broker": [], "bridge": []}
    bursts: dict[str, list[dict]] = {"broker": [], "bridge": []}
    with tempfile.TemporaryDirectory(prefix="voevent-bench-") as tmpdir, local_network() as network:
        tmp = Path(tmpdir)
        for k, mode in alternating(args.rounds, ["broker", "bridge"]):
            events = packets(args.events, f"{mode}{k}")
            run = broker_alone(tmp, events, args.authors) if mode == "broker" else \
                through_bridge(tmp, network.addresses, events, args.authors, k)
            run["events_per_s"] = round(args.events / run["seconds"])
            runs[mode].append(run)
            print(f"round {k} {mode}: {run['events_per_s']:,} VOEvents/s "
                  f"({run['seconds']:.2f} s; authors done after {run['authors_seconds']:.2f} s)", flush=True)
            run = burst(tmp, network.addresses, packets(args.burst, f"burst{mode}{k}"), mode, k)
            run["events_per_s"] = round(args.burst / run["seconds"])
            bursts[mode].append(run)
            print(f"round {k} {mode}, a burst of {args.burst} from a scripted broadcaster: "
                  f"{run['events_per_s']:,} VOEvents/s"
                  + (f" (all published at SP4 at {run['published_per_s']:,}/s)" if mode == "bridge" else ""),
                  flush=True)
    best = {mode: max(r["events_per_s"] for r in rs) for mode, rs in runs.items()}
    fastest = {mode: max(r["events_per_s"] for r in rs) for mode, rs in bursts.items()}
    report = {"benchmark": "VOEvents/s broker → bridge → SP4 → SP1 subscriber, vs the broker alone",
              "events": args.events, "authors": args.authors, "rounds": args.rounds,
              "packet_bytes": sorted({len(p) for p in packets(4, "x")}),
              "bridge_events_per_s": best["bridge"], "broker_alone_events_per_s": best["broker"],
              "bridge_vs_limit": round(best["bridge"] / best["broker"], 2), "runs": runs,
              "burst": {"events": args.burst, "bridge_events_per_s": fastest["bridge"],
                        "plain_subscriber_events_per_s": fastest["broker"],
                        "bridge_vs_limit": round(fastest["bridge"] / fastest["broker"], 2), "runs": bursts}}
    print(f"through the bridge: {best['bridge']:,} VOEvents/s end to end; the broker alone to a plain "
          f"VTP subscriber: {best['broker']:,} VOEvents/s ({report['bridge_vs_limit']:.0%} of it)")
    print(f"a burst from a scripted broadcaster: the bridge to SP1 {fastest['bridge']:,} VOEvents/s; a plain "
          f"VTP subscriber {fastest['broker']:,} VOEvents/s ({report['burst']['bridge_vs_limit']:.0%} of it)")
    write_report("voevent_bridge", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
