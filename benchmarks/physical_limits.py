"""The physical limits a data-plane benchmark is compared with, measured in the same run.

Run alone: python benchmarks/physical_limits.py [--photons 200000] [--out FILE.json]

* **gRPC echo**: the same photons, in batches of ``BATCH`` items (the client library's), sent as
  one byte buffer per batch to an echo server in another process, which answers with the buffer's
  length: items per second one unary call per batch moves (as the data plane's transfers are
  made today), and the same over one client stream with every batch in flight (what a
  flow-controlled stream could reach). Also the round trip of one small batch (p50/p99).
* **lxml parse**: the same photons parsed as one document per batch (what validating a batch in
  one pass costs), and one parse per item (what the data plane does where it splits a batch):
  items per second on one core.

A super-peer's own rate divided by these says how much of the machine it leaves unused.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import grpc
from local_network import (  # (puts the checkout on sys.path)
    ROOT,
    percentile,
    write_report,
)
from lxml import etree

from photons.generator import generate
from thinpeer.ops.ports import free_ports

BATCH = 1000
METHOD = "/limits.Echo/Take"
STREAM = "/limits.Echo/TakeAll"


def _length(request: bytes, context) -> bytes:
    return len(request).to_bytes(8, "little")


def _lengths(requests, context) -> bytes:
    return sum(len(r) for r in requests).to_bytes(8, "little")


def serve(port: int) -> None:
    """The echo server (run in its own process by ``grpc_echo``)."""
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(4), options=[("grpc.max_receive_message_length", 64 << 20)])
    handlers = {"Take": grpc.unary_unary_rpc_method_handler(_length),
                "TakeAll": grpc.stream_unary_rpc_method_handler(_lengths)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("limits.Echo", handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def batches(items: list[str], size: int = BATCH) -> list[bytes]:
    """Each batch as one buffer: the items' bytes one after the other."""
    return ["".join(items[k:k + size]).encode() for k in range(0, len(items), size)]


def grpc_echo(items: list[str], small: int = 5) -> dict:
    """Items per second through a gRPC echo in another process: a unary call per batch, and one
    client stream with every batch; the round trip of a ``small``-item batch."""
    (port,) = free_ports(1)
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)])
        take = channel.unary_unary(METHOD)
        take_all = channel.stream_unary(STREAM)
        grpc.channel_ready_future(channel).result(timeout=10)
        buffers = batches(items)
        take(buffers[0])
        start = time.perf_counter()
        for b in buffers:
            take(b)
        unary = len(items) / (time.perf_counter() - start)
        start = time.perf_counter()
        take_all(iter(buffers))
        streamed = len(items) / (time.perf_counter() - start)
        rtts = []
        for b in batches(items[:small * 300], small):
            t = time.perf_counter()
            take(b)
            rtts.append((time.perf_counter() - t) * 1000)
        channel.close()
        return {"unary_items_per_s": round(unary), "stream_items_per_s": round(streamed),
                "small_batch_rtt_p50_ms": round(statistics.median(rtts), 3),
                "small_batch_rtt_p99_ms": round(percentile(rtts, 0.99), 3),
                "batch_items": BATCH, "bytes_per_item": round(sum(map(len, buffers)) / len(items), 1)}
    finally:
        server.kill()
        server.wait()


def lxml_parse(items: list[str]) -> dict:
    """Items per second parsed on one core: one document per batch, and one parse per item."""
    docs = [("<b>" + "".join(items[k:k + BATCH]) + "</b>").encode() for k in range(0, len(items), BATCH)]
    start = time.process_time()
    for d in docs:
        etree.fromstring(d)
    whole = len(items) / (time.process_time() - start)
    encoded = [i.encode() for i in items]
    start = time.process_time()
    for i in encoded:
        etree.fromstring(i)
    each = len(items) / (time.process_time() - start)
    return {"batch_parse_items_per_cpu_s": round(whole), "item_parse_items_per_cpu_s": round(each)}


def measure(items: list[str]) -> dict:
    return {"grpc_echo": grpc_echo(items), "lxml": lxml_parse(items)}


def photons(n: int) -> list[str]:
    return [p.to_xml() for p in generate(n, 3)]


def describe(limits: dict) -> str:
    e, x = limits["grpc_echo"], limits["lxml"]
    return (f"limits on this machine, same run: gRPC echo {e['unary_items_per_s']:,} items/s (a unary call "
            f"per {e['batch_items']}-item batch), {e['stream_items_per_s']:,} items/s (one stream), small-batch "
            f"round trip p50 {e['small_batch_rtt_p50_ms']} ms / p99 {e['small_batch_rtt_p99_ms']} ms; lxml "
            f"{x['batch_parse_items_per_cpu_s']:,} items per CPU-second parsed a batch at a time, "
            f"{x['item_parse_items_per_cpu_s']:,} one at a time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    limits = measure(photons(args.photons))
    print(describe(limits))
    write_report("physical_limits", {"benchmark": "physical limits", "photons": args.photons, **limits}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
