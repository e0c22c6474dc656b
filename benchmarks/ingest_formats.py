"""Items per second through ``streamglobe publish`` per input format, and a live writer's latency.

Run: python benchmarks/ingest_formats.py [--photons 100000] [--rounds 2] [--out FILE.json]

The same photons as an XML document, as one XML item per line, and as JSON lines are published
by the CLI (a process of its own, as a user runs it) to SP4 of a local network (``--in-memory``);
the rounds alternate the formats, so all three see the same machine. Each is compared with its
limit measured in the same run: how fast this process reads the same file into items alone
(parse and, for JSON, map to XML), without a super-peer.

Then a live writer: one line every 50 ms into ``publish --input -``, a subscriber at SP1 reading
them as they come; the time from the write to the result, per item, with the default linger
(50 ms) and with ``--linger-ms 0``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from local_network import alternating, local_network, percentile, write_report

from photons.generator import generate
from thinpeer.client import SuperPeerClient
from thinpeer.formats.json_items import item_to_json
from thinpeer.sources.chunks import read_chunks
from thinpeer.sources.lines import JsonLineItems, LineItems
from thinpeer.sources.xml_items import open_xml

CLI = [sys.executable, "-m", "thinpeer.cli"]
FORMATS = ["xml", "lines", "ndjson"]
LIVE_ITEMS = 60
LIVE_EVERY_S = 0.05


def write_inputs(directory: Path, photons: list[str]) -> dict[str, Path]:
    paths = {"xml": directory / "photons.xml", "lines": directory / "photons.lines",
             "ndjson": directory / "photons.ndjson"}
    paths["xml"].write_text("<photons>\n" + "\n".join(photons) + "\n</photons>\n")
    paths["lines"].write_text("\n".join(photons) + "\n")
    paths["ndjson"].write_text("\n".join(json.dumps(item_to_json(p)) for p in photons) + "\n")
    return paths


def read_alone(fmt: str, path: Path) -> float:
    """Items per second this process makes of the file, with nothing sent."""
    start, n = time.perf_counter(), 0
    chunks = read_chunks(str(path))
    source = (open_xml(str(path), chunks) if fmt == "xml" else LineItems(chunks) if fmt == "lines"
              else JsonLineItems(chunks, "photon"))
    for _ in source:
        n += 1
    return n / (time.perf_counter() - start)


def publish(address: str, fmt: str, path: Path, stream: str) -> float:
    start = time.perf_counter()
    extra = ["--root", "photons", "--item", "photon"] if fmt != "xml" else []
    r = subprocess.run([*CLI, "publish", "--superpeer", address, "--stream", stream, "--input", str(path),
                        "--format", fmt, *extra], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"publish --format {fmt} failed: {r.stderr}")
    return time.perf_counter() - start


def live_latency(addresses: dict[str, str], linger_ms: float, stream: str) -> list[float]:
    """Seconds from a line's write to its result at SP1, per line."""
    query = f'<r>{{ for $e in stream("{stream}")/events/e return $e }}</r>'
    writer = subprocess.Popen([*CLI, "publish", "--superpeer", addresses["SP4"], "--stream", stream,
                               "--input", "-", "--format", "lines", "--root", "events", "--item", "e",
                               "--linger-ms", str(linger_ms)], stdin=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    reader = SuperPeerClient(addresses["SP1"])
    sid = reader.subscribe(query, wait_for_streams=True).subscription
    sent: dict[int, float] = {}
    arrived: dict[int, float] = {}

    def read() -> None:
        offset = 0
        while len(arrived) < LIVE_ITEMS:
            reply = reader.read(sid, offset, wait_ms=500)
            now = time.perf_counter()
            for item in reply.items:
                arrived[int(item.split("<id>")[1].split("<")[0])] = now
            offset = reply.offset + len(reply.items)
            if reply.closed:
                return

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    for k in range(LIVE_ITEMS):
        sent[k] = time.perf_counter()
        writer.stdin.write(f"<e><id>{k}</id></e>\n".encode())
        writer.stdin.flush()
        time.sleep(LIVE_EVERY_S)
    thread.join(30)
    writer.stdin.close()
    writer.wait(30)
    return [arrived[k] - sent[k] for k in sorted(arrived)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    photons = [p.to_xml() for p in generate(args.photons, 3)]
    report: dict = {"photons": args.photons, "formats": {}, "live": {}}
    with TemporaryDirectory() as tmp, local_network(serve_args=("--in-memory",)) as network:
        paths = write_inputs(Path(tmp), photons)
        seconds: dict[str, list[float]] = {f: [] for f in FORMATS}
        alone: dict[str, list[float]] = {f: [] for f in FORMATS}
        for k, (_, fmt) in enumerate(alternating(args.rounds, FORMATS)):
            seconds[fmt].append(publish(network.addresses["SP4"], fmt, paths[fmt], f"p{k}"))
            alone[fmt].append(read_alone(fmt, paths[fmt]))
        for fmt in FORMATS:
            rate = args.photons / min(seconds[fmt])
            limit = max(alone[fmt])
            report["formats"][fmt] = {"items_per_s": round(rate), "read_alone_items_per_s": round(limit),
                                      "ratio_to_limit": round(rate / limit, 3),
                                      "bytes": paths[fmt].stat().st_size}
            print(f"publish --format {fmt:6}: {rate:9,.0f} items/s   (reading the file alone: "
                  f"{limit:9,.0f} items/s; {rate / limit:.0%} of it)")
        for linger in (50.0, 0.0):
            waits = live_latency(network.addresses, linger, f"live{int(linger)}")
            p50, p99 = percentile(waits, 0.5) * 1000, percentile(waits, 0.99) * 1000
            report["live"][f"linger_{linger:g}ms"] = {"items": len(waits), "p50_ms": round(p50, 1),
                                                      "p99_ms": round(p99, 1), "max_ms": round(max(waits) * 1000, 1)}
            print(f"live writer → subscriber (--linger-ms {linger:g}): {len(waits)} items, "
                  f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(waits) * 1000:.0f} ms")
    write_report("ingest_formats", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
