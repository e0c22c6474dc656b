"""Items per second the client library publishes and reads through one super-peer.

Run: python benchmarks/client_rates.py [--photons 200000] [--out FILE.json]

A stream at SP4 (``--in-memory``) with a subscription at SP4 that takes every photon; the client
publishes the photons (wall time until the last batch is acknowledged, and the client's own CPU),
then, once the stream has closed, reads all results back (wall time and client CPU). The
publisher is bound by the super-peer's ingest (each batch checked, logged and acknowledged before
the next); the reader by the super-peer's result buffer and the client.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from local_network import local_network, write_report

from photons.generator import generate
from thinpeer.client import SuperPeerClient

WHOLE = '<all>{ for $p in stream("photons")/photons/photon return $p }</all>'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    items = [p.to_xml() for p in generate(args.photons, 3)]
    with local_network(serve_args=("--in-memory",)) as network:
        source = SuperPeerClient(network.addresses["SP4"])
        source.register_stream("photons", "photons", "photon", rate=1000)
        source.publish("photons", items[:200])
        time.sleep(1.2)
        reader = SuperPeerClient(network.addresses["SP4"])
        sid = reader.subscribe(WHOLE).subscription
        cpu, start = time.process_time(), time.perf_counter()
        source.publish("photons", items[200:])
        publish = {"items": len(items) - 200, "seconds": time.perf_counter() - start,
                   "client_cpu_s": time.process_time() - cpu}
        source.close_stream("photons")
        time.sleep(3)  # (the results are all made before they are read)
        cpu, start, got = time.process_time(), time.perf_counter(), 0
        for batch in reader.result_batches(sid, 0, idle_timeout=5):
            got += len(batch.items)
            if got >= len(items) - 200:
                break
        read = {"items": got, "seconds": time.perf_counter() - start, "client_cpu_s": time.process_time() - cpu}
    for r in (publish, read):
        r["items_per_s"] = round(r["items"] / r["seconds"])
        r["items_per_client_cpu_s"] = round(r["items"] / r["client_cpu_s"]) if r["client_cpu_s"] > 0 else None
        r["seconds"], r["client_cpu_s"] = round(r["seconds"], 2), round(r["client_cpu_s"], 2)
    print(f"publish: {publish['items_per_s']:,} items/s ({publish['items_per_client_cpu_s']:,} per client CPU-second); "
          f"read: {read['items_per_s']:,} items/s ({read['items_per_client_cpu_s']:,} per client CPU-second)")
    write_report("client_rates", {"publish": publish, "read": read}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
